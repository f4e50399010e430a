//! A linear map's autodiff step (`FusedOps::fused_linear` under `Autodiff`): `B`'s map
//! forward, keeping the input (as the matrix of its rows) and the weight; backward `dx`,
//! `dW` and `db` by `B`'s backward kernel, or, inside [`super::overlap::backward`] on a
//! backend that [defers](super::FusedOps::defers_weight_gradients) them, `dx` at once and
//! `dW`, `db` in a job beside the rest of the pass.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::autodiff::NodeId;
use burn::backend::Autodiff;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Shape, TensorMetadata};
use std::sync::Arc;

use super::{overlap, reshaped, FusedOps, Weight};

/// Parents `[x, W]` or `[x, W, b]`.
#[derive(Debug)]
struct LinearBackward;

impl<B: FusedOps, const N: usize> Backward<B, N> for LinearBackward {
    /// The input as [`FusedOps::linear_rows`] gives it, its own shape, the weight and its
    /// layout.
    type State = (FloatTensor<B>, Shape, FloatTensor<B>, Weight);

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (x, shape, weight, layout) = ops.state;
        let grad = grads.consume::<B>(&ops.node);
        let with_bias = N == 3;
        let ids = ops.parents.each_ref().map(|p| p.as_ref().map(|node| node.id));
        // `dx` registered as the input's gradient, added to the gradient the input already has
        // (a tensor read by several maps: the encoder's output by every decoder layer's keys
        // and values) by `FusedOps::fused_add`: on the CPU over the buffer of one of the two,
        // where `Gradients::register` would sum them into a new one (2.2% of a Multi30k step).
        // The same sum, the same bits (IEEE addition is commutative).
        let first = &ops.parents[0];
        let register_dx = |dx: FloatTensor<B>, grads: &mut Gradients| {
            let Some(parent) = first else { return };
            let pending = {
                // A tensor of the parent's node to look its gradient up by, dropped before the
                // sum so that `dx` is unshared again.
                let probe =
                    FloatTensor::<Autodiff<B>> { primitive: dx.clone(), node: parent.clone(), rc: Arc::new(parent.id) };
                grads.remove::<B>(&probe)
            };
            let dx = match pending {
                Some(pending) if pending.shape() == dx.shape() => B::fused_add(pending, dx),
                // Never seen (a node's gradients have its shape), but Burn's sum broadcasts.
                Some(pending) => B::float_add(pending, dx),
                None => dx,
            };
            grads.register::<B>(parent.id, dx);
        };
        // The weight's (and bias's) gradient left to a job: only parameters' (leaves, nodes
        // without parents), only where a job pays, and not an embedding's used as the output
        // layer (`OutIn`): its gradient is summed with the lookups' (three of them where a
        // translation model ties both embeddings), and registered last it would be summed in
        // another order, other bits.
        let later = B::defers_weight_gradients()
            && layout == Weight::InOut
            && overlap::may_defer(ops.parents[1..].iter().map(|p| p.as_ref().map(|node| node.parents.is_empty())));
        if !later {
            let (dx, dw, db) = B::fused_linear_backward(x, weight, grad, layout, with_bias);
            register_dx(reshaped::<B>(dx, shape), grads);
            let mut weights = ids;
            weights[0] = None;
            register_some::<B, N>(weights, [None, Some(dw), db], grads);
            return;
        }
        if ops.parents[0].is_some() {
            let dx = reshaped::<B>(B::fused_linear_input_backward(weight, grad.clone(), layout), shape);
            register_dx(dx, grads);
        }
        overlap::defer(move || {
            let (dw, db) = B::fused_linear_weight_backward(x, grad, layout, with_bias);
            Box::new(move |grads: &mut Gradients| {
                let mut weights = ids;
                weights[0] = None;
                register_some::<B, N>(weights, [None, Some(dw), db], grads)
            })
        });
    }
}

/// `x·W (+ b)` on `Autodiff<B, C>`, tracked where any input is.
pub(super) fn tracked<B: FusedOps, C: CheckpointStrategy>(
    x: FloatTensor<Autodiff<B, C>>,
    weight: FloatTensor<Autodiff<B, C>>,
    bias: Option<FloatTensor<Autodiff<B, C>>>,
    layout: Weight,
) -> FloatTensor<Autodiff<B, C>> {
    fn run<B: FusedOps, C: CheckpointStrategy, const N: usize>(
        inputs: [&FloatTensor<Autodiff<B, C>>; N],
        layout: Weight,
    ) -> FloatTensor<Autodiff<B, C>> {
        let (x, weight) = (inputs[0].primitive.clone(), inputs[1].primitive.clone());
        let bias = inputs.get(2).map(|b| b.primitive.clone());
        let nodes = inputs.map(|t| t.node.clone());
        let shape = x.shape();
        // The output in the input's rank, `[…, d_out]`.
        let out_shape = |y: &FloatTensor<B>| {
            let mut out = shape.clone();
            let last = out.num_dims() - 1;
            out[last] = y.shape()[y.shape().num_dims() - 1];
            out
        };
        match <LinearBackward as Backward<B, N>>::prepare::<C>(LinearBackward, nodes).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let rows = B::linear_rows(x);
                // Where the rows are a matrix the output is reshaped back to the input's rank,
                // and the bias is added after that reshape: under burn-fusion the sum then joins
                // what follows it (activation, dropout, residual), where added to the matrix it
                // ran as a kernel of its own (the same values).
                let (inside, after) =
                    if rows.shape().num_dims() == shape.num_dims() { (bias, None) } else { (None, bias) };
                let y = B::fused_linear(rows.clone(), weight.clone(), inside, layout);
                let out = out_shape(&y);
                let mut y = reshaped::<B>(y, out.clone());
                if let Some(b) = after {
                    y = B::float_add(y, B::float_reshape(b, super::composed_norm::wide(&out)));
                }
                prep.finish((rows, shape, weight, layout), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::fused_linear(x, weight, bias, layout)),
        }
    }

    match &bias {
        Some(bias) => run::<B, C, 3>([&x, &weight, bias], layout),
        None => run::<B, C, 2>([&x, &weight], layout),
    }
}

/// Registers `found[i]` as the gradient of the `i`-th parent where the parent is tracked and
/// there is a gradient (a map without bias has none for it).
/// (Also the other steps of `autodiff.rs` with several parents.)
pub(super) fn register_some<B: FusedOps, const N: usize>(
    parents: [Option<NodeId>; N],
    found: [Option<FloatTensor<B>>; 3],
    grads: &mut Gradients,
) {
    for (parent, grad) in parents.into_iter().zip(found) {
        if let (Some(id), Some(grad)) = (parent, grad) {
            grads.register::<B>(id, grad);
        }
    }
}
