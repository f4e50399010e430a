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
            (norm.forward(x + crate::fused::dropout(dropout, y)), side)
        }
        NormPosition::Pre => {
            let (y, side) = sublayer(norm.forward(x.clone()));
            (x + crate::fused::dropout(dropout, y), side)
        }
    }
}
