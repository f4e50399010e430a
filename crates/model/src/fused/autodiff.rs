//! The fused operations under autodiff: `Autodiff<B>` runs `B`'s forward kernel and
//! registers a backward step that runs `B`'s backward kernel (Burn's custom-operation
//! mechanism: a [`Backward`] step prepared on the input's node). What the backward needs is
//! kept from the forward: the input for GELU, the output for the softmax.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{unary, Backward, Ops, OpsKind};
use burn::backend::Autodiff;
use burn::tensor::ops::FloatTensor;

use super::FusedOps;

impl<B: FusedOps, C: CheckpointStrategy> FusedOps for Autodiff<B, C> {
    fn fused_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct GeluBackward;

        impl<B: FusedOps> Backward<B, 1> for GeluBackward {
            /// The input `x`.
            type State = FloatTensor<B>;

            fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
                let x = ops.state;
                unary::<B, _>(ops.parents, ops.node, grads, |grad| B::fused_gelu_backward(x, grad));
            }
        }

        match GeluBackward.prepare::<C>([x.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let out = B::fused_gelu(x.primitive.clone());
                prep.finish(x.primitive, out)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::fused_gelu(x.primitive)),
        }
    }

    fn fused_softmax_last(x: FloatTensor<Self>) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct SoftmaxBackward;

        impl<B: FusedOps> Backward<B, 1> for SoftmaxBackward {
            /// The output `y`.
            type State = FloatTensor<B>;

            fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
                let y = ops.state;
                unary::<B, _>(ops.parents, ops.node, grads, |grad| B::fused_softmax_last_backward(y, grad));
            }
        }

        match SoftmaxBackward.prepare::<C>([x.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let out = B::fused_softmax_last(x.primitive);
                prep.finish(out.clone(), out)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::fused_softmax_last(x.primitive)),
        }
    }
}
