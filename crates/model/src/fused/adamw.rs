//! One AdamW update of a parameter (Loshchilov & Hutter; PyTorch's and nanoGPT's form) in one
//! pass over the parameter, its gradient and its two moments, where Burn's `AdamW` makes
//! about fifteen passes, each allocating a new buffer:
//!
//! ```text
//! g ← g·s                          (s: the gradient's scale, clipping's factor; 1 without)
//! m ← β₁·m + (1 − β₁)·g            v ← β₂·v + (1 − β₂)·g²
//! m̂ = m / (1 − β₁ᵗ)                v̂ = v / (1 − β₂ᵗ)
//! θ ← θ·decay − lr · m̂ / (√v̂ + ε)   (decay = 1 − lr·λ, or 1 where the parameter is exempt)
//! ```
//!
//! Each element goes through the same f32 operations in the same order as the composed form
//! ([`composed`], Burn's `AdamW` with the decay multiplied in first), so the two give the same
//! bits: a run is the same whichever path it takes (tested).
//!
//! `fused/adam.rs` runs Burn's `Adam` through the same CPU kernel with Adam's coefficients
//! ([`Coefficients::adam`]).

use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorPrimitive};
use burn_ndarray::{NdArray, NdArrayTensor, SharedArray};
use rayon::prelude::*;

use super::cpu::{tensor, values, GRAIN};
use super::dispatch::{is, on_kernels, same};
use super::unwritten::{assume_init, uninit};
use super::wide::wide;
use super::FusedOps;

/// The scalars of one update.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWStep {
    /// The learning rate of this step.
    pub lr: f64,
    pub beta_1: f32,
    pub beta_2: f32,
    pub epsilon: f32,
    /// The factor the parameter is multiplied by before the update: `1 − lr·λ`, or exactly 1
    /// for a parameter exempt from decay.
    pub decay: f64,
    /// The update's number, from 1 (bias correction).
    pub time: i32,
}

/// The composed form in Burn's tensor operations: `(θ, m, v)` after the update; `moments`
/// `None` on the first update (moments start at zero); `scale` (shape `[1]`, on the device)
/// multiplies the gradient first, as clipping by the global norm does.
pub fn composed<B: Backend, const D: usize>(
    param: Tensor<B, D>,
    grad: Tensor<B, D>,
    moments: Option<(Tensor<B, D>, Tensor<B, D>)>,
    scale: Option<Tensor<B, 1>>,
    s: AdamWStep,
) -> [Tensor<B, D>; 3] {
    let grad = match scale {
        Some(scale) => grad.mul(scale.reshape([1; D])),
        None => grad,
    };
    let (m, v) = composed_moments(grad, moments, &s);
    let m_hat = m.clone().div_scalar(1f32 - s.beta_1.powi(s.time));
    let v_hat = v.clone().div_scalar(1f32 - s.beta_2.powi(s.time));
    let delta = m_hat.div(v_hat.sqrt().add_scalar(s.epsilon));
    let param = if s.decay == 1.0 { param } else { param.mul_scalar(s.decay) };
    [param - delta.mul_scalar(s.lr), m, v]
}

/// The moments after `grad` in Burn's operations: `β₁·m + (1 − β₁)·g`, `β₂·v + (1 − β₂)·g²`
/// (from zero on the first update), as Burn's `Adam` and `AdamW` compute them.
pub(super) fn composed_moments<B: Backend, const D: usize>(
    grad: Tensor<B, D>,
    moments: Option<(Tensor<B, D>, Tensor<B, D>)>,
    s: &AdamWStep,
) -> (Tensor<B, D>, Tensor<B, D>) {
    let (f1, f2) = (1.0 - s.beta_1, 1.0 - s.beta_2);
    match moments {
        Some((m, v)) => (
            m.mul_scalar(s.beta_1).add(grad.clone().mul_scalar(f1)),
            v.mul_scalar(s.beta_2).add(grad.square().mul_scalar(f2)),
        ),
        None => (grad.clone().mul_scalar(f1), grad.square().mul_scalar(f2)),
    }
}

/// One AdamW update of a parameter (formulas in this module's top doc): `[θ, m, v]` after it,
/// from the parameter, its gradient and its moments (`None` on the first update), in one pass where
/// the backend has a kernel. `scale` multiplies the gradient first (clipping's factor, left on
/// the device: one pass where a separate multiplication would be one more per parameter). The
/// same bits either way.
///
/// # Shapes
/// - `param`, `grad`, the moments: one shape; outputs: the same
/// - `scale`: `[1]`
pub fn adamw<B: Backend, const D: usize>(
    param: Tensor<B, D>,
    grad: Tensor<B, D>,
    moments: Option<(Tensor<B, D>, Tensor<B, D>)>,
    scale: Option<Tensor<B, 1>>,
    step: AdamWStep,
) -> [Tensor<B, D>; 3] {
    if is::<B, NdArray<f32>>() {
        let raw = |t: Tensor<B, D>| same::<Tensor<B, D>, Tensor<NdArray<f32>, D>>(t).into_primitive().tensor();
        let scale = scale.map(|s| same::<Tensor<B, 1>, Tensor<NdArray<f32>, 1>>(s).into_primitive().tensor());
        let out = cpu(raw(param), raw(grad), moments.map(|(m, v)| [raw(m), raw(v)]), scale, step);
        out.map(|t| same(Tensor::<NdArray<f32>, D>::from_primitive(TensorPrimitive::Float(t))))
    } else {
        on_kernels!(updates B, K => adamw_on::<B, K, D>(param, grad, moments, scale, step), _ => composed(param, grad, moments, scale, step))
    }
}

/// [`adamw`] through `F`'s [`FusedOps::fused_adamw`] (`F` is `B`).
fn adamw_on<B: Backend, F: FusedOps, const D: usize>(
    param: Tensor<B, D>,
    grad: Tensor<B, D>,
    moments: Option<(Tensor<B, D>, Tensor<B, D>)>,
    scale: Option<Tensor<B, 1>>,
    step: AdamWStep,
) -> [Tensor<B, D>; 3] {
    let raw = |t: Tensor<B, D>| same::<Tensor<B, D>, Tensor<F, D>>(t).into_primitive().tensor();
    let scale = scale.map(|s| same::<Tensor<B, 1>, Tensor<F, 1>>(s).into_primitive().tensor());
    let out = F::fused_adamw(raw(param), raw(grad), moments.map(|(m, v)| [raw(m), raw(v)]), scale, step);
    out.map(|t| same(Tensor::<F, D>::from_primitive(TensorPrimitive::Float(t))))
}

type T = FloatTensor<NdArray<f32>>;

/// The kernel: one parallel pass; in place where the update holds the only reference to the
/// parameter and both moments (as every update after the first does in training), else into
/// three new buffers. Both ways compute the same bits. `scale` (`[1]`) multiplies the gradient
/// first; without one the gradient is multiplied by 1, which leaves every value as it is.
pub fn cpu(param: T, grad: T, moments: Option<[T; 2]>, scale: Option<T>, s: AdamWStep) -> [T; 3] {
    let scale = scale.map_or(1.0, |t| {
        let (_, v) = values(t);
        assert_eq!(v.len(), 1, "AdamW: the gradient's scale has one element");
        v[0]
    });
    run_cpu(param, grad, moments, scale, Coefficients::new(&s))
}

/// The CPU's update with the coefficients `k` (AdamW's or Adam's form, `fused/adam.rs`).
pub(super) fn run_cpu(param: T, grad: T, moments: Option<[T; 2]>, scale: f32, k: Coefficients) -> [T; 3] {
    match moments {
        Some([m, v]) if super::cpu::writable(&param) && super::cpu::writable(&m) && super::cpu::writable(&v) => {
            in_place([param, m, v], grad, scale, k)
        }
        moments => into_new(param, grad, moments, scale, k),
    }
}

#[cfg(test)]
thread_local! {
    /// Updates made in place on this thread, for the tests.
    static IN_PLACE: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// The update written over the parameter and its moments (each [`super::cpu::writable`]).
fn in_place(tensors: [T; 3], grad: T, scale: f32, k: Coefficients) -> [T; 3] {
    #[cfg(test)]
    IN_PLACE.with(|c| c.set(c.get() + 1));
    let (_, g) = values(grad);
    let [mut p, mut m, mut v] = tensors.map(|t| match t {
        // Owned and unshared: the array itself, not a copy.
        NdArrayTensor::F32(storage) => storage.into_owned(),
        _ => unreachable!("checked writable"),
    });
    let slice = |a: &mut SharedArray<f32>| a.as_slice_mut().expect("checked contiguous and unshared") as *mut [f32];
    // SAFETY: three distinct arrays (each unshared), borrowed mutably once each.
    let (ps, ms, vs) = unsafe { (&mut *slice(&mut p), &mut *slice(&mut m), &mut *slice(&mut v)) };
    assert!(ps.len() == g.len() && ms.len() == g.len() && vs.len() == g.len(), "AdamW: tensors of unequal sizes");
    let chunks = ps.par_chunks_mut(CHUNK).zip(ms.par_chunks_mut(CHUNK)).zip(vs.par_chunks_mut(CHUNK));
    chunks.zip(g.par_chunks(CHUNK)).for_each(|(((ps, ms), vs), g)| {
        wide(
            #[inline(always)]
            || {
                for (((p, m), v), &g) in ps.iter_mut().zip(ms).zip(vs).zip(g) {
                    let (m_new, v_new) = k.moments(*m, *v, g * scale);
                    *p = k.theta(*p, m_new, v_new);
                    (*m, *v) = (m_new, v_new);
                }
            },
        )
    });
    [p, m, v].map(NdArrayTensor::from)
}

/// The update into three new buffers.
fn into_new(param: T, grad: T, moments: Option<[T; 2]>, scale: f32, k: Coefficients) -> [T; 3] {
    let (shape, p) = values(param);
    let (_, g) = values(grad);
    let moments = moments.map(|[m, v]| (values(m).1, values(v).1));
    let n = p.len();
    let (mut p_out, mut m_out, mut v_out) = (uninit(n), uninit(n), uninit(n));
    let outs = p_out.par_chunks_mut(CHUNK).zip(m_out.par_chunks_mut(CHUNK)).zip(v_out.par_chunks_mut(CHUNK));
    outs.enumerate().for_each(|(chunk, ((po, mo), vo))| {
        wide(
            #[inline(always)]
            || {
                let start = chunk * CHUNK;
                let range = start..start + po.len();
                let (p, g) = (&p[range.clone()], &g[range.clone()]);
                let outs = po.iter_mut().zip(mo.iter_mut()).zip(vo.iter_mut()).zip(p.iter().zip(g));
                // Iterators, not indices: with no bounds checks left in it, the loop vectorizes.
                match &moments {
                    Some((m, v)) => {
                        let old = m[range.clone()].iter().zip(&v[range.clone()]);
                        for ((((po, mo), vo), (&p, &g)), (&m, &v)) in outs.zip(old) {
                            let (m, v) = k.moments(m, v, g * scale);
                            po.write(k.theta(p, m, v));
                            mo.write(m);
                            vo.write(v);
                        }
                    }
                    None => {
                        for (((po, mo), vo), (&p, &g)) in outs {
                            let (m, v) = k.first_moments(g * scale);
                            po.write(k.theta(p, m, v));
                            mo.write(m);
                            vo.write(v);
                        }
                    }
                }
            },
        )
    });
    // SAFETY: the chunks cover all n elements of each buffer, and every element was written.
    let (p_out, m_out, v_out) = unsafe { (assume_init(p_out), assume_init(m_out), assume_init(v_out)) };
    [tensor(p_out, shape.clone()), tensor(m_out, shape.clone()), tensor(v_out, shape)]
}

/// The step's scalars in the per-element formulas (the GPU kernel takes the same ones).
#[derive(Clone, Copy)]
pub(crate) struct Coefficients {
    pub(crate) b1: f32,
    pub(crate) b2: f32,
    /// `1 − β₁`, `1 − β₂`.
    pub(crate) f1: f32,
    pub(crate) f2: f32,
    /// `1 − β₁ᵗ`, `1 − β₂ᵗ`: bias corrections.
    pub(crate) c1: f32,
    pub(crate) c2: f32,
    pub(crate) eps: f32,
    pub(crate) lr: f32,
    pub(crate) decay: f32,
    pub(crate) exempt: bool,
    /// Burn's `Adam` form ([`adam`]) instead of AdamW's, with its factor `√c₂/c₁` and its
    /// `ε·√c₂` (the GPU kernels take AdamW's form only).
    pub(crate) adam: Option<(f32, f32)>,
}

impl Coefficients {
    pub(crate) fn new(s: &AdamWStep) -> Coefficients {
        let (b1, b2) = (s.beta_1, s.beta_2);
        let (c1, c2) = (1f32 - b1.powi(s.time), 1f32 - b2.powi(s.time));
        let (eps, lr, decay, exempt) = (s.epsilon, s.lr as f32, s.decay as f32, s.decay == 1.0);
        Coefficients { b1, b2, f1: 1.0 - b1, f2: 1.0 - b2, c1, c2, eps, lr, decay, exempt, adam: None }
    }

    /// Burn's `Adam`'s coefficients, computed as it computes them.
    pub(super) fn adam(s: &AdamWStep) -> Coefficients {
        let c2_sqrt = (1.0 - s.beta_2.powi(s.time)).sqrt();
        let factor = c2_sqrt / (1.0 - s.beta_1.powi(s.time));
        Coefficients { adam: Some((factor, s.epsilon * c2_sqrt)), ..Coefficients::new(s) }
    }

    /// The moments after gradient `g`: `β₁·m + (1 − β₁)·g`, `β₂·v + (1 − β₂)·g²`.
    #[inline(always)]
    fn moments(&self, m: f32, v: f32, g: f32) -> (f32, f32) {
        (m * self.b1 + g * self.f1, v * self.b2 + g * g * self.f2)
    }

    /// The first moments (from zero), as the composed form computes them.
    #[inline(always)]
    fn first_moments(&self, g: f32) -> (f32, f32) {
        (g * self.f1, g * g * self.f2)
    }

    /// `θ·decay − lr · m̂ / (√v̂ + ε)` from θ and the new moments (Adam's form: `θ − lr ·
    /// (m·√c₂/c₁) / (√v + ε·√c₂)`).
    #[inline(always)]
    fn theta(&self, p: f32, m: f32, v: f32) -> f32 {
        if let Some((factor, eps)) = self.adam {
            return p - (m * factor) / (v.sqrt() + eps) * self.lr;
        }
        let delta = (m / self.c1) / ((v / self.c2).sqrt() + self.eps);
        let theta = if self.exempt { p } else { p * self.decay };
        theta - delta * self.lr
    }
}

/// Elements per parallel task: a quarter of the element-wise kernels' grain, since most
/// parameters are one or two grains long (16k-65k elements in nanoGPT's CPU model) and would
/// otherwise be updated by one thread while the others wait.
const CHUNK: usize = GRAIN / 4;

#[cfg(test)]
mod tests {
    use burn::tensor::{Tensor, TensorData};
    use burn_ndarray::NdArray;

    use super::super::tests::{data, values};
    use super::*;

    type Cpu = NdArray<f32>;

    /// Three AdamW updates of a parameter larger than one parallel block: the kernel gives the
    /// composed form's bits exactly, with decay and exempt (`decay` = 1), from zero moments on,
    /// with the gradient scaled (clipping's factor) and not.
    #[test]
    fn adamw_kernel_equals_the_composed_update_bit_for_bit_with_and_without_a_gradient_scale() {
        let device = Default::default();
        let n = 7 * 7_100; // twelve full tasks of CHUNK and a partial one (and more than 3 GRAIN)
        assert!(n % CHUNK != 0 && n > 12 * CHUNK);
        assert!(n > 3 * GRAIN && n < 4 * GRAIN);
        for (decay_rate, scale) in [(0.1, None), (0.0, None), (0.1, Some(0.37f32))] {
            let scale = scale.map(|s| Tensor::<Cpu, 1>::from_data([s], &device));
            let start = Tensor::<Cpu, 2>::from_data(TensorData::new(values(n, 21, 0.5), [n / 7, 7]), &device);
            let (mut fused, mut reference) = ((start.clone(), None), (start, None));
            let in_place_before = IN_PLACE.with(|c| c.get());
            for time in 1..=3 {
                let grad =
                    Tensor::<Cpu, 2>::from_data(TensorData::new(values(n, 30 + time as u64, 2.0), [n / 7, 7]), &device);
                let lr = 1e-2 / time as f64;
                let step =
                    AdamWStep { lr, beta_1: 0.9, beta_2: 0.95, epsilon: 1e-8, decay: 1.0 - lr * decay_rate, time };
                let calls = super::super::cpu::CALLS.with(|c| c.get());
                let [p, m, v] = super::super::adamw(fused.0, grad.clone(), fused.1, scale.clone(), step);
                assert!(
                    super::super::cpu::CALLS.with(|c| c.get()) > calls,
                    "NdArray<f32> did not run the AdamW kernel"
                );
                fused = (p, Some((m, v)));
                let [p, m, v] = composed(reference.0, grad, reference.1, scale.clone(), step);
                reference = (p, Some((m, v)));
            }
            let (Some((m, v)), Some((m_ref, v_ref))) = (fused.1, reference.1) else { unreachable!() };
            assert_eq!(IN_PLACE.with(|c| c.get()) - in_place_before, 2, "the 2nd and 3rd updates in place");
            assert_eq!(data(fused.0), data(reference.0), "parameter, decay {decay_rate}");
            assert_eq!(data(m), data(m_ref), "first moment");
            assert_eq!(data(v), data(v_ref), "second moment");
        }
    }

    /// An update never writes into a tensor that something else still holds: with the
    /// parameter shared, the kernel takes new buffers and the other holder's values stay.
    #[test]
    fn adamw_writes_in_place_only_into_tensors_nobody_else_holds() {
        let device = Default::default();
        let n = 3 * CHUNK + 5;
        let tensor = |seed: u64, scale: f32| {
            Tensor::<Cpu, 2>::from_data(TensorData::new(values(n, seed, scale), [n, 1]), &device)
        };
        let step = AdamWStep { lr: 0.1, beta_1: 0.9, beta_2: 0.99, epsilon: 1e-8, decay: 0.99, time: 2 };
        let moments = || Some((tensor(2, 1.0), tensor(3, 1.0).abs()));
        let scale = || Some(Tensor::<Cpu, 1>::from_data([0.6f32], &device));
        let expected = composed(tensor(1, 1.0), tensor(4, 1.0), moments(), scale(), step).map(data);

        let before = IN_PLACE.with(|c| c.get());
        let got = super::super::adamw(tensor(1, 1.0), tensor(4, 1.0), moments(), scale(), step).map(data);
        assert_eq!(IN_PLACE.with(|c| c.get()), before + 1, "unshared tensors are updated in place");
        assert_eq!(got, expected, "in place: the composed form's bits");

        let param = tensor(1, 1.0);
        let held = param.clone();
        let got = super::super::adamw(param, tensor(4, 1.0), moments(), scale(), step).map(data);
        assert_eq!(IN_PLACE.with(|c| c.get()), before + 1, "a shared parameter is not written over");
        assert_eq!(got, expected, "into new buffers: the same bits");
        assert_eq!(data(held), values(n, 1, 1.0), "the other holder's values are untouched");
    }
}
