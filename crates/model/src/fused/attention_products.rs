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

/// Which product [`on`] runs.
#[derive(Clone, Copy)]
enum Which {
    Scores(Option<usize>),
    Context(Option<usize>),
    Shaped(ProductShape),
}

/// `Q·Kᵀ`: attention's raw scores, `[batch, heads, queries, keys]`, from `q`: `[batch, heads,
/// queries, d]` and `k`: `[batch, heads, keys, d]`. `causal`: the offset of a causal mask
/// that the weights will apply (the entries above its diagonal may then be left 0).
pub fn attention_scores<B: Backend>(q: Tensor<B, 4>, k: Tensor<B, 4>, causal: Option<usize>) -> Tensor<B, 4> {
    let kt = k.clone().swap_dims(2, 3);
    match super::products::kernels_taking::<B, 4>(&q, &kt) {
        Some(kernels) => on(kernels, Which::Scores(causal), q, k),
        None => q.matmul(kt),
    }
}

/// `P̃·V`: attention's context, `[batch, heads, queries, d_v]`, from the weights `p`
/// (`[batch, heads, queries, keys]`, zero at the keys a causal mask of offset `causal` masks)
/// and `v`: `[batch, heads, keys, d_v]`.
pub fn attention_context<B: Backend>(p: Tensor<B, 4>, v: Tensor<B, 4>, causal: Option<usize>) -> Tensor<B, 4> {
    match super::products::kernels_taking::<B, 4>(&p, &v) {
        Some(kernels) => on(kernels, Which::Context(causal), p, v),
        None => p.matmul(v),
    }
}

/// `a·b` under `shape` (rank 4, attention's per-head products) on `B`: our kernel where it
/// takes the product ([`super::products::matmul`]'s rule), else [`super::product_shape`]'s
/// composed reference (Burn's product and masks). For `bench products`, which times the
/// backward's products alone too.
pub fn product_shaped<B: Backend>(a: Tensor<B, 4>, b: Tensor<B, 4>, shape: ProductShape) -> Tensor<B, 4> {
    match super::products::kernels_taking::<B, 4>(&a, &b) {
        Some(kernels) => on(kernels, Which::Shaped(shape), a, b),
        None => super::product_shape::composed(a, b, shape),
    }
}

/// `which` by the backend `kernels` names (`B` itself); Burn's operations for a backend
/// without our kernels, which [`super::products::kernels_taking`] never names.
fn on<B: Backend>(kernels: Kernels, which: Which, a: Tensor<B, 4>, b: Tensor<B, 4>) -> Tensor<B, 4> {
    fn with<B: Backend, K: FusedOps>(which: Which, a: Tensor<B, 4>, b: Tensor<B, 4>) -> Tensor<B, 4> {
        let a = same::<Tensor<B, 4>, Tensor<K, 4>>(a).into_primitive().tensor();
        let b = same::<Tensor<B, 4>, Tensor<K, 4>>(b).into_primitive().tensor();
        let c = match which {
            Which::Scores(causal) => K::fused_attention_scores(a, b, causal),
            Which::Context(causal) => K::fused_attention_context(a, b, causal),
            Which::Shaped(shape) => K::fused_product_shaped(a, b, shape),
        };
        same(Tensor::<K, 4>::from_primitive(TensorPrimitive::Float(c)))
    }
    super::on_kernels!(@match kernels, K => with::<B, K>(which, a, b), _ => match which {
        Which::Scores(_) => a.matmul(b.swap_dims(2, 3)),
        Which::Context(_) => a.matmul(b),
        Which::Shaped(shape) => super::product_shape::composed(a, b, shape),
    })
}

fn transposed<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_swap_dims(x, 2, 3)
}

/// Both operands, each kept where the other is tracked (its gradient reads it).
type Kept<B> = (Option<FloatTensor<B>>, Option<FloatTensor<B>>);

/// The autodiff step `backward` over `forward(a, b)`, keeping `b` where `a` is tracked and `a`
/// where `b` is (the state both steps below read as `(b, a)`).
fn step<B: FusedOps, C: CheckpointStrategy>(
    backward: impl Backward<B, 2, State = Kept<B>>,
    a: FloatTensor<Autodiff<B, C>>,
    b: FloatTensor<Autodiff<B, C>>,
    forward: impl FnOnce(FloatTensor<B>, FloatTensor<B>) -> FloatTensor<B>,
) -> FloatTensor<Autodiff<B, C>> {
    let (a_tracked, b_tracked) = (a.is_tracked(), b.is_tracked());
    match backward.prepare::<C>([a.node.clone(), b.node.clone()]).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let state = (a_tracked.then(|| b.primitive.clone()), b_tracked.then(|| a.primitive.clone()));
            prep.finish(state, forward(a.primitive, b.primitive))
        }
        OpsKind::UnTracked(prep) => prep.finish(forward(a.primitive, b.primitive)),
    }
}

/// [`FusedProducts::fused_attention_scores`](super::FusedProducts::fused_attention_scores) on `Autodiff<B, C>`: one step, `dQ = tril(dX)·K` and
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
        type State = Kept<B>;

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

    step::<B, C>(ScoresBackward(causal), q, k, |q, k| B::fused_attention_scores(q, k, causal))
}

/// [`FusedProducts::fused_attention_context`](super::FusedProducts::fused_attention_context) on `Autodiff<B, C>`: one step, `dP̃ = tril(dC·Vᵀ)` and
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
        type State = Kept<B>;

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

    step::<B, C>(ContextBackward(causal), p, v, |p, v| B::fused_attention_context(p, v, causal))
}
