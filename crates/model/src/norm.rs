//! Layer normalization (Ba et al. 2016) over the last axis, as every sub-layer uses it: the
//! same parameters and record as `burn::nn::LayerNorm` (`gamma`, optional `beta`, `epsilon`),
//! computed by [`crate::fused::layer_norm`], one pass forward and one backward on backends with
//! a kernel. Ours rather than Burn's because Burn's keeps `epsilon` private, and the fused
//! operation needs it.

use burn::module::{Initializer, Module, Param};
use burn::tensor::{backend::Backend, Tensor};

/// `LayerNorm(x) = (x − μ)/√(σ² + ε) · γ + β` over the last axis (`σ²` biased, as PyTorch).
#[derive(Module, Debug)]
pub struct LayerNorm<B: Backend> {
    /// The learned scale `γ`, `[d_model]`, initialized to ones.
    pub gamma: Param<Tensor<B, 1>>,
    /// The learned shift `β`, `[d_model]`, initialized to zeros; absent without bias.
    pub beta: Option<Param<Tensor<B, 1>>>,
    /// `ε`, added to the variance: a setting from the model's configuration (like Burn's, it
    /// is not read back from a checkpoint).
    pub epsilon: f64,
}

impl<B: Backend> LayerNorm<B> {
    /// `γ = 1`, `β = 0` (if `bias`).
    pub fn new(d_model: usize, epsilon: f64, bias: bool, device: &B::Device) -> Self {
        Self {
            gamma: Initializer::Ones.init([d_model], device),
            beta: bias.then(|| Initializer::Zeros.init([d_model], device)),
            epsilon,
        }
    }

    /// # Shapes
    /// - `x`: `[..., d_model]`; output: the same
    pub fn forward<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        crate::fused::layer_norm(x, self.gamma.val(), self.beta.as_ref().map(|b| b.val()), self.epsilon)
    }
}

#[cfg(test)]
mod tests {
    use burn::nn::LayerNormConfig;
    use burn::tensor::{Distribution, Tensor};

    use super::*;

    type B = burn_ndarray::NdArray<f32>;

    #[test]
    fn layer_norm_equals_burns_layer_norm_with_the_same_parameters() {
        let device = Default::default();
        for bias in [true, false] {
            let ours = LayerNorm::<B>::new(24, 1e-5, bias, &device);
            let gamma = Tensor::<B, 1>::random([24], Distribution::Normal(1.0, 0.3), &device);
            let beta = Tensor::<B, 1>::random([24], Distribution::Normal(0.0, 0.3), &device);
            let ours = LayerNorm {
                gamma: Param::from_tensor(gamma.clone()),
                beta: ours.beta.map(|_| Param::from_tensor(beta.clone())),
                ..ours
            };
            let mut burns = LayerNormConfig::new(24).with_epsilon(1e-5).with_bias(bias).init::<B>(&device);
            burns.gamma = Param::from_tensor(gamma);
            burns.beta = burns.beta.map(|_| Param::from_tensor(beta.clone()));
            let x = Tensor::<B, 3>::random([3, 5, 24], Distribution::Normal(2.0, 3.0), &device);
            ours.forward(x.clone())
                .into_data()
                .assert_approx_eq::<f32>(&burns.forward(x).into_data(), Default::default());
        }
    }

    #[test]
    fn checkpoints_of_burns_layer_norm_load_into_ours() {
        use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, Recorder};
        let device = Default::default();
        let mut burns = LayerNormConfig::new(8).with_epsilon(1e-6).init::<B>(&device);
        burns.gamma = Param::from_tensor(Tensor::random([8], Distribution::Normal(1.0, 0.3), &device));
        let recorder = NamedMpkBytesRecorder::<FullPrecisionSettings>::default();
        let bytes = recorder.record(burns.clone().into_record(), ()).unwrap();
        let record = recorder.load::<LayerNormRecord<B>>(bytes, &device).unwrap();
        let ours = LayerNorm::<B>::new(8, 1e-6, true, &device).load_record(record);
        let x = Tensor::<B, 2>::random([4, 8], Distribution::Normal(0.0, 2.0), &device);
        ours.forward(x.clone()).into_data().assert_approx_eq::<f32>(&burns.forward(x).into_data(), Default::default());
    }
}
