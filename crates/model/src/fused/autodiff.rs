//! The fused operations under autodiff: `Autodiff<B>` runs `B`'s forward kernel and
//! registers a backward step that runs `B`'s backward kernel (Burn's custom-operation
//! mechanism: a [`Backward`] step prepared on the input's node). What the backward needs is
//! kept from the forward: for GELU its derivative where the backend computes it with the
//! forward (the CPU), else the input; the output for the softmax; the input and `γ`
//! for the LayerNorm (whose backward recomputes mean and deviation instead of keeping them);
//! `Q`, `K`, `V` (or their packed rows) and the weights for attention; `P`, `P̃` and the mask for
//! attention's weights with dropout (its step in `attention_weights.rs`); the input and weight for the linear map (its step in `linear_autodiff.rs`, a product's in `product_autodiff.rs`); the
//! logits and targets for the cross-entropy; the indices for a token lookup; the input's
//! shape for a reshape. The composed
//! LayerNorm ([`FusedOps::composed_layer_norm`]) runs `B`'s own operations forward and its
//! closed-form backward ([`composed_norm`]), keeping `x̂`, `1/σ` and `γ`.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use std::sync::Arc;

use burn::backend::autodiff::ops::{binary, unary, Backward, Ops, OpsKind};
use burn::backend::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::{BoolTensor, FloatTensor, IntTensor};
use burn::tensor::TensorMetadata;

use super::linear_autodiff::register_some;
use super::{composed_norm, FusedOps, FusedProducts, Packing, Weight};

impl<B: FusedOps, C: CheckpointStrategy> FusedProducts for Autodiff<B, C> {
    fn fused_product(a: FloatTensor<Self>, b: FloatTensor<Self>) -> FloatTensor<Self> {
        super::product_autodiff::tracked::<B, C>(a, b)
    }

    fn fused_attention_scores(q: FloatTensor<Self>, k: FloatTensor<Self>, causal: Option<usize>) -> FloatTensor<Self> {
        super::attention_products::scores::<B, C>(q, k, causal)
    }

    fn fused_attention_context(p: FloatTensor<Self>, v: FloatTensor<Self>, causal: Option<usize>) -> FloatTensor<Self> {
        super::attention_products::context::<B, C>(p, v, causal)
    }
}

impl<B: FusedOps, C: CheckpointStrategy> FusedOps for Autodiff<B, C> {
    fn fused_reshape(x: FloatTensor<Self>, shape: burn::tensor::Shape) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct ReshapeBackward;

        impl<B: FusedOps> Backward<B, 1> for ReshapeBackward {
            /// The input's shape.
            type State = burn::tensor::Shape;

            fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
                let shape = ops.state;
                unary::<B, _>(ops.parents, ops.node, grads, |grad| B::fused_reshape(grad, shape));
            }
        }

        match ReshapeBackward.prepare::<C>([x.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let input = x.primitive.shape();
                prep.finish(input, B::fused_reshape(x.primitive, shape))
            }
            OpsKind::UnTracked(prep) => prep.finish(B::fused_reshape(x.primitive, shape)),
        }
    }

    fn fused_add(a: FloatTensor<Self>, b: FloatTensor<Self>) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct AddBackward;

        impl<B: FusedOps> Backward<B, 2> for AddBackward {
            type State = ();

            fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
                binary::<B, _, _>(ops.parents, ops.node, grads, |grad| grad, |grad| grad);
            }
        }

        match AddBackward.prepare::<C>([a.node.clone(), b.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish((), B::fused_add(a.primitive, b.primitive)),
            OpsKind::UnTracked(prep) => prep.finish(B::fused_add(a.primitive, b.primitive)),
        }
    }

    fn fused_relu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct ReluBackward;

        impl<B: FusedOps> Backward<B, 1> for ReluBackward {
            /// The output `y`.
            type State = FloatTensor<B>;

            fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
                let y = ops.state;
                unary::<B, _>(ops.parents, ops.node, grads, |grad| B::fused_relu_backward(y, grad));
            }
        }

        match ReluBackward.prepare::<C>([x.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let y = B::fused_relu(x.primitive);
                prep.finish(y.clone(), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::fused_relu(x.primitive)),
        }
    }

    fn fused_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct GeluBackward;

        impl<B: FusedOps> Backward<B, 1> for GeluBackward {
            /// The derivative where the forward kept it (`Ok`), else the input `x` (`Err`).
            type State = Result<FloatTensor<B>, FloatTensor<B>>;

            fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
                unary::<B, _>(ops.parents, ops.node, grads, |grad| match ops.state {
                    Ok(derivative) => B::fused_gelu_backward_from_derivative(derivative, grad),
                    Err(x) => B::fused_gelu_backward(x, grad),
                });
            }
        }

        match GeluBackward.prepare::<C>([x.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                // `x` handed over alone: the kernel may write the output over it.
                let (out, kept) = B::fused_gelu_keeping(x.primitive);
                prep.finish(kept, out)
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

    fn fused_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        /// Parents `[x, γ]` or `[x, γ, β]`.
        #[derive(Debug)]
        struct LayerNormBackward;

        impl<B: FusedOps, const N: usize> Backward<B, N> for LayerNormBackward {
            /// The input `x`, `γ`, `ε` and the moments the forward kept, if it did.
            type State = (FloatTensor<B>, FloatTensor<B>, f64, Option<FloatTensor<B>>);

            fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
                let (x, gamma, epsilon, moments) = ops.state;
                let grad = grads.consume::<B>(&ops.node);
                // The input's gradient from its other uses (the residual stream's, registered
                // first: the sum that reads it is later in the forward), added by the kernel.
                let pending = ops.parents[0].as_ref().and_then(|node| {
                    let probe = FloatTensor::<Autodiff<B>> {
                        primitive: grad.clone(),
                        node: node.clone(),
                        rc: Arc::new(node.id),
                    };
                    grads.remove::<B>(&probe)
                });
                let found = match (moments, pending) {
                    (Some(moments), pending) => {
                        B::fused_layer_norm_backward_kept(x, gamma, moments, grad, epsilon, pending)
                    }
                    (None, Some(pending)) => B::fused_layer_norm_backward_adding(x, gamma, grad, epsilon, pending),
                    (None, None) => B::fused_layer_norm_backward(x, gamma, grad, epsilon),
                };
                register_some::<B, N>(
                    ops.parents.each_ref().map(|p| p.as_ref().map(|node| node.id)),
                    found.map(Some),
                    grads,
                );
            }
        }

        /// The forward on `[x, γ]` or `[x, γ, β]`, tracked when any of them is.
        fn run<B: FusedOps, C: CheckpointStrategy, const N: usize>(
            inputs: [&FloatTensor<Autodiff<B, C>>; N],
            epsilon: f64,
        ) -> FloatTensor<Autodiff<B, C>> {
            let (x, gamma) = (inputs[0].primitive.clone(), inputs[1].primitive.clone());
            let beta = inputs.get(2).map(|b| b.primitive.clone());
            let nodes = inputs.map(|t| t.node.clone());
            match <LayerNormBackward as Backward<B, N>>::prepare::<C>(LayerNormBackward, nodes)
                .compute_bound()
                .stateful()
            {
                OpsKind::Tracked(prep) => {
                    let (out, moments) = B::fused_layer_norm_keeping(x.clone(), gamma.clone(), beta, epsilon);
                    prep.finish((x, gamma, epsilon, moments), out)
                }
                OpsKind::UnTracked(prep) => prep.finish(B::fused_layer_norm(x, gamma, beta, epsilon)),
            }
        }

        match &beta {
            Some(beta) => run::<B, C, 3>([&x, &gamma, beta], epsilon),
            None => run::<B, C, 2>([&x, &gamma], epsilon),
        }
    }

    fn composed_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        /// Parents `[x, γ]` or `[x, γ, β]`.
        #[derive(Debug)]
        struct ComposedNormBackward;

        impl<B: FusedOps, const N: usize> Backward<B, N> for ComposedNormBackward {
            /// `x̂`, `1/σ` (the normalized axis of size one) and `γ`.
            type State = [FloatTensor<B>; 3];

            fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
                let [normalized, rstd, gamma] = ops.state;
                let grad = grads.consume::<B>(&ops.node);
                let (dx, dgamma, dbeta) = composed_norm::backward::<B>(normalized, rstd, gamma, grad, N == 3);
                register_some::<B, N>(
                    ops.parents.each_ref().map(|p| p.as_ref().map(|node| node.id)),
                    [Some(dx), Some(dgamma), dbeta],
                    grads,
                );
            }
        }

        fn run<B: FusedOps, C: CheckpointStrategy, const N: usize>(
            inputs: [&FloatTensor<Autodiff<B, C>>; N],
            epsilon: f64,
        ) -> FloatTensor<Autodiff<B, C>> {
            let (x, gamma) = (inputs[0].primitive.clone(), inputs[1].primitive.clone());
            let beta = inputs.get(2).map(|b| b.primitive.clone());
            let nodes = inputs.map(|t| t.node.clone());
            match <ComposedNormBackward as Backward<B, N>>::prepare::<C>(ComposedNormBackward, nodes)
                .compute_bound()
                .stateful()
            {
                OpsKind::Tracked(prep) => {
                    let [out, normalized, rstd] = composed_norm::forward::<B>(x, gamma.clone(), beta, epsilon);
                    prep.finish([normalized, rstd, gamma], out)
                }
                OpsKind::UnTracked(prep) => prep.finish(B::layer_norm(x, gamma, beta, epsilon)),
            }
        }

        match &beta {
            Some(beta) => run::<B, C, 3>([&x, &gamma, beta], epsilon),
            None => run::<B, C, 2>([&x, &gamma], epsilon),
        }
    }

    fn fused_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: Option<BoolTensor<Self>>,
        scale: f64,
    ) -> [FloatTensor<Self>; 2] {
        #[derive(Debug)]
        struct AttentionBackward;

        impl<B: FusedOps> Backward<B, 3> for AttentionBackward {
            /// `Q`, `K`, `V`, the weights `P` and the scale.
            type State = ([FloatTensor<B>; 4], f64);

            fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
                let ([q, k, v, weights], scale) = ops.state;
                let grad = grads.consume::<B>(&ops.node);
                let found = B::fused_attention_backward(q, k, v, weights, grad, scale);
                register_some::<B, 3>(
                    ops.parents.each_ref().map(|p| p.as_ref().map(|node| node.id)),
                    found.map(Some),
                    grads,
                );
            }
        }

        let nodes = [q.node.clone(), k.node.clone(), v.node.clone()];
        let (q, k, v) = (q.primitive, k.primitive, v.primitive);
        match AttentionBackward.prepare::<C>(nodes).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let [context, weights] = B::fused_attention(q.clone(), k.clone(), v.clone(), mask, scale);
                let untracked = Self::from_inner(weights.clone());
                [prep.finish(([q, k, v, weights], scale), context), untracked]
            }
            OpsKind::UnTracked(prep) => {
                let [context, weights] = B::fused_attention(q, k, v, mask, scale);
                [prep.finish(context), Self::from_inner(weights)]
            }
        }
    }

    fn fused_attention_weights(
        scores: FloatTensor<Self>,
        mask: Option<BoolTensor<Self>>,
        key: IntTensor<Self>,
        scale: f64,
        keep: f64,
    ) -> [FloatTensor<Self>; 2] {
        super::attention_weights::tracked::<B, C>(scores, mask, key, scale, keep)
    }

    fn fused_attention_packed(
        qkv: FloatTensor<Self>,
        packing: Packing,
        mask: Option<BoolTensor<Self>>,
        scale: f64,
    ) -> [FloatTensor<Self>; 2] {
        super::attention_packed::tracked::<B, C>(qkv, packing, mask, scale)
    }

    fn fused_linear(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        layout: Weight,
    ) -> FloatTensor<Self> {
        super::linear_autodiff::tracked::<B, C>(x, weight, bias, layout)
    }

    fn fused_cross_entropy(logits: FloatTensor<Self>, targets: IntTensor<Self>, smoothing: f64) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct CrossEntropyBackward;

        impl<B: FusedOps> Backward<B, 1> for CrossEntropyBackward {
            /// The logits, the targets, the rows' `ln Σ e^z` where the forward kept them, and
            /// the smoothing.
            type State = (FloatTensor<B>, IntTensor<B>, Option<FloatTensor<B>>, f64);

            fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
                let (logits, targets, kept, smoothing) = ops.state;
                unary::<B, _>(ops.parents, ops.node, grads, |grad| {
                    B::fused_cross_entropy_backward_from(logits, targets, kept, grad, smoothing)
                });
            }
        }

        match CrossEntropyBackward.prepare::<C>([logits.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (out, kept) = B::fused_cross_entropy_keeping(logits.primitive.clone(), targets.clone(), smoothing);
                prep.finish((logits.primitive, targets, kept, smoothing), out)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::fused_cross_entropy(logits.primitive, targets, smoothing)),
        }
    }

    fn fused_embedding(weight: FloatTensor<Self>, indices: IntTensor<Self>) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct EmbeddingBackward;

        impl<B: FusedOps> Backward<B, 1> for EmbeddingBackward {
            /// The indices and the vocabulary size.
            type State = (IntTensor<B>, usize);

            fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
                let (indices, vocab) = ops.state;
                unary::<B, _>(ops.parents, ops.node, grads, |grad| B::fused_embedding_backward(vocab, indices, grad));
            }
        }

        match EmbeddingBackward.prepare::<C>([weight.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let vocab = weight.primitive.shape()[0];
                let out = B::fused_embedding(weight.primitive, indices.clone());
                prep.finish((indices, vocab), out)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::fused_embedding(weight.primitive, indices)),
        }
    }
}
