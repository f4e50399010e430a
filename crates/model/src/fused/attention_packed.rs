//! Self-attention over one product's rows. With `Y = x·[W^Q | W^K | W^V]`, each row of `Y`
//! holds a position's queries, keys and values side by side (`[batch, len, heads·d_k |
//! heads·d_k | heads·d_v]`); attention reads its heads there ([`Packing`] says where) and its
//! backward writes `dQ`, `dK`, `dV` into one buffer of `Y`'s layout. The product's backward
//! then takes one gradient: `dx = dY·Wᵀ` and `dW = xᵀ·dY` as one product each.
//!
//! Three products of the same `x` cost more on the CPU: each reads `x` again, and their three
//! `dx` are summed by Burn's autodiff, two serial element-wise adds of `[rows, d_model]` per
//! layer. On nanoGPT's CPU model (768 rows, `d_model` 128, a Xeon's two cores) the kernels of
//! one layer's projections took 320 µs forward and 590 µs backward as three maps with the two
//! adds, against 260 and 450 µs as one (docs/benchmarks.md). Slicing `Y` into three tensors
//! instead (the `merged` projections on the GPU) gives those back: the backward of each slice
//! is a zero-filled `[rows, 3·d]` tensor, a slice assignment and a sum.
//!
//! Elsewhere than the CPU kernels the packed input is sliced and split into heads, and
//! [`super::attention`] runs on the three (the composed form; the GPU backends keep three
//! products by default, `crate::projections`).

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{unary, Backward, Ops, OpsKind};
use burn::backend::Autodiff;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::ops::{BoolTensor, FloatTensor};
use burn::tensor::{Bool, Tensor, TensorPrimitive};
use burn_ndarray::NdArray;

use super::dispatch::{on_kernels, same};
pub use super::heads::Packing;
use super::heads::{rows, Heads, Interleaved, F};
use super::unwritten::{assume_init, uninit};
use super::FusedOps;

/// The queries, keys and values of `qkv` (`[batch, len, width]`), each `[batch, heads, len,
/// d]`: slices, split into heads.
pub(super) fn split<B: Backend>(qkv: Tensor<B, 3>, packing: Packing) -> [Tensor<B, 4>; 3] {
    let [batch, len, width] = qkv.dims();
    assert_eq!(width, packing.width(), "packed attention: rows of {width} for {packing:?}");
    let (offsets, widths) = (packing.offsets(), packing.widths());
    [0, 1, 2].map(|part| {
        let block = qkv.clone().narrow(2, offsets[part], packing.heads * widths[part]);
        block.reshape([batch, len, packing.heads, widths[part]]).swap_dims(1, 2)
    })
}

/// `[O, P]`, composed: the packed input split, then `B`'s attention.
pub(super) fn composed<B: FusedOps>(
    qkv: FloatTensor<B>,
    packing: Packing,
    mask: Option<BoolTensor<B>>,
    scale: f64,
) -> [FloatTensor<B>; 2] {
    let [q, k, v] = split(Tensor::<B, 3>::from_primitive(TensorPrimitive::Float(qkv)), packing);
    let prim = |t: Tensor<B, 4>| t.into_primitive().tensor();
    B::fused_attention(prim(q), prim(k), prim(v), mask, scale)
}

/// The packed input's gradient, composed: `B`'s attention backward on the split input, its
/// three gradients joined in the packed layout.
pub(super) fn composed_backward<B: FusedOps>(
    qkv: FloatTensor<B>,
    packing: Packing,
    weights: FloatTensor<B>,
    grad: FloatTensor<B>,
    scale: f64,
) -> FloatTensor<B> {
    let qkv = Tensor::<B, 3>::from_primitive(TensorPrimitive::Float(qkv));
    let [batch, len, _] = qkv.dims();
    let [q, k, v] = split(qkv, packing).map(|t| t.into_primitive().tensor());
    let grads = B::fused_attention_backward(q, k, v, weights, grad, scale);
    let grads = grads.map(|g| Tensor::<B, 4>::from_primitive(TensorPrimitive::Float(g)));
    join(grads, packing, [batch, len]).into_primitive().tensor()
}

/// Three `[batch, heads, len, d]` tensors (the queries', keys' and values', or their
/// gradients) joined into the packed `[batch, len, width]` layout: [`split`]'s inverse.
pub(super) fn join<B: Backend>(parts: [Tensor<B, 4>; 3], packing: Packing, [batch, len]: [usize; 2]) -> Tensor<B, 3> {
    let widths = packing.widths();
    let joined: Vec<_> = parts
        .into_iter()
        .zip(widths)
        .map(|(t, width)| t.swap_dims(1, 2).reshape([batch, len, packing.heads * width]))
        .collect();
    Tensor::cat(joined, 2)
}

#[cfg(test)]
thread_local! {
    /// Packed attentions run by the CPU kernel on this thread, for the tests.
    pub(crate) static CPU_CALLS: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// The forward kernel: `[O, P]` read from the packed rows in place.
pub(super) fn cpu(qkv: F, packing: Packing, mask: Option<BoolTensor<NdArray<f32>>>, scale: f64) -> [F; 2] {
    #[cfg(test)]
    CPU_CALLS.with(|c| c.set(c.get() + 1));
    let [q, k, v] = Heads::packed(qkv, packing);
    super::attention::forward(&q, &k, &v, mask, scale)
}

/// The backward kernel: the gradient of the packed input, each head's `dQ`, `dK`, `dV`
/// written into its columns of one `[batch, len, width]` buffer.
pub(super) fn cpu_backward(qkv: F, packing: Packing, weights: F, grad: F, scale: f64) -> F {
    let [q, k, v] = Heads::packed(qkv, packing);
    let [batch, _, len, _] = q.dims;
    let width = packing.width();
    let mut d = uninit(batch * len * width);
    // `Packing::offsets` are the running sums of the blocks' widths, as `blocks` lays them.
    let outs = Interleaved::blocks(&mut d, packing.heads, len, packing.widths(), width);
    super::attention::backward([&q, &k, &v], weights, grad, scale, &outs);
    // SAFETY: the three blocks cover every column of every row, and `backward` wrote every
    // head of each.
    rows(unsafe { assume_init(d) }, [batch, len, width])
}

/// The operation under autodiff: `B`'s forward, and a backward step that runs `B`'s backward
/// and registers the packed input's gradient (only `O` is differentiable, as in
/// [`super::attention`]).
pub(super) fn tracked<B: FusedOps, C: CheckpointStrategy>(
    qkv: FloatTensor<Autodiff<B, C>>,
    packing: Packing,
    mask: Option<BoolTensor<Autodiff<B, C>>>,
    scale: f64,
) -> [FloatTensor<Autodiff<B, C>>; 2] {
    #[derive(Debug)]
    struct PackedBackward;

    impl<B: FusedOps> Backward<B, 1> for PackedBackward {
        /// The packed input, the weights `P`, the packing and the scale.
        type State = (FloatTensor<B>, FloatTensor<B>, Packing, f64);

        fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
            let (qkv, weights, packing, scale) = ops.state;
            unary::<B, _>(ops.parents, ops.node, grads, |grad| {
                B::fused_attention_packed_backward(qkv, packing, weights, grad, scale)
            });
        }
    }

    match PackedBackward.prepare::<C>([qkv.node.clone()]).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let [context, weights] = B::fused_attention_packed(qkv.primitive.clone(), packing, mask, scale);
            let untracked = Autodiff::<B, C>::from_inner(weights.clone());
            [prep.finish((qkv.primitive, weights, packing, scale), context), untracked]
        }
        OpsKind::UnTracked(prep) => {
            let [context, weights] = B::fused_attention_packed(qkv.primitive, packing, mask, scale);
            [prep.finish(context), Autodiff::<B, C>::from_inner(weights)]
        }
    }
}

/// Self-attention of packed queries, keys and values: `[O, P]` as [`super::attention`] gives
/// them for the three split into heads (`O` `[batch, heads, len, d_v]`, `P` `[batch, heads,
/// len, len]`), read in place where the backend has the kernel.
///
/// # Shapes
/// - `qkv`: `[batch, len, heads·(2·d_k + d_v)]`, as `packing` lays it out
/// - `mask`: broadcastable to `[batch, heads, len, len]`
pub fn attention_packed<B: Backend>(
    qkv: Tensor<B, 3>,
    packing: Packing,
    mask: Option<Tensor<B, 4, Bool>>,
    scale: f64,
) -> [Tensor<B, 4>; 2] {
    fn on<B: Backend, K: FusedOps>(
        qkv: Tensor<B, 3>,
        packing: Packing,
        mask: Option<Tensor<B, 4, Bool>>,
        scale: f64,
    ) -> [Tensor<B, 4>; 2] {
        let qkv = same::<Tensor<B, 3>, Tensor<K, 3>>(qkv).into_primitive().tensor();
        let mask = mask.map(|m| same::<Tensor<B, 4, Bool>, Tensor<K, 4, Bool>>(m).into_primitive());
        K::fused_attention_packed(qkv, packing, mask, scale)
            .map(|t| same(Tensor::<K, 4>::from_primitive(TensorPrimitive::Float(t))))
    }
    on_kernels!(B, K => on::<B, K>(qkv, packing, mask, scale), _ => {
        let [q, k, v] = split(qkv, packing);
        super::attention(q, k, v, mask, scale)
    })
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Distribution, Tensor};

    use super::*;
    use crate::mask::causal_mask;

    type Cpu = NdArray<f32>;

    /// `a` and `b` in row-major order have the same shape and values within `1e-5`, and `a`
    /// is not all zero.
    fn assert_close(a: F, b: F, what: &str) {
        let ((shape_a, a), (shape_b, b)) = (super::super::cpu::values(a), super::super::cpu::values(b));
        assert_eq!(shape_a, shape_b, "{what}");
        assert!(a.iter().any(|&v| v != 0.0), "{what} is all zero");
        let worst = a.iter().zip(b.iter()).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
        assert!(worst < 1e-5, "{what} differs by {worst}");
    }

    /// The kernels reading the heads in place from packed rows, and writing the packed
    /// gradient, give the values and gradients of attention composed of Burn's operations on
    /// the rows sliced into three: heads of unequal widths, with and without a causal mask,
    /// and packed inputs that are strided views (a permuted batch axis; columns `len` apart).
    #[test]
    fn packed_attention_kernels_equal_the_composed_form() {
        let device = Default::default();
        for (heads, d_k, d_v, causal) in [(2, 3, 5, true), (4, 8, 8, false), (1, 4, 2, true)] {
            let packing = Packing { heads, d_k, d_v };
            let (batch, len, scale) = (2, 7, 0.3);
            let qkv = Tensor::<Cpu, 3>::random([batch, len, packing.width()], Distribution::Default, &device);
            let permuted =
                Tensor::<Cpu, 3>::from_data(qkv.clone().swap_dims(0, 1).into_data(), &device).swap_dims(0, 1);
            let columns_apart =
                Tensor::<Cpu, 3>::from_data(qkv.clone().swap_dims(1, 2).into_data(), &device).swap_dims(1, 2);
            let mask = causal.then(|| causal_mask::<Cpu>(len, len, 0, &device));
            let grad = Tensor::<Cpu, 4>::random([batch, heads, len, d_v], Distribution::Default, &device);
            // The reference: Burn's operations throughout (slices, products, softmax).
            let [q, k, v] = split(qkv.clone(), packing);
            let [o, p] = super::super::attention::composed(q.clone(), k.clone(), v.clone(), mask.clone(), scale);
            let grads = super::super::attention::composed_backward(q, k, v, p.clone(), grad.clone(), scale);
            let d = join(grads, packing, [batch, len]);
            let prim4 = |t: Tensor<Cpu, 4>| t.into_primitive().tensor();
            for input in [&qkv, &permuted, &columns_apart] {
                let prim = |t: &Tensor<Cpu, 3>| t.clone().into_primitive().tensor();
                let mask = mask.clone().map(|m| m.into_primitive());
                let [ours_o, ours_p] = cpu(prim(input), packing, mask, scale);
                let ours_d = cpu_backward(prim(input), packing, ours_p.clone(), prim4(grad.clone()), scale);
                assert_close(ours_o, prim4(o.clone()), "O");
                assert_close(ours_p, prim4(p.clone()), "P");
                assert_close(ours_d, d.clone().into_primitive().tensor(), "the packed gradient");
            }
        }
    }
}
