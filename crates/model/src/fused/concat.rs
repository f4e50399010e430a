//! Appending positions to a key/value cache without burn-ndarray's second copy.
//!
//! `Tensor::cat` along an axis other than the first makes burn-ndarray 0.21 build the result
//! with that axis outermost (ndarray's `concatenate` grows it by `append`) and then copy it
//! once more, element by element, into the standard layout: for a decoder's cache, appended
//! one position at a time along the positions axis of `[batch, heads, len, d]`, that second
//! copy was a quarter of beam search's time on the Multi30k model (docs/benchmarks.md). On the
//! CPU backend the kernel here writes both inputs straight into a standard-layout result;
//! any other backend takes `Tensor::cat`.

use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorPrimitive};
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

#[cfg(test)]
mod tests {
    use burn::tensor::{Tensor, TensorData};

    use super::*;

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
}
