//! Helpers shared by the tests that hold two backends to the same model (`backend_parity.rs`,
//! `kernel_parity.rs`).

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::Backend;
use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, Recorder};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};

/// `module`'s weights (from backend `B1`) loaded into `empty`, a module of the same
/// configuration on backend `B2`, through the checkpoint format.
pub fn carry<B1: Backend, B2: Backend, M1: Module<B1>, M2: Module<B2>>(
    module: M1,
    empty: M2,
    device: &B2::Device,
) -> M2 {
    let recorder = NamedMpkBytesRecorder::<FullPrecisionSettings>::default();
    let bytes = Recorder::<B1>::record(&recorder, module.into_record(), ()).expect("the record serializes");
    let record = Recorder::<B2>::load(&recorder, bytes, device).expect("the record loads");
    empty.load_record(record)
}

/// Every float parameter's gradient in `grads`, in `module`'s visiting order (`None` where a
/// parameter has none).
pub fn gradients<B: AutodiffBackend, M: Module<B>>(module: &M, grads: &B::Gradients) -> Vec<Option<TensorData>> {
    let mut visitor = Gradients::<B> { grads, out: Vec::new() };
    module.visit(&mut visitor);
    visitor.out
}

struct Gradients<'a, B: AutodiffBackend> {
    grads: &'a B::Gradients,
    out: Vec<Option<TensorData>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Gradients<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        self.out.push(param.val().grad(self.grads).map(|g| g.into_data()));
    }
}
