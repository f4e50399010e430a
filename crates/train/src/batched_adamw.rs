//! [`GroupedAdamW`]'s step over all parameters as one operation, on the GPU backends
//! ([`attend_model::fused::adamw_many`]). Burn's optimizer adaptor updates one parameter at a
//! time, and under burn-fusion each update is a hand-off from the training thread to the
//! device's (one of the units that make up the fixed cost of a GPU step, docs/benchmarks.md).
//! Here one pass over the model takes out every parameter that has a gradient, with its
//! moments; one operation updates them all; the model's lazy parameters then read the new
//! values ([`step`] says why they are taken and not copied). The state
//! stays the adaptor's (its records: Burn's `AdamWState` per parameter), so checkpoints are the
//! same files either way, and each parameter's update is the same kernel with the same bits
//! as the adaptor's: tested here (the steps and the saved state, on the CPU) and in
//! attend-model's `fused/cube/tests.rs` (the batched kernels under burn-fusion, on wgpu).
//! [`crate::optimizer::Optim::step`] takes this path where
//! [`attend_model::fused::adamw_many::batches_updates`]: the GPU backends.

use std::sync::{Arc, Mutex, PoisonError};

use attend_model::fused::adamw_many::{adamw_many, Update};
use burn::module::{AutodiffModule, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::record::AdaptorRecord;
use burn::optim::{AdamWState, AdaptiveMomentumState, GradientsParams, Optimizer};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorPrimitive};

use crate::grouped_adamw::GroupedAdamW;

type Inner<B> = <B as AutodiffBackend>::InnerBackend;
type Adaptor<B, M> = OptimizerAdaptor<GroupedAdamW<Inner<B>>, M, B>;
type Records<B, M> = <Adaptor<B, M> as Optimizer<M, B>>::Record;
type Record<B> = AdaptorRecord<GroupedAdamW<Inner<B>>, B>;
/// What becomes of one update's `[θ, m, v]`: θ fills the parameter's slot, the moments its record.
type Finish<B> = Box<dyn FnOnce([FloatTensor<Inner<B>>; 3]) -> (ParamId, Record<B>)>;

/// One AdamW step of `module` with learning rate `lr`, every gradient multiplied by `factor`
/// (`[1]`) first where there is one, as `optim`'s adaptor takes it parameter by parameter;
/// `optim`'s records take the new moments.
///
/// Under burn-fusion a tensor handed to an operation with no other handle alive is the
/// operation's to overwrite, and one still held elsewhere costs one more operation (its drop)
/// when the last handle goes. So the parameters and moments are taken, not copied: the
/// adaptor's records are taken out of it, and each parameter with a gradient is taken out of
/// the model, which gets back a lazy parameter (`Param::uninitialized`) that reads its new
/// value when first used, after the update is registered. Such a parameter keeps no param
/// mapper (`Param::consume`'s; attend's models set none). Before the step returns, each reads
/// its value, so the model it returns holds plain parameters again.
pub fn step<B: AutodiffBackend, M: AutodiffModule<B>>(
    optim: &mut Adaptor<B, M>,
    lr: f64,
    module: M,
    grads: GradientsParams,
    factor: Option<Tensor<Inner<B>, 1>>,
) -> M {
    let config = optim.optim().clone();
    let adaptor = std::mem::replace(optim, OptimizerAdaptor::from(config.clone()));
    let mut records = adaptor.to_record();
    drop(adaptor);
    let mut take =
        TakeOut::<B, M> { grads, records: &mut records, config: &config, lr, updates: Vec::new(), finish: Vec::new() };
    let module = module.map(&mut take);
    let TakeOut { updates, finish, .. } = take;
    if !updates.is_empty() {
        for (finish, out) in finish.into_iter().zip(adamw_many::<Inner<B>>(updates, factor)) {
            let (id, record) = finish(out);
            records.insert(id, record);
        }
    }
    *optim = optim.clone().load_record(records);
    // Each lazy parameter reads its value now: a copy of the model made before the first use
    // would otherwise make its own autodiff leaf for it, which the gradients of the copy's
    // forward would name, not this model's parameter.
    module.visit(&mut Initialize);
    module
}

/// Reads every parameter's value once (a lazy one's is then set in place).
struct Initialize;

impl<B: AutodiffBackend> ModuleVisitor<B> for Initialize {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        drop(param.val());
    }
}

/// The one pass over the model: each parameter with a gradient is taken out with its moments
/// (out of the records) and its step's scalars, and replaced by a lazy parameter.
struct TakeOut<'a, B: AutodiffBackend, M: AutodiffModule<B>> {
    grads: GradientsParams,
    records: &'a mut Records<B, M>,
    config: &'a GroupedAdamW<Inner<B>>,
    lr: f64,
    updates: Vec<Update<Inner<B>>>,
    finish: Vec<Finish<B>>,
}

impl<B: AutodiffBackend, M: AutodiffModule<B>> ModuleMapper<B> for TakeOut<'_, B, M> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let Some(grad) = self.grads.remove::<Inner<B>, D>(param.id) else { return param };
        let (id, tensor, _mapper) = param.consume();
        let (device, shape, require_grad) = (tensor.device(), tensor.shape(), tensor.is_require_grad());
        let state: Option<AdamWState<Inner<B>, D>> = self.records.remove(&id).map(|r| r.into_state::<D>());
        let time = state.as_ref().map_or(1, |s| s.momentum.time + 1);
        let raw = |t: Tensor<Inner<B>, D>| t.into_primitive().tensor();
        self.updates.push(Update {
            param: raw(tensor.inner()),
            grad: raw(grad),
            moments: state.map(|s| [raw(s.momentum.moment_1), raw(s.momentum.moment_2)]),
            step: self.config.scalars::<D>(self.lr, time),
        });
        let typed = |t| Tensor::<Inner<B>, D>::from_primitive(TensorPrimitive::Float(t));
        let slot: Arc<Mutex<Option<FloatTensor<Inner<B>>>>> = Arc::default();
        let fill = slot.clone();
        self.finish.push(Box::new(move |[value, m, v]| {
            *fill.lock().unwrap_or_else(PoisonError::into_inner) = Some(value);
            let state = AdamWState::new(AdaptiveMomentumState::new(time, typed(m), typed(v)));
            (id, AdaptorRecord::from_state(state))
        }));
        // The slot is read (its handle cloned), not emptied: a clone of a lazy parameter keeps
        // its own copy of this. The slot goes with the last copy, once initialized.
        let read = move |_: &B::Device, require_grad: bool| {
            let value = slot.lock().unwrap_or_else(PoisonError::into_inner).clone();
            let value = value.expect("the batched update fills every slot before the step returns");
            let value = Tensor::<B, D>::from_inner(typed(value));
            if require_grad {
                value.require_grad()
            } else {
                value
            }
        };
        Param::uninitialized(id, read, device, require_grad, shape)
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::Autodiff;
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::TensorData;
    use burn_ndarray::NdArray;

    use super::*;
    use crate::optimizer::Optim;

    type B = Autodiff<NdArray<f32>>;

    /// Three AdamW steps (decay on, the gradients scaled by 0.5) of a 3→2 linear map whose bias
    /// is frozen, either through the adaptor one parameter at a time or as one batch: the
    /// weights, and the optimizer state as saved, as bytes.
    fn three_steps(mut layer: Linear<B>, batched: bool, dir: &std::path::Path) -> (Vec<f32>, Vec<f32>, Vec<u8>) {
        let sets: Vec<String> =
            ["train.optimizer=adamw", "train.lr=0.05", "train.weight_decay=0.1", "train.beta2=0.95"]
                .map(String::from)
                .into();
        let config = crate::config::RunConfig::load(None, &sets).unwrap();
        let device = Default::default();
        let mut optim = Optim::<B, Linear<B>>::new(&config.train);
        let x = Tensor::<B, 2>::from_data(TensorData::new(vec![1.0f32, -2.0, 0.5, 0.3, 0.7, -1.1], [2, 3]), &device);
        for step in 1..=3u64 {
            // The forward on a copy, as the half-precision path casts one: its gradients must
            // still name this model's parameters.
            let loss = layer.clone().forward(x.clone()).powi_scalar(2).sum();
            let grads = GradientsParams::from_grads(loss.backward(), &layer);
            let factor = Some(Tensor::<NdArray<f32>, 1>::from_data([0.5f32], &device));
            let lr = config.train.lr / step as f64;
            layer = match (&mut optim, batched) {
                (Optim::AdamW(adaptor, _), true) => super::step(adaptor, lr, layer, grads, factor),
                (optim, false) => optim.step(step, lr, layer, grads, factor),
                _ => unreachable!("adamw"),
            };
        }
        let path = dir.join(if batched { "batched" } else { "adaptor" });
        optim.save(&path).unwrap();
        let bytes = std::fs::read(path.with_extension("mpk")).unwrap();
        let values = |t: Tensor<B, 2>| t.into_data().to_vec::<f32>().unwrap();
        let bias = layer.bias.as_ref().unwrap().val().into_data().to_vec::<f32>().unwrap();
        (values(layer.weight.val()), bias, bytes)
    }

    #[test]
    fn batched_adamw_takes_the_adaptors_steps_and_saves_the_same_state_bit_for_bit() {
        let dir = tempfile::tempdir().unwrap();
        let device = Default::default();
        // One layer for both runs: the saved state names each parameter by its id.
        let mut layer: Linear<B> = LinearConfig::new(3, 2).init(&device);
        layer.weight = Param::from_tensor(Tensor::from_data([[0.5f32, -0.2], [0.1, 0.3], [-0.4, 0.25]], &device));
        layer.bias = Some(Param::from_tensor(Tensor::from_data([0.1f32, -0.1], &device)).set_require_grad(false));
        let (w_adaptor, b_adaptor, state_adaptor) = three_steps(layer.clone(), false, dir.path());
        let (w_batched, b_batched, state_batched) = three_steps(layer, true, dir.path());
        assert_ne!(w_adaptor, vec![0.5, -0.2, 0.1, 0.3, -0.4, 0.25], "the weights moved");
        assert_eq!(w_batched, w_adaptor, "weights");
        assert_eq!(b_adaptor, vec![0.1, -0.1], "the frozen bias is untouched");
        assert_eq!(b_batched, b_adaptor, "frozen bias");
        assert_eq!(state_batched, state_adaptor, "the saved optimizer state");
    }
}
