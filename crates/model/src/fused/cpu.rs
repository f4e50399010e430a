//! The fused operations as single-pass Rust kernels for `burn-ndarray` (f32), parallel with
//! rayon over blocks of rows (or of elements), each block big enough to pay for a hand-off.
//!
//! Each kernel reads its inputs once (contiguous views, no copy when the input is already in
//! standard layout) and writes one new buffer, which becomes the output tensor without a copy
//! (allocated unwritten: zeroing it first was one more pass over memory).

use burn::tensor::ops::FloatTensor;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Tensor, TensorData, TensorMetadata, TensorPrimitive};
use burn_ndarray::{NdArray, NdArrayTensor};
use rayon::prelude::*;

use super::exp::exp_nonpositive;
use super::unwritten::{assume_init, assume_init_mut, uninit};
use super::wide::{lanes_dot, lanes_max, lanes_sum, lanes_sum_f64, wide};

#[cfg(test)]
std::thread_local! {
    /// Tensors read by the kernels on this thread, for the test that checks which backends
    /// take the kernels.
    pub(super) static CALLS: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
    /// LayerNorm backwards that added a pending gradient, on this thread.
    pub(crate) static ADDED_PENDING: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// Elements per parallel task: below this a task costs more to hand over than to run.
pub(super) const GRAIN: usize = 1 << 14;

pub(super) type T = FloatTensor<NdArray<f32>>;

/// Softmax of each row of the last axis: `e^{x−max} / Σ e^{x−max}`.
pub fn softmax_last(x: T) -> T {
    let (shape, x) = values(x);
    let last = last_axis(&shape);
    let mut out = vec![0.0f32; x.len()];
    let block = row_block(last);
    out.par_chunks_mut(block).zip(x.par_chunks(block)).for_each(|(out, x)| {
        for (out, x) in out.chunks_mut(last).zip(x.chunks(last)) {
            out.copy_from_slice(x);
            softmax_row(out);
        }
    });
    tensor(out, shape)
}

/// Softmax of one row, in place: `e^{x−max} / Σ e^{x−max}`.
pub(super) fn softmax_row(row: &mut [f32]) {
    wide(
        #[inline(always)]
        || softmax_in_place(row),
    )
}

/// [`softmax_row`]'s body, for loops that run many rows inside one [`wide`] call (a call per
/// short row repeats the feature check and the loops' set-up for every 64 values).
#[inline(always)]
pub(super) fn softmax_in_place(row: &mut [f32]) {
    let max = lanes_max(row);
    row.iter_mut().for_each(|v| *v = exp_nonpositive(*v - max));
    let inv = 1.0 / lanes_sum(row);
    row.iter_mut().for_each(|v| *v *= inv);
}

/// From the softmax's output `y`: `y ⊙ (grad − Σ_row grad ⊙ y)`.
pub fn softmax_last_backward(y: T, grad: T) -> T {
    let (shape, y) = values(y);
    let (_, grad) = values(grad);
    let last = last_axis(&shape);
    let mut out = vec![0.0f32; y.len()];
    let block = row_block(last);
    out.par_chunks_mut(block).zip(y.par_chunks(block).zip(grad.par_chunks(block))).for_each(|(out, (y, g))| {
        wide(
            #[inline(always)]
            || {
                for ((out, y), g) in out.chunks_mut(last).zip(y.chunks(last)).zip(g.chunks(last)) {
                    let dot = lanes_dot(y, g);
                    for ((o, &y), &g) in out.iter_mut().zip(y).zip(g) {
                        *o = y * (g - dot);
                    }
                }
            },
        )
    });
    tensor(out, shape)
}

/// LayerNorm of each row of the last axis: `(x − μ)·r·γ + β`, `r = 1/√(σ² + ε)`.
pub fn layer_norm(x: T, gamma: T, beta: Option<T>, epsilon: f64) -> T {
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
    let mut out = uninit(x.len());
    let block = row_block(last);
    out.par_chunks_mut(block).zip(x.par_chunks(block)).for_each(|(out, x)| {
        wide(
            #[inline(always)]
            || {
                for (out, x) in out.chunks_mut(last).zip(x.chunks(last)) {
                    let (mean, rstd) = moments(x, epsilon);
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
    // SAFETY: the blocks cover the buffer (whole rows), every element written once.
    tensor(unsafe { assume_init(out) }, shape)
}

/// The LayerNorm's gradients `[dx, dγ, dβ]` from its input, `γ` and the output's gradient
/// (formulas at `FusedOps::fused_layer_norm_backward`). `dγ` and `dβ` are summed per block
/// of rows, then over the blocks in order, so the result does not depend on the scheduling.
///
/// With `pending` (the input's gradient from its other uses, of `x`'s shape), `dx` comes back
/// with it added, each element `dx + pending` rounded once as a separate sum would be.
pub fn layer_norm_backward(x: T, gamma: T, grad: T, epsilon: f64, pending: Option<T>) -> [T; 3] {
    let (shape, x) = values(x);
    let (_, gamma) = values(gamma);
    let gamma = &*gamma;
    let (_, grad) = values(grad);
    #[cfg(test)]
    if pending.is_some() {
        ADDED_PENDING.with(|c| c.set(c.get() + 1));
    }
    let pending = pending.map(|p| values(p).1);
    let pending = pending.as_deref();
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
    // Not zeroed first (a `memset` of the whole gradient was a fifth of this kernel's time):
    // each row's first loop below writes every element before any is read.
    let mut dx = uninit(x.len());
    let block = row_block(last);
    let partials: Vec<(Vec<f32>, Vec<f32>)> = dx
        .par_chunks_mut(block)
        .zip(x.par_chunks(block).zip(grad.par_chunks(block)))
        .enumerate()
        .map(|(index, (dx, (x, grad)))| {
            let pending = pending.map(|p| &p[index * block..][..x.len()]);
            wide(
                #[inline(always)]
                || {
                    let (mut dgamma, mut dbeta) = (vec![0.0f32; last], vec![0.0f32; last]);
                    for (row, ((dx, x), grad)) in
                        dx.chunks_mut(last).zip(x.chunks(last)).zip(grad.chunks(last)).enumerate()
                    {
                        let (mean, rstd) = moments(x, epsilon);
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
/// f64 (in eight lanes) so that rows far from zero keep their f32 precision. Always inlined:
/// called (`#[inline]` let LLVM decline) it ran in the baseline build's two f64 lanes, 2.3% of
/// a training step's samples, outside the [`wide`] loops that call it.
#[inline(always)]
fn moments(x: &[f32], epsilon: f64) -> (f32, f32) {
    let n = x.len() as f64;
    let mean = lanes_sum_f64(x, |v| v as f64) / n;
    let var = lanes_sum_f64(x, |v| (v as f64 - mean) * (v as f64 - mean)) / n;
    (mean as f32, (1.0 / (var + epsilon).sqrt()) as f32)
}

/// Whole rows per parallel task, about [`GRAIN`] elements.
fn row_block(last: usize) -> usize {
    last.max(1) * (GRAIN / last.max(1)).max(1)
}

fn last_axis(shape: &burn::tensor::Shape) -> usize {
    shape[shape.num_dims() - 1]
}

/// The tensor's shape and its f32 values in standard (row-major) order: borrowed when the
/// storage already is contiguous, else gathered once.
pub(super) fn values(x: T) -> (burn::tensor::Shape, Values) {
    #[cfg(test)]
    CALLS.with(|c| c.set(c.get() + 1));
    let shape = x.shape();
    let values = match &x {
        NdArrayTensor::F32(storage) => {
            let view = storage.view();
            match view.as_slice() {
                Some(_) => Values::Borrowed(x),
                None => Values::Owned(gather_rows(view)),
            }
        }
        // Not f32 (never the case on `NdArray<f32>`): convert once.
        other => {
            let flat = NdArray::<f32>::float_reshape(other.clone(), [shape.num_elements()].into());
            let data = Tensor::<NdArray<f32>, 1>::from_primitive(TensorPrimitive::Float(flat)).into_data();
            Values::Owned(data.convert::<f32>().into_vec::<f32>().expect("f32 after conversion"))
        }
    };
    (shape, values)
}

/// The elements of `view` in row-major order, gathered a lane of the last axis at a time (a
/// 0-dimensional view is always contiguous): an element-wise iterator over burn-ndarray's
/// dynamic-rank views costs more than the copy (40% of a step when attention gathered its
/// heads so; 200 µs for attention's 64 × 64 causal mask).
pub(super) fn gather_rows<E: Copy>(view: ndarray::ArrayViewD<'_, E>) -> Vec<E> {
    let mut out = Vec::with_capacity(view.len());
    for lane in view.rows() {
        match lane.as_slice() {
            Some(lane) => out.extend_from_slice(lane),
            None => out.extend(lane.iter().copied()),
        }
    }
    out
}

/// The values of [`values`]: the tensor itself (contiguous f32) or a gathered copy.
pub(super) enum Values {
    Borrowed(T),
    Owned(Vec<f32>),
}

impl core::ops::Deref for Values {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        match self {
            Values::Borrowed(NdArrayTensor::F32(storage)) => storage.view().to_slice().expect("checked contiguous"),
            Values::Borrowed(_) => unreachable!("only f32 storage is borrowed"),
            Values::Owned(v) => v,
        }
    }
}

/// Whether `t` is a contiguous f32 buffer that no other tensor shares: one that a kernel may
/// write over (AdamW's update, the residual sum).
pub(super) fn writable(t: &T) -> bool {
    // `is_unique` is false for storage borrowed from outside (a memory-mapped record).
    matches!(t, NdArrayTensor::F32(storage) if storage.is_unique() && storage.view().is_standard_layout())
}

pub(super) fn tensor(values: Vec<f32>, shape: burn::tensor::Shape) -> T {
    NdArrayTensor::from_data(TensorData::new(values, shape))
}
