//! GELU, exact form: `GELU(x) = x·Φ(x) = x·½(1 + erf(x/√2))` (Hendrycks & Gimpel 2016), as
//! GPT-2 and nanoGPT (`nn.GELU()`) use it.
//!
//! Burn 0.21's `activation::gelu` computes this forward but its backward differentiates the
//! tanh approximation (docs/burn.md). We compose GELU from `erf`, whose autodiff
//! backward is exact (`d erf(u)/du = 2/√π·e^{-u²}`), so the gradient is the true
//! `Φ(x) + x·φ(x)`; a test checks it against finite differences.

use burn::tensor::{backend::Backend, Tensor};

/// Exact GELU, element-wise.
///
/// # Shapes
/// - `x`: any
/// - output: same as `x`
///
/// One pass forward and one backward where the backend has a kernel ([`crate::fused`]), the
/// composed form above elsewhere.
pub fn gelu<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    crate::fused::gelu(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_backend::{TestAutodiffBackend, TestBackend};
    use burn::tensor::TensorData;

    /// Reference values: `x·Φ(x)` from scipy.stats.norm.cdf (`0.5·Φ(0.5)`, `Φ(1)`, ...).
    #[test]
    fn gelu_matches_exact_erf_values() {
        let device = Default::default();
        let x = Tensor::<TestBackend, 1>::from_floats([-3.0, -1.0, 0.0, 0.5, 1.0, 3.0], &device);
        let expected = [-0.004_049_694_6, -0.158_655_25, 0.0, 0.345_731_23, 0.841_344_7, 2.995_950_3];
        let got = gelu(x).into_data().to_vec::<f32>().unwrap();
        for (g, e) in got.iter().zip(expected) {
            assert!((g - e).abs() < 1e-5, "{got:?}");
        }
    }

    /// The autodiff gradient equals the central finite difference of the forward.
    #[test]
    fn gelu_gradient_matches_finite_differences() {
        let device = Default::default();
        let points: Vec<f32> = (-40..=40).map(|i| i as f32 * 0.1).collect();
        let n = points.len();
        let x =
            Tensor::<TestAutodiffBackend, 1>::from_data(TensorData::new(points.clone(), [n]), &device).require_grad();
        let grads = gelu(x.clone()).sum().backward();
        let grad = x.grad(&grads).unwrap().into_data().to_vec::<f32>().unwrap();

        let h = 1e-2f32;
        let forward = |shift: f32| {
            let shifted: Vec<f32> = points.iter().map(|p| p + shift).collect();
            let t = Tensor::<TestBackend, 1>::from_data(TensorData::new(shifted, [n]), &device);
            gelu(t).into_data().to_vec::<f32>().unwrap()
        };
        let (plus, minus) = (forward(h), forward(-h));
        for i in 0..n {
            let numeric = (plus[i] - minus[i]) / (2.0 * h);
            assert!((grad[i] - numeric).abs() < 2e-4, "x = {}: autodiff {} vs numeric {numeric}", points[i], grad[i]);
        }
    }
}
