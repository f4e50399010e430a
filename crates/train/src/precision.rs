//! `train.precision = "f16" | "bf16"`: mixed precision by hand (Burn 0.21 has no automatic
//! mixed precision).
//!
//! The master weights and the optimizer state stay f32. Each micro-batch computes with a copy
//! of the weights cast to half precision *inside* the autodiff graph ([`half_weights`]): the
//! backward of the cast brings every gradient back to its f32 master weight, in f32. The loss
//! (computed from logits cast back to f32) is multiplied by a loss scale before the backward, so
//! that small gradients do not underflow in half precision, and the gradients are divided by
//! it afterwards, in the one factor the step multiplies them by ([`crate::clip`]: with
//! clipping's). The scale is dynamic, as PyTorch's `GradScaler`: it starts at 2¹⁶; a step
//! whose gradients hold an infinity or a NaN is skipped (the weights and moments stay as they
//! were; the schedule goes on) and the scale halves; after 2,000 steps in a row without one it
//! doubles. Deciding needs one value read back per step (the squared global norm of the
//! gradients, [`LossScale::check`]), as `GradScaler` reads its `found_inf`.

use burn::module::{AutodiffModule, ModuleMapper, Param};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{DType, ElementConversion, FloatDType, Tensor};
use serde::{Deserialize, Serialize};

use crate::config::Precision;

/// The loss scale a half-precision run starts with (PyTorch's `GradScaler` default).
pub const INITIAL_SCALE: f64 = 65536.0;
/// Steps in a row without an overflow after which the scale doubles (`GradScaler`'s
/// `growth_interval`).
pub const GROWTH_INTERVAL: u64 = 2000;

impl Precision {
    /// The dtype steps compute in; `None` for f32 (no cast, no scaling).
    pub fn half(self) -> Option<FloatDType> {
        match self {
            Precision::F32 => None,
            Precision::F16 => Some(FloatDType::F16),
            Precision::Bf16 => Some(FloatDType::BF16),
        }
    }

    /// The name in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
            Precision::Bf16 => "bf16",
        }
    }
}

/// Whether `device` can compute in `precision` (f32 everywhere; f16/bf16 where the backend
/// says so).
pub fn supported<B: Backend>(precision: Precision, device: &B::Device) -> bool {
    match precision.half() {
        None => true,
        Some(half) => B::supports_dtype(device, DType::from(half)),
    }
}

/// The model with every float parameter cast to `dtype`, tracked: gradients of a loss
/// computed with it reach the f32 parameters of `model` (Burn's autodiff casts them back).
pub fn half_weights<B: AutodiffBackend, M: AutodiffModule<B>>(model: &M, dtype: FloatDType) -> M {
    model.clone().map(&mut CastParams { dtype })
}

struct CastParams {
    dtype: FloatDType,
}

impl<B: Backend> ModuleMapper<B> for CastParams {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, tensor, mapper) = param.consume();
        Param::from_mapped_value(id, tensor.cast(self.dtype), mapper)
    }
}

/// Dynamic loss scaling; saved in each checkpoint's `state.json` so that a resumed run goes
/// on with the scale it had.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossScale {
    /// What the loss is multiplied by before the backward.
    pub scale: f64,
    /// Steps in a row without an overflow since the scale last changed.
    pub good_steps: u64,
    /// Steps skipped for an overflow, over the whole run.
    pub skipped: u64,
}

impl Default for LossScale {
    fn default() -> Self {
        LossScale { scale: INITIAL_SCALE, good_steps: 0, skipped: 0 }
    }
}

impl LossScale {
    /// Whether gradients with squared global norm `squared` (`None`: no gradients) are all
    /// finite: one value read back. `false` halves the scale and the caller skips the step; the
    /// gradients are divided by the scale afterwards, in the step's one factor
    /// ([`crate::clip::gradient_factor`]). A finite gradient whose square overflows f32 (above
    /// 1.8e19) counts as an overflow too.
    pub fn check<B: Backend>(&mut self, squared: Option<&Tensor<B, 1>>) -> bool {
        let finite = squared.is_none_or(|s| s.clone().into_scalar().elem::<f64>().is_finite());
        self.after(finite);
        finite
    }

    /// The scale's update after a step with (`finite`) or without finite gradients.
    fn after(&mut self, finite: bool) {
        if finite {
            self.good_steps += 1;
            if self.good_steps == GROWTH_INTERVAL {
                self.scale *= 2.0;
                self.good_steps = 0;
            }
        } else {
            self.scale = (self.scale / 2.0).max(1.0);
            self.good_steps = 0;
            self.skipped += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use burn::nn::{Linear, LinearConfig};
    use burn::optim::GradientsParams;
    use burn::tensor::{Distribution, TensorData};

    use super::*;

    type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;

    #[test]
    fn an_overflow_halves_the_scale_and_a_growth_interval_of_good_steps_doubles_it() {
        let mut s = LossScale::default();
        s.after(false);
        assert_eq!((s.scale, s.good_steps, s.skipped), (INITIAL_SCALE / 2.0, 0, 1));
        for _ in 0..GROWTH_INTERVAL - 1 {
            s.after(true);
        }
        assert_eq!(s.scale, INITIAL_SCALE / 2.0);
        s.after(true);
        assert_eq!((s.scale, s.good_steps), (INITIAL_SCALE, 0));
        let mut tiny = LossScale { scale: 1.0, ..LossScale::default() };
        tiny.after(false);
        assert_eq!(tiny.scale, 1.0, "never below 1");
    }

    fn grads_of(layer: &Linear<B>, x: Tensor<B, 2>, times: f64) -> GradientsParams {
        GradientsParams::from_grads(layer.forward(x).sum().mul_scalar(times).backward(), layer)
    }

    /// The gradients of a loss scaled by `s`, multiplied by the step's factor, equal the
    /// unscaled loss's gradients (`1/s` without clipping) and their clipped form (with it);
    /// an infinity in the gradients is caught and halves the scale.
    #[test]
    fn the_factor_undoes_the_loss_scale_and_clips_and_an_infinity_is_caught() {
        use crate::clip::{clip_global_norm, gradient_factor, scale_gradients, squared_global_norm};
        type N = burn_ndarray::NdArray<f32>;
        let device = Default::default();
        let layer = LinearConfig::new(3, 2).init::<B>(&device);
        let x = Tensor::<B, 2>::random([4, 3], Distribution::Default, &device);
        let weight = |grads: &GradientsParams| grads.get::<N, 2>(layer.weight.id).unwrap().into_data();
        let tolerance = burn::tensor::Tolerance::rel_abs(1e-6, 1e-6);
        let mut s = LossScale { scale: 1024.0, ..LossScale::default() };
        for clip in [0.0, 0.01] {
            let mut scaled = grads_of(&layer, x.clone(), 1024.0);
            let squared = squared_global_norm(&layer, &scaled);
            assert!(s.check(squared.as_ref()));
            scale_gradients(&layer, &mut scaled, gradient_factor(squared.unwrap(), clip, 1024.0));
            let mut plain = grads_of(&layer, x.clone(), 1.0);
            clip_global_norm(&layer, &mut plain, clip);
            let plain_norm: f32 = squared_global_norm(&layer, &plain).unwrap().into_scalar();
            assert!(clip == 0.0 || plain_norm.sqrt() < 0.0101, "clipped to 0.01: {}", plain_norm.sqrt());
            weight(&scaled).assert_approx_eq::<f32>(&weight(&plain), tolerance);
        }

        let inf = Tensor::<B, 2>::from_data(TensorData::new(vec![f32::INFINITY; 12], [4, 3]), &device);
        let overflowed = grads_of(&layer, inf, 1.0);
        assert!(!s.check(squared_global_norm(&layer, &overflowed).as_ref()));
        assert_eq!((s.scale, s.skipped), (512.0, 1));
    }
}
