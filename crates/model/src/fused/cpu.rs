//! The fused operations as single-pass Rust kernels for `burn-ndarray` (f32), parallel with
//! rayon over blocks of rows (or of elements), each block big enough to pay for a hand-off.
//!
//! Each kernel reads its inputs once (contiguous views, no copy when the input is already in
//! standard layout) and writes one new buffer, which becomes the output tensor without a copy
//! (allocated unwritten: zeroing it first was one more pass over memory). Here the softmax and
//! what the kernels share (reading a tensor's values, writing a new one); the activations are
//! in `activation.rs`, LayerNorm in `layer_norm_cpu.rs`.

use burn::tensor::ops::FloatTensor;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Tensor, TensorData, TensorMetadata, TensorPrimitive};
use burn_ndarray::{NdArray, NdArrayTensor};
use rayon::prelude::*;

use super::exp::exp_nonpositive;
use super::wide::{lanes_dot, lanes_max, lanes_sum, wide};

#[cfg(test)]
std::thread_local! {
    /// Tensors read by the kernels on this thread, for the test that checks which backends
    /// take the kernels.
    pub(super) static CALLS: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
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

/// Whole rows per parallel task, about [`GRAIN`] elements.
pub(super) fn row_block(last: usize) -> usize {
    last.max(1) * (GRAIN / last.max(1)).max(1)
}

pub(super) fn last_axis(shape: &burn::tensor::Shape) -> usize {
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
