//! Position-wise feed-forward network (paper section 3.3, eq. 2):
//! `FFN(x) = max(0, xW₁ + b₁)W₂ + b₂`, or with GELU in place of `max(0, ·)`.

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::{backend::Backend, Tensor};

use crate::config::{Activation, ModelConfig};
use crate::gelu::gelu;
use crate::init::{linear, Role};
use crate::positionwise::positionwise;

/// `W₂(act(W₁ x))`, applied to each position separately.
#[derive(Module, Debug)]
pub struct FeedForward<B: Backend> {
    /// `W₁, b₁`: `d_model → d_ff`.
    pub w_1: Linear<B>,
    /// `W₂, b₂`: `d_ff → d_model` (a residual output projection).
    pub w_2: Linear<B>,
    /// The non-linearity.
    pub activation: Activation,
}

impl<B: Backend> FeedForward<B> {
    /// Builds the network for `config` (`d_model`, `d_ff`, `activation`, `bias`, `init`).
    pub fn new(config: &ModelConfig, device: &B::Device) -> Self {
        Self {
            w_1: linear(config.d_model, config.d_ff, config, Role::Plain, device),
            w_2: linear(config.d_ff, config.d_model, config, Role::ResidualOutput, device),
            activation: config.activation,
        }
    }

    /// # Shapes
    /// - `x`: `[batch, len, d_model]`
    /// - output: `[batch, len, d_model]`
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        positionwise(&self.w_2, activate(positionwise(&self.w_1, x), self.activation))
    }
}

/// Applies `activation` element-wise.
///
/// # Shapes
/// - `x`: any; output: same
pub fn activate<B: Backend, const D: usize>(x: Tensor<B, D>, activation: Activation) -> Tensor<B, D> {
    match activation {
        Activation::Relu => crate::fused::relu(x),
        Activation::Gelu => gelu(x),
        Activation::GeluTanh => gelu_tanh(x),
    }
}

/// `½x(1 + tanh(√(2/π)(x + 0.044715x³)))` (Hendrycks & Gimpel's approximation; GPT-2's).
pub fn gelu_tanh<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    let inner =
        (x.clone() + x.clone().powi_scalar(3).mul_scalar(0.044715)).mul_scalar((2.0 / std::f64::consts::PI).sqrt());
    x.mul_scalar(0.5) * (inner.tanh() + 1.0)
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Tensor, TensorData};

    use super::*;
    use crate::test_backend::TestBackend;

    /// Values of `½x(1 + tanh(√(2/π)(x + 0.044715x³)))` computed in f64 (Python's `math`);
    /// PyTorch's `gelu(x, approximate="tanh")` gives the same to f32 precision.
    #[test]
    fn gelu_tanh_equals_gpt2s_formula_at_known_points() {
        let x = [-3.0f32, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0];
        let expected =
            [-0.003637392, -0.158808009, -0.154285990, 0.0, 0.345714010, 0.841191991, 1.954597694, 2.996362608];
        let input = Tensor::<TestBackend, 1>::from_data(TensorData::new(x.to_vec(), [x.len()]), &Default::default());
        let got = activate(input, Activation::GeluTanh).into_data().to_vec::<f32>().unwrap();
        for ((x, got), want) in x.iter().zip(got).zip(expected) {
            assert!((got as f64 - want).abs() < 1e-6, "gelu_tanh({x}) = {got}, expected {want}");
        }
    }
}
