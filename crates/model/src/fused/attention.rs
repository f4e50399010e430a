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
use burn::tensor::ops::{BoolTensor, FloatTensor};
use burn::tensor::{Bool, Tensor, TensorData, TensorPrimitive};
use burn_ndarray::{NdArray, NdArrayTensor};
use rayon::prelude::*;

use core::mem::MaybeUninit;

use super::cpu::softmax_in_place;
use super::linear::{product_into, product_to, view};
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
    let mut scores = q.matmul(k.swap_dims(2, 3)).mul_scalar(scale);
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

/// A `[batch, heads, rows, cols]` tensor read where it lies: each head's matrix as `gemm`
/// reads it, through the tensor's strides (`Q`, `K`, `V` arrive as strided views of
/// `[batch, len, heads, d]`; gathering them cost more than the products of small heads).
struct Heads {
    /// What the matrices point into: the tensor itself, or (not f32) a converted copy.
    keep: Keep,
    dims: [usize; 4],
    strides: [isize; 4],
}

enum Keep {
    Tensor(F),
    Owned(Vec<f32>),
}

impl Heads {
    fn new(t: F) -> Heads {
        match t {
            NdArrayTensor::F32(_) => {
                let keep = Keep::Tensor(t);
                let Keep::Tensor(NdArrayTensor::F32(storage)) = &keep else { unreachable!("just built") };
                let view = storage.view();
                let dims = [0, 1, 2, 3].map(|axis| view.shape()[axis]);
                let strides = [0, 1, 2, 3].map(|axis| view.strides()[axis]);
                Heads { keep, dims, strides }
            }
            other => {
                let (shape, values) = super::cpu::values(other);
                let dims = [shape[0], shape[1], shape[2], shape[3]];
                let strides = [dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1].map(|s| s as isize);
                Heads { keep: Keep::Owned(values.to_vec()), dims, strides }
            }
        }
    }

    /// The first element's address (the data stays where it is while `self` lives).
    fn base(&self) -> *const f32 {
        match &self.keep {
            Keep::Tensor(NdArrayTensor::F32(storage)) => storage.view().as_ptr(),
            Keep::Tensor(_) => unreachable!("only f32 tensors are kept"),
            Keep::Owned(values) => values.as_ptr(),
        }
    }

    /// Head `head` (batch-major) as `(pointer, column stride, row stride)`, or its transpose.
    fn matrix(&self, base: *const f32, head: usize, transposed: bool) -> (*const f32, isize, isize) {
        let (b, h) = (head / self.dims[1], head % self.dims[1]);
        let ptr = base.wrapping_offset(b as isize * self.strides[0] + h as isize * self.strides[1]);
        let (rs, cs) = (self.strides[2], self.strides[3]);
        if transposed {
            (ptr, rs, cs)
        } else {
            (ptr, cs, rs)
        }
    }
}

/// An address that may cross threads (the data it points to is only read).
#[derive(Clone, Copy)]
struct Address(*const f32);
// SAFETY: the kernels only read through these addresses, from tensors kept alive and unchanged
// for the whole parallel loop.
unsafe impl Send for Address {}
unsafe impl Sync for Address {}

/// The forward kernel: `[O, P]`.
pub(super) fn cpu(q: F, k: F, v: F, mask: Option<BoolTensor<NdArray<f32>>>, scale: f64) -> [F; 2] {
    let (q, k, v) = (Heads::new(q), Heads::new(k), Heads::new(v));
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

/// A `[batch, len, heads, d]` buffer that the tasks of a parallel loop over (batch, head)
/// write into, each its own head's `len × d` matrix (row stride `heads·d`).
struct Interleaved {
    base: *mut f32,
    heads: usize,
    len: usize,
    d: usize,
}

// SAFETY: tasks write disjoint elements (one head each, `Interleaved::write`'s contract), and
// the buffer outlives the parallel loop that borrows it.
unsafe impl Send for Interleaved {}
unsafe impl Sync for Interleaved {}

impl Interleaved {
    fn new(buffer: &mut [MaybeUninit<f32>], heads: usize, len: usize, d: usize) -> Interleaved {
        assert_eq!(buffer.len() % (heads * len * d).max(1), 0, "a whole number of [len, heads, d] blocks");
        Interleaved { base: buffer.as_mut_ptr().cast(), heads, len, d }
    }

    /// `head`'s matrix (batch-major numbering) `= scale · lhs · rhs`, `[m, n, k]` with `m` =
    /// `len` and `n` = `d`.
    ///
    /// # Safety
    /// No other thread may write `head` at the same time; `lhs` and `rhs` as `product_to` asks.
    unsafe fn write(
        &self,
        head: usize,
        [m, n, k]: [usize; 3],
        lhs: (*const f32, isize, isize),
        rhs: (*const f32, isize, isize),
        scale: f32,
    ) {
        assert!(m == self.len && n == self.d, "a head's matrix is len x d");
        let (b, h) = (head / self.heads, head % self.heads);
        let offset = b * self.len * self.heads * self.d + h * self.d;
        // SAFETY: `offset` and the `m` rows of stride `heads·d` after it lie inside the buffer
        // (checked in `new`, with b < batch); the caller keeps other threads off this head.
        unsafe { product_to(self.base.add(offset), (self.heads * self.d) as isize, [m, n, k], lhs, rhs, scale) }
    }
}

/// `values` laid out `[batch, len, heads, d]` as a `[batch, heads, len, d]` tensor (a
/// permuted view: no copy).
fn by_heads(values: Vec<f32>, dims: [usize; 4]) -> F {
    let array = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&dims), values)
        .expect("the buffer holds the product of its dimensions");
    NdArrayTensor::from(array.permuted_axes(ndarray::IxDyn(&[0, 2, 1, 3])).into_shared())
}

/// The backward kernel: `[dQ, dK, dV]`.
pub(super) fn cpu_backward(q: F, k: F, v: F, weights: F, grad: F, scale: f64) -> [F; 3] {
    let (q, k, v, d_o) = (Heads::new(q), Heads::new(k), Heads::new(v), Heads::new(grad));
    let (_, p) = super::cpu::values(weights);
    let [batch, heads, queries, d_k] = q.dims;
    let (keys, d_v) = (k.dims[2], v.dims[3]);
    let bases = [q.base(), k.base(), v.base(), d_o.base()].map(Address);
    let (mut dq, mut dk, mut dv) =
        (uninit(batch * queries * heads * d_k), uninit(batch * keys * heads * d_k), uninit(batch * keys * heads * d_v));
    let (dq_out, dk_out, dv_out) = (
        Interleaved::new(&mut dq, heads, queries, d_k),
        Interleaved::new(&mut dk, heads, keys, d_k),
        Interleaved::new(&mut dv, heads, keys, d_v),
    );
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
    // SAFETY: every head wrote its block of `dq`, `dk` and `dv`.
    let (dq, dk, dv) = unsafe { (assume_init(dq), assume_init(dk), assume_init(dv)) };
    [
        by_heads(dq, [batch, queries, heads, d_k]),
        by_heads(dk, [batch, keys, heads, d_k]),
        by_heads(dv, [batch, keys, heads, d_v]),
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
