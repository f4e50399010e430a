//! LayerNorm's CPU kernels for `burn-ndarray` (f32), forward and backward, parallel over
//! blocks of whole rows.
//!
//! Under autodiff the forward keeps each row's mean `μ` and `r = 1/√(σ² + ε)` (two floats a
//! row, [`layer_norm_keeping`]) and the backward reads them instead of computing them again
//! from `x`: the two f64 passes over the row and the division and square root were about a
//! third of the backward's time. They are the same bits either way (one function,
//! [`moments`], on the same row).

use rayon::prelude::*;

use super::cpu::{last_axis, row_block, tensor, values, T};
use super::unwritten::{assume_init, assume_init_mut, uninit};
use super::wide::{lanes_sum_f64, wide};

#[cfg(test)]
std::thread_local! {
    /// LayerNorm backwards that added a pending gradient, on this thread.
    pub(crate) static ADDED_PENDING: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
    /// LayerNorm backwards that read the moments the forward kept, on this thread.
    pub(crate) static MOMENTS_READ: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// LayerNorm of each row of the last axis: `(x − μ)·r·γ + β`, `r = 1/√(σ² + ε)`.
pub fn layer_norm(x: T, gamma: T, beta: Option<T>, epsilon: f64) -> T {
    layer_norm_keeping(x, gamma, beta, epsilon).0
}

/// [`layer_norm`] and each row's `(μ, r)`, side by side in a `[rows, 2]` tensor, for
/// [`layer_norm_backward`].
pub fn layer_norm_keeping(x: T, gamma: T, beta: Option<T>, epsilon: f64) -> (T, T) {
    let (shape, x) = values(x);
    let (_, gamma) = values(gamma);
    let beta = beta.map(|b| values(b).1);
    // Slices taken once, not a `Values` dereference (a view built, its layout checked) a row.
    let (gamma, beta) = (&*gamma, beta.as_deref());
    let last = last_axis(&shape);
    // Every element of `out` is written only if γ (and β) cover the last axis.
    assert!(
        gamma.len() == last && beta.as_ref().is_none_or(|b| b.len() == last),
        "layer_norm: γ, β of the last axis, {last}"
    );
    let rows = x.len() / last.max(1);
    let (mut out, mut kept) = (uninit(x.len()), uninit(2 * rows));
    let block = row_block(last);
    let kept_block = 2 * (block / last.max(1));
    let chunks = out.par_chunks_mut(block).zip(kept.par_chunks_mut(kept_block));
    chunks.zip(x.par_chunks(block)).for_each(|((out, kept), x)| {
        wide(
            #[inline(always)]
            || {
                for ((out, x), kept) in out.chunks_mut(last).zip(x.chunks(last)).zip(kept.chunks_mut(2)) {
                    let (mean, rstd) = moments(x, epsilon);
                    kept[0].write(mean);
                    kept[1].write(rstd);
                    let row = out.iter_mut().zip(x).zip(gamma.iter());
                    match &beta {
                        Some(beta) => row.zip(beta.iter()).for_each(|(((o, &v), &g), &b)| {
                            o.write((v - mean) * rstd * g + b);
                        }),
                        None => row.for_each(|((o, &v), &g)| {
                            o.write((v - mean) * rstd * g);
                        }),
                    }
                }
            },
        )
    });
    // SAFETY: the blocks cover both buffers (whole rows, and two floats for each of them),
    // every element written once.
    let (out, kept) = unsafe { (assume_init(out), assume_init(kept)) };
    (tensor(out, shape), tensor(kept, [rows, 2].into()))
}

/// The LayerNorm's gradients `[dx, dγ, dβ]` from its input, `γ` and the output's gradient
/// (formulas at `FusedOps::fused_layer_norm_backward`), with each row's `(μ, r)` from
/// `moments` where the forward kept them ([`layer_norm_keeping`]), else computed again. `dγ`
/// and `dβ` are summed per block of rows, then over the blocks in order, so the result does
/// not depend on the scheduling.
///
/// With `pending` (the input's gradient from its other uses, of `x`'s shape), `dx` comes back
/// with it added, each element `dx + pending` rounded once as a separate sum would be.
pub fn layer_norm_backward(
    x: T,
    gamma: T,
    grad: T,
    epsilon: f64,
    moments_kept: Option<T>,
    pending: Option<T>,
) -> [T; 3] {
    let (shape, x) = values(x);
    let (_, gamma) = values(gamma);
    let gamma = &*gamma;
    let (_, grad) = values(grad);
    #[cfg(test)]
    {
        if pending.is_some() {
            ADDED_PENDING.with(|c| c.set(c.get() + 1));
        }
        if moments_kept.is_some() {
            MOMENTS_READ.with(|c| c.set(c.get() + 1));
        }
    }
    let pending = pending.map(|p| values(p).1);
    let pending = pending.as_deref();
    let kept = moments_kept.map(|m| values(m).1);
    let kept = kept.as_deref();
    let last = last_axis(&shape);
    // Every element of `dx` is written only if γ covers the last axis and `grad` all of `x`.
    assert!(
        gamma.len() == last && grad.len() == x.len(),
        "layer_norm_backward: γ of {last}, the gradient of x's shape"
    );
    assert!(
        pending.as_ref().is_none_or(|p| p.len() == x.len()),
        "layer_norm_backward: a pending gradient of another size than x"
    );
    assert!(
        kept.as_ref().is_none_or(|k| k.len() * last == 2 * x.len()),
        "layer_norm_backward: kept moments of another count than x's rows"
    );
    // Not zeroed first (a `memset` of the whole gradient was a fifth of this kernel's time):
    // each row's first loop below writes every element before any is read.
    let mut dx = uninit(x.len());
    let block = row_block(last);
    let rows_per_block = block / last.max(1);
    let partials: Vec<(Vec<f32>, Vec<f32>)> = dx
        .par_chunks_mut(block)
        .zip(x.par_chunks(block).zip(grad.par_chunks(block)))
        .enumerate()
        .map(|(index, (dx, (x, grad)))| {
            let pending = pending.map(|p| &p[index * block..][..x.len()]);
            let kept = kept.map(|k| &k[2 * index * rows_per_block..][..2 * (x.len() / last)]);
            wide(
                #[inline(always)]
                || {
                    let (mut dgamma, mut dbeta) = (vec![0.0f32; last], vec![0.0f32; last]);
                    for (row, ((dx, x), grad)) in
                        dx.chunks_mut(last).zip(x.chunks(last)).zip(grad.chunks(last)).enumerate()
                    {
                        let (mean, rstd) = match kept {
                            Some(kept) => (kept[2 * row], kept[2 * row + 1]),
                            None => moments(x, epsilon),
                        };
                        // dx's row means of g·dy and g·dy·x̂ (x̂ the normalized input), summed in
                        // f64 lanes; `dx` holds g·dy and then g·dy·x̂ for the sums meanwhile.
                        for (((d, &dy), &g), db) in dx.iter_mut().zip(grad).zip(gamma.iter()).zip(dbeta.iter_mut()) {
                            d.write(dy * g);
                            *db += dy;
                        }
                        // SAFETY: the loop above wrote every element of the row.
                        let dx = unsafe { assume_init_mut(dx) };
                        let mean_g = lanes_sum_f64(dx, |v| v as f64);
                        for (((d, &v), &dy), dg) in dx.iter_mut().zip(x).zip(grad).zip(dgamma.iter_mut()) {
                            let normalized = (v - mean) * rstd;
                            *d *= normalized;
                            *dg += dy * normalized;
                        }
                        let mean_gx = lanes_sum_f64(dx, |v| v as f64);
                        let (mean_g, mean_gx) = ((mean_g / last as f64) as f32, (mean_gx / last as f64) as f32);
                        let dx_of = |v: f32, dy: f32, g: f32| rstd * (dy * g - mean_g - (v - mean) * rstd * mean_gx);
                        match pending {
                            Some(pending) => {
                                let pending = &pending[row * last..][..last];
                                for (((d, &v), (&dy, &g)), &p) in
                                    dx.iter_mut().zip(x).zip(grad.iter().zip(gamma.iter())).zip(pending)
                                {
                                    *d = dx_of(v, dy, g) + p;
                                }
                            }
                            None => {
                                for ((d, &v), (&dy, &g)) in dx.iter_mut().zip(x).zip(grad.iter().zip(gamma.iter())) {
                                    *d = dx_of(v, dy, g);
                                }
                            }
                        }
                    }
                    (dgamma, dbeta)
                },
            )
        })
        .collect();
    let (mut dgamma, mut dbeta) = (vec![0.0f32; last], vec![0.0f32; last]);
    for (g, b) in &partials {
        dgamma.iter_mut().zip(g).for_each(|(s, v)| *s += v);
        dbeta.iter_mut().zip(b).for_each(|(s, v)| *s += v);
    }
    let params = burn::tensor::Shape::from([last]);
    // SAFETY: the chunks cover the buffer, every row written by its first loop.
    [tensor(unsafe { assume_init(dx) }, shape), tensor(dgamma, params.clone()), tensor(dbeta, params)]
}

/// Mean and `1/√(σ² + ε)` of one row: two passes over the row (which is in cache), summed in
/// f64 (in [`lanes_sum_f64`]'s lanes) so that rows far from zero keep their f32 precision.
/// Always inlined: called (`#[inline]` let LLVM decline) it ran in the baseline build's two
/// f64 lanes, 2.3% of a training step's samples, outside the [`wide`] loops that call it.
#[inline(always)]
fn moments(x: &[f32], epsilon: f64) -> (f32, f32) {
    let n = x.len() as f64;
    let mean = lanes_sum_f64(x, |v| v as f64) / n;
    let var = lanes_sum_f64(x, |v| (v as f64 - mean) * (v as f64 - mean)) / n;
    (mean as f32, (1.0 / (var + epsilon).sqrt()) as f32)
}

#[cfg(test)]
mod tests {
    use super::moments;

    /// `1/σ` of a row far from zero (mean about 10⁶, σ = 0.5) as the two-pass sum in f64 gives it,
    /// to f32's precision: a one-pass form (`Σ(v + m)(v − m)`, the same in exact arithmetic)
    /// carries the mean's rounding times `2m` into the variance, 10⁻⁴ of it here.
    #[test]
    fn moments_of_a_row_far_from_zero_keep_f32_precision() {
        // 60 entries (not a power of two, so the mean 10⁶ − 1.5/60 is rounded in f64).
        let x: Vec<f32> = (0..60).map(|i| 1.0e6 + ((i % 7) as f32 - 3.0) * 0.25).collect();
        let n = x.len() as f64;
        let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
        let (m, r) = moments(&x, 1e-5);
        assert_eq!(m, mean as f32);
        let expected = 1.0 / (var + 1e-5).sqrt();
        let relative = (r as f64 - expected).abs() / expected;
        assert!(relative < 1e-6, "1/σ = {r}, the two-pass f64 value {expected}: {relative:e} apart");
    }
}
