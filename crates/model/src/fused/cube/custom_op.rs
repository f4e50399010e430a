//! A fused operation as a custom operation of burn-fusion's stream (`OperationIr::Custom`):
//! its inputs by kind, the closure that runs `B`'s kernel on their handles when the stream
//! reaches it, and [`register`], which hands it to the stream and returns its outputs.

use core::fmt;

use burn::tensor::ops::{BoolTensor, FloatTensor, IntTensor};
use burn::tensor::{DType, Shape, TensorMetadata};
use burn_fusion::stream::{Operation, OperationStreams};
use burn_fusion::{FusionBackend, FusionTensor};
use burn_ir::{CustomOpIr, HandleContainer, OperationIr, OperationOutput, TensorIr};

/// An input of a custom operation, fetched from the stream's handles.
pub(super) enum Arg<B: FusionBackend> {
    Float(FloatTensor<B>),
    Int(IntTensor<B>),
    Bool(BoolTensor<B>),
}

impl<B: FusionBackend> Arg<B> {
    pub(super) fn float(self) -> FloatTensor<B> {
        match self {
            Arg::Float(t) => t,
            _ => unreachable!("inputs are fetched in the kinds they were registered with"),
        }
    }
    pub(super) fn int(self) -> IntTensor<B> {
        match self {
            Arg::Int(t) => t,
            _ => unreachable!("inputs are fetched in the kinds they were registered with"),
        }
    }
    pub(super) fn bool(self) -> BoolTensor<B> {
        match self {
            Arg::Bool(t) => t,
            _ => unreachable!("inputs are fetched in the kinds they were registered with"),
        }
    }
}

/// What kind of tensor an input is.
#[derive(Clone, Copy, Debug)]
pub(super) enum Kind {
    Float,
    Int,
    Bool,
}

type Run<B> = Box<dyn Fn(Vec<Arg<B>>) -> Vec<FloatTensor<B>> + Send + Sync>;

/// A fused operation as a custom operation of the fusion stream.
struct Custom<B: FusionBackend> {
    desc: CustomOpIr,
    kinds: Vec<Kind>,
    run: Run<B>,
}

impl<B: FusionBackend> fmt::Debug for Custom<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Custom").field("id", &self.desc.id).field("kinds", &self.kinds).finish()
    }
}

impl<B: FusionBackend> Operation<B::FusionRuntime> for Custom<B> {
    fn execute(&self, handles: &mut HandleContainer<B::Handle>) {
        let args = self
            .desc
            .inputs
            .iter()
            .zip(&self.kinds)
            .map(|(ir, kind)| match kind {
                Kind::Float => Arg::Float(handles.get_float_tensor::<B>(ir)),
                Kind::Int => Arg::Int(handles.get_int_tensor::<B>(ir)),
                Kind::Bool => Arg::Bool(handles.get_bool_tensor::<B>(ir)),
            })
            .collect();
        let outputs = (self.run)(args);
        for (ir, tensor) in self.desc.outputs.iter().zip(outputs) {
            handles.register_float_tensor::<B>(&ir.id, tensor);
        }
    }
}

/// Registers `run` on `inputs` as the custom operation `id`, with outputs of the given shapes
/// and types; returns the outputs.
pub(super) fn register<B: FusionBackend, const N: usize>(
    id: &'static str,
    inputs: Vec<(FusionTensor<B::FusionRuntime>, Kind)>,
    outputs: [(Shape, DType); N],
    run: impl Fn(Vec<Arg<B>>) -> [FloatTensor<B>; N] + Send + Sync + 'static,
) -> [FusionTensor<B::FusionRuntime>; N] {
    register_vec(id, inputs, Vec::from(outputs), move |args| Vec::from(run(args))).outputs()
}

/// [`register`] with as many outputs as `outputs` lists (`run` returns one per entry).
pub(super) fn register_vec<B: FusionBackend>(
    id: &'static str,
    inputs: Vec<(FusionTensor<B::FusionRuntime>, Kind)>,
    outputs: Vec<(Shape, DType)>,
    run: impl Fn(Vec<Arg<B>>) -> Vec<FloatTensor<B>> + Send + Sync + 'static,
) -> Vec<FusionTensor<B::FusionRuntime>> {
    let client = inputs[0].0.client.clone();
    let mut streams = OperationStreams::default();
    for (tensor, _) in &inputs {
        streams.tensor(tensor);
    }
    let outputs: Vec<TensorIr> = outputs
        .into_iter()
        .map(|(shape, dtype)| TensorIr::uninit(client.create_empty_handle(), shape, dtype))
        .collect();
    let kinds = inputs.iter().map(|(_, kind)| *kind).collect();
    let inputs: Vec<TensorIr> = inputs.into_iter().map(|(tensor, _)| tensor.into_ir()).collect();
    let desc = CustomOpIr::new(id, &inputs, &outputs);
    let op = Custom::<B> { desc: desc.clone(), kinds, run: Box::new(run) };
    client.register(streams, OperationIr::Custom(desc), op)
}

/// The shape and float type of `t`.
pub(super) fn like<R: burn_fusion::FusionRuntime>(t: &FusionTensor<R>) -> (Shape, DType) {
    (t.shape(), t.dtype)
}

/// Takes the next input off `args`.
pub(super) fn next<B: FusionBackend>(args: &mut std::vec::IntoIter<Arg<B>>) -> Arg<B> {
    args.next().expect("as many inputs as registered")
}
