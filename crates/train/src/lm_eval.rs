//! Scoring a language model on a token stream: total negative log-likelihood and the number
//! of positions scored, from which `attend_metrics` derives every perplexity.
//!
//! The stream is cut into windows of at most `block` tokens ([`windows`]); each window
//! predicts its tokens 1..=L from tokens 0..L−1. With a context window of `c` tokens (fairseq's
//! `eval_lm --context-window`, HuggingFace's sliding-window perplexity), each window after the
//! first starts `c − 1` tokens before the first target it has not yet scored, and scores only
//! the targets after them: every target is scored exactly once, and each one after the first
//! window from at least `c` tokens. `c` of 0 or 1 gives non-overlapping windows, the cheapest
//! score, and the one training's validation reports. Positions with fewer than `min_context`
//! tokens of context inside their window are not scored (generated data: the source's order,
//! so the figure compares with the entropy rate; 0 scores everything).

use attend_model::DecoderOnly;
use burn::tensor::backend::Backend;
use burn::tensor::{ElementConversion, Int, Tensor, TensorData};

use crate::objective::cross_entropy;

/// Sufficient statistics of a scored stream.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Scored {
    /// Sum of `−log p` in nats.
    pub nll: f64,
    /// Positions scored.
    pub tokens: u64,
}

impl Scored {
    /// Cross-entropy in nats per token.
    pub fn loss(&self) -> f64 {
        self.nll / self.tokens.max(1) as f64
    }
}

/// One window of a stream: inputs `stream[start..start + len]`, targets one token later; its
/// first `skip` positions are context only (scored by an earlier window).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub start: usize,
    pub len: usize,
    pub skip: usize,
}

/// The windows of at most `block` tokens that score each target of a stream of `n` tokens
/// (positions 1..n) exactly once, every one after the first window from at least `context`
/// tokens (`context` is capped at `block`; 0 and 1 give non-overlapping windows).
pub fn windows(n: usize, block: usize, context: usize) -> Vec<Window> {
    let block = block.max(1);
    let overlap = context.clamp(1, block) - 1;
    let mut out = Vec::new();
    // The first target not yet scored.
    let mut next = 1;
    while next < n {
        let start = if out.is_empty() { 0 } else { next - 1 - overlap };
        let len = block.min(n - 1 - start);
        out.push(Window { start, len, skip: next - 1 - start });
        next = start + len + 1;
    }
    out
}

/// Scores `stream` through `windows` (at most `max_batches` batches of `batch` windows; 0: all).
pub fn score<B: Backend>(
    model: &DecoderOnly<B>,
    stream: &[u32],
    windows: &[Window],
    batch: usize,
    min_context: usize,
    max_batches: usize,
    device: &B::Device,
) -> Scored {
    let mut total = Scored::default();
    // Windows of the longest length in batches; a shorter one (the last, or a stream shorter
    // than a block) alone.
    let longest = windows.iter().map(|w| w.len).max().unwrap_or(0);
    let (full, rest): (Vec<&Window>, Vec<&Window>) = windows.iter().partition(|w| w.len == longest);
    let limit = if max_batches > 0 { max_batches } else { usize::MAX };
    for group in full.chunks(batch.max(1)).chain(rest.chunks(1)).take(limit) {
        let len = group[0].len;
        let rows = group.len();
        let mut inputs = Vec::with_capacity(rows * len);
        let mut targets = Vec::with_capacity(rows * len);
        let mut weights = Vec::with_capacity(rows * len);
        for w in group {
            inputs.extend(stream[w.start..w.start + len].iter().map(|&t| t as i64));
            targets.extend(stream[w.start + 1..w.start + len + 1].iter().map(|&t| t as i64));
            weights.extend((0..len).map(|i| if i >= w.skip && i + 1 >= min_context { 1.0f32 } else { 0.0 }));
        }
        let counted: f64 = weights.iter().map(|&w| w as f64).sum();
        if counted == 0.0 {
            continue;
        }
        let x = Tensor::<B, 2, Int>::from_data(TensorData::new(inputs, [rows, len]), device);
        let y = Tensor::<B, 2, Int>::from_data(TensorData::new(targets, [rows, len]), device);
        let w = Tensor::<B, 2>::from_data(TensorData::new(weights, [rows, len]), device);
        let losses = cross_entropy(model.forward(x), y, Some((w, counted)), 0.0);
        total.nll += losses.nll_sum.into_scalar().elem::<f64>();
        total.tokens += counted as u64;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use attend_model::ModelConfig;
    use burn::tensor::activation::log_softmax;
    use burn_ndarray::NdArray;

    type B = NdArray<f32>;

    /// The targets a window scores, as stream positions.
    fn targets(w: &Window) -> std::ops::RangeInclusive<usize> {
        w.start + 1 + w.skip..=w.start + w.len
    }

    #[test]
    fn windows_score_every_target_once_and_each_after_the_first_window_from_the_context_asked() {
        for n in 0..40 {
            for block in 1..9 {
                for context in 0..=block + 1 {
                    let ws = windows(n, block, context);
                    let mut seen = vec![0u32; n];
                    for (k, w) in ws.iter().enumerate() {
                        assert!(w.len >= 1 && w.len <= block && w.skip < w.len, "{w:?} of n {n}, block {block}");
                        assert!(w.start + w.len < n, "{w:?} reads past a stream of {n}");
                        for t in targets(w) {
                            seen[t] += 1;
                            let least = if k == 0 { 1 } else { context.clamp(1, block) };
                            assert!(t - w.start >= least, "target {t} of {w:?} (context {context})");
                        }
                    }
                    let expected: Vec<u32> = (0..n).map(|t| u32::from(t > 0)).collect();
                    assert_eq!(seen, expected, "n {n}, block {block}, context {context}");
                }
            }
        }
    }

    #[test]
    fn without_a_context_window_the_windows_are_consecutive_blocks() {
        for context in [0, 1] {
            let ws = windows(12, 4, context);
            let starts: Vec<_> = ws.iter().map(|w| (w.start, w.len, w.skip)).collect();
            assert_eq!(starts, [(0, 4, 0), (4, 4, 0), (8, 3, 0)], "context {context}");
        }
    }

    #[test]
    fn the_widest_context_window_scores_each_token_from_the_block_before_it() {
        let block = 6;
        let config = ModelConfig {
            d_model: 16,
            n_heads: 2,
            n_layers: 2,
            d_ff: 32,
            block_size: block,
            ..ModelConfig::nanogpt_cpu()
        };
        let device = Default::default();
        let vocab = 11;
        let model = config.init_decoder_only::<B>(vocab, &device).unwrap();
        let stream: Vec<u32> = (0..41u32).map(|i| (i * 7 + i * i / 3) % vocab as u32).collect();
        let scored = score(&model, &stream, &windows(stream.len(), block, block), 4, 0, 0, &device);

        // Each target from the (at most) `block` tokens before it, one forward pass each.
        let mut nll = 0.0;
        for t in 1..stream.len() {
            let before = &stream[t.saturating_sub(block)..t];
            let ids = before.iter().map(|&i| i as i64).collect::<Vec<_>>();
            let x = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [1, before.len()]), &device);
            let last = model.forward(x).slice([0..1, before.len() - 1..before.len()]).reshape([vocab]);
            let logp = log_softmax(last, 0).into_data().to_vec::<f32>().unwrap();
            nll -= logp[stream[t] as usize] as f64;
        }
        assert_eq!(scored.tokens, stream.len() as u64 - 1);
        assert!((scored.nll - nll).abs() <= 1e-5 * nll, "windows {} against one pass a token {nll}", scored.nll);
        let consecutive = score(&model, &stream, &windows(stream.len(), block, 0), 4, 0, 0, &device);
        assert!((consecutive.nll - nll).abs() > 1e-3, "the context window changed nothing on this model");
    }
}
