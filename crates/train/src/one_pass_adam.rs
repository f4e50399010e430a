//! [`OnePassAdam`]: Burn's `Adam` (with its L2 penalty, if any) with each parameter's update
//! one pass on the CPU ([`attend_model::fused::adam::adam`]), where Burn's makes about a
//! dozen, each allocating a buffer. It computes Burn's bits and keeps Burn's `AdamState`, so
//! a run, its checkpoints and an exact resume are what Burn's `Adam` gives.

use attend_model::fused::adam::adam;
use attend_model::fused::adamw::AdamWStep;
use burn::optim::decay::{WeightDecay, WeightDecayConfig};
use burn::optim::{AdamState, AdaptiveMomentumState, LearningRate, SimpleOptimizer};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// Adam as Burn's `AdamConfig` builds it (without AMSGrad): the penalty `λ·θ` added to the
/// gradient first where `weight_decay` is set, then [`adam`].
#[derive(Clone)]
pub struct OnePassAdam {
    pub beta_1: f32,
    pub beta_2: f32,
    pub epsilon: f32,
    pub weight_decay: Option<WeightDecay>,
}

impl OnePassAdam {
    pub fn new(beta_1: f32, beta_2: f32, epsilon: f32, weight_decay: Option<&WeightDecayConfig>) -> Self {
        OnePassAdam { beta_1, beta_2, epsilon, weight_decay: weight_decay.map(WeightDecay::new) }
    }
}

impl<B: Backend> SimpleOptimizer<B> for OnePassAdam {
    type State<const D: usize> = AdamState<B, D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<B, D>,
        grad: Tensor<B, D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<B, D>, Option<Self::State<D>>) {
        let grad = match &self.weight_decay {
            Some(decay) => decay.transform(grad, tensor.clone()),
            None => grad,
        };
        let time = state.as_ref().map_or(1, |s| s.momentum.time + 1);
        let moments = state.map(|s| (s.momentum.moment_1, s.momentum.moment_2));
        let step = AdamWStep {
            lr,
            beta_1: self.beta_1,
            beta_2: self.beta_2,
            epsilon: self.epsilon,
            decay: 1.0,
            time: time as i32,
        };
        let [tensor, moment_1, moment_2] = adam(tensor, grad, moments, step);
        (tensor, Some(AdamState::new(AdaptiveMomentumState::new(time, moment_1, moment_2))))
    }

    fn to_device<const D: usize>(mut state: Self::State<D>, device: &B::Device) -> Self::State<D> {
        state.momentum = state.momentum.to_device(device);
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::optim::{AdamConfig, SimpleOptimizer};
    use burn::tensor::Distribution;
    use burn_ndarray::NdArray;

    type B = NdArray<f32>;

    fn bits(t: &Tensor<B, 2>) -> Vec<u32> {
        t.to_data().to_vec::<f32>().unwrap().iter().map(|x| x.to_bits()).collect()
    }

    /// Five updates of a `[67, 129]` parameter (more than one parallel chunk) by ours and by
    /// Burn's `Adam` from the same gradients, with and without the L2 penalty, the paper's
    /// β₂ and ε (Multi30k's): the same bits in the parameter and both moments at every step,
    /// the learning rate changing as a schedule changes it.
    #[test]
    fn one_pass_adam_gives_the_bits_of_burns_adam_with_and_without_its_penalty() {
        let device = Default::default();
        for decay in [None, Some(WeightDecayConfig::new(0.01))] {
            let burn = AdamConfig::new()
                .with_beta_1(0.9)
                .with_beta_2(0.98)
                .with_epsilon(1e-9)
                .with_weight_decay(decay.clone())
                .build();
            let ours = OnePassAdam::new(0.9, 0.98, 1e-9, decay.as_ref());
            let mut p_ref = Tensor::<B, 2>::random([67, 129], Distribution::Normal(0.0, 1.0), &device);
            let mut p = Tensor::<B, 2>::from_data(p_ref.to_data(), &device);
            let (mut s_ref, mut s) = (None, None);
            for t in 1..=5 {
                let g: Tensor<B, 2> = Tensor::random([67, 129], Distribution::Normal(0.0, 0.1 * t as f64), &device);
                let lr = 1e-3 * t as f64;
                let g2 = Tensor::from_data(g.to_data(), &device);
                (p_ref, s_ref) = SimpleOptimizer::<B>::step(&burn, lr, p_ref, g, s_ref);
                (p, s) = SimpleOptimizer::<B>::step(&ours, lr, p, g2, s);
                let (r, o): (&AdamState<B, 2>, &AdamState<B, 2>) = (s_ref.as_ref().unwrap(), s.as_ref().unwrap());
                assert_eq!(bits(&p), bits(&p_ref), "parameter at step {t}, decay {decay:?}");
                assert_eq!(bits(&o.momentum.moment_1), bits(&r.momentum.moment_1), "m at step {t}");
                assert_eq!(bits(&o.momentum.moment_2), bits(&r.momentum.moment_2), "v at step {t}");
                assert_eq!(o.momentum.time, r.momentum.time);
            }
        }
    }

    /// The form the GPU backends take, [`attend_model::fused::adam::composed_adam`], gives
    /// the bits of Burn's `Adam` too (here on the CPU, whose `adam` is the kernel instead).
    #[test]
    fn composed_adam_gives_the_bits_of_burns_adam() {
        use attend_model::fused::adam::composed_adam;
        let device = Default::default();
        let burn = AdamConfig::new().with_beta_1(0.9).with_beta_2(0.98).with_epsilon(1e-9).build();
        let mut p_ref = Tensor::<B, 2>::random([5, 7], Distribution::Normal(0.0, 1.0), &device);
        let mut p = Tensor::<B, 2>::from_data(p_ref.to_data(), &device);
        let (mut s_ref, mut moments) = (None::<AdamState<B, 2>>, None);
        for time in 1..=3 {
            let g: Tensor<B, 2> = Tensor::random([5, 7], Distribution::Normal(0.0, 0.1), &device);
            let step = AdamWStep { lr: 1e-3, beta_1: 0.9, beta_2: 0.98, epsilon: 1e-9, decay: 1.0, time };
            let [p_new, m, v] = composed_adam(p, g.clone(), moments, step);
            (p_ref, s_ref) = SimpleOptimizer::<B>::step(&burn, 1e-3, p_ref, g, s_ref);
            let r = &s_ref.as_ref().unwrap().momentum;
            assert_eq!(bits(&p_new), bits(&p_ref), "parameter at step {time}");
            assert_eq!((bits(&m), bits(&v)), (bits(&r.moment_1), bits(&r.moment_2)), "moments at step {time}");
            (p, moments) = (p_new, Some((m, v)));
        }
    }
}
