//! Scoring a language model on a token stream: total negative log-likelihood and the number
//! of positions scored, from which `attend_metrics` derives every perplexity.
//!
//! The stream is cut into non-overlapping windows of `block` tokens (the last one shorter);
//! each window predicts its tokens 1..=L from tokens 0..L−1. Positions with fewer than
//! `min_context` tokens of context inside their window are not scored (generated data: the
//! source's order, so the figure compares with the entropy rate; 0 scores everything).

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

/// Scores `stream` (at most `max_batches` batches of `batch` windows; 0: all).
pub fn score<B: Backend>(
    model: &DecoderOnly<B>,
    stream: &[u32],
    block: usize,
    batch: usize,
    min_context: usize,
    max_batches: usize,
    device: &B::Device,
) -> Scored {
    let mut windows: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    while start + 1 < stream.len() {
        let len = block.min(stream.len() - 1 - start);
        windows.push((start, len));
        start += len;
    }
    let mut total = Scored::default();
    // Full-length windows in batches; a shorter last window alone.
    let (full, rest): (Vec<_>, Vec<_>) = windows.into_iter().partition(|w| w.1 == block);
    let limit = if max_batches > 0 { max_batches } else { usize::MAX };
    for group in full.chunks(batch.max(1)).chain(rest.chunks(1)).take(limit) {
        let len = group[0].1;
        let rows = group.len();
        let mut inputs = Vec::with_capacity(rows * len);
        let mut targets = Vec::with_capacity(rows * len);
        for &(s, l) in group {
            inputs.extend(stream[s..s + l].iter().map(|&t| t as i64));
            targets.extend(stream[s + 1..s + l + 1].iter().map(|&t| t as i64));
        }
        let weights: Vec<f32> = (0..rows * len).map(|i| if i % len + 1 >= min_context { 1.0 } else { 0.0 }).collect();
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
