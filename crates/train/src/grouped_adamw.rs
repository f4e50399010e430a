//! [`GroupedAdamW`]: AdamW with nanoGPT's decay groups, each parameter's update one fused pass
//! ([`attend_model::fused::adamw`]), and [`GradScale`], the cell through which a step hands it
//! clipping's factor. [`crate::optimizer::Optim`] steps it through Burn's adaptor, parameter
//! by parameter, or on the GPU backends through [`crate::batched_adamw`], all at once.

use attend_model::fused::{self, adamw::AdamWStep};
use burn::optim::{AdamWState, AdaptiveMomentumState, LearningRate, SimpleOptimizer};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// AdamW as PyTorch and nanoGPT take it: decoupled decay `θ ← θ(1 − lr·λ)` on parameters of
/// two or more dimensions only (nanoGPT's decay groups), then the Adam step with bias
/// correction and ε added after the root. Parameters without a gradient (frozen) are not
/// touched at all, decay included, as in PyTorch. The update of each parameter is one pass
/// where the backend has a kernel, clipping's factor ([`GradScale`]) multiplied in; its state
/// is Burn's `AdamWState`, so checkpoints keep the format Burn's `AdamW` writes.
#[derive(Clone, Debug)]
pub struct GroupedAdamW<B: Backend> {
    pub beta_1: f32,
    pub beta_2: f32,
    pub epsilon: f32,
    pub weight_decay: f64,
    /// The factor the gradients of the step being taken are multiplied by (clipping's), if any.
    pub grad_scale: GradScale<B>,
}

impl<B: Backend> GroupedAdamW<B> {
    /// The scalars of update number `time` of a parameter of rank `D` at learning rate `lr`:
    /// decay only where `D ≥ 2` (nanoGPT's groups).
    pub(crate) fn scalars<const D: usize>(&self, lr: LearningRate, time: usize) -> AdamWStep {
        AdamWStep {
            lr,
            beta_1: self.beta_1,
            beta_2: self.beta_2,
            epsilon: self.epsilon,
            decay: if D >= 2 && self.weight_decay > 0.0 { 1.0 - lr * self.weight_decay } else { 1.0 },
            time: time as i32,
        }
    }
}

/// The gradients' factor for the step being taken, shared between [`crate::optimizer::Optim::step`], which
/// sets it, and [`GroupedAdamW`], which reads it: Burn's `SimpleOptimizer::step` takes only
/// the learning rate, and its adaptor lends the optimizer out by shared reference only.
#[derive(Clone, Debug)]
pub struct GradScale<B: Backend>(std::sync::Arc<std::sync::Mutex<Option<Tensor<B, 1>>>>);

impl<B: Backend> Default for GradScale<B> {
    fn default() -> Self {
        GradScale(Default::default())
    }
}

impl<B: Backend> GradScale<B> {
    pub(crate) fn set(&self, factor: Option<Tensor<B, 1>>) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = factor;
    }

    pub(crate) fn get(&self) -> Option<Tensor<B, 1>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl<B: Backend> SimpleOptimizer<B> for GroupedAdamW<B> {
    type State<const D: usize> = AdamWState<B, D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<B, D>,
        grad: Tensor<B, D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<B, D>, Option<Self::State<D>>) {
        let time = state.as_ref().map_or(1, |s| s.momentum.time + 1);
        let moments = state.map(|s| (s.momentum.moment_1, s.momentum.moment_2));
        let step = self.scalars::<D>(lr, time);
        let [tensor, moment_1, moment_2] = fused::adamw(tensor, grad, moments, self.grad_scale.get(), step);
        (tensor, Some(AdamWState::new(AdaptiveMomentumState::new(time, moment_1, moment_2))))
    }

    fn to_device<const D: usize>(mut state: Self::State<D>, device: &B::Device) -> Self::State<D> {
        state.momentum = state.momentum.to_device(device);
        state
    }
}
