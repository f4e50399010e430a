//! Parameter initialization for the three schemes of [`Init`]: Burn's defaults, Xavier, GPT-2.

use burn::module::{Initializer, Module, ModuleVisitor, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{backend::Backend, Tensor};

use crate::config::{Init, ModelConfig};

/// Whether a linear map writes into the residual stream (attention `Wᴼ`, FFN `W₂`): GPT-2
/// scales those down by `1/√(2·n_layers)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Any other linear map.
    Plain,
    /// A residual output projection.
    ResidualOutput,
}

/// A linear map `d_in → d_out` with the configured bias and initialization.
pub fn linear<B: Backend>(
    d_in: usize,
    d_out: usize,
    config: &ModelConfig,
    role: Role,
    device: &B::Device,
) -> Linear<B> {
    let base = LinearConfig::new(d_in, d_out).with_bias(config.bias);
    let initializer = match config.init {
        Init::Burn => return base.init(device),
        Init::Xavier => Initializer::XavierUniform { gain: 1.0 },
        Init::Gpt2 => {
            let scale = match role {
                Role::Plain => 1.0,
                Role::ResidualOutput => (2.0 * config.n_layers as f64).sqrt(),
            };
            Initializer::Normal { mean: 0.0, std: 0.02 / scale }
        }
    };
    let mut layer = base.with_initializer(initializer).init(device);
    // Xavier and GPT-2 start biases at zero; Burn's `LinearConfig` would draw them like the
    // weights.
    layer.bias = layer.bias.map(|_| Initializer::Zeros.init([d_out], device));
    layer
}

/// A table of `rows` vectors (token embeddings, learned positions): `N(0, 1)` for Burn
/// (`EmbeddingConfig`'s default), `N(0, d_model^-1/2)` for Xavier, `N(0, 0.02)` for GPT-2.
///
/// # Shapes
/// - output: `[rows, d_model]`
pub fn table<B: Backend>(rows: usize, config: &ModelConfig, device: &B::Device) -> Param<Tensor<B, 2>> {
    let std = match config.init {
        Init::Burn => 1.0, // burn::nn::EmbeddingConfig's default N(0, 1)
        Init::Xavier => (config.d_model as f64).powf(-0.5),
        Init::Gpt2 => 0.02,
    };
    Initializer::Normal { mean: 0.0, std }.init([rows, config.d_model], device)
}

/// Draws every lazily initialized parameter of `module` now, in module order.
///
/// Burn 0.21 initializes a parameter at its first `val()`, and `Clone` of a module whose
/// parameters are not yet drawn gives a copy that draws *different* values under the *same*
/// parameter ids. Every model constructor of this crate returns a materialized module, so
/// clones are equal and the draws happen in a fixed order after `B::seed`.
pub fn materialize<B: Backend, M: Module<B>>(module: M) -> M {
    struct Draw;
    impl<B: Backend> ModuleVisitor<B> for Draw {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let _ = param.val();
        }
    }
    module.visit(&mut Draw);
    module
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_backend::TestBackend;

    fn std_of(t: Tensor<TestBackend, 2>) -> f32 {
        let v = t.into_data().to_vec::<f32>().unwrap();
        let mean = v.iter().sum::<f32>() / v.len() as f32;
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / v.len() as f32).sqrt()
    }

    #[test]
    fn gpt2_init_scales_residual_projections_and_zeroes_biases() {
        let device = Default::default();
        let config = ModelConfig { init: Init::Gpt2, n_layers: 8, ..ModelConfig::base() };
        let plain = linear::<TestBackend>(256, 256, &config, Role::Plain, &device);
        let residual = linear::<TestBackend>(256, 256, &config, Role::ResidualOutput, &device);
        assert!((std_of(plain.weight.val()) - 0.02).abs() < 0.001);
        assert!((std_of(residual.weight.val()) - 0.02 / 4.0).abs() < 0.0005);
        let bias = plain.bias.unwrap().val().into_data().to_vec::<f32>().unwrap();
        assert!(bias.iter().all(|&b| b == 0.0));
    }

    #[test]
    fn materialized_module_clones_are_equal() {
        let device = Default::default();
        let config = ModelConfig::base();
        let layer = materialize(linear::<TestBackend>(4, 3, &config, Role::Plain, &device));
        let copy = layer.clone();
        layer.weight.val().into_data().assert_eq(&copy.weight.val().into_data(), true);
    }
}
