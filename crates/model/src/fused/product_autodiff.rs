//! A matrix product's autodiff step (`FusedProducts::fused_product` under `Autodiff`): `B`'s
//! product forward, and `dA = dC·Bᵀ`, `dB = Aᵀ·dC` by the same product backward.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{binary, Backward, Ops, OpsKind};
use burn::backend::Autodiff;
use burn::tensor::ops::FloatTensor;
use burn::tensor::TensorMetadata;

use super::FusedOps;

/// `a·b` over the last two axes on `Autodiff<B, C>`, tracked where either operand is.
pub(super) fn tracked<B: FusedOps, C: CheckpointStrategy>(
    a: FloatTensor<Autodiff<B, C>>,
    b: FloatTensor<Autodiff<B, C>>,
) -> FloatTensor<Autodiff<B, C>> {
    /// `C = A·B` over the last two axes: `dA = dC·Bᵀ`, `dB = Aᵀ·dC`, each by `B`'s product
    /// with a transposed view for an operand. The batch axes must be alike (no gradient is
    /// summed over a broadcast axis): [`super::products::matmul`] sends no other.
    #[derive(Debug)]
    struct ProductBackward;

    impl<B: FusedOps> Backward<B, 2> for ProductBackward {
        /// `A` where `B` is tracked (for `dB`), `B` where `A` is (for `dA`).
        type State = (Option<FloatTensor<B>>, Option<FloatTensor<B>>);

        fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
            let (a, b) = ops.state;
            let transposed = |x: Option<FloatTensor<B>>| {
                let x = x.expect("kept for a tracked parent");
                let rank = x.shape().num_dims();
                B::float_swap_dims(x, rank - 2, rank - 1)
            };
            binary::<B, _, _>(
                ops.parents,
                ops.node,
                grads,
                |grad| B::fused_product(grad, transposed(b)),
                |grad| B::fused_product(transposed(a), grad),
            );
        }
    }

    let (a_tracked, b_tracked) = (a.is_tracked(), b.is_tracked());
    match ProductBackward.prepare::<C>([a.node.clone(), b.node.clone()]).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let state = (b_tracked.then(|| a.primitive.clone()), a_tracked.then(|| b.primitive.clone()));
            prep.finish(state, B::fused_product(a.primitive, b.primitive))
        }
        OpsKind::UnTracked(prep) => prep.finish(B::fused_product(a.primitive, b.primitive)),
    }
}
