//! Attention's weights with dropout on them, as one operation: from the raw scores `X = QKᵀ`
//! (`[batch, heads, queries, keys]`), `P = softmax(s·X)` with masked keys at `MASKED_SCORE`,
//! and `P̃ = P ⊙ m / keep`, `m` a Bernoulli(keep) draw per weight; the backward, from
//! `dP̃`: `dP = dP̃ ⊙ m / keep`, `dX = s·P ⊙ (dP − Σ_keys dP ⊙ P)`, 0 at masked keys. `P` is
//! handed out for heat maps (untracked, as [`super::attention`]'s), `P̃` goes on to `P̃·V`.
//!
//! On the GPU backends with kernels (`ATTEND_GPU_KERNELS`: with burn-fusion or without under
//! `auto`, `attention` and `all`; only without it under `composed`) it is one CubeCL row kernel each way
//! (`cube/attention_weights.rs`, which draws `m` from a key and says why the backward needs
//! no draw). Everywhere else, the CPU included, it is [`composed`]: the scale, the mask,
//! [`softmax_last`] and [`dropout`](super::dropout), the operations attention ran before, with
//! their bits.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{unary, Backward, Ops, OpsKind};
use burn::backend::Autodiff;
use burn::nn::Dropout;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::ops::{BoolTensor, FloatTensor, IntTensor};
use burn::tensor::{Bool, Distribution, Int, Tensor, TensorPrimitive};

use super::dispatch::{is_cpu_backend, same};
use super::{softmax_last, FusedOps};
use crate::mask::MASKED_SCORE;

/// The key's two draws are below this (24 bits: exact in an `f32` and an `i32`).
const KEY_RANGE: f64 = 16_777_216.0;

/// `[P, P̃]`: attention's weights of the raw scores `scores` (`[batch, heads, queries,
/// keys]`, before the scale `scale`) under `mask` (broadcastable to that shape, `true` = may
/// not attend), and the weights after `dropout` (in training, on a backend with autodiff).
pub fn attention_weights<B: Backend>(
    scores: Tensor<B, 4>,
    mask: Option<Tensor<B, 4, Bool>>,
    scale: f64,
    dropout: &Dropout,
) -> [Tensor<B, 4>; 2] {
    if dropout.prob == 0.0 || !B::ad_enabled(&scores.device()) || is_cpu_backend::<B>() {
        return composed(scores, mask, scale, dropout);
    }
    fn on<B: Backend, K: FusedOps>(
        scores: Tensor<B, 4>,
        mask: Option<Tensor<B, 4, Bool>>,
        scale: f64,
        keep: f64,
    ) -> [Tensor<B, 4>; 2] {
        let key = Tensor::<B, 1, Int>::random([2], Distribution::Uniform(0.0, KEY_RANGE), &scores.device());
        let key = same::<Tensor<B, 1, Int>, Tensor<K, 1, Int>>(key).into_primitive();
        let scores = same::<Tensor<B, 4>, Tensor<K, 4>>(scores).into_primitive().tensor();
        let mask = mask.map(|m| same::<Tensor<B, 4, Bool>, Tensor<K, 4, Bool>>(m).into_primitive());
        K::fused_attention_weights(scores, mask, key, scale, keep)
            .map(|t| same(Tensor::<K, 4>::from_primitive(TensorPrimitive::Float(t))))
    }
    let keep = 1.0 - dropout.prob;
    super::on_kernels!(weights B, K => on::<B, K>(scores, mask, scale, keep), _ => composed(scores, mask, scale, dropout))
}

/// `[P, P̃]` composed of the operations attention runs without the kernels.
pub(super) fn composed<B: Backend>(
    scores: Tensor<B, 4>,
    mask: Option<Tensor<B, 4, Bool>>,
    scale: f64,
    dropout: &Dropout,
) -> [Tensor<B, 4>; 2] {
    let [batch, heads, queries, keys] = scores.dims();
    let mut scores = scores.mul_scalar(scale);
    if let Some(mask) = mask {
        scores = scores.mask_fill(mask.expand([batch, heads, queries, keys]), MASKED_SCORE);
    }
    let weights = softmax_last(scores);
    let dropped = super::dropout(dropout, weights.clone());
    [weights, dropped]
}

fn float<B: Backend>(t: FloatTensor<B>) -> Tensor<B, 4> {
    Tensor::from_primitive(TensorPrimitive::Float(t))
}

/// `mask` expanded to `like`'s shape.
fn expanded<B: Backend>(mask: BoolTensor<B>, like: &Tensor<B, 4>) -> Tensor<B, 4, Bool> {
    Tensor::<B, 4, Bool>::from_primitive(mask).expand(like.dims())
}

/// [`FusedOps::fused_attention_weights`]' default: the composed softmax, and Burn's Bernoulli
/// draw for the mask (the key is for the kernels' own draw).
pub(super) fn default_forward<B: Backend>(
    scores: FloatTensor<B>,
    mask: Option<BoolTensor<B>>,
    scale: f64,
    keep: f64,
) -> [FloatTensor<B>; 2] {
    let mut scores = float::<B>(scores).mul_scalar(scale);
    if let Some(mask) = mask {
        let mask = expanded(mask, &scores);
        scores = scores.mask_fill(mask, MASKED_SCORE);
    }
    let weights = burn::tensor::activation::softmax(scores, 3);
    let draw = weights.random_like(Distribution::Bernoulli(keep));
    let dropped = weights.clone() * draw.mul_scalar(1.0 / keep);
    [weights, dropped].map(|t| t.into_primitive().tensor())
}

/// [`FusedOps::fused_attention_weights_backward`]' default, composed.
pub(super) fn default_backward<B: Backend>(
    weights: FloatTensor<B>,
    dropped: FloatTensor<B>,
    grad: FloatTensor<B>,
    mask: Option<BoolTensor<B>>,
    scale: f64,
    keep: f64,
) -> FloatTensor<B> {
    let (weights, dropped, grad) = (float::<B>(weights), float::<B>(dropped), float::<B>(grad));
    let dp = grad.mask_fill(dropped.lower_equal_elem(0.0), 0.0).mul_scalar(1.0 / keep);
    let mut ds = (weights.clone() * (dp.clone() - (dp * weights).sum_dim(3))).mul_scalar(scale);
    if let Some(mask) = mask {
        let mask = expanded(mask, &ds);
        ds = ds.mask_fill(mask, 0.0);
    }
    ds.into_primitive().tensor()
}

/// The operation under autodiff: `B`'s forward, and a backward step that runs `B`'s backward
/// from `P`, `P̃` and the mask (kept); `P` comes back untracked.
pub(super) fn tracked<B: FusedOps, C: CheckpointStrategy>(
    scores: FloatTensor<Autodiff<B, C>>,
    mask: Option<BoolTensor<Autodiff<B, C>>>,
    key: IntTensor<Autodiff<B, C>>,
    scale: f64,
    keep: f64,
) -> [FloatTensor<Autodiff<B, C>>; 2] {
    #[derive(Debug)]
    struct WeightsBackward;

    impl<B: FusedOps> Backward<B, 1> for WeightsBackward {
        /// `P`, `P̃`, the mask, the scale and the keep probability.
        type State = ([FloatTensor<B>; 2], Option<BoolTensor<B>>, f64, f64);

        fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
            let ([weights, dropped], mask, scale, keep) = ops.state;
            unary::<B, _>(ops.parents, ops.node, grads, |grad| {
                B::fused_attention_weights_backward(weights, dropped, grad, mask, scale, keep)
            });
        }
    }

    let node = scores.node.clone();
    match WeightsBackward.prepare::<C>([node]).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let [weights, dropped] = B::fused_attention_weights(scores.primitive, mask.clone(), key, scale, keep);
            let untracked = Autodiff::<B, C>::from_inner(weights.clone());
            [untracked, prep.finish(([weights, dropped.clone()], mask, scale, keep), dropped)]
        }
        OpsKind::UnTracked(prep) => {
            let [weights, dropped] = B::fused_attention_weights(scores.primitive, mask, key, scale, keep);
            [Autodiff::<B, C>::from_inner(weights), prep.finish(dropped)]
        }
    }
}
