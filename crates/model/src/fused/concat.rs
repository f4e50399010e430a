//! Concatenation without burn-ndarray's slow paths: appending positions to a key/value cache
//! ([`cat_pair`]), and matrices side by side ([`cat_columns`], self-attention's
//! `[W^Q | W^K | W^V]`).
//!
//! `Tensor::cat` along an axis other than the first makes burn-ndarray 0.21 build the result
//! with that axis outermost (ndarray's `concatenate` grows it by `append`) and then copy it
//! once more, element by element, into the standard layout: for a decoder's cache, appended
//! one position at a time along the positions axis of `[batch, heads, len, d]`, that second
//! copy was a quarter of beam search's time on the Multi30k model (docs/benchmarks.md). On the
//! CPU backend the kernel here writes both inputs straight into a standard-layout result;
//! any other backend takes `Tensor::cat`.
//!
//! The same `concatenate` put the three `[128, 128]` projection weights of nanoGPT's CPU model
//! side by side in about 80 µs (2% of a training step for four layers), and Burn's backward of
//! a `cat` hands each weight a strided view of the gradient that every later reader gathers.
//! [`cat_columns`] copies rows forward, and backward copies each part's columns out as a
//! contiguous gradient.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use burn_ndarray::{NdArray, NdArrayTensor};
use ndarray::{ArrayD, Axis, IxDyn, Slice};

use super::{is, same};

type F = FloatTensor<NdArray<f32>>;

/// `cat([a, b], axis)` into a standard-layout array: each input assigned to its range.
fn cpu(a: F, b: F, axis: usize) -> F {
    match (a, b) {
        (NdArrayTensor::F32(a), NdArrayTensor::F32(b)) => {
            let (a, b) = (a.view(), b.view());
            let mut shape = a.shape().to_vec();
            let split = shape[axis];
            shape[axis] += b.shape()[axis];
            let mut out = ArrayD::<f32>::zeros(IxDyn(&shape));
            out.slice_axis_mut(Axis(axis), Slice::from(..split)).assign(&a);
            out.slice_axis_mut(Axis(axis), Slice::from(split..)).assign(&b);
            NdArrayTensor::from(out.into_shared())
        }
        (a, b) => {
            use burn::tensor::ops::FloatTensorOps;
            NdArray::<f32>::float_cat(vec![a, b], axis)
        }
    }
}

/// `Tensor::cat([a, b], axis)`: in one copy on `NdArray<f32>` (the inference backend, which
/// tracks no gradients); every other backend, `Autodiff<NdArray<f32>>` included, takes Burn's
/// `cat` and its gradient.
pub fn cat_pair<B: Backend, const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>, axis: usize) -> Tensor<B, D> {
    if is::<B, NdArray<f32>>() {
        let [a, b] = [a, b].map(|t| same::<Tensor<B, D>, Tensor<NdArray<f32>, D>>(t).into_primitive().tensor());
        same(Tensor::<NdArray<f32>, D>::from_primitive(TensorPrimitive::Float(cpu(a, b, axis))))
    } else {
        Tensor::cat(vec![a, b], axis)
    }
}

/// `parts` (matrices with the same number of rows) side by side, `[rows, Σ cols]`, row by row.
pub(super) fn columns_cpu(parts: &[F]) -> F {
    let parts: Vec<_> = parts.iter().map(|p| super::cpu::values(p.clone())).collect();
    let rows = parts[0].0[0];
    assert!(
        parts.iter().all(|(shape, _)| shape.num_dims() == 2 && shape[0] == rows),
        "cat_columns: matrices of {rows} rows"
    );
    let width: usize = parts.iter().map(|(shape, _)| shape[1]).sum();
    // Each part's slice taken once (a `Values` dereference builds a view), not once a row.
    let slices: Vec<(usize, &[f32])> = parts.iter().map(|(shape, values)| (shape[1], &**values)).collect();
    let mut out = Vec::with_capacity(rows * width);
    for row in 0..rows {
        for &(cols, values) in &slices {
            out.extend_from_slice(&values[row * cols..][..cols]);
        }
    }
    NdArrayTensor::from_data(TensorData::new(out, [rows, width]))
}

/// The columns of `grad` (`[rows, Σ widths]`) cut back into `[rows, width]` matrices, each
/// contiguous.
pub(super) fn split_columns<const N: usize>(grad: F, widths: [usize; N]) -> [F; N] {
    let (shape, grad) = super::cpu::values(grad);
    let (rows, width) = (shape[0], shape[1]);
    let mut start = 0;
    widths.map(|w| {
        let mut part = Vec::with_capacity(rows * w);
        for row in grad.chunks(width.max(1)).take(rows) {
            part.extend_from_slice(&row[start..start + w]);
        }
        start += w;
        NdArrayTensor::from_data(TensorData::new(part, [rows, w]))
    })
}

/// `Tensor::cat(parts, 1)` of matrices with the same number of rows: on the CPU backend one
/// row-by-row copy, and under autodiff a backward that gives each part a contiguous copy of
/// its columns of the gradient; every other backend takes Burn's `cat` and its gradient.
pub fn cat_columns<B: Backend, const N: usize>(parts: [Tensor<B, 2>; N]) -> Tensor<B, 2> {
    type Cpu = NdArray<f32>;
    type Tracked = Autodiff<NdArray<f32>>;
    if is::<B, Cpu>() {
        let parts = parts.map(|t| same::<Tensor<B, 2>, Tensor<Cpu, 2>>(t).into_primitive().tensor());
        same(Tensor::<Cpu, 2>::from_primitive(TensorPrimitive::Float(columns_cpu(&parts))))
    } else if is::<B, Tracked>() {
        let parts = parts.map(|t| same::<Tensor<B, 2>, Tensor<Tracked, 2>>(t).into_primitive().tensor());
        same(Tensor::<Tracked, 2>::from_primitive(TensorPrimitive::Float(columns_tracked(parts))))
    } else {
        Tensor::cat(parts.to_vec(), 1)
    }
}

/// [`cat_columns`] under autodiff on the CPU backend.
fn columns_tracked<const N: usize>(
    parts: [FloatTensor<Autodiff<NdArray<f32>>>; N],
) -> FloatTensor<Autodiff<NdArray<f32>>> {
    #[derive(Debug)]
    struct ColumnsBackward;

    impl<const N: usize> Backward<NdArray<f32>, N> for ColumnsBackward {
        /// Each part's width.
        type State = [usize; N];

        fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
            let grad = grads.consume::<NdArray<f32>>(&ops.node);
            for (parent, part) in ops.parents.iter().zip(split_columns(grad, ops.state)) {
                if let Some(parent) = parent {
                    grads.register::<NdArray<f32>>(parent.id, part);
                }
            }
        }
    }

    let nodes = parts.each_ref().map(|p| p.node.clone());
    let inner: Vec<F> = parts.iter().map(|p| p.primitive.clone()).collect();
    let out = columns_cpu(&inner);
    match ColumnsBackward
        .prepare::<burn::backend::autodiff::checkpoint::strategy::NoCheckpointing>(nodes)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let widths = parts.each_ref().map(|p| burn::tensor::TensorMetadata::shape(&p.primitive)[1]);
            prep.finish(widths, out)
        }
        OpsKind::UnTracked(prep) => prep.finish(out),
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Tensor, TensorData};

    use super::*;
    use burn::tensor::Distribution;

    type Cpu = NdArray<f32>;

    fn standard(t: &Tensor<Cpu, 4>) -> bool {
        match t.clone().into_primitive().tensor() {
            NdArrayTensor::F32(storage) => storage.view().is_standard_layout(),
            _ => unreachable!("f32"),
        }
    }

    /// Along every axis, from standard and permuted inputs: Burn's values, in standard layout.
    #[test]
    fn cat_pair_equals_burns_cat_in_standard_layout_for_every_axis_and_layout() {
        let device = Default::default();
        let x = |n: usize, shape: [usize; 4]| {
            Tensor::<Cpu, 4>::from_data(TensorData::new((0..n).map(|v| v as f32 * 0.5 - 7.0).collect(), shape), &device)
        };
        for axis in 0..4 {
            let mut other = [2, 3, 4, 5];
            other[axis] = 1 + axis;
            let a = x(120, [2, 3, 4, 5]);
            let b = x(other.iter().product(), other);
            // The first input in standard layout, then as a transposed view of other memory.
            for a in [a.clone(), x(120, [2, 4, 3, 5]).swap_dims(1, 2)] {
                let ours = cat_pair(a.clone(), b.clone(), axis);
                assert!(standard(&ours), "axis {axis}");
                assert_eq!(ours.into_data(), Tensor::cat(vec![a, b.clone()], axis).into_data(), "axis {axis}");
            }
        }
    }

    /// Side by side, forward and backward: Burn's `cat` values, and each part's gradient that
    /// Burn's `cat` gives it (a loss weighting every column differently), without autodiff and
    /// with it; the gradients come back contiguous.
    #[test]
    fn cat_columns_equals_burns_cat_in_values_and_gradients() {
        type Ad = Autodiff<Cpu>;
        let device = Default::default();
        let parts = [3, 1, 4].map(|w| Tensor::<Cpu, 2>::random([5, w], Distribution::Default, &device));
        assert_eq!(cat_columns(parts.clone()).into_data(), Tensor::cat(parts.to_vec(), 1).into_data());
        let weights = Tensor::<Ad, 2>::random([5, 8], Distribution::Default, &device);
        let gradients = |ours: bool| {
            let tracked = parts.clone().map(|p| Tensor::<Ad, 2>::from_inner(p).require_grad());
            let joined = if ours { cat_columns(tracked.clone()) } else { Tensor::cat(tracked.to_vec(), 1) };
            let grads = (joined * weights.clone()).sum().backward();
            tracked.map(|p| p.grad(&grads).expect("every part has a gradient"))
        };
        for (ours, burns) in gradients(true).into_iter().zip(gradients(false)) {
            match ours.clone().into_primitive().tensor() {
                NdArrayTensor::F32(storage) => assert!(storage.view().is_standard_layout()),
                _ => unreachable!("f32"),
            }
            assert_eq!(ours.into_data(), burns.into_data());
        }
    }
}
