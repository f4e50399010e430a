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

#[cfg(test)]
mod tests {
    use burn::tensor::{Tensor, TensorData};
    use burn_ndarray::NdArray;

    use super::super::tests::{data, values};
    use super::*;

    type Cpu = NdArray<f32>;

    /// Three Adam updates through the CPU kernel (AdamW's, with Adam's coefficients) give the
    /// bits of the composed form, which computes Burn's `Adam` in its own operations: the
    /// factor `√c₂/c₁`, the `ε·√c₂` and the step's subtraction each change the parameter.
    #[test]
    fn adam_kernel_equals_the_composed_update_bit_for_bit_over_three_steps() {
        let device = Default::default();
        let n = 5 * 3_001;
        let tensor = |seed: u64, scale: f32| {
            Tensor::<Cpu, 2>::from_data(TensorData::new(values(n, seed, scale), [n / 5, 5]), &device)
        };
        let (mut fused, mut reference) = ((tensor(1, 0.5), None), (tensor(1, 0.5), None));
        for time in 1..=3 {
            let grad = tensor(10 + time as u64, 2.0);
            // ε large enough next to √v̂ that where it sits in the quotient shows in the bits.
            let step = AdamWStep { lr: 3e-2 / time as f64, beta_1: 0.8, beta_2: 0.9, epsilon: 1e-2, decay: 1.0, time };
            let calls = super::super::cpu::CALLS.with(|c| c.get());
            let [p, m, v] = adam(fused.0, grad.clone(), fused.1, step);
            assert!(super::super::cpu::CALLS.with(|c| c.get()) > calls, "NdArray<f32> did not run the kernel");
            fused = (p, Some((m, v)));
            let [p, m, v] = composed_adam(reference.0, grad, reference.1, step);
            reference = (p, Some((m, v)));
        }
        let start = values(n, 1, 0.5);
        let fused_p = data(fused.0);
        assert!(fused_p.iter().zip(&start).all(|(a, b)| a != b), "every parameter moved");
        assert_eq!(fused_p, data(reference.0), "parameter");
        let (Some((m, v)), Some((m_ref, v_ref))) = (fused.1, reference.1) else { unreachable!() };
        assert_eq!(data(m), data(m_ref), "first moment");
        assert_eq!(data(v), data(v_ref), "second moment");
    }
}
