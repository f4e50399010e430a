//! The residual connection around each sub-layer (paper section 5.4): post-norm
//! `LayerNorm(x + Dropout(Sublayer(x)))` as in the paper, or pre-norm
//! `x + Dropout(Sublayer(LayerNorm(x)))`.

use burn::nn::Dropout;
use burn::tensor::{backend::Backend, Tensor};

use crate::config::{ModelConfig, NormPosition};
use crate::norm::LayerNorm;

/// A LayerNorm with `config`'s epsilon and bias setting.
pub fn layer_norm<B: Backend>(config: &ModelConfig, device: &B::Device) -> LayerNorm<B> {
    LayerNorm::new(config.d_model, config.norm_eps, config.bias, device)
}

/// Wraps `sublayer` in dropout, a residual connection and `norm` at `position`; passes the
/// sub-layer's side output (attention weights) through.
///
/// # Shapes
/// - `x`: `[batch, len, d_model]`; `sublayer` maps it to the same shape
/// - output: `[batch, len, d_model]`
pub fn residual<B: Backend, T>(
    x: Tensor<B, 3>,
    norm: &LayerNorm<B>,
    position: NormPosition,
    dropout: &Dropout,
    sublayer: impl FnOnce(Tensor<B, 3>) -> (Tensor<B, 3>, T),
) -> (Tensor<B, 3>, T) {
    match position {
        NormPosition::Post => {
            let (y, side) = sublayer(x.clone());
            (norm.forward(crate::fused::add(x, crate::fused::dropout(dropout, y))), side)
        }
        NormPosition::Pre => {
            let (y, side) = sublayer(norm.forward(x.clone()));
            (crate::fused::add(x, crate::fused::dropout(dropout, y)), side)
        }
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::Autodiff;
    use burn::nn::DropoutConfig;
    use burn::tensor::{Distribution, Tensor};
    use burn_ndarray::NdArray;

    use super::*;
    use crate::fused::{ADDED_PENDING, ADDS_IN_PLACE};

    type Ad = Autodiff<NdArray<f32>>;

    /// On the CPU a pre-norm sub-layer's residual sum is the parallel kernel's, written over
    /// the sub-layer's output, and its backward sum is folded into the LayerNorm's backward.
    #[test]
    fn pre_norm_residual_sums_run_in_the_cpu_kernels_forward_and_backward() {
        let device = Default::default();
        let config = ModelConfig { d_model: 8, n_heads: 2, ..ModelConfig::base() };
        let norm = layer_norm::<Ad>(&config, &device);
        let dropout = DropoutConfig::new(0.0).init();
        let x = Tensor::<Ad, 3>::random([2, 3, 8], Distribution::Default, &device).require_grad();
        let count = || (ADDS_IN_PLACE.with(|c| c.get()), ADDED_PENDING.with(|c| c.get()));
        let before = count();
        let (y, ()) = residual(x.clone(), &norm, NormPosition::Pre, &dropout, |h| (h.mul_scalar(2.0), ()));
        let grads = y.sum().backward();
        assert!(x.grad(&grads).is_some());
        let after = count();
        assert_eq!((after.0 - before.0, after.1 - before.1), (1, 1));
    }
}
