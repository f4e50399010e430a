//! The token lookup `E[ids]` on the GPU backends, with its backward as a matrix product.
//!
//! The lookup's gradient is `dE[v] = Σ_{n : ids[n] = v} dY[n]`. Burn computes it with
//! `select_add`, whose CubeCL kernel gives one thread to each of the `d` columns and lets it
//! walk all `N = batch·len` rows in turn (no atomics, so no races, but only `d` threads): on
//! nanoGPT's GPU configuration (`N` = 16,384, `d` = 384) that one launch took 5.5 ms of each
//! step on an H200 (CubeCL's profile, 2026-11-26), a large share of the GPU time of the whole
//! step. The same sum is a product, `dE = onehot(ids)ᵀ · dY`, with `onehot(ids)[n, v] =
//! [ids[n] = v]` (`[N, V]`): 2·N·V·d operations that a GPU's matrix product runs at full
//! width (its rows cut into slices, [`rows_product`], since `N` is long and `V·d` small).
//! The one-hot matrix is built on the device (a comparison with `0..V`) and, for a
//! large vocabulary, in chunks of rows of at most [`MAX_ONE_HOT`] elements, so that it never
//! takes much memory; each chunk's product is added to the total.
//!
//! The product does `2·N·V·d` operations where the sum does `N·d`: it is taken for a
//! vocabulary of at most [`MAX_PRODUCT_VOCAB`] entries (characters, small word lists), and a
//! larger one keeps `select_add`. The forward stays Burn's lookup (a gather: exact, and
//! cheap). The CPU keeps Burn's own backward, a serial pass over the rows that is the right
//! thing there.

use burn::tensor::backend::Backend;
use burn::tensor::ops::{FloatTensor, IntTensor};
use burn::tensor::{FloatDType, Int, Tensor, TensorMetadata, TensorPrimitive};

use super::products::rows_product;
use super::{as_rank, on_kernels, same, FusedOps};

/// The most elements of one chunk of the one-hot matrix (64 MB in f32).
pub(super) const MAX_ONE_HOT: usize = 1 << 24;

/// The largest vocabulary whose lookup gradient is a product: the product does `2·N·V·d`
/// operations where `select_add` does `N·d` additions (in a time that grows with `N` alone), so
/// past about a thousand entries (`V = 1024`, `N` = 16,384, `d` = 384: 13 GFLOP, about 1 ms
/// at the rate of the H200's products) the product stops paying; a BPE vocabulary keeps
/// Burn's `select_add`.
pub(super) const MAX_PRODUCT_VOCAB: usize = 1024;

/// The lookup's gradient (`[vocab, d]`) on the GPU backends: [`backward_by_product`] for a
/// vocabulary of at most [`MAX_PRODUCT_VOCAB`] entries, else Burn's `select_add`.
pub(super) fn backward<B: Backend>(vocab: usize, ids: IntTensor<B>, grad: FloatTensor<B>) -> FloatTensor<B> {
    if vocab <= MAX_PRODUCT_VOCAB {
        return backward_by_product::<B>(vocab, ids, grad, MAX_ONE_HOT);
    }
    let shape = grad.shape();
    let d = shape[shape.num_dims() - 1];
    let rows = shape.num_elements() / d.max(1);
    let zeros = B::float_zeros([vocab, d].into(), &B::float_device(&grad), grad.dtype().into());
    let ids = B::int_reshape(ids, [rows].into());
    B::float_select_add(zeros, 0, ids, B::float_reshape(grad, [rows, d].into()))
}

/// `E[tokens]`: the rows of `weight` (`[V, d]`) at `tokens`, with the backward as a product
/// on the GPU backends.
///
/// # Shapes
/// - `weight`: `[vocab, d_model]`; `tokens`: `[batch, len]`; output: `[batch, len, d_model]`
pub fn embedding<B: Backend>(weight: Tensor<B, 2>, tokens: Tensor<B, 2, Int>) -> Tensor<B, 3> {
    fn on<B: Backend, K: FusedOps>(weight: Tensor<B, 2>, tokens: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        let w = same::<Tensor<B, 2>, Tensor<K, 2>>(weight).into_primitive().tensor();
        let ids = same::<Tensor<B, 2, Int>, Tensor<K, 2, Int>>(tokens).into_primitive();
        same(Tensor::<K, 3>::from_primitive(TensorPrimitive::Float(K::fused_embedding(w, ids))))
    }
    if super::is_cpu_backend::<B>() {
        return burn::tensor::module::embedding(weight, tokens);
    }
    on_kernels!(B, K => on::<B, K>(weight, tokens), _ => {
        on_kernels!(tracked B, K => on::<B, K>(weight, tokens), _ => burn::tensor::module::embedding(weight, tokens))
    })
}

/// `dE = onehot(ids)ᵀ · grad` (`[vocab, d]`) from the lookup's output gradient `grad`
/// (`[..., d]`, one row per id), in chunks of rows whose one-hot matrix has at most
/// `max_elements` elements.
pub(super) fn backward_by_product<B: Backend>(
    vocab: usize,
    ids: IntTensor<B>,
    grad: FloatTensor<B>,
    max_elements: usize,
) -> FloatTensor<B> {
    let shape = grad.shape();
    let d = shape[shape.num_dims() - 1];
    let rows = shape.num_elements() / d.max(1);
    let device = B::float_device(&grad);
    let dtype = grad.dtype();
    let ids = Tensor::<B, 1, Int>::from_primitive(B::int_reshape(ids, [rows].into()));
    let grad = as_rank::<B, 2>(grad, [rows, d]);
    let classes = Tensor::<B, 1, Int>::arange(0..vocab as i64, &device).reshape([1, vocab]);
    let chunk = (max_elements / vocab.max(1)).max(1);
    let mut total: Option<Tensor<B, 2>> = None;
    for start in (0..rows).step_by(chunk) {
        let end = (start + chunk).min(rows);
        let (ids, grad) = if start == 0 && end == rows {
            (ids.clone(), grad.clone())
        } else {
            (ids.clone().slice(start..end), grad.clone().slice(start..end))
        };
        let n = end - start;
        let one_hot = ids.reshape([n, 1]).expand([n, vocab]).equal(classes.clone().expand([n, vocab])).float();
        let one_hot = if one_hot.dtype() == dtype { one_hot } else { one_hot.cast(FloatDType::from(dtype)) };
        let part = rows_product(one_hot, grad);
        total = Some(match total {
            None => part,
            Some(sum) => sum + part,
        });
    }
    let total = total.unwrap_or_else(|| Tensor::<B, 2>::zeros([vocab, d], &device).cast(FloatDType::from(dtype)));
    total.into_primitive().tensor()
}

#[cfg(test)]
mod tests {
    use burn::backend::Autodiff;
    use burn::tensor::{Distribution, Int, Tensor, TensorData, TensorPrimitive, Tolerance};
    use burn_ndarray::NdArray;

    use super::{backward_by_product, embedding};
    use crate::fused::FusedOps;

    type B = NdArray<f32>;

    /// Ids with repeats and a vocabulary entry no id names (its gradient must be zero).
    fn ids(device: &burn::tensor::ops::Device<B>) -> Tensor<B, 2, Int> {
        Tensor::from_data(TensorData::new(vec![3i64, 0, 3, 5, 1, 3, 0, 2, 5, 5, 1, 3], [3, 4]), device)
    }

    #[test]
    fn product_backward_equals_select_add_in_one_chunk_and_in_many() {
        let device = Default::default();
        let vocab = 7;
        let grad = Tensor::<B, 3>::random([3, 4, 5], Distribution::Normal(0.0, 1.0), &device);
        let reference =
            Tensor::<B, 2>::from_primitive(burn::tensor::TensorPrimitive::Float(<B as burn::tensor::ops::ModuleOps<
                B,
            >>::embedding_backward(
                Tensor::<B, 2>::zeros([vocab, 5], &device).into_primitive().tensor(),
                grad.clone().into_primitive().tensor(),
                ids(&device).into_primitive(),
            )));
        assert!(reference.clone().slice(6..7).abs().sum().into_scalar() == 0.0, "id 6 never occurs");
        // One chunk (all 12 rows), chunks of 2 rows (14 elements), and of one row.
        for max_elements in [1 << 24, 14, 1] {
            let ours = backward_by_product::<B>(
                vocab,
                ids(&device).into_primitive(),
                grad.clone().into_primitive().tensor(),
                max_elements,
            );
            let ours = Tensor::<B, 2>::from_primitive(burn::tensor::TensorPrimitive::Float(ours));
            ours.into_data().assert_approx_eq::<f32>(&reference.clone().into_data(), Tolerance::absolute(1e-5));
        }
    }

    #[test]
    fn a_vocabulary_past_the_product_limit_keeps_select_add_with_the_same_gradient() {
        let device = Default::default();
        let vocab = super::MAX_PRODUCT_VOCAB + 5;
        let ids: Vec<i64> = (0..24).map(|i| (i * 97 % vocab) as i64).collect();
        let ids = || Tensor::<B, 2, Int>::from_data(TensorData::new(ids.clone(), [4, 6]), &device).into_primitive();
        let grad = Tensor::<B, 3>::random([4, 6, 3], Distribution::Normal(0.0, 1.0), &device);
        let kept = super::backward::<B>(vocab, ids(), grad.clone().into_primitive().tensor());
        let product = backward_by_product::<B>(vocab, ids(), grad.into_primitive().tensor(), 1 << 24);
        let (kept, product) = (
            Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(kept)),
            Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(product)),
        );
        assert_eq!(kept.dims(), [vocab, 3]);
        kept.into_data().assert_approx_eq::<f32>(&product.into_data(), Tolerance::absolute(1e-5));
    }

    #[test]
    fn lookup_with_product_backward_gives_burns_values_and_gradient() {
        let device = Default::default();
        let weight = Tensor::<Autodiff<B>, 2>::random([7, 5], Distribution::Normal(0.0, 1.0), &device).require_grad();
        let tokens = Tensor::<Autodiff<B>, 2, Int>::from_inner(ids(&device));
        let w = Tensor::<Autodiff<B>, 3>::random([3, 4, 5], Distribution::Normal(0.0, 1.0), &device);
        // The step itself, as the GPU backends take it, on the CPU backend.
        let step = |weight: Tensor<Autodiff<B>, 2>| {
            let y = <Autodiff<B> as FusedOps>::fused_embedding(
                weight.into_primitive().tensor(),
                tokens.clone().into_primitive(),
            );
            Tensor::<Autodiff<B>, 3>::from_primitive(burn::tensor::TensorPrimitive::Float(y))
        };
        let ours = step(weight.clone());
        let burns = burn::tensor::module::embedding(weight.clone(), tokens.clone());
        ours.clone().into_data().assert_eq(&burns.clone().into_data(), true);
        let g_ours = weight.grad(&(ours * w.clone()).sum().backward()).unwrap();
        let g_burn = weight.grad(&(burns * w).sum().backward()).unwrap();
        g_ours.into_data().assert_approx_eq::<f32>(&g_burn.into_data(), Tolerance::absolute(1e-5));
        // The public function keeps Burn's own lookup on the CPU.
        let public = embedding(weight, tokens);
        assert_eq!(public.dims(), [3, 4, 5]);
    }
}
