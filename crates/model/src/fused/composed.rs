//! The composed forms of the row operations on a backend's primitives: the defaults of
//! [`FusedOps`](super::FusedOps), and what burn-fusion's implementation runs under
//! `ATTEND_GPU_KERNELS=auto` in place of our kernels (the operation then keeps its own
//! backward under autodiff, in Burn's operations: [`super::dispatch`]).

use burn::tensor::backend::Backend;
use burn::tensor::ops::{BoolTensor, FloatTensor, IntTensor};
use burn::tensor::{Bool, Int, Tensor, TensorMetadata, TensorPrimitive};

use super::{as_rank, attention as attn, cross_entropy as ce, INV_SQRT_2PI};

fn float<B: Backend, const D: usize>(t: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(t))
}

/// `Φ(x) = ½(1 + erf(x/√2))`.
fn normal_cdf<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let erf = B::float_erf(B::float_mul_scalar(x, core::f64::consts::FRAC_1_SQRT_2.into()));
    B::float_mul_scalar(B::float_add_scalar(erf, 1.0.into()), 0.5.into())
}

/// Exact GELU `x·Φ(x)` (the operations of [`Gelu`](super::unary::Gelu)'s composed form, in any rank:
/// no reshape, which under burn-fusion would cut the element-wise block around it).
pub(super) fn gelu<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_mul(x.clone(), normal_cdf::<B>(x))
}

/// `grad · (Φ(x) + x·φ(x))`, `φ(x) = e^{−x²/2}/√(2π)`.
pub(super) fn gelu_backward<B: Backend>(x: FloatTensor<B>, grad: FloatTensor<B>) -> FloatTensor<B> {
    let square = B::float_mul(x.clone(), x.clone());
    let pdf = B::float_mul_scalar(B::float_exp(B::float_mul_scalar(square, (-0.5).into())), INV_SQRT_2PI.into());
    let slope = B::float_add(normal_cdf::<B>(x.clone()), B::float_mul(x, pdf));
    B::float_mul(grad, slope)
}

/// Softmax over the last axis (Burn's, in any rank).
pub(super) fn softmax_last<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let last = x.shape().num_dims() - 1;
    B::softmax(x, last)
}

/// The softmax's backward from its output `y`: `y ⊙ (grad − Σ_last grad ⊙ y)`.
pub(super) fn softmax_last_backward<B: Backend>(y: FloatTensor<B>, grad: FloatTensor<B>) -> FloatTensor<B> {
    let last = y.shape().num_dims() - 1;
    let dot = B::float_sum_dim(B::float_mul(grad.clone(), y.clone()), last);
    B::float_mul(y, B::float_sub(grad, dot))
}

/// `[O, P]` of attention ([`attn::composed`]).
pub(super) fn attention<B: Backend>(
    q: FloatTensor<B>,
    k: FloatTensor<B>,
    v: FloatTensor<B>,
    mask: Option<BoolTensor<B>>,
    scale: f64,
) -> [FloatTensor<B>; 2] {
    let mask = mask.map(Tensor::<B, 4, Bool>::from_primitive);
    attn::composed(float(q), float(k), float(v), mask, scale).map(|t| t.into_primitive().tensor())
}

/// `[dQ, dK, dV]` of attention ([`attn::composed_backward`]).
pub(super) fn attention_backward<B: Backend>(
    q: FloatTensor<B>,
    k: FloatTensor<B>,
    v: FloatTensor<B>,
    weights: FloatTensor<B>,
    grad: FloatTensor<B>,
    scale: f64,
) -> [FloatTensor<B>; 3] {
    attn::composed_backward::<B>(float(q), float(k), float(v), float(weights), float(grad), scale)
        .map(|t| t.into_primitive().tensor())
}

/// `[nll, smoothed]` per row ([`ce::composed`]).
pub(super) fn cross_entropy<B: Backend>(
    logits: FloatTensor<B>,
    targets: IntTensor<B>,
    smoothing: f64,
) -> FloatTensor<B> {
    ce::composed(float(logits), Tensor::<B, 1, Int>::from_primitive(targets), smoothing).into_primitive().tensor()
}

/// The logits' gradient of the cross-entropy ([`ce::composed_backward`]).
pub(super) fn cross_entropy_backward<B: Backend>(
    logits: FloatTensor<B>,
    targets: IntTensor<B>,
    grad: FloatTensor<B>,
    smoothing: f64,
) -> FloatTensor<B> {
    let targets = Tensor::<B, 1, Int>::from_primitive(targets);
    ce::composed_backward(float(logits), targets, float(grad), smoothing).into_primitive().tensor()
}

/// The LayerNorm's backward from its input (`dx`, `dγ`, `dβ`; formulas at
/// [`FusedOps::fused_layer_norm_backward`](super::FusedOps::fused_layer_norm_backward)).
pub(super) fn layer_norm_backward<B: Backend>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    grad: FloatTensor<B>,
    epsilon: f64,
) -> [FloatTensor<B>; 3] {
    let shape = x.shape();
    let last = shape[shape.num_dims() - 1];
    let dims = [shape.num_elements() / last, last];
    let (x, grad) = (as_rank::<B, 2>(x, dims), as_rank::<B, 2>(grad, dims));
    let gamma = as_rank::<B, 2>(gamma, [1, last]);
    let centered = x.clone() - x.mean_dim(1);
    let rstd = (centered.clone().powi_scalar(2).mean_dim(1).add_scalar(epsilon)).sqrt().recip();
    let normalized = centered * rstd.clone();
    let g = grad.clone() * gamma;
    let dx = rstd * (g.clone() - g.clone().mean_dim(1) - normalized.clone() * (g * normalized.clone()).mean_dim(1));
    let dgamma = super::column_sums::column_sums::<B>((grad.clone() * normalized).into_primitive().tensor());
    let dbeta = super::column_sums::column_sums::<B>(grad.into_primitive().tensor());
    [B::float_reshape(dx.into_primitive().tensor(), shape), dgamma, dbeta]
}
