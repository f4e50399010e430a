//! The fused operations as single-pass Rust kernels for `burn-ndarray` (f32), parallel with
//! rayon over blocks of rows (or of elements), each block big enough to pay for a hand-off.
//!
//! Each kernel reads its inputs once (contiguous views, no copy when the input is already in
//! standard layout) and writes one new buffer, which becomes the output tensor without a copy.

use burn::tensor::ops::FloatTensor;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Tensor, TensorData, TensorMetadata, TensorPrimitive};
use burn_ndarray::{NdArray, NdArrayTensor};
use rayon::prelude::*;

use super::INV_SQRT_2PI;

#[cfg(test)]
std::thread_local! {
    /// Tensors read by the kernels on this thread, for the test that checks which backends
    /// take the kernels.
    pub(super) static CALLS: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// Elements per parallel task: below this a task costs more to hand over than to run.
const GRAIN: usize = 1 << 14;

type T = FloatTensor<NdArray<f32>>;

/// `x·Φ(x)`, `Φ(x) = ½(1 + erf(x/√2))`.
pub fn gelu(x: T) -> T {
    let (shape, x) = values(x);
    let mut out = vec![0.0f32; x.len()];
    out.par_chunks_mut(GRAIN).zip(x.par_chunks(GRAIN)).for_each(|(out, x)| {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = v * cdf(v);
        }
    });
    tensor(out, shape)
}

/// `grad · (Φ(x) + x·φ(x))`, `φ(x) = e^{-x²/2}/√(2π)`.
pub fn gelu_backward(x: T, grad: T) -> T {
    let (shape, x) = values(x);
    let (_, grad) = values(grad);
    let mut out = vec![0.0f32; x.len()];
    out.par_chunks_mut(GRAIN).zip(x.par_chunks(GRAIN).zip(grad.par_chunks(GRAIN))).for_each(|(out, (x, g))| {
        for ((o, &v), &g) in out.iter_mut().zip(x).zip(g) {
            let pdf = (-0.5 * v * v).exp() * INV_SQRT_2PI as f32;
            *o = g * (cdf(v) + v * pdf);
        }
    });
    tensor(out, shape)
}

/// Softmax of each row of the last axis: `e^{x−max} / Σ e^{x−max}`.
pub fn softmax_last(x: T) -> T {
    let (shape, x) = values(x);
    let last = last_axis(&shape);
    let mut out = vec![0.0f32; x.len()];
    let block = row_block(last);
    out.par_chunks_mut(block).zip(x.par_chunks(block)).for_each(|(out, x)| {
        for (out, x) in out.chunks_mut(last).zip(x.chunks(last)) {
            let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0f32;
            for (o, &v) in out.iter_mut().zip(x) {
                *o = (v - max).exp();
                sum += *o;
            }
            let inv = 1.0 / sum;
            out.iter_mut().for_each(|o| *o *= inv);
        }
    });
    tensor(out, shape)
}

/// From the softmax's output `y`: `y ⊙ (grad − Σ_row grad ⊙ y)`.
pub fn softmax_last_backward(y: T, grad: T) -> T {
    let (shape, y) = values(y);
    let (_, grad) = values(grad);
    let last = last_axis(&shape);
    let mut out = vec![0.0f32; y.len()];
    let block = row_block(last);
    out.par_chunks_mut(block).zip(y.par_chunks(block).zip(grad.par_chunks(block))).for_each(|(out, (y, g))| {
        for ((out, y), g) in out.chunks_mut(last).zip(y.chunks(last)).zip(g.chunks(last)) {
            let dot: f32 = y.iter().zip(g).map(|(y, g)| y * g).sum();
            for ((o, &y), &g) in out.iter_mut().zip(y).zip(g) {
                *o = y * (g - dot);
            }
        }
    });
    tensor(out, shape)
}

/// `Φ(x) = ½(1 + erf(x/√2))`.
#[inline]
fn cdf(x: f32) -> f32 {
    0.5 * (1.0 + libm::erff(x * core::f32::consts::FRAC_1_SQRT_2))
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
fn values(x: T) -> (burn::tensor::Shape, Values) {
    #[cfg(test)]
    CALLS.with(|c| c.set(c.get() + 1));
    let shape = x.shape();
    let values = match &x {
        NdArrayTensor::F32(storage) => {
            let view = storage.view();
            match view.as_slice() {
                Some(_) => Values::Borrowed(x),
                None => Values::Owned(view.iter().copied().collect()),
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

/// The values of [`values`]: the tensor itself (contiguous f32) or a gathered copy.
enum Values {
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

fn tensor(values: Vec<f32>, shape: burn::tensor::Shape) -> T {
    NdArrayTensor::from_data(TensorData::new(values, shape))
}
