//! Decoding with a key/value cache: [`greedy`], [`beam_search`] and [`sample`].
//!
//! Each algorithm drives any model that implements [`IncrementalDecoder`]: feed the prompt
//! once, then one token per row per step, so that each new token costs one position's work.
//! The three models of this crate implement it; the per-step choice (argmax, beam bookkeeping,
//! sampling) runs on the host over the last position's logits.
//!
//! Batches: every row of a prompt has the same length (for translation the prompt is BOS and
//! the rows differ in their padded sources, held in the cache). Rows stop independently at
//! EOS; the batch stops when every row has, or after `max_new_tokens`. A decoder-only model
//! whose cache is full restarts on its last `block_size` tokens (a sliding window, as nanoGPT's
//! `generate` crops its context; `Feeder`); a model that cannot restart (translation) stops
//! when its learned positions run out.

mod beam;
mod greedy;
mod log_probs;
mod sample;

pub use beam::{beam_search, length_penalty, BeamOptions, Hypothesis};
pub use greedy::{greedy, GreedyOptions};
pub use sample::{distribution, sample, SampleOptions};

use burn::tensor::{backend::Backend, Int, Tensor, TensorData};

use crate::lm::{LanguageModel, LmCache};
use crate::notes::{NotesCache, NotesModel};
use crate::seq2seq::{Seq2seqCache, TranslationModel};

/// A model that can continue sequences one step at a time from a cache.
pub trait IncrementalDecoder<B: Backend> {
    /// What is carried from step to step (keys/values, encoder memory, length).
    type Cache: Clone;

    /// Feeds `tokens` after what `cache` holds, extends `cache`, and returns the logits of
    /// the next token after the last of them.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, new]`
    /// - output: `[batch, vocab]`
    fn step(&self, tokens: Tensor<B, 2, Int>, cache: &mut Self::Cache) -> Tensor<B, 2>;

    /// Keeps (repeats, reorders) the batch rows `indices` of `cache`.
    ///
    /// # Shapes
    /// - `indices`: `[new_batch]`
    fn reorder(&self, cache: Self::Cache, indices: Tensor<B, 1, Int>) -> Self::Cache;

    /// [`reorder`](Self::reorder) for beam search after its first step: the rows come in
    /// groups of beams of one input (rows `b·width .. (b+1)·width`), and each new row's
    /// parent lies in its own group, so what the group's rows share (an encoder-decoder's
    /// source memory) need not move. By default the same as `reorder`.
    fn reorder_beams(&self, cache: Self::Cache, indices: Tensor<B, 1, Int>) -> Self::Cache {
        self.reorder(cache, indices)
    }

    /// Positions `cache` holds.
    fn cached_len(&self, cache: &Self::Cache) -> usize;

    /// Most positions the model can hold (`block_size` with learned positions).
    fn max_len(&self) -> Option<usize>;

    /// An empty cache for the same rows, if the model can restart on a cropped context
    /// (decoder-only models: `None` for an encoder-decoder, whose context is its source).
    fn restart(&self, cache: &Self::Cache) -> Option<Self::Cache>;
}

/// The last position's row of `[batch, len, vocab]` logits.
fn last_position<B: Backend>(logits: Tensor<B, 3>) -> Tensor<B, 2> {
    let [batch, len, vocab] = logits.dims();
    logits.slice([0..batch, len - 1..len]).reshape([batch, vocab])
}

impl<B: Backend> IncrementalDecoder<B> for LanguageModel<B> {
    type Cache = LmCache<B>;

    fn step(&self, tokens: Tensor<B, 2, Int>, cache: &mut LmCache<B>) -> Tensor<B, 2> {
        last_position(self.forward_cached(tokens, cache, None).0)
    }

    fn reorder(&self, cache: LmCache<B>, indices: Tensor<B, 1, Int>) -> LmCache<B> {
        cache.select(indices)
    }

    fn cached_len(&self, cache: &LmCache<B>) -> usize {
        cache.len
    }

    fn max_len(&self) -> Option<usize> {
        LanguageModel::max_len(self)
    }

    fn restart(&self, _cache: &LmCache<B>) -> Option<LmCache<B>> {
        Some(self.empty_cache())
    }
}

impl<B: Backend> IncrementalDecoder<B> for NotesModel<B> {
    type Cache = NotesCache<B>;

    fn step(&self, tokens: Tensor<B, 2, Int>, cache: &mut NotesCache<B>) -> Tensor<B, 2> {
        last_position(self.forward_cached(tokens, cache).0)
    }

    fn reorder(&self, cache: NotesCache<B>, indices: Tensor<B, 1, Int>) -> NotesCache<B> {
        cache.select(indices)
    }

    fn cached_len(&self, cache: &NotesCache<B>) -> usize {
        cache.len
    }

    fn max_len(&self) -> Option<usize> {
        NotesModel::max_len(self)
    }

    fn restart(&self, _cache: &NotesCache<B>) -> Option<NotesCache<B>> {
        Some(self.empty_cache())
    }
}

impl<B: Backend> IncrementalDecoder<B> for TranslationModel<B> {
    type Cache = Seq2seqCache<B>;

    fn step(&self, tokens: Tensor<B, 2, Int>, cache: &mut Seq2seqCache<B>) -> Tensor<B, 2> {
        last_position(self.forward_cached(tokens, cache))
    }

    fn reorder(&self, cache: Seq2seqCache<B>, indices: Tensor<B, 1, Int>) -> Seq2seqCache<B> {
        cache.select(indices)
    }

    fn reorder_beams(&self, cache: Seq2seqCache<B>, indices: Tensor<B, 1, Int>) -> Seq2seqCache<B> {
        cache.select_target(indices)
    }

    fn cached_len(&self, cache: &Seq2seqCache<B>) -> usize {
        cache.len
    }

    fn max_len(&self) -> Option<usize> {
        TranslationModel::max_len(self)
    }

    fn restart(&self, _cache: &Seq2seqCache<B>) -> Option<Seq2seqCache<B>> {
        None
    }
}

/// Host copy of `[batch, vocab]` logits, one `Vec` per row.
pub(crate) fn rows<B: Backend>(logits: Tensor<B, 2>) -> Vec<Vec<f32>> {
    let [_, vocab] = logits.dims();
    let flat = logits.into_data().convert::<f32>().to_vec::<f32>().expect("float logits");
    flat.chunks(vocab).map(<[f32]>::to_vec).collect()
}

/// `[batch, len]` token tensor from host rows of equal length.
pub(crate) fn token_tensor<B: Backend>(rows: &[Vec<u32>], device: &B::Device) -> Tensor<B, 2, Int> {
    let len = rows.first().map_or(0, Vec::len);
    let flat: Vec<i64> = rows.iter().flat_map(|r| r.iter().map(|&t| t as i64)).collect();
    Tensor::from_data(TensorData::new(flat, [rows.len(), len]), device)
}

/// `[n]` index tensor.
pub(crate) fn index_tensor<B: Backend>(indices: &[usize], device: &B::Device) -> Tensor<B, 1, Int> {
    let flat: Vec<i64> = indices.iter().map(|&i| i as i64).collect();
    Tensor::from_data(TensorData::new(flat, [indices.len()]), device)
}

/// Index of the largest value; the lowest index among ties.
pub(crate) fn argmax(row: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in row.iter().enumerate() {
        if x > row[best] {
            best = i;
        }
    }
    best
}

/// Step-by-step feeding for [`greedy`] and [`sample`], one token per row after the prompt.
///
/// A decoder-only model that is full (`max_len` reached) restarts on the last `max_len`
/// tokens, as nanoGPT's `generate` crops its context to `block_size`: that step costs a full
/// window's work, the following ones one position each until the window is full again.
pub(crate) struct Feeder<B: Backend> {
    history: Vec<Vec<u32>>,
    device: B::Device,
}

impl<B: Backend> Feeder<B> {
    /// Feeds `prompt` (cropped to the window when the model can restart) and returns the
    /// logits after it, and how many tokens may be generated.
    ///
    /// # Shapes
    /// - `prompt`: `[batch, prompt_len]`
    /// - output logits: `[batch, vocab]`
    pub(crate) fn start<M: IncrementalDecoder<B>>(
        model: &M,
        cache: &mut M::Cache,
        prompt: Tensor<B, 2, Int>,
        max_new_tokens: usize,
    ) -> (Self, Tensor<B, 2>, usize) {
        let device = prompt.device();
        let [batch, len] = prompt.dims();
        let flat = prompt.into_data().convert::<i64>().to_vec::<i64>().expect("integer tokens");
        let history: Vec<Vec<u32>> =
            (0..batch).map(|b| flat[b * len..(b + 1) * len].iter().map(|&t| t as u32).collect()).collect();
        let sliding = model.restart(cache).is_some();
        let window = match model.max_len() {
            Some(limit) if sliding && len > limit => limit,
            _ => len,
        };
        let fed: Vec<Vec<u32>> = history.iter().map(|h| h[h.len() - window..].to_vec()).collect();
        let logits = model.step(token_tensor(&fed, &device), cache);
        let steps =
            if sliding { max_new_tokens } else { budget(max_new_tokens, model.cached_len(cache), model.max_len()) };
        (Self { history, device }, logits, steps)
    }

    /// Appends one token per row and returns the logits after it.
    ///
    /// # Shapes
    /// - output: `[batch, vocab]`
    pub(crate) fn feed<M: IncrementalDecoder<B>>(
        &mut self,
        model: &M,
        cache: &mut M::Cache,
        next: &[u32],
    ) -> Tensor<B, 2> {
        for (row, &token) in self.history.iter_mut().zip(next) {
            row.push(token);
        }
        if let Some(limit) = model.max_len() {
            if model.cached_len(cache) >= limit {
                if let Some(empty) = model.restart(cache) {
                    *cache = empty;
                    let window: Vec<Vec<u32>> = self.history.iter().map(|h| h[h.len() - limit..].to_vec()).collect();
                    return model.step(token_tensor(&window, &self.device), cache);
                }
            }
        }
        let fed: Vec<Vec<u32>> = next.iter().map(|&t| vec![t]).collect();
        model.step(token_tensor(&fed, &self.device), cache)
    }
}

/// How many new tokens fit: `max_new_tokens`, or fewer if the model's length limit is near.
pub(crate) fn budget(max_new_tokens: usize, cached: usize, max_len: Option<usize>) -> usize {
    match max_len {
        // The last generated token is never fed back, so it may sit at position max_len.
        Some(limit) => max_new_tokens.min((limit + 1).saturating_sub(cached)),
        None => max_new_tokens,
    }
}

#[cfg(test)]
pub(crate) mod toy;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Arch, ModelConfig, Positions};
    use crate::test_backend::TestBackend;

    /// A translation model cannot slide a window over its context (its source): with learned
    /// positions of `block_size` 4 it generates `5 - prompt_len` tokens (the last one never fed
    /// back), whatever `max_new_tokens` asks; with sinusoidal positions it has no limit.
    #[test]
    fn translation_decoding_stops_where_its_learned_positions_run_out() {
        let device = Default::default();
        let bos = vec![vec![1], vec![1]];
        let two = vec![vec![1, 4], vec![1, 6]];
        for (positions, prompt, expected) in
            [(Positions::Learned, &bos, 4), (Positions::Learned, &two, 3), (Positions::Sinusoidal, &bos, 10)]
        {
            let config = ModelConfig {
                arch: Arch::Seq2seq,
                d_model: 8,
                n_heads: 2,
                n_layers: 1,
                d_ff: 16,
                dropout: 0.0,
                positions,
                block_size: 4,
                ..ModelConfig::base()
            };
            let mt = config.init_seq2seq::<TestBackend>(9, &device);
            let source = token_tensor(&[vec![3, 4, 5], vec![6, 7, 8]], &device);
            let cache = mt.begin(mt.encode(source, None));
            let prompt_tensor = || token_tensor::<TestBackend>(prompt, &device);
            let out = greedy(&mt, cache.clone(), prompt_tensor(), &GreedyOptions { max_new_tokens: 10, eos: None });
            let case = format!("{positions:?}, prompt {prompt:?}");
            assert_eq!(out.iter().map(Vec::len).collect::<Vec<_>>(), vec![expected; 2], "{case}");
            let options = BeamOptions { width: 2, length_penalty: 0.0, max_new_tokens: 10, eos: None };
            let best = beam_search(&mt, cache, prompt_tensor(), &options);
            assert_eq!(best.iter().map(|h| h.tokens.len()).collect::<Vec<_>>(), vec![expected; 2], "{case}");
        }
    }
}
