//! Attention's two products where its weights take dropout (`crate::attention`): the scores
//! `X = Q·Kᵀ` and the context `C = P̃·V`, per head. Where our GPU kernel multiplies (the
//! setting and the operands as [`super::products::matmul`] takes them) each is one autodiff
//! step of its own, with what [`super::product_shape`] says a causal mask lets them leave
//! out, and their results heads last where the heads are joined next:
//!
//! | product | forward | backward |
//! | --- | --- | --- |
//! | scores | `X = tril(Q·Kᵀ)` | `dQ = tril(dX)·K`, `dK = triu(dXᵀ)·Q`, both heads last |
//! | context | `C = tril(P̃)·V`, heads last | `dP̃ = tril(dC·Vᵀ)`, `dV = triu(P̃ᵀ)·dC` heads last |
//!
//! (`tril`, `triu` by the causal mask's offset; without a causal mask, full products.)
//! The scores take `K` itself rather than the view `Kᵀ`, so that `dK` is a product of its own
//! in `K`'s layout, where the product's generic backward gave `dKᵀ` and a transposing copy.
//!
//! The masked entries these leave out are ones the weights make irrelevant: the weights'
//! softmax replaces masked scores, masked weights are 0 (before and after dropout) and the
//! weights' backward gives 0 at masked keys, so `tril(P̃) = P̃`, `tril(dX) = dX`, and `dP̃`'s
//! masked entries are never read. Everywhere else (the CPU, Burn's products) they are Burn's
//! full `matmul`s, which therefore give the same weights, context and gradients.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{binary, Backward, Ops, OpsKind};
use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorPrimitive};

use super::dispatch::{same, Kernels};
use super::product_shape::{ProductShape, Triangle};
use super::FusedOps;

/// The scores' and the context's triangles under a causal mask of offset `causal` (`None`:
/// no causal mask, full products).
pub(super) fn triangles(causal: Option<usize>) -> (Triangle, Triangle) {
    match causal {
        Some(offset) => (Triangle::Output(offset), Triangle::LowerA(offset)),
        None => (Triangle::Full, Triangle::Full),
    }
}

/// Which of the two products.
#[derive(Clone, Copy)]
enum Which {
    Scores,
    Context,
}

/// `Q·Kᵀ`: attention's raw scores, `[batch, heads, queries, keys]`, from `q`: `[batch, heads,
/// queries, d]` and `k`: `[batch, heads, keys, d]`. `causal`: the offset of a causal mask
/// that the weights will apply (the entries above its diagonal may then be left 0).
pub fn attention_scores<B: Backend>(q: Tensor<B, 4>, k: Tensor<B, 4>, causal: Option<usize>) -> Tensor<B, 4> {
    let kt = k.clone().swap_dims(2, 3);
    match super::products::kernels_taking::<B, 4>(&q, &kt) {
        Some(kernels) => on(kernels, Which::Scores, q, k, causal),
        None => q.matmul(kt),
    }
}

/// `P̃·V`: attention's context, `[batch, heads, queries, d_v]`, from the weights `p`
/// (`[batch, heads, queries, keys]`, zero at the keys a causal mask of offset `causal` masks)
/// and `v`: `[batch, heads, keys, d_v]`.
pub fn attention_context<B: Backend>(p: Tensor<B, 4>, v: Tensor<B, 4>, causal: Option<usize>) -> Tensor<B, 4> {
    match super::products::kernels_taking::<B, 4>(&p, &v) {
        Some(kernels) => on(kernels, Which::Context, p, v, causal),
        None => p.matmul(v),
    }
}

/// `which` by the backend `kernels` names (`B` itself).
fn on<B: Backend>(
    kernels: Kernels,
    which: Which,
    a: Tensor<B, 4>,
    b: Tensor<B, 4>,
    causal: Option<usize>,
) -> Tensor<B, 4> {
    fn with<B: Backend, K: FusedOps>(
        which: Which,
        a: Tensor<B, 4>,
        b: Tensor<B, 4>,
        causal: Option<usize>,
    ) -> Tensor<B, 4> {
        let a = same::<Tensor<B, 4>, Tensor<K, 4>>(a).into_primitive().tensor();
        let b = same::<Tensor<B, 4>, Tensor<K, 4>>(b).into_primitive().tensor();
        let c = match which {
            Which::Scores => K::fused_attention_scores(a, b, causal),
            Which::Context => K::fused_attention_context(a, b, causal),
        };
        same(Tensor::<K, 4>::from_primitive(TensorPrimitive::Float(c)))
    }
    super::on_kernels!(@match kernels, K => with::<B, K>(which, a, b, causal), _ => match which {
        Which::Scores => a.matmul(b.swap_dims(2, 3)),
        Which::Context => a.matmul(b),
    })
}

/// `a·b` under `shape` (rank 4, attention's per-head products) on `B`: our kernel where it
/// takes the product ([`super::products::matmul`]'s rule), else [`super::product_shape`]'s
/// composed reference (Burn's product and masks). For `bench products`, which times the
/// backward's products alone too.
pub fn product_shaped<B: Backend>(a: Tensor<B, 4>, b: Tensor<B, 4>, shape: ProductShape) -> Tensor<B, 4> {
    fn with<B: Backend, K: FusedOps>(a: Tensor<B, 4>, b: Tensor<B, 4>, shape: ProductShape) -> Tensor<B, 4> {
        let a = same::<Tensor<B, 4>, Tensor<K, 4>>(a).into_primitive().tensor();
        let b = same::<Tensor<B, 4>, Tensor<K, 4>>(b).into_primitive().tensor();
        same(Tensor::<K, 4>::from_primitive(TensorPrimitive::Float(K::fused_product_shaped(a, b, shape))))
    }
    match super::products::kernels_taking::<B, 4>(&a, &b) {
        Some(kernels) => super::on_kernels!(@match kernels, K => with::<B, K>(a, b, shape), _ => {
            super::product_shape::composed(a, b, shape)
        }),
        None => super::product_shape::composed(a, b, shape),
    }
}

fn transposed<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_swap_dims(x, 2, 3)
}

/// [`FusedOps::fused_attention_scores`] on `Autodiff<B, C>`: one step, `dQ = tril(dX)·K` and
/// `dK = triu(dXᵀ)·Q`, heads last.
pub(super) fn scores<B: FusedOps, C: CheckpointStrategy>(
    q: FloatTensor<Autodiff<B, C>>,
    k: FloatTensor<Autodiff<B, C>>,
    causal: Option<usize>,
) -> FloatTensor<Autodiff<B, C>> {
    #[derive(Debug)]
    struct ScoresBackward(Option<usize>);

    impl<B: FusedOps> Backward<B, 2> for ScoresBackward {
        /// `K` where `Q` is tracked, `Q` where `K` is.
        type State = (Option<FloatTensor<B>>, Option<FloatTensor<B>>);

        fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
            let (k, q) = ops.state;
            let offset = self.0;
            let lower = offset.map_or(Triangle::Full, Triangle::LowerA);
            let upper = offset.map_or(Triangle::Full, Triangle::UpperA);
            binary::<B, _, _>(
                ops.parents,
                ops.node,
                grads,
                |dx| B::fused_product_shaped(dx, k.expect("kept for a tracked Q"), ProductShape::new(lower, true)),
                |dx| {
                    B::fused_product_shaped(
                        transposed::<B>(dx),
                        q.expect("kept for a tracked K"),
                        ProductShape::new(upper, true),
                    )
                },
            );
        }
    }

    let (q_tracked, k_tracked) = (q.is_tracked(), k.is_tracked());
    let forward = |q, k| B::fused_attention_scores(q, k, causal);
    match ScoresBackward(causal).prepare::<C>([q.node.clone(), k.node.clone()]).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let state = (q_tracked.then(|| k.primitive.clone()), k_tracked.then(|| q.primitive.clone()));
            prep.finish(state, forward(q.primitive, k.primitive))
        }
        OpsKind::UnTracked(prep) => prep.finish(forward(q.primitive, k.primitive)),
    }
}

/// [`FusedOps::fused_attention_context`] on `Autodiff<B, C>`: one step, `dP̃ = tril(dC·Vᵀ)` and
/// `dV = triu(P̃ᵀ)·dC`, heads last.
pub(super) fn context<B: FusedOps, C: CheckpointStrategy>(
    p: FloatTensor<Autodiff<B, C>>,
    v: FloatTensor<Autodiff<B, C>>,
    causal: Option<usize>,
) -> FloatTensor<Autodiff<B, C>> {
    #[derive(Debug)]
    struct ContextBackward(Option<usize>);

    impl<B: FusedOps> Backward<B, 2> for ContextBackward {
        /// `V` where `P̃` is tracked, `P̃` where `V` is.
        type State = (Option<FloatTensor<B>>, Option<FloatTensor<B>>);

        fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
            let (v, p) = ops.state;
            let offset = self.0;
            let output = offset.map_or(Triangle::Full, Triangle::Output);
            let upper = offset.map_or(Triangle::Full, Triangle::UpperA);
            binary::<B, _, _>(
                ops.parents,
                ops.node,
                grads,
                |dc| {
                    let v = transposed::<B>(v.expect("kept for a tracked P̃"));
                    B::fused_product_shaped(dc, v, ProductShape::new(output, false))
                },
                |dc| {
                    B::fused_product_shaped(
                        transposed::<B>(p.expect("kept for a tracked V")),
                        dc,
                        ProductShape::new(upper, true),
                    )
                },
            );
        }
    }

    let (p_tracked, v_tracked) = (p.is_tracked(), v.is_tracked());
    let forward = |p, v| B::fused_attention_context(p, v, causal);
    match ContextBackward(causal).prepare::<C>([p.node.clone(), v.node.clone()]).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let state = (p_tracked.then(|| v.primitive.clone()), v_tracked.then(|| p.primitive.clone()));
            prep.finish(state, forward(p.primitive, v.primitive))
        }
        OpsKind::UnTracked(prep) => prep.finish(forward(p.primitive, v.primitive)),
    }
}
