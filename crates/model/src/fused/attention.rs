//! Scaled dot-product attention as one operation per (batch, head): with `s` the scale
//! (`1/√d_k`), `S = s·QKᵀ` (masked scores set to `MASKED_SCORE`), `P = softmax(S)` row-wise,
//! `O = PV`; backward from `dO`: `dP = dO·Vᵀ`, `dS = P ⊙ (dP − rowsum(dP ⊙ P))`,
//! `dQ = s·dS·K`, `dK = s·dSᵀ·Q`, `dV = Pᵀ·dO`.
//!
//! Returns `[O, P]`: `P` is kept for the backward and handed out for heat maps, but only `O`
//! is differentiable (no loss here reads the weights; under autodiff `P` comes back
//! untracked). Dropout on the weights is not part of it: `scaled_dot_product_attention` takes
//! the composed path when attention dropout is active.
//!
//! The CPU kernel runs the heads in parallel (rayon), each head's products in `gemm` with
//! the transposed operands read through strides.

use burn::tensor::backend::Backend;
use burn::tensor::ops::{BoolTensor, FloatTensor};
use burn::tensor::{Bool, Tensor, TensorData, TensorPrimitive};
use burn_ndarray::{NdArray, NdArrayTensor};
use rayon::prelude::*;

use super::linear::{product_into, view};
use crate::mask::MASKED_SCORE;

/// `[O, P]`, composed of Burn's operations.
pub(super) fn composed<B: Backend>(
    q: Tensor<B, 4>,
    k: Tensor<B, 4>,
    v: Tensor<B, 4>,
    mask: Option<Tensor<B, 4, Bool>>,
    scale: f64,
) -> [Tensor<B, 4>; 2] {
    let [batch, heads, queries, _] = q.dims();
    let keys = k.dims()[2];
    let mut scores = q.mul_scalar(scale).matmul(k.swap_dims(2, 3));
    if let Some(mask) = mask {
        scores = scores.mask_fill(mask.expand([batch, heads, queries, keys]), MASKED_SCORE);
    }
    let weights = burn::tensor::activation::softmax(scores, 3);
    [weights.clone().matmul(v), weights]
}

/// `[dQ, dK, dV]`, composed.
pub(super) fn composed_backward<B: Backend>(
    q: Tensor<B, 4>,
    k: Tensor<B, 4>,
    v: Tensor<B, 4>,
    weights: Tensor<B, 4>,
    grad: Tensor<B, 4>,
    scale: f64,
) -> [Tensor<B, 4>; 3] {
    let dp = grad.clone().matmul(v.swap_dims(2, 3));
    let ds = weights.clone() * (dp.clone() - (dp * weights.clone()).sum_dim(3));
    let dq = ds.clone().matmul(k).mul_scalar(scale);
    let dk = ds.swap_dims(2, 3).matmul(q).mul_scalar(scale);
    let dv = weights.swap_dims(2, 3).matmul(grad);
    [dq, dk, dv]
}

type F = FloatTensor<NdArray<f32>>;

/// The mask's values and its strides over `[batch, heads, queries, keys]` (0 on a broadcast axis).
struct Mask {
    values: Vec<bool>,
    strides: [usize; 4],
}

impl Mask {
    fn new(mask: BoolTensor<NdArray<f32>>) -> Mask {
        let mask = Tensor::<NdArray<f32>, 4, Bool>::from_primitive(mask);
        let dims = mask.dims();
        let values = mask.into_data().convert::<bool>().into_vec::<bool>().expect("bool mask");
        let mut strides = [0; 4];
        let mut stride = 1;
        for axis in (0..4).rev() {
            strides[axis] = if dims[axis] == 1 { 0 } else { stride };
            stride *= dims[axis];
        }
        Mask { values, strides }
    }

    fn at(&self, b: usize, h: usize, q: usize, k: usize) -> bool {
        let s = &self.strides;
        self.values[b * s[0] + h * s[1] + q * s[2] + k * s[3]]
    }
}

/// The forward kernel: `[O, P]`.
pub(super) fn cpu(q: F, k: F, v: F, mask: Option<BoolTensor<NdArray<f32>>>, scale: f64) -> [F; 2] {
    let (q_shape, q) = super::cpu::values(q);
    let (k_shape, k) = super::cpu::values(k);
    let (v_shape, v) = super::cpu::values(v);
    let [batch, heads, queries, d_k] = [q_shape[0], q_shape[1], q_shape[2], q_shape[3]];
    let (keys, d_v) = (k_shape[2], v_shape[3]);
    let mask = mask.map(Mask::new);
    let mut weights = vec![0.0f32; batch * heads * queries * keys];
    let mut context = vec![0.0f32; batch * heads * queries * d_v];
    weights.par_chunks_mut(queries * keys).zip(context.par_chunks_mut(queries * d_v)).enumerate().for_each(
        |(head, (p, o))| {
            let (q, k) = (&q[head * queries * d_k..][..queries * d_k], &k[head * keys * d_k..][..keys * d_k]);
            let v = &v[head * keys * d_v..][..keys * d_v];
            product_into(p, queries, keys, d_k, view(q, d_k, false), view(k, d_k, true), scale as f32, false);
            for (row, scores) in p.chunks_mut(keys).enumerate() {
                if let Some(mask) = &mask {
                    let (b, h) = (head / heads, head % heads);
                    for (col, s) in scores.iter_mut().enumerate() {
                        if mask.at(b, h, row, col) {
                            *s = MASKED_SCORE;
                        }
                    }
                }
                super::cpu::softmax_row(scores);
            }
            product_into(o, queries, d_v, keys, view(p, keys, false), view(v, d_v, false), 1.0, false);
        },
    );
    let tensor = |values, dims: [usize; 4]| NdArrayTensor::from_data(TensorData::new(values, dims));
    [tensor(context, [batch, heads, queries, d_v]), tensor(weights, [batch, heads, queries, keys])]
}

/// The backward kernel: `[dQ, dK, dV]`.
pub(super) fn cpu_backward(q: F, k: F, v: F, weights: F, grad: F, scale: f64) -> [F; 3] {
    let (q_shape, q) = super::cpu::values(q);
    let (k_shape, k) = super::cpu::values(k);
    let (v_shape, v) = super::cpu::values(v);
    let (_, p) = super::cpu::values(weights);
    let (_, grad) = super::cpu::values(grad);
    let [batch, heads, queries, d_k] = [q_shape[0], q_shape[1], q_shape[2], q_shape[3]];
    let (keys, d_v) = (k_shape[2], v_shape[3]);
    let (mut dq, mut dk, mut dv) = (vec![0.0f32; q.len()], vec![0.0f32; k.len()], vec![0.0f32; v.len()]);
    dq.par_chunks_mut(queries * d_k)
        .zip(dk.par_chunks_mut(keys * d_k).zip(dv.par_chunks_mut(keys * d_v)))
        .enumerate()
        .for_each(|(head, (dq, (dk, dv)))| {
            let q = &q[head * queries * d_k..][..queries * d_k];
            let k = &k[head * keys * d_k..][..keys * d_k];
            let v = &v[head * keys * d_v..][..keys * d_v];
            let p = &p[head * queries * keys..][..queries * keys];
            let d_o = &grad[head * queries * d_v..][..queries * d_v];
            let mut ds = vec![0.0f32; queries * keys];
            product_into(&mut ds, queries, keys, d_v, view(d_o, d_v, false), view(v, d_v, true), 1.0, false);
            for (ds, p) in ds.chunks_mut(keys).zip(p.chunks(keys)) {
                let dot: f32 = ds.iter().zip(p).map(|(d, p)| d * p).sum();
                ds.iter_mut().zip(p).for_each(|(d, &p)| *d = p * (*d - dot));
            }
            let s = scale as f32;
            product_into(dq, queries, d_k, keys, view(&ds, keys, false), view(k, d_k, false), s, false);
            product_into(dk, keys, d_k, queries, view(&ds, keys, true), view(q, d_k, false), s, false);
            product_into(dv, keys, d_v, queries, view(p, keys, true), view(d_o, d_v, false), 1.0, false);
        });
    let tensor = |values, dims: [usize; 4]| NdArrayTensor::from_data(TensorData::new(values, dims));
    [
        tensor(dq, [batch, heads, queries, d_k]),
        tensor(dk, [batch, heads, keys, d_k]),
        tensor(dv, [batch, heads, keys, d_v]),
    ]
}

/// `[O, P]` of attention, fused where the backend has a kernel (formulas in this module's
/// documentation).
///
/// # Shapes
/// - `q`: `[batch, heads, queries, d_k]`; `k`: `[batch, heads, keys, d_k]`;
///   `v`: `[batch, heads, keys, d_v]`; `mask`: broadcastable to `[batch, heads, queries, keys]`
/// - output: `[batch, heads, queries, d_v]`, `[batch, heads, queries, keys]`
pub fn attention<B: Backend>(
    q: Tensor<B, 4>,
    k: Tensor<B, 4>,
    v: Tensor<B, 4>,
    mask: Option<Tensor<B, 4, Bool>>,
    scale: f64,
) -> [Tensor<B, 4>; 2] {
    use super::{is, same, FusedOps};
    use burn::backend::Autodiff;
    fn on<B: Backend, K: FusedOps>(
        q: Tensor<B, 4>,
        k: Tensor<B, 4>,
        v: Tensor<B, 4>,
        mask: Option<Tensor<B, 4, Bool>>,
        scale: f64,
    ) -> [Tensor<B, 4>; 2] {
        let prim = |t: Tensor<B, 4>| same::<Tensor<B, 4>, Tensor<K, 4>>(t).into_primitive().tensor();
        let mask = mask.map(|m| same::<Tensor<B, 4, Bool>, Tensor<K, 4, Bool>>(m).into_primitive());
        K::fused_attention(prim(q), prim(k), prim(v), mask, scale)
            .map(|t| same(Tensor::<K, 4>::from_primitive(TensorPrimitive::Float(t))))
    }
    if is::<B, Autodiff<NdArray<f32>>>() {
        on::<B, Autodiff<NdArray<f32>>>(q, k, v, mask, scale)
    } else if is::<B, NdArray<f32>>() {
        on::<B, NdArray<f32>>(q, k, v, mask, scale)
    } else {
        composed(q, k, v, mask, scale)
    }
}
