//! One update of Burn's `Adam` in one pass over the parameter, its gradient and its moments on
//! the CPU (AdamW's kernel, `fused/adamw.rs`, with Adam's coefficients), where Burn's `Adam`
//! makes about a dozen passes; in Burn's operations on the other backends. Either way the
//! bits of Burn's `Adam` (tested in `attend-train`'s `one_pass_adam`).

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorPrimitive};
use burn_ndarray::NdArray;

use super::adamw::{composed_moments, run_cpu, AdamWStep, Coefficients};
use super::dispatch::{is, same};

/// One update of Burn's `Adam` (Kingma & Ba with Burn's arrangement of the bias corrections;
/// any L2 penalty already added to `grad`): the moments as [`super::adamw::adamw`]'s, then
/// `θ ← θ − lr · (m·√c₂/c₁) / (√v + ε·√c₂)` with `c₁ = 1 − β₁ᵗ`, `c₂ = 1 − β₂ᵗ`, in one pass on
/// the CPU and in Burn's operations elsewhere ([`composed_adam`]): the bits of Burn's `Adam`
/// either way (tested). `step.decay` must be 1.
pub fn adam<B: Backend, const D: usize>(
    param: Tensor<B, D>,
    grad: Tensor<B, D>,
    moments: Option<(Tensor<B, D>, Tensor<B, D>)>,
    step: AdamWStep,
) -> [Tensor<B, D>; 3] {
    assert_eq!(step.decay, 1.0, "Adam: no decoupled decay");
    if is::<B, NdArray<f32>>() {
        let raw = |t: Tensor<B, D>| same::<Tensor<B, D>, Tensor<NdArray<f32>, D>>(t).into_primitive().tensor();
        let out =
            run_cpu(raw(param), raw(grad), moments.map(|(m, v)| [raw(m), raw(v)]), 1.0, Coefficients::adam(&step));
        out.map(|t| same(Tensor::<NdArray<f32>, D>::from_primitive(TensorPrimitive::Float(t))))
    } else {
        composed_adam(param, grad, moments, step)
    }
}

/// [`adam`] in Burn's tensor operations, as Burn's `Adam` computes it.
pub fn composed_adam<B: Backend, const D: usize>(
    param: Tensor<B, D>,
    grad: Tensor<B, D>,
    moments: Option<(Tensor<B, D>, Tensor<B, D>)>,
    s: AdamWStep,
) -> [Tensor<B, D>; 3] {
    let (m, v) = composed_moments(grad, moments, &s);
    let c2_sqrt = (1.0 - s.beta_2.powi(s.time)).sqrt();
    let factor = c2_sqrt / (1.0 - s.beta_1.powi(s.time));
    let update = m.clone().mul_scalar(factor).div(v.clone().sqrt().add_scalar(s.epsilon * c2_sqrt));
    [param - update.mul_scalar(s.lr), m, v]
}
