//! Clipping by the **global** gradient norm, as PyTorch's `clip_grad_norm_` (Burn clips each
//! parameter's gradient on its own): `g ← g · min(1, c / (‖g‖₂ + 1e-6))` with `‖g‖₂` over all
//! parameters together, computed on the device (no value read back to the host).
//!
//! The step's gradients are multiplied by one factor ([`gradient_factor`]): clipping's, and in
//! half precision also `1/s`, the loss scale undone. It comes from the squared global norm
//! ([`squared_global_norm`], one operation over every gradient). AdamW multiplies it into its
//! update of each parameter (one pass instead of two: [`crate::optimizer`]); the other
//! optimizers take the gradients scaled by [`scale_gradients`] first.

use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::ops::FloatTensor;
use burn::tensor::Tensor;

/// Scales the gradients so that their global L2 norm is at most `max_norm`, as PyTorch's
/// `clip_grad_norm_`: `g ← g · min(1, c / (‖g‖₂ + 1e-6))`. All on the device: no value is read
/// back to the host (a GPU step stays asynchronous). `max_norm` = 0 does nothing.
pub fn clip_global_norm<B: AutodiffBackend, M: AutodiffModule<B>>(
    module: &M,
    grads: &mut GradientsParams,
    max_norm: f64,
) {
    if let Some(factor) = clip_factor(module, grads, max_norm) {
        scale_gradients(module, grads, factor);
    }
}

/// The factor `min(1, c / (‖g‖₂ + 1e-6))` (shape `[1]`, on the device) that clips the
/// gradients to global norm `c` = `max_norm`; `None` where `max_norm` is 0 or no parameter has
/// a gradient.
pub fn clip_factor<B: AutodiffBackend, M: AutodiffModule<B>>(
    module: &M,
    grads: &GradientsParams,
    max_norm: f64,
) -> Option<Tensor<B::InnerBackend, 1>> {
    if max_norm <= 0.0 {
        return None;
    }
    squared_global_norm(module, grads).map(|squared| gradient_factor(squared, max_norm, 1.0))
}

/// `‖g‖₂² = Σₜ Σᵢ gₜᵢ²` over the gradients of every parameter that has one (shape `[1]`, on the
/// device), in one operation where the backend has a kernel (not three per parameter);
/// `None` where no parameter has a gradient.
pub fn squared_global_norm<B: AutodiffBackend, M: AutodiffModule<B>>(
    module: &M,
    grads: &GradientsParams,
) -> Option<Tensor<B::InnerBackend, 1>> {
    let mut squares = Gradients::<B::InnerBackend> { grads, list: Vec::new() };
    module.visit(&mut squares);
    (!squares.list.is_empty()).then(|| attend_model::fused::squared_norm(squares.list))
}

/// The factor for gradients that are `loss_scale` (`s`) times the loss's, with squared global
/// norm `squared`: `(1/s) · min(1, c / (‖g‖₂/s + 1e-6))`, the loss scale undone and the result
/// clipped to norm `c` = `max_norm`; `1/s` where `max_norm` is 0. In f32 `s` is 1.
pub fn gradient_factor<B: Backend>(squared: Tensor<B, 1>, max_norm: f64, loss_scale: f64) -> Tensor<B, 1> {
    if max_norm <= 0.0 {
        return Tensor::full([1], 1.0 / loss_scale, &squared.device());
    }
    let norm = squared.sqrt();
    let norm = if loss_scale == 1.0 { norm } else { norm.div_scalar(loss_scale) };
    let limit = Tensor::<B, 1>::full([1], max_norm, &norm.device());
    let clip = limit.div(norm.add_scalar(1e-6)).clamp_max(1.0);
    if loss_scale == 1.0 {
        clip
    } else {
        clip.div_scalar(loss_scale)
    }
}

/// Multiplies every gradient by `factor` (shape `[1]`).
pub fn scale_gradients<B: AutodiffBackend, M: AutodiffModule<B>>(
    module: &M,
    grads: &mut GradientsParams,
    factor: Tensor<B::InnerBackend, 1>,
) {
    module.visit(&mut ScaleGrads::<B::InnerBackend> { grads, factor });
}

/// The gradients of the parameters visited, in the module's order.
struct Gradients<'a, B: Backend> {
    grads: &'a GradientsParams,
    list: Vec<FloatTensor<B>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Gradients<'_, B::InnerBackend> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) {
            self.list.push(g.into_primitive().tensor());
        }
    }
}

/// Multiplies every gradient it visits by `factor` (shape `[1]`).
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
