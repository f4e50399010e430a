//! The fused operations on CubeCL's backends (`CubeBackend<R, ..>`: burn-wgpu and burn-cuda
//! without burn-fusion), as CubeCL kernels ([`kernels`]), and under burn-fusion
//! ([`fusion`]): each operation is registered with the fusion stream as a custom operation
//! that runs the same kernel.
//!
//! | operation | kernels (forward; backward) |
//! | --- | --- |
//! | GELU | one element-wise pass; one |
//! | softmax over the last axis | one row pass; one |
//! | LayerNorm | one row pass, a warp a row ([`layer_norm`]); one row pass (adding the residual stream's gradient), then the column sums of `dγ`, `dβ` |
//! | attention's weights with dropout | one row pass (softmax, the draw, both weights); one ([`attention_weights`]) |
//! | attention | `sQ·Kᵀ` and `P·V` in Burn's matrix product, the mask and softmax in one row pass; the softmax's backward in one row pass between the products |
//! | softmax + cross-entropy | one row pass over the logits; one (no `[rows, V]` log-probabilities kept) |
//! | AdamW update of a parameter | one element-wise pass ([`adamw`]) |
//! | squared norm of many tensors | one pass per tensor into partial sums, one over those ([`norm`]) |
//! | a matrix product of a linear map or of attention (`ATTEND_GPU_MATMUL`, the default on wgpu) | one register-blocked product ([`product`]) |
//!
//! Linear maps are otherwise composed: one matrix product each, ours on wgpu by default and
//! CubeCL's on cuda (`ATTEND_GPU_MATMUL`, `fused/products.rs`).

mod adamw;
mod attention_weights;
#[cfg(all(test, feature = "wgpu"))]
mod attention_weights_tests;
mod custom_op;
pub mod fusion;
mod kernels;
mod launch;
mod layer_norm;
mod layer_norm_long;
#[cfg(all(test, feature = "wgpu"))]
mod layer_norm_tests;
mod norm;
mod product;
#[cfg(all(test, feature = "wgpu"))]
mod product_form_tests;
mod product_launch;
#[cfg(all(test, feature = "wgpu"))]
mod product_shape_tests;
#[cfg(feature = "kernel-source")]
pub(crate) mod product_source;
mod product_staging;
#[cfg(all(test, feature = "wgpu"))]
mod product_tests;
#[cfg(feature = "kernel-source")]
pub(crate) mod row_source;
mod softmax;
#[cfg(all(test, feature = "wgpu"))]
mod tests;
#[cfg(all(test, feature = "wgpu"))]
mod update_tests;
mod warp_rows;

use burn::tensor::ops::{BoolTensor, FloatTensor, IntTensor};
use burn::tensor::{Shape, TensorMetadata};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};

use super::{FusedOps, FusedProducts};
use launch::{alike, as_rows, element_launch, empty, expanded_mask, reads_four, row_launch};
use softmax::{softmax_rows, softmax_rows_backward};

/// Operations run through these kernels, for the tests that check the dispatch reaches them.
#[cfg(test)]
pub(super) static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts one operation run through the kernels (tests only).
fn counted() {
    #[cfg(test)]
    CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> FusedProducts for CubeBackend<R, F, I, BT> {
    fn fused_product_shaped(
        a: FloatTensor<Self>,
        b: FloatTensor<Self>,
        shape: crate::fused::ProductShape,
    ) -> FloatTensor<Self> {
        counted();
        let b = alike::<R, F, I, BT>(b, &a);
        let cols = b.meta.shape()[b.meta.num_dims() - 1];
        let depth = a.meta.shape()[a.meta.num_dims() - 1];
        let tile = crate::fused::product_tile().for_product(cols, depth);
        product_launch::product(a, b, tile, shape, crate::fused::product_form())
    }
}

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> FusedOps for CubeBackend<R, F, I, BT> {
    fn fused_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        counted();
        let x = into_contiguous(x);
        let out = empty(&x, x.shape());
        let (count, dim) = element_launch(&x);
        let dtype = x.dtype.into();
        // SAFETY: units past the last element stop (`terminate!` at `x.len()`), and `out` is `x`'s
        // shape.
        unsafe {
            kernels::gelu_forward::launch_unchecked::<R>(
                &x.client.clone(),
                count,
                dim,
                x.into_tensor_arg(),
                out.clone().into_tensor_arg(),
                dtype,
            );
        }
        out
    }

    fn fused_gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        counted();
        let x = into_contiguous(x);
        let grad = into_contiguous(alike::<R, F, I, BT>(grad, &x));
        let dx = empty(&x, x.shape());
        let (count, dim) = element_launch(&x);
        let dtype = x.dtype.into();
        // SAFETY: units past the last element stop (`terminate!` at `x.len()`), and `grad` and `dx`
        // are `x`'s shape.
        unsafe {
            kernels::gelu_backward::launch_unchecked::<R>(
                &x.client.clone(),
                count,
                dim,
                x.into_tensor_arg(),
                grad.into_tensor_arg(),
                dx.clone().into_tensor_arg(),
                dtype,
            );
        }
        dx
    }

    fn fused_softmax_last(x: FloatTensor<Self>) -> FloatTensor<Self> {
        counted();
        let (x, shape) = as_rows(x);
        burn_cubecl::ops::reshape(softmax_rows(x, None), shape)
    }

    fn fused_softmax_last_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        counted();
        let (y, shape) = as_rows(y);
        let (grad, _) = as_rows(alike::<R, F, I, BT>(grad, &y));
        burn_cubecl::ops::reshape(softmax_rows_backward(y, grad), shape)
    }

    fn fused_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        counted();
        let (x, shape) = as_rows(x);
        let gamma = into_contiguous(alike::<R, F, I, BT>(gamma, &x));
        let beta = beta.map(|b| into_contiguous(alike::<R, F, I, BT>(b, &x)));
        burn_cubecl::ops::reshape(layer_norm::forward(x, gamma, beta, epsilon), shape)
    }

    fn fused_layer_norm_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        epsilon: f64,
    ) -> [FloatTensor<Self>; 3] {
        layer_norm_backward::<R, F, I, BT>(x, gamma, grad, None, epsilon)
    }

    fn fused_layer_norm_backward_adding(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        epsilon: f64,
        pending: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3] {
        layer_norm_backward::<R, F, I, BT>(x, gamma, grad, Some(pending), epsilon)
    }

    fn fused_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: Option<BoolTensor<Self>>,
        scale: f64,
    ) -> [FloatTensor<Self>; 2] {
        counted();
        use burn::tensor::ops::{BoolTensorOps, FloatTensorOps};
        let [batch, heads, queries, _] = q.shape().dims::<4>();
        let keys = k.shape()[2];
        let q = Self::float_mul_scalar(q, scale.into());
        let scores = Self::float_matmul(q, Self::float_swap_dims(k, 2, 3));
        let (scores, shape) = as_rows(scores);
        let mask = mask.map(|m| Self::bool_expand(m, Shape::new([batch, heads, queries, keys])));
        let weights = burn_cubecl::ops::reshape(softmax_rows(scores, mask), shape);
        [Self::float_matmul(weights.clone(), v), weights]
    }

    fn fused_attention_backward(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        scale: f64,
    ) -> [FloatTensor<Self>; 3] {
        counted();
        use burn::tensor::ops::FloatTensorOps;
        let dp = Self::float_matmul(grad.clone(), Self::float_swap_dims(v, 2, 3));
        let (dp, shape) = as_rows(dp);
        let (p, _) = as_rows(weights.clone());
        let ds = burn_cubecl::ops::reshape(softmax_rows_backward(p, dp), shape);
        let dq = Self::float_mul_scalar(Self::float_matmul(ds.clone(), k), scale.into());
        let dk = Self::float_mul_scalar(Self::float_matmul(Self::float_swap_dims(ds, 2, 3), q), scale.into());
        let dv = Self::float_matmul(Self::float_swap_dims(weights, 2, 3), grad);
        [dq, dk, dv]
    }

    fn fused_attention_weights(
        scores: FloatTensor<Self>,
        mask: Option<BoolTensor<Self>>,
        key: IntTensor<Self>,
        scale: f64,
        keep: f64,
    ) -> [FloatTensor<Self>; 2] {
        if scores.meta.shape()[3] > attention_weights::MAX_KEYS {
            return crate::fused::attention_weights::default_forward::<Self>(scores, mask, scale, keep);
        }
        counted();
        let mask = mask.map(|m| expanded_mask::<R, F, I, BT>(m, &scores));
        attention_weights::forward(scores, mask, key, scale, keep)
    }

    fn fused_attention_weights_backward(
        weights: FloatTensor<Self>,
        dropped: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        mask: Option<BoolTensor<Self>>,
        scale: f64,
        keep: f64,
    ) -> FloatTensor<Self> {
        if weights.meta.shape()[3] > attention_weights::MAX_KEYS {
            return crate::fused::attention_weights::default_backward::<Self>(
                weights, dropped, grad, mask, scale, keep,
            );
        }
        counted();
        let mask = mask.map(|m| expanded_mask::<R, F, I, BT>(m, &weights));
        let (dropped, grad) = (alike::<R, F, I, BT>(dropped, &weights), alike::<R, F, I, BT>(grad, &weights));
        attention_weights::backward(weights, dropped, grad, mask, scale, keep)
    }

    fn fused_cross_entropy(logits: FloatTensor<Self>, targets: IntTensor<Self>, smoothing: f64) -> FloatTensor<Self> {
        counted();
        let z = into_contiguous(logits);
        let targets = into_contiguous(targets);
        let rows = z.shape()[0];
        let out = empty(&z, Shape::new([rows, 2]));
        let (count, dim, units) = row_launch(&z);
        let dtypes = [z.dtype.into(), targets.dtype.into()];
        // SAFETY: cubes past the last row stop (`terminate!`), each unit walks the columns below
        // the vocabulary, the target's logit is read only below it, and `targets` and `out` hold a
        // row (of one and two entries) for each row of `z`.
        unsafe {
            kernels::cross_entropy_forward::launch_unchecked::<R>(
                &z.client.clone(),
                count,
                dim,
                z.into_tensor_arg(),
                targets.into_tensor_arg(),
                out.clone().into_tensor_arg(),
                smoothing as f32,
                units,
                dtypes,
            );
        }
        out
    }

    fn fused_cross_entropy_backward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        grad: FloatTensor<Self>,
        smoothing: f64,
    ) -> FloatTensor<Self> {
        counted();
        let z = into_contiguous(logits);
        let targets = into_contiguous(targets);
        let grad = into_contiguous(alike::<R, F, I, BT>(grad, &z));
        let dz = empty(&z, z.shape());
        let (count, dim, units) = row_launch(&z);
        let dtypes = [z.dtype.into(), targets.dtype.into()];
        // SAFETY: cubes past the last row stop (`terminate!`), each unit walks the columns below
        // the vocabulary, `dz` is `z`'s shape, and `targets` and `grad` hold a row (of one and two
        // entries) for each row of `z`.
        unsafe {
            kernels::cross_entropy_backward::launch_unchecked::<R>(
                &z.client.clone(),
                count,
                dim,
                z.into_tensor_arg(),
                targets.into_tensor_arg(),
                grad.into_tensor_arg(),
                dz.clone().into_tensor_arg(),
                smoothing as f32,
                units,
                dtypes,
            );
        }
        dz
    }

    fn fused_squared_norm(tensors: Vec<FloatTensor<Self>>) -> FloatTensor<Self> {
        counted();
        norm::squared_norm(tensors.into_iter().map(into_contiguous).collect())
    }

    fn fused_adamw(
        param: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        moments: Option<[FloatTensor<Self>; 2]>,
        scale: Option<FloatTensor<Self>>,
        step: crate::fused::adamw::AdamWStep,
    ) -> [FloatTensor<Self>; 3] {
        counted();
        let param = into_contiguous(param);
        let alike = |t| into_contiguous(alike::<R, F, I, BT>(t, &param));
        let (grad, moments, scale) = (alike(grad), moments.map(|[m, v]| [alike(m), alike(v)]), scale.map(alike));
        adamw::launch(param, grad, moments, scale, step)
    }
}

/// LayerNorm's `[dx (+ pending), dγ, dβ]`: the row kernel, then the column sums of `grad ⊙ x̂`
/// and of `grad` in the parameters' own float type.
fn layer_norm_backward<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement>(
    x: CubeTensor<R>,
    gamma: CubeTensor<R>,
    grad: CubeTensor<R>,
    pending: Option<CubeTensor<R>>,
    epsilon: f64,
) -> [CubeTensor<R>; 3] {
    use burn::tensor::ops::FloatTensorOps;
    counted();
    let (x, shape) = as_rows(x);
    let (grad, _) = as_rows(alike::<R, F, I, BT>(grad, &x));
    let pending = pending.map(|p| as_rows(alike::<R, F, I, BT>(p, &x)).0);
    let gamma_dtype = gamma.dtype;
    let gamma = into_contiguous(alike::<R, F, I, BT>(gamma, &x));
    let x_dtype = x.dtype;
    let [dx, grad_normalized] = layer_norm::backward(x, gamma, grad.clone(), pending, epsilon);
    let column_sum = |t| {
        let sum = crate::fused::column_sums::column_sums::<CubeBackend<R, F, I, BT>>(t);
        if gamma_dtype == x_dtype {
            sum
        } else {
            CubeBackend::<R, F, I, BT>::float_cast(sum, gamma_dtype.into())
        }
    };
    [burn_cubecl::ops::reshape(dx, shape), column_sum(grad_normalized), column_sum(grad)]
}
