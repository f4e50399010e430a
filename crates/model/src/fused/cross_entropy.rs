//! Softmax and cross-entropy over the vocabulary as one operation: per row of logits `z` and its
//! target `t`, with `lse = log Σ_v e^{z_v}`,
//!
//! - `nll = lse − z_t` (the negative log-likelihood), and
//! - `smoothed = (1 − s)·nll + s·(lse − mean_v z_v)` (label smoothing `s`: the cross-entropy
//!   against `(1 − s)·onehot(t) + s/V`, as the paper's section 5.4 and fairseq),
//!
//! returned as `[rows, 2]`. Its gradient with respect to `z`, for output gradients `(g₀, g₁)`
//! per row and `p = softmax(z)`: `(g₀ + g₁)·p − g₁·s/V − (g₀ + (1 − s)·g₁)·onehot(t)`.
//!
//! The composed form keeps the log-probabilities (`[rows, V]`) and their gradient chain; the
//! kernel keeps only the logits, reads each row once forward and writes `dz` once backward.
//!
//! The row's `lse` is also here in `f64` to the last bits or so ([`log_sum_exp_f64`]), for
//! beam search's log-probabilities.

use burn::tensor::activation::log_softmax;
use burn::tensor::backend::Backend;
use burn::tensor::ops::{FloatTensor, IntTensor};
use burn::tensor::{Int, Tensor, TensorData, TensorPrimitive};
use burn_ndarray::{NdArray, NdArrayTensor};
use rayon::prelude::*;

use super::unwritten::{assume_init, assume_init_mut, uninit};
use super::wide::{lanes_max, lanes_sum_f64, wide};

/// `[nll, smoothed]` per row, composed of Burn's tensor operations.
pub(super) fn composed<B: Backend>(logits: Tensor<B, 2>, targets: Tensor<B, 1, Int>, smoothing: f64) -> Tensor<B, 2> {
    let [rows, _] = logits.dims();
    let logp = log_softmax(logits, 1);
    let nll = logp.clone().gather(1, targets.reshape([rows, 1])).neg();
    let uniform = logp.mean_dim(1).neg();
    let smoothed = nll.clone().mul_scalar(1.0 - smoothing) + uniform.mul_scalar(smoothing);
    Tensor::cat(vec![nll, smoothed], 1)
}

/// The gradient with respect to the logits, composed.
pub(super) fn composed_backward<B: Backend>(
    logits: Tensor<B, 2>,
    targets: Tensor<B, 1, Int>,
    grad: Tensor<B, 2>,
    smoothing: f64,
) -> Tensor<B, 2> {
    let [rows, vocab] = logits.dims();
    let device = logits.device();
    let p = burn::tensor::activation::softmax(logits, 1);
    let onehot = Tensor::<B, 1, Int>::arange(0..vocab as i64, &device)
        .reshape([1, vocab])
        .expand([rows, vocab])
        .equal(targets.reshape([rows, 1]).expand([rows, vocab]))
        .float();
    let g0 = grad.clone().slice([0..rows, 0..1]);
    let g1 = grad.slice([0..rows, 1..2]);
    p * (g0.clone() + g1.clone())
        - g1.clone().mul_scalar(smoothing / vocab as f64)
        - onehot * (g0 + g1.mul_scalar(1.0 - smoothing))
}

type F = FloatTensor<NdArray<f32>>;

/// The forward kernel: one pass over each row (max, then the sum of exponentials, the target's
/// logit and the row's sum in the same sweep). Also each row's `ln Σ e^z` as the backward
/// reads it (rounded to f32), so that the backward does not sum the exponentials again: two
/// of its three passes over `[rows, V]` logits (the Multi30k model's are 100 MB a step).
pub(super) fn cpu(logits: F, targets: IntTensor<NdArray<f32>>, smoothing: f64) -> (F, F) {
    let (shape, z) = super::cpu::values(logits);
    let vocab = shape[1];
    let targets = indices(targets, vocab);
    let mut out = vec![0.0f32; 2 * targets.len()];
    let mut normalizers = vec![0.0f32; targets.len()];
    let rows_per_task = (super::cpu::GRAIN / vocab).max(1);
    out.par_chunks_mut(2 * rows_per_task)
        .zip(normalizers.par_chunks_mut(rows_per_task))
        .zip(z.par_chunks(vocab * rows_per_task))
        .zip(targets.par_chunks(rows_per_task))
        .for_each(|(((out, normalizers), z), targets)| {
            wide(
                #[inline(always)]
                || {
                    let rows = out.chunks_mut(2).zip(normalizers.iter_mut()).zip(z.chunks(vocab)).zip(targets);
                    for (((out, normalizer), z), &t) in rows {
                        let lse = log_sum_exp(z);
                        let mean = lanes_sum_f64(z, |v| v as f64) / vocab as f64;
                        let nll = lse - z[t] as f64;
                        out[0] = nll as f32;
                        out[1] = ((1.0 - smoothing) * nll + smoothing * (lse - mean)) as f32;
                        *normalizer = lse as f32;
                    }
                },
            )
        });
    let rows = targets.len();
    (
        NdArrayTensor::from_data(TensorData::new(out, [rows, 2])),
        NdArrayTensor::from_data(TensorData::new(normalizers, [rows])),
    )
}

#[cfg(test)]
std::thread_local! {
    /// Backwards on this thread that read the forward's log-normalizers, for the tests.
    pub(super) static KEPT_READ: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// The backward kernel: `dz` written once per row, from the rows' `ln Σ e^z` where the
/// forward kept them (`log_normalizers`, `[rows]`), else summed again.
pub(super) fn cpu_backward(
    logits: F,
    targets: IntTensor<NdArray<f32>>,
    log_normalizers: Option<F>,
    grad: F,
    smoothing: f64,
) -> F {
    let (shape, z) = super::cpu::values(logits);
    let (_, grad) = super::cpu::values(grad);
    #[cfg(test)]
    if log_normalizers.is_some() {
        KEPT_READ.with(|c| c.set(c.get() + 1));
    }
    let kept = log_normalizers.map(|l| super::cpu::values(l).1);
    let kept = kept.as_deref();
    assert!(kept.is_none_or(|l| l.len() == shape[0]), "cross_entropy_backward: one log-normalizer a row");
    let vocab = shape[1];
    let targets = indices(targets, vocab);
    let mut dz = uninit(z.len());
    let rows_per_task = (super::cpu::GRAIN / vocab).max(1);
    let block = vocab * rows_per_task;
    dz.par_chunks_mut(block)
        .zip(z.par_chunks(block))
        .zip(grad.par_chunks(2 * rows_per_task).zip(targets.par_chunks(rows_per_task)))
        .enumerate()
        .for_each(|(task, ((dz, z), (grad, targets)))| {
            let kept = kept.map(|l| &l[task * rows_per_task..][..targets.len()]);
            wide(
                #[inline(always)]
                || {
                    let rows = dz.chunks_mut(vocab).zip(z.chunks(vocab)).zip(grad.chunks(2)).zip(targets).enumerate();
                    for (row, (((dz, z), g), &t)) in rows {
                        let lse = match kept {
                            Some(kept) => kept[row],
                            None => log_sum_exp(z) as f32,
                        };
                        let (both, uniform) = (g[0] + g[1], g[1] * (smoothing / vocab as f64) as f32);
                        for (d, &v) in dz.iter_mut().zip(z) {
                            d.write(both * super::exp::exp_nonpositive(v - lse) - uniform);
                        }
                        // SAFETY: the loop above wrote every element of the row.
                        let dz = unsafe { assume_init_mut(dz) };
                        dz[t] -= g[0] + (1.0 - smoothing as f32) * g[1];
                    }
                },
            )
        });
    // SAFETY: the blocks cover the buffer (whole rows), every row written above.
    NdArrayTensor::from_data(TensorData::new(unsafe { assume_init(dz) }, shape))
}

/// `log Σ e^{z}` of one row, in f64 around the row's maximum.
#[inline(always)]
fn log_sum_exp(z: &[f32]) -> f64 {
    let max = lanes_max(z);
    let sum = lanes_sum_f64(z, |v| super::exp::exp_nonpositive(v - max) as f64);
    max as f64 + sum.ln()
}

/// `ln Σ exp(vᵢ)` in `f64`, as `log_sum_exp` above but exact to `f64`'s last bits or so:
/// `max + ln Σ e^(vᵢ − max)` with `exp_nonpositive_f64` (within 2 ulp of libm's `exp`), the sum
/// in `lanes_sum_f64`'s 32 interleaved lanes, compiled for AVX2 where the CPU has it. Beam search's
/// log-normalizer of a row of logits, where libm's scalar `exp` took about 9% of `translate`.
/// `−∞` for an empty row.
pub fn log_sum_exp_f64(values: &[f32]) -> f64 {
    wide(
        #[inline(always)]
        || {
            let max = lanes_max(values) as f64;
            max + lanes_sum_f64(values, |v| super::exp::exp_nonpositive_f64(v as f64 - max)).ln()
        },
    )
}

/// The targets as row indices; every one must name a column of the logits (as for `gather`).
fn indices(targets: IntTensor<NdArray<f32>>, vocab: usize) -> Vec<usize> {
    let data = Tensor::<NdArray<f32>, 1, Int>::from_primitive(targets).into_data();
    let values = data.convert::<i64>().into_vec::<i64>().expect("i64 after conversion");
    values
        .into_iter()
        .map(|t| {
            assert!((0..vocab as i64).contains(&t), "cross-entropy target {t} outside the vocabulary 0..{vocab}");
            t as usize
        })
        .collect()
}

/// `[nll, smoothed]` per row of `logits` (`[rows, V]`) against `targets` (`[rows]`), fused
/// where the backend has a kernel (formulas in this module's documentation).
///
/// # Shapes
/// - `logits`: `[rows, vocab]`; `targets`: `[rows]`; output: `[rows, 2]`
pub fn cross_entropy<B: Backend>(logits: Tensor<B, 2>, targets: Tensor<B, 1, Int>, smoothing: f64) -> Tensor<B, 2> {
    use super::{same, FusedOps};
    fn on<B: Backend, K: FusedOps>(logits: Tensor<B, 2>, targets: Tensor<B, 1, Int>, smoothing: f64) -> Tensor<B, 2> {
        let z = same::<Tensor<B, 2>, Tensor<K, 2>>(logits).into_primitive().tensor();
        let t = same::<Tensor<B, 1, Int>, Tensor<K, 1, Int>>(targets).into_primitive();
        same(Tensor::<K, 2>::from_primitive(TensorPrimitive::Float(K::fused_cross_entropy(z, t, smoothing))))
    }
    super::on_kernels!(B, K => on::<B, K>(logits, targets, smoothing), _ => {
        super::on_kernels!(tracked B, K => on::<B, K>(logits, targets, smoothing), _ => {
            composed(logits, targets, smoothing)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::log_sum_exp_f64;

    #[test]
    fn log_sum_exp_f64_equals_the_libm_sum_to_1e_14() {
        // A vocabulary-sized row with a wide range, as logits have.
        let row: Vec<f32> = (0..8_003u32).map(|i| ((i * 7_919 % 1_000) as f32 - 700.0) * 0.031).collect();
        let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let libm = max + row.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln();
        let ours = log_sum_exp_f64(&row);
        assert!((ours - libm).abs() < 1e-14, "{ours} against {libm}");
        assert_eq!(log_sum_exp_f64(&[3.5]), 3.5);
        assert_eq!(log_sum_exp_f64(&[]), f64::NEG_INFINITY);
    }
}
