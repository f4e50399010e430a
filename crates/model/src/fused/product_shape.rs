//! What a product of attention may leave out, and where it writes: [`ProductShape`], taken by
//! `FusedProducts::fused_product_shaped` (our GPU kernel, `fused/cube/product.rs`) and by
//! attention's two products ([`super::attention_products`]).
//!
//! **Triangles.** Under a causal mask (`crate::mask::causal_mask`: query `i` may not see key
//! `j > i + offset`) half of attention's products is known zero before it is computed: the
//! masked scores are replaced before the softmax, the masked weights are 0, and so are the
//! masked entries of the scores' gradient. Each product then is one of
//! - [`Triangle::Output`]: `C = tril(A·B, offset)`, the scores `Q·Kᵀ` and `dP̃ = dC·Vᵀ`: a
//!   tile of `C` wholly above the diagonal is written as zeros without a step along `k`;
//! - [`Triangle::LowerA`]: `C = tril(A, offset)·B`, the context `P̃·V` and `dQ = dS·K`: a
//!   tile's rows `r < r₁` take `k ≤ r₁ − 1 + offset` only;
//! - [`Triangle::UpperA`]: `C = triu(A, −offset)·B`, `dV = P̃ᵀ·dC` and `dK = dSᵀ·Q` (the
//!   transposes of a lower triangle): a tile's rows `r ≥ r₀` take `k ≥ r₀ − offset` only.
//!
//! With `tril(X, o)` keeping `X[r, c]` for `c ≤ r + o` and `triu(X, −o)` keeping it for
//! `c ≥ r − o`. The kernel zeroes what the triangle leaves out of `A` as it loads it, so each
//! is that product exactly, whatever `A` holds there ([`composed`] is the reference).
//!
//! **Heads last.** Attention's heads are split from `[batch, len, heads·width]` by a reshape
//! and a swap of axes, a view; the products' `[batch, heads, len, width]` results (the
//! context, and `dQ`, `dK`, `dV`) then went back by a copy each (`[batch, len, heads, width]`
//! in memory) before the output map or the projections' backward could read them as rows:
//! four copies a layer, 1.2 ms of nanoGPT's GPU step on an H200. With
//! [`ProductShape::heads_last`] the kernel writes its rank-4 result into memory laid out as
//! `[batch, len, heads, width]` and hands out the `[batch, heads, len, width]` view of it, so
//! joining the heads is a view again. The values are the same; only the strides differ.

use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Bool, Tensor, TensorPrimitive};

/// Which entries of a product are known zero ([module docs](self)); `offset` as in
/// `crate::mask::causal_mask`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Triangle {
    /// `A·B`.
    Full,
    /// `tril(A·B, offset)`.
    Output(usize),
    /// `tril(A, offset)·B`.
    LowerA(usize),
    /// `triu(A, −offset)·B`.
    UpperA(usize),
}

impl Triangle {
    /// The kernel's comptime code (0 to 3, in the order above) and its runtime offset.
    pub fn code(self) -> (u32, usize) {
        match self {
            Triangle::Full => (0, 0),
            Triangle::Output(offset) => (1, offset),
            Triangle::LowerA(offset) => (2, offset),
            Triangle::UpperA(offset) => (3, offset),
        }
    }
}

/// A product's [`Triangle`] and the layout of its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProductShape {
    pub triangle: Triangle,
    /// A rank-4 result `[batch, heads, m, n]` stored as `[batch, m, heads, n]` (a view of it
    /// handed out); a hint the composed form ignores.
    pub heads_last: bool,
}

impl ProductShape {
    /// `A·B` in a contiguous result: what `fused_product` computes.
    pub const PLAIN: ProductShape = ProductShape { triangle: Triangle::Full, heads_last: false };

    pub fn new(triangle: Triangle, heads_last: bool) -> ProductShape {
        ProductShape { triangle, heads_last }
    }
}

fn float<B: Backend, const D: usize>(x: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(x))
}

/// `true` above the diagonal `c = r + offset` of each `[rows, cols]` matrix (what `tril`
/// zeroes), or below `c = r − offset` where `upper` (what `triu(·, −offset)` zeroes).
fn outside<B: Backend, const D: usize>(
    dims: [usize; D],
    offset: usize,
    upper: bool,
    device: &B::Device,
) -> Tensor<B, D, Bool> {
    let matrix = [dims[D - 2], dims[D - 1]];
    let mask = if upper {
        Tensor::<B, 2, Bool>::triu_mask(matrix, -(offset as i64), device)
    } else {
        Tensor::<B, 2, Bool>::tril_mask(matrix, offset as i64, device)
    };
    let mut shape = [1; D];
    shape[D - 2..].copy_from_slice(&matrix);
    mask.reshape(shape).expand(dims)
}

/// `shape`'s product of Burn's operations: the matrix product with the triangle's entries
/// zeroed (the reference of the kernel's; [`ProductShape::heads_last`] does not change values).
pub(super) fn composed<B: Backend, const D: usize>(
    a: Tensor<B, D>,
    b: Tensor<B, D>,
    shape: ProductShape,
) -> Tensor<B, D> {
    let device = a.device();
    match shape.triangle {
        Triangle::Full => a.matmul(b),
        Triangle::Output(offset) => {
            let c = a.matmul(b);
            let zeroed = outside::<B, D>(c.dims(), offset, false, &device);
            c.mask_fill(zeroed, 0.0)
        }
        Triangle::LowerA(offset) => {
            let zeroed = outside::<B, D>(a.dims(), offset, false, &device);
            a.mask_fill(zeroed, 0.0).matmul(b)
        }
        Triangle::UpperA(offset) => {
            let zeroed = outside::<B, D>(a.dims(), offset, true, &device);
            a.mask_fill(zeroed, 0.0).matmul(b)
        }
    }
}

/// [`composed`] on primitives of rank `a`'s, for `FusedProducts::fused_product_shaped`'s default
/// (and so `fused_product`'s: a full product is Burn's `matmul` of any rank).
pub(super) fn composed_primitive<B: Backend>(
    a: FloatTensor<B>,
    b: FloatTensor<B>,
    shape: ProductShape,
) -> FloatTensor<B> {
    use burn::tensor::TensorMetadata;
    if shape.triangle == Triangle::Full {
        return B::float_matmul(a, b);
    }
    match a.shape().num_dims() {
        2 => composed::<B, 2>(float(a), float(b), shape).into_primitive().tensor(),
        3 => composed::<B, 3>(float(a), float(b), shape).into_primitive().tensor(),
        4 => composed::<B, 4>(float(a), float(b), shape).into_primitive().tensor(),
        rank => unreachable!("products of rank 2 to 4 only (rank {rank}): `takes_ours` sends no other"),
    }
}
