//! The sum of the squares of every element of several tensors, `Σₜ Σᵢ tᵢ²` (the squared global
//! norm that clipping divides by, over all of a model's gradients), as one operation.
//!
//! Composed, it is three operations per tensor (the square, its sum, the running total); with
//! nanoGPT's 51 parameters that is about 150 of the 670 executions burn-fusion runs per step
//! (docs/benchmarks.md), each a hand-off from the training thread to the device's. Where the
//! backend has a kernel it is one: CubeCL's backends sum each tensor's squares in one launch
//! and the partial sums in one more ([`crate::fused`]'s `cube/norm.rs`).

use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorPrimitive};

use super::dispatch::{on_kernels, same};
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
}
