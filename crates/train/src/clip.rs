//! Clipping by the **global** gradient norm, as PyTorch's `clip_grad_norm_` (Burn clips each
//! parameter's gradient on its own): `g ← g · min(1, c / (‖g‖₂ + 1e-6))` with `‖g‖₂` over all
//! parameters together, computed on the device (no value read back to the host).

use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::Tensor;

/// Scales the gradients so that their global L2 norm is at most `max_norm`, as PyTorch's
/// `clip_grad_norm_`: `g ← g · min(1, c / (‖g‖₂ + 1e-6))`. All on the device: no value is read
/// back to the host (a GPU step stays asynchronous). `max_norm` = 0 does nothing.
pub fn clip_global_norm<B: AutodiffBackend, M: AutodiffModule<B>>(
    module: &M,
    grads: &mut GradientsParams,
    max_norm: f64,
) {
    if max_norm <= 0.0 {
        return;
    }
    let mut sum = SquaredNorm::<B::InnerBackend> { grads, total: None };
    module.visit(&mut sum);
    let Some(total) = sum.total else { return };
    let limit = Tensor::<B::InnerBackend, 1>::full([1], max_norm, &total.device());
    let factor = limit.div(total.sqrt().add_scalar(1e-6)).clamp_max(1.0);
    module.visit(&mut ScaleGrads::<B::InnerBackend> { grads, factor });
}

struct SquaredNorm<'a, B: Backend> {
    grads: &'a GradientsParams,
    total: Option<Tensor<B, 1>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for SquaredNorm<'_, B::InnerBackend> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) {
            let s = g.powi_scalar(2).sum();
            self.total = Some(match self.total.take() {
                Some(t) => t + s,
                None => s,
            });
        }
    }
}

/// Multiplies every gradient by `factor` (shape `[1]`).
struct ScaleGrads<'a, B: Backend> {
    grads: &'a mut GradientsParams,
    factor: Tensor<B, 1>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for ScaleGrads<'_, B::InnerBackend> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.remove::<B::InnerBackend, D>(param.id) {
            let factor = self.factor.clone().reshape([1; D]);
            self.grads.register::<B::InnerBackend, D>(param.id, g.mul(factor));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::{Linear, LinearConfig};

    type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;

    /// A layer and the gradients of a loss through it, with their global L2 norm.
    fn layer_and_grads() -> (Linear<B>, GradientsParams, f64) {
        let layer = LinearConfig::new(4, 3).init::<B>(&Default::default());
        let (grads, norm) = grads_scaled(&layer, 1.0);
        (layer, grads, norm)
    }

    /// The gradients of `scale`·Σ(layer(x))² for a fixed x (linear in `scale`), and their norm.
    fn grads_scaled(layer: &Linear<B>, scale: f64) -> (GradientsParams, f64) {
        let x = Tensor::<B, 1>::from_data([0.3f32, -1.2, 0.7, 2.0, -0.4], &Default::default());
        let x =
            x.reshape([5, 1]).repeat_dim(1, 4).mul(Tensor::from_data([[1.0f32, -0.5, 0.25, 2.0]], &Default::default()));
        let loss = layer.forward(x).powi_scalar(2).sum().mul_scalar(scale);
        let grads = GradientsParams::from_grads(loss.backward(), layer);
        let norm = squared(layer, &grads).sqrt();
        (grads, norm)
    }

    /// The squared global norm, summed here on the host from the weight's and the bias's
    /// gradients (independently of the code under test).
    fn squared(layer: &Linear<B>, grads: &GradientsParams) -> f64 {
        type N = burn_ndarray::NdArray<f32>;
        let weight: Vec<f32> = grads.get::<N, 2>(layer.weight.id).unwrap().into_data().to_vec().unwrap();
        let bias: Vec<f32> = grads.get::<N, 1>(layer.bias.as_ref().unwrap().id).unwrap().into_data().to_vec().unwrap();
        weight.iter().chain(&bias).map(|&g| g as f64 * g as f64).sum()
    }

    #[test]
    fn clipping_scales_the_global_norm_to_the_limit_as_pytorch() {
        let (layer, mut grads, norm) = layer_and_grads();
        let limit = norm / 4.0;
        clip_global_norm(&layer, &mut grads, limit);
        let want = norm * limit / (norm + 1e-6);
        assert!((squared(&layer, &grads).sqrt() - want).abs() < 1e-4 * want, "{norm} -> {want}");
    }

    /// PyTorch divides by ‖g‖ + 1e-6: with a norm of 1e-6 that term halves the factor.
    #[test]
    fn clipping_adds_pytorchs_1e_6_to_a_tiny_norm() {
        let (layer, _, norm) = layer_and_grads();
        let (mut grads, norm) = grads_scaled(&layer, 1e-6 / norm);
        assert!((norm - 1e-6).abs() < 1e-9, "{norm}");
        let limit = norm / 4.0;
        clip_global_norm(&layer, &mut grads, limit);
        let want = norm * limit / (norm + 1e-6);
        assert!((squared(&layer, &grads).sqrt() - want).abs() < 1e-3 * want, "{norm} -> {want}");
    }

    #[test]
    fn a_zero_limit_leaves_the_gradients_exactly_as_they_are() {
        let (layer, mut grads, _) = layer_and_grads();
        let before = grads.get::<burn_ndarray::NdArray<f32>, 2>(layer.weight.id).unwrap().into_data();
        clip_global_norm(&layer, &mut grads, 0.0);
        assert_eq!(grads.get::<burn_ndarray::NdArray<f32>, 2>(layer.weight.id).unwrap().into_data(), before);
    }

    #[test]
    fn gradients_within_the_limit_are_left_exactly_as_they_are() {
        let (layer, mut grads, norm) = layer_and_grads();
        let before = grads.get::<burn_ndarray::NdArray<f32>, 2>(layer.weight.id).unwrap().into_data();
        clip_global_norm(&layer, &mut grads, norm * 2.0);
        assert_eq!(grads.get::<burn_ndarray::NdArray<f32>, 2>(layer.weight.id).unwrap().into_data(), before);
    }
}
