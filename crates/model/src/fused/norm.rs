//! The sum of the squares of every element of several tensors, `Σₜ Σᵢ tᵢ²` (the squared global
//! norm that clipping divides by, over all of a model's gradients), as one operation.
//!
//! Composed, it is three operations per tensor (the square, its sum, the running total); with
//! nanoGPT's 51 parameters that is about 150 of the 670 executions burn-fusion runs per step
//! (docs/benchmarks.md), each a hand-off from the training thread to the device's. Where the
//! backend has a kernel it is one: CubeCL's backends sum each tensor's squares in one launch
//! and the partial sums in one more ([`crate::fused`]'s `cube/norm.rs`). On the CPU backend
//! ([`cpu`]) the tensors are summed in parallel, each in one pass without the composed form's
//! buffer of squares, and with its bits: burn-ndarray's sum is ndarray's, eight interleaved
//! partial sums over memory order, which [`ndarray_sum_of_squares`] repeats.

use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorPrimitive};

use burn_ndarray::{NdArray, NdArrayTensor};
use rayon::prelude::*;

use super::dispatch::{on_kernels, same};
use super::wide::wide;
use super::FusedOps;

/// `Σₜ Σᵢ tᵢ²` over `tensors` (of any shapes), as a `[1]` tensor on their device, where the
/// backend has a kernel in one operation. The composed form adds the tensors' sums in order.
///
/// # Panics
/// If `tensors` is empty (there is no device to put the sum on).
pub fn squared_norm<B: Backend>(tensors: Vec<FloatTensor<B>>) -> Tensor<B, 1> {
    assert!(!tensors.is_empty(), "squared_norm of no tensors");
    fn on<B: Backend, F: FusedOps>(tensors: Vec<FloatTensor<B>>) -> Tensor<B, 1> {
        let tensors = tensors.into_iter().map(same::<FloatTensor<B>, FloatTensor<F>>).collect();
        same(Tensor::<F, 1>::from_primitive(TensorPrimitive::Float(F::fused_squared_norm(tensors))))
    }
    on_kernels!(updates B, K => on::<B, K>(tensors), _ => Tensor::from_primitive(TensorPrimitive::Float(composed::<B>(tensors))))
}

/// The composed form: each tensor's `Σ t²` (the square as `t·t`, as Burn's `powi_scalar(2)`),
/// added into a running total in order.
pub(crate) fn composed<B: Backend>(tensors: Vec<FloatTensor<B>>) -> FloatTensor<B> {
    tensors
        .into_iter()
        .map(|t| B::float_sum(B::float_mul(t.clone(), t)))
        .reduce(|total, s| B::float_add(total, s))
        .expect("checked non-empty")
}

type F = FloatTensor<NdArray<f32>>;

/// The CPU kernel: the tensors' sums of squares in parallel, each as the composed form
/// computes it (`t·t`, then burn-ndarray's sum), added in order; a tensor not in standard
/// layout (whose product's memory order ndarray chooses) takes the composed form itself.
pub(super) fn cpu(tensors: Vec<F>) -> F {
    use burn::tensor::ops::FloatTensorOps;
    let sums: Vec<f32> = tensors
        .into_par_iter()
        .map(|t| match &t {
            NdArrayTensor::F32(storage) if storage.view().is_standard_layout() => {
                let view = storage.view();
                let values = view.as_slice().expect("standard layout");
                wide(
                    #[inline(always)]
                    || ndarray_sum_of_squares(values),
                )
            }
            _ => {
                let sum = NdArray::<f32>::float_sum(NdArray::<f32>::float_mul(t.clone(), t));
                super::cpu::values(sum).1[0]
            }
        })
        .collect();
    let total = sums.into_iter().reduce(|total, s| total + s).expect("checked non-empty");
    NdArrayTensor::from_data(burn::tensor::TensorData::new(vec![total], [1]))
}

/// `Σ vᵢ²` with ndarray's `sum` of the squares (`numeric_util::unrolled_fold`): eight running
/// sums over runs of eight, combined as `((p₀+p₄) + (p₁+p₅)) + (p₂+p₆) + (p₃+p₇)`, then the
/// rest one at a time; each square rounded to f32 before it is added.
#[inline(always)]
fn ndarray_sum_of_squares(values: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let chunks = values.chunks_exact(8);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane += v * v;
        }
    }
    let mut total = 0.0f32;
    for i in 0..4 {
        total += lanes[i] + lanes[i + 4];
    }
    rest.iter().fold(total, |total, &v| total + v * v)
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Tensor, TensorData};
    use burn_ndarray::NdArray;

    use super::*;

    type Cpu = NdArray<f32>;

    /// Tensors of ranks 1-3 whose squares sum, by hand, to 1 + 4 + 9 + 16 + 0.25 + 100 = 130.25.
    #[test]
    fn squared_norm_sums_the_squares_of_every_element_of_every_tensor() {
        let device = Default::default();
        let a = Tensor::<Cpu, 1>::from_data([1.0f32, -2.0], &device);
        let b = Tensor::<Cpu, 2>::from_data([[3.0f32], [-4.0]], &device);
        let c = Tensor::<Cpu, 3>::from_data(TensorData::new(vec![0.5f32, -10.0], [1, 2, 1]), &device);
        let tensors = vec![a.into_primitive().tensor(), b.into_primitive().tensor(), c.into_primitive().tensor()];
        let total: f32 = squared_norm::<Cpu>(tensors).into_scalar();
        assert_eq!(total, 130.25);
    }

    /// The CPU kernel gives the composed form's bits: tensors of lengths around the
    /// eight-lane runs (0-7 left over), a large one, and one not in standard layout, each
    /// alone and all together.
    #[test]
    fn cpu_squared_norm_has_the_composed_forms_bits() {
        let device = Default::default();
        let mut tensors: Vec<_> = [1usize, 7, 8, 9, 15, 16, 23, 1000, 65_537]
            .iter()
            .map(|&n| {
                Tensor::<Cpu, 1>::random([n], burn::tensor::Distribution::Default, &device).into_primitive().tensor()
            })
            .collect();
        let transposed = Tensor::<Cpu, 2>::random([13, 7], burn::tensor::Distribution::Default, &device).transpose();
        tensors.push(transposed.into_primitive().tensor());
        let bits =
            |t: FloatTensor<Cpu>| Tensor::<Cpu, 1>::from_primitive(TensorPrimitive::Float(t)).into_scalar().to_bits();
        // Each tensor alone (a large one would swamp a small one's last bits in the total),
        // then all of them.
        for t in &tensors {
            assert_eq!(bits(super::cpu(vec![t.clone()])), bits(composed::<Cpu>(vec![t.clone()])));
        }
        assert_eq!(bits(super::cpu(tensors.clone())), bits(composed::<Cpu>(tensors)));
    }
}
