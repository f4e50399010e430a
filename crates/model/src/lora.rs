//! Low-rank adapters (LoRA; Hu et al. 2021): a frozen linear map `W x` becomes
//! `W x + (α/r)·B A x`, with `A` (r×d_in) drawn at random and `B` (d_out×r) zero, so that a
//! fresh adapter changes nothing and only `A`, `B` (r·(d_in + d_out) numbers) train.
//!
//! Stored in Burn's row-vector convention (`y = x W` with `W` `[d_in, d_out]`): `a` is `Aᵀ`
//! (`[d_in, r]`) and `b` is `Bᵀ` (`[r, d_out]`), so the adapter adds `(α/r)·x a b`.
//! [`Lora::merged`] folds it into the weight for export.

use burn::module::{Module, Param};
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Tensor};

use crate::fused::{linear, Weight};

/// One adapter beside a `[d_in, d_out]` weight.
#[derive(Module, Debug)]
pub struct Lora<B: Backend> {
    /// `Aᵀ`, `[d_in, r]`: uniform in `±1/√d_in` (PEFT's Kaiming-uniform with a = √5).
    pub a: Param<Tensor<B, 2>>,
    /// `Bᵀ`, `[r, d_out]`: zero at the start.
    pub b: Param<Tensor<B, 2>>,
    /// `α/r`.
    pub scale: f64,
}

impl<B: Backend> Lora<B> {
    /// A fresh adapter of rank `rank` for a `d_in → d_out` map, scaled by `alpha / rank`.
    pub fn new(d_in: usize, d_out: usize, rank: usize, alpha: f64, device: &B::Device) -> Self {
        let bound = 1.0 / (d_in as f64).sqrt();
        Lora {
            a: Param::from_tensor(Tensor::random([d_in, rank], Distribution::Uniform(-bound, bound), device)),
            b: Param::from_tensor(Tensor::zeros([rank, d_out], device)),
            scale: alpha / rank as f64,
        }
    }

    /// `(α/r)·x a b` for every row of `x`.
    ///
    /// # Shapes
    /// - `x`: `[rows, d_in]`
    /// - output: `[rows, d_out]`
    pub fn delta(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let low = linear(x, self.a.val(), None, Weight::InOut);
        linear(low, self.b.val(), None, Weight::InOut).mul_scalar(self.scale)
    }

    /// `(α/r)·x a b` for every position of `x`.
    ///
    /// # Shapes
    /// - `x`: `[batch, len, d_in]`
    /// - output: `[batch, len, d_out]`
    pub fn delta_positionwise(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [batch, len, d_in] = x.dims();
        let y = self.delta(x.reshape([batch * len, d_in]));
        let d_out = y.dims()[1];
        y.reshape([batch, len, d_out])
    }

    /// `W + (α/r)·a b`: the weight with the adapter folded in (`weight` is `[d_in, d_out]`).
    pub fn merged(&self, weight: Tensor<B, 2>) -> Tensor<B, 2> {
        weight + self.a.val().matmul(self.b.val()).mul_scalar(self.scale)
    }
}

/// The adapters of one multi-head attention layer, by projection (`lora_targets`).
#[derive(Module, Debug)]
pub struct AttentionAdapters<B: Backend> {
    pub query: Option<Lora<B>>,
    pub key: Option<Lora<B>>,
    pub value: Option<Lora<B>>,
    pub output: Option<Lora<B>>,
}

/// The projections an adapter can sit beside (`model.lora_targets`).
pub const LORA_TARGETS: [&str; 4] = ["query", "key", "value", "output"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_backend::TestBackend;

    #[test]
    fn a_fresh_adapter_adds_exactly_zero_and_a_trained_one_adds_scaled_x_a_b() {
        let device = Default::default();
        let mut lora = Lora::<TestBackend>::new(3, 2, 2, 4.0, &device);
        let x = Tensor::<TestBackend, 2>::from_floats([[1.0, -2.0, 0.5], [0.0, 1.0, 3.0]], &device);
        let zero = lora.delta(x.clone()).into_data().to_vec::<f32>().unwrap();
        assert!(zero.iter().all(|&v| v == 0.0), "{zero:?}");
        // a = [[1, 0], [0, 1], [1, 1]], b = [[1, 2], [3, 4]], α/r = 2:
        // row 1: x a = (1.5, -1.5), · b = (-3, -3), · 2 = (-6, -6);
        // row 2: x a = (3, 4), · b = (15, 22), · 2 = (30, 44).
        lora.a = Param::from_tensor(Tensor::from_floats([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], &device));
        lora.b = Param::from_tensor(Tensor::from_floats([[1.0, 2.0], [3.0, 4.0]], &device));
        assert_eq!(lora.delta(x.clone()).into_data().to_vec::<f32>().unwrap(), [-6.0, -6.0, 30.0, 44.0]);
        // Folding the adapter into a weight gives the same map.
        let w = Tensor::<TestBackend, 2>::from_floats([[0.5, 1.0], [2.0, 0.0], [1.0, -1.0]], &device);
        let merged = x.clone().matmul(lora.merged(w.clone()));
        let separate = x.clone().matmul(w) + lora.delta(x);
        merged.into_data().assert_approx_eq::<f32>(&separate.into_data(), burn::tensor::Tolerance::absolute(1e-5));
    }
}
