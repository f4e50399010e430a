//! The trait of the fused matrix products, [`FusedProducts`], [`super::FusedOps`]'s
//! supertrait: the linear maps' and attention's products, each with its composed form (Burn's
//! `matmul`, masked where a triangle is left out) as the default, overridden where our product
//! kernel multiplies (`cube/mod.rs`, `cube/fusion.rs`) and by the autodiff steps
//! (`autodiff.rs`: `product_autodiff.rs`, `attention_products.rs`).

use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;

use super::attention_products;
use super::product_shape::{self, ProductShape};

/// Backends with fused matrix products. Every method has a composed default.
pub trait FusedProducts: Backend {
    /// `a·b` over the last two axes (rank 2 to 4; either operand may be a transposed view):
    /// the products of the linear maps and of attention where `ATTEND_GPU_MATMUL` takes ours
    /// ([`super::products`], which calls it on the GPU backends only). By default
    /// [`FusedProducts::fused_product_shaped`] with nothing left out (our kernel where a backend
    /// has it, else Burn's `matmul`); under autodiff an autodiff step of its own (its
    /// operands' batch axes alike).
    fn fused_product(a: FloatTensor<Self>, b: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::fused_product_shaped(a, b, ProductShape::PLAIN)
    }

    /// [`FusedProducts::fused_product`] leaving out what `shape`'s triangle says and laying the
    /// result out as it says ([`product_shape`]). By default composed: the triangle zeroed by
    /// masks, the result contiguous.
    fn fused_product_shaped(a: FloatTensor<Self>, b: FloatTensor<Self>, shape: ProductShape) -> FloatTensor<Self> {
        product_shape::composed_primitive::<Self>(a, b, shape)
    }

    /// Attention's scores `Q·Kᵀ` (`q`: `[batch, heads, queries, d]`, `k`: `[batch, heads,
    /// keys, d]`), `tril` of them where `causal` gives the mask's offset
    /// ([`attention_products`]): [`FusedProducts::fused_product_shaped`], and under autodiff a step
    /// whose `dQ`, `dK` come heads last.
    fn fused_attention_scores(q: FloatTensor<Self>, k: FloatTensor<Self>, causal: Option<usize>) -> FloatTensor<Self> {
        let (triangle, _) = attention_products::triangles(causal);
        Self::fused_product_shaped(q, Self::float_swap_dims(k, 2, 3), ProductShape::new(triangle, false))
    }

    /// Attention's context `P̃·V` (`p`: `[batch, heads, queries, keys]`, `v`: `[batch, heads,
    /// keys, d_v]`) heads last, `tril(P̃)·V` where `causal` gives the mask's offset
    /// ([`attention_products`]).
    fn fused_attention_context(p: FloatTensor<Self>, v: FloatTensor<Self>, causal: Option<usize>) -> FloatTensor<Self> {
        let (_, triangle) = attention_products::triangles(causal);
        Self::fused_product_shaped(p, v, ProductShape::new(triangle, true))
    }
}
