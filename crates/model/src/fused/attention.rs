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
//! The CPU kernel runs the heads in parallel (rayon), each head's products in `gemm`, reading
//! `Q`, `K`, `V` and `dO` through their strides (no gathered copies, transposes for free), and
//! writing `O`, `dQ`, `dK`, `dV` where the model wants them: in `[batch, len, heads, d]` order,
//! handed back as `[batch, heads, len, d]` views of it. The heads' split (`reshape` then
//! `swap_dims`) and join (`swap_dims` then `reshape`) around attention then cost no copy,
//! forward or backward.

use burn::tensor::backend::Backend;
use burn::tensor::ops::BoolTensor;
use burn::tensor::{Bool, Tensor, TensorData, TensorPrimitive};
use burn_ndarray::{NdArray, NdArrayTensor};
use rayon::prelude::*;

use super::cpu::softmax_in_place;
use super::heads::{by_heads, Address, Heads, Interleaved, F};
use super::linear::{product_into, view};
use super::products::product;
use super::score_mask::Mask;
use super::unwritten::{assume_init, uninit};
use super::wide::{lanes_dot, wide};
use crate::mask::MASKED_SCORE;

/// `[O, P]`, composed of Burn's operations.
///
/// The scale multiplies the product `QKᵀ`, as nanoGPT's and GPT-2's attention do, not `Q`
/// before it: burn-fusion 0.21 (seen on wgpu) computes wrong scores when the product's operand is
/// an element-wise operation over a reshaped view with a unit axis, which is what a cached
/// decoding step's queries (`[batch, 1, d]` split into heads, then scaled) are. docs/burn.md,
/// "Fused matrix products that read a unit-axis view"; the test
/// `cached_decoding_equals_full_forward_for_every_batch_with_and_without_biases`.
pub(super) fn composed<B: Backend>(
    q: Tensor<B, 4>,
    k: Tensor<B, 4>,
    v: Tensor<B, 4>,
    mask: Option<Tensor<B, 4, Bool>>,
    scale: f64,
) -> [Tensor<B, 4>; 2] {
    let [batch, heads, queries, _] = q.dims();
    let keys = k.dims()[2];
    let mut scores = product(q, k.swap_dims(2, 3)).mul_scalar(scale);
    if let Some(mask) = mask {
        scores = scores.mask_fill(mask.expand([batch, heads, queries, keys]), MASKED_SCORE);
    }
    let weights = burn::tensor::activation::softmax(scores, 3);
    [product(weights.clone(), v), weights]
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
    let dp = product(grad.clone(), v.swap_dims(2, 3));
    let ds = weights.clone() * (dp.clone() - (dp * weights.clone()).sum_dim(3));
    let dq = product(ds.clone(), k).mul_scalar(scale);
    let dk = product(ds.swap_dims(2, 3), q).mul_scalar(scale);
    let dv = product(weights.swap_dims(2, 3), grad);
    [dq, dk, dv]
}

/// The forward kernel: `[O, P]`.
pub(super) fn cpu(q: F, k: F, v: F, mask: Option<BoolTensor<NdArray<f32>>>, scale: f64) -> [F; 2] {
    forward(&Heads::new(q), &Heads::new(k), &Heads::new(v), mask, scale)
}

/// `[O, P]` of the heads given: `O` as a `[batch, heads, queries, d_v]` view of a `[batch,
/// queries, heads, d_v]` buffer.
pub(super) fn forward(q: &Heads, k: &Heads, v: &Heads, mask: Option<BoolTensor<NdArray<f32>>>, scale: f64) -> [F; 2] {
    let [batch, heads, queries, d_k] = q.dims;
    let (keys, d_v) = (k.dims[2], v.dims[3]);
    let mask = mask.map(Mask::new);
    let bases = [q.base(), k.base(), v.base()].map(Address);
    let mut weights = uninit(batch * heads * queries * keys);
    let mut context = uninit(batch * queries * heads * d_v);
    let out = Interleaved::new(&mut context, heads, queries, d_v);
    weights.par_chunks_mut(queries * keys).enumerate().for_each(|(head, p)| {
        let [qb, kb, vb] = bases;
        let (qm, km) = (q.matrix(qb.0, head, false), k.matrix(kb.0, head, true));
        let p = product_into(p, queries, keys, d_k, qm, km, scale as f32);
        wide(
            #[inline(always)]
            || {
                for (row, scores) in p.chunks_mut(keys).enumerate() {
                    match &mask {
                        Some(mask) => mask.softmax(head / heads, head % heads, row, scores),
                        None => softmax_in_place(scores),
                    }
                }
            },
        );
        // SAFETY: head `head`'s rows of `context`, which no other task touches.
        unsafe { out.write(head, [queries, d_v, keys], view(p, keys, false), v.matrix(vb.0, head, false), 1.0) };
    });
    // SAFETY: every head wrote its block of `weights` (the product) and of `context`.
    let (weights, context) = unsafe { (assume_init(weights), assume_init(context)) };
    let weights = NdArrayTensor::from_data(TensorData::new(weights, [batch, heads, queries, keys]));
    [by_heads(context, [batch, queries, heads, d_v]), weights]
}

/// The backward kernel: `[dQ, dK, dV]`.
pub(super) fn cpu_backward(q: F, k: F, v: F, weights: F, grad: F, scale: f64) -> [F; 3] {
    let (q, k, v) = (Heads::new(q), Heads::new(k), Heads::new(v));
    let [batch, heads, queries, d_k] = q.dims;
    let (keys, d_v) = (k.dims[2], v.dims[3]);
    let (mut dq, mut dk, mut dv) =
        (uninit(batch * queries * heads * d_k), uninit(batch * keys * heads * d_k), uninit(batch * keys * heads * d_v));
    let outs = [
        Interleaved::new(&mut dq, heads, queries, d_k),
        Interleaved::new(&mut dk, heads, keys, d_k),
        Interleaved::new(&mut dv, heads, keys, d_v),
    ];
    backward([&q, &k, &v], weights, grad, scale, &outs);
    // SAFETY: every head wrote its block of `dq`, `dk` and `dv` (`backward`).
    let (dq, dk, dv) = unsafe { (assume_init(dq), assume_init(dk), assume_init(dv)) };
    [
        by_heads(dq, [batch, queries, heads, d_k]),
        by_heads(dk, [batch, keys, heads, d_k]),
        by_heads(dv, [batch, keys, heads, d_v]),
    ]
}

/// `dQ`, `dK`, `dV` of the heads given, from the weights `P` and the gradient of `O`, each
/// head's written through `outs` (every head of each, once).
pub(super) fn backward([q, k, v]: [&Heads; 3], weights: F, grad: F, scale: f64, outs: &[Interleaved; 3]) {
    let d_o = Heads::new(grad);
    let (_, p) = super::cpu::values(weights);
    let [batch, heads, queries, d_k] = q.dims;
    let (keys, d_v) = (k.dims[2], v.dims[3]);
    let bases = [q.base(), k.base(), v.base(), d_o.base()].map(Address);
    let [dq_out, dk_out, dv_out] = outs;
    (0..batch * heads).into_par_iter().for_each(|head| {
        let [qb, kb, vb, ob] = bases;
        let p = &p[head * queries * keys..][..queries * keys];
        let mut ds = uninit(queries * keys);
        let (om, vt) = (d_o.matrix(ob.0, head, false), v.matrix(vb.0, head, true));
        let ds = product_into(&mut ds, queries, keys, d_v, om, vt, 1.0);
        wide(
            #[inline(always)]
            || {
                for (ds, p) in ds.chunks_mut(keys).zip(p.chunks(keys)) {
                    let dot = lanes_dot(ds, p);
                    ds.iter_mut().zip(p).for_each(|(d, &p)| *d = p * (*d - dot));
                }
            },
        );
        let s = scale as f32;
        // SAFETY: head `head`'s rows of `dq`, `dk`, `dv`, which no other task touches.
        unsafe {
            let (dsm, dst) = (view(ds, keys, false), view(ds, keys, true));
            dq_out.write(head, [queries, d_k, keys], dsm, k.matrix(kb.0, head, false), s);
            dk_out.write(head, [keys, d_k, queries], dst, q.matrix(qb.0, head, false), s);
            dv_out.write(head, [keys, d_v, queries], view(p, keys, true), d_o.matrix(ob.0, head, false), 1.0);
        }
    });
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
    use super::{same, FusedOps};
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
    super::on_kernels!(B, K => on::<B, K>(q, k, v, mask, scale), _ => {
        super::on_kernels!(tracked B, K => on::<B, K>(q, k, v, mask, scale), _ => composed(q, k, v, mask, scale))
    })
}
