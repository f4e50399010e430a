//! The training objective: cross-entropy with optional label smoothing and position weights.
//!
//! With smoothing ε (paper section 5.4: ε_ls = 0.1) the target distribution puts `1 − ε` on the
//! true token and spreads `ε` uniformly over the vocabulary, so the per-position loss is
//! `(1 − ε)·(−log p(y)) + ε·mean_v(−log p(v))`. The plain negative log-likelihood `−log p(y)`
//! is returned beside it: it is what perplexity is made of, whatever the smoothing. Both come
//! from one fused operation (`attend_model::fused::cross_entropy`: one pass over the logits
//! forward and one backward on the CPU backend, composed elsewhere).

use burn::tensor::backend::Backend;
use burn::tensor::{DType, FloatDType, Int, Tensor};

/// The objective and the plain NLL of one batch.
pub struct Losses<B: Backend> {
    /// Weighted mean of the smoothed per-position loss (what is minimized). Shape `[1]`.
    pub objective: Tensor<B, 1>,
    /// Weighted sum of `−log p(y)` in nats. Shape `[1]`.
    pub nll_sum: Tensor<B, 1>,
    /// Sum of the weights: the number of positions counted.
    pub count: f64,
    /// Tokens the batch put through the model (for tokens/s and training FLOPs): `count`,
    /// except where positions are read but not predicted (a masked LM's unchosen ones).
    pub tokens: f64,
}

/// Cross-entropy of `logits` against `targets`.
///
/// # Shapes
/// - `logits`: `[batch, len, vocab]`
/// - `targets`: `[batch, len]`
/// - `weights`: `[batch, len]`, 1 for a counted position and 0 for padding or skipped
///   context (`None`: all 1)
pub fn cross_entropy<B: Backend>(
    logits: Tensor<B, 3>,
    targets: Tensor<B, 2, Int>,
    weights: Option<(Tensor<B, 2>, f64)>,
    smoothing: f64,
) -> Losses<B> {
    let [batch, len, vocab] = logits.dims();
    // A half-precision step's logits: the loss is computed in f32 (as PyTorch's autocast does).
    let logits = if logits.dtype() == DType::F32 { logits } else { logits.cast(FloatDType::F32) };
    let rows = batch * len;
    // `fused::reshape`: Burn's reshape copies the logits on the CPU backend (and their gradient
    // back), a `[rows, vocab]` pass each way (3.6% of a Multi30k step).
    let logits = attend_model::fused::reshape(logits, [rows, vocab]);
    let both = attend_model::fused::cross_entropy(logits, targets.reshape([rows]), smoothing);
    let nll = both.clone().slice([0..rows, 0..1]).reshape([batch, len]);
    let per_position = both.slice([0..rows, 1..2]).reshape([batch, len]);
    let (weighted, weighted_nll, count) = match weights {
        Some((w, count)) => (per_position * w.clone(), nll * w, count),
        None => (per_position, nll, (batch * len) as f64),
    };
    Losses { objective: weighted.sum().div_scalar(count.max(1.0)), nll_sum: weighted_nll.sum(), count, tokens: count }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::TensorData;
    use burn_ndarray::NdArray;

    type B = NdArray<f32>;

    #[test]
    fn uniform_logits_give_nll_ln_vocab_and_smoothing_changes_nothing() {
        let device = Default::default();
        let logits = Tensor::<B, 3>::zeros([2, 3, 5], &device);
        let targets = Tensor::<B, 2, Int>::from_data(TensorData::from([[0, 1, 2], [3, 4, 0]]), &device);
        let plain = cross_entropy(logits.clone(), targets.clone(), None, 0.0);
        let nll: f32 = plain.nll_sum.into_scalar();
        assert!((nll as f64 / 6.0 - 5f64.ln()).abs() < 1e-6);
        let smoothed: f32 = cross_entropy(logits, targets, None, 0.1).objective.into_scalar();
        assert!((smoothed as f64 - 5f64.ln()).abs() < 1e-6);
    }

    #[test]
    fn zero_weight_positions_do_not_count() {
        let device = Default::default();
        let logits = Tensor::<B, 3>::from_data(TensorData::from([[[5.0f32, 0.0], [0.0, 5.0]]]), &device);
        let targets = Tensor::<B, 2, Int>::from_data(TensorData::from([[0, 0]]), &device);
        let weights = Tensor::<B, 2>::from_data(TensorData::from([[1.0f32, 0.0]]), &device);
        let losses = cross_entropy(logits, targets, Some((weights, 1.0)), 0.0);
        let want = (1.0f64 + (-5f64).exp()).ln(); // −log softmax([5, 0])[0]
        assert!((losses.objective.into_scalar() as f64 - want).abs() < 1e-5);
        assert!((losses.nll_sum.into_scalar() as f64 - want).abs() < 1e-5, "the NLL is weighted too");
    }

    /// Label smoothing on non-uniform logits, by hand: logits (ln 1, ln 2, ln 5) give
    /// p = (1/8, 2/8, 5/8); with target 2 the NLL is ln(8/5) and the mean of −log p(v) over the
    /// vocabulary is (ln 8 + ln 4 + ln(8/5))/3, so with ε = 0.1 the loss is
    /// 0.9·ln 1.6 + 0.1·(ln 8 + ln 4 + ln 1.6)/3 = 0.5541946. The fused CPU kernel and the
    /// composed form (on `f64`) both give it to 1e-6.
    #[test]
    fn label_smoothing_gives_the_hand_derived_loss_on_non_uniform_logits() {
        let want = 0.9 * 1.6f64.ln() + 0.1 * (8f64.ln() + 4f64.ln() + 1.6f64.ln()) / 3.0;
        assert!((want - 0.554_194_6).abs() < 1e-7);
        let device = Default::default();
        let logits = [[[1f32.ln(), 2f32.ln(), 5f32.ln()]]];
        let l = Tensor::<B, 3>::from_data(TensorData::from(logits), &device);
        let t = Tensor::<B, 2, Int>::from_data(TensorData::from([[2]]), &device);
        let losses = cross_entropy(l, t, None, 0.1);
        assert!((losses.objective.into_scalar() as f64 - want).abs() < 1e-6);
        assert!((losses.nll_sum.into_scalar() as f64 - 1.6f64.ln()).abs() < 1e-6, "the NLL is unsmoothed");
        type C = NdArray<f64>;
        let l = Tensor::<C, 3>::from_data(TensorData::from([[[1f64.ln(), 2f64.ln(), 5f64.ln()]]]), &device);
        let t = Tensor::<C, 2, Int>::from_data(TensorData::from([[2]]), &device);
        let composed = cross_entropy(l, t, None, 0.1).objective.into_scalar();
        assert!((composed - want).abs() < 1e-6, "{composed} vs {want}");
    }
}
