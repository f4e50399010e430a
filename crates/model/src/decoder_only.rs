//! [`DecoderOnly`]: either decoder-only model of this crate, chosen by `model.arch` at run
//! time, so that one training loop, one evaluation and one `generate` serve the GPT-style
//! [`LanguageModel`] (`arch = "lm"`) and the notes' one-layer [`NotesModel`]
//! (`arch = "notes"`). It is a Burn module (an enum module: parameters, records and optimizer
//! state are those of the variant it holds).

use burn::module::Module;
use burn::tensor::{backend::Backend, Int, Tensor};

use crate::config::{Arch, ModelConfig};
use crate::decode::IncrementalDecoder;
use crate::lm::{LanguageModel, LmCache};
use crate::notes::{NotesCache, NotesModel};

/// A decoder-only language model of either architecture.
///
/// One model per run, moved rarely: the size difference of the variants costs nothing, and
/// boxing them would change the record's layout (and so the checkpoints').
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum DecoderOnly<B: Backend> {
    /// `arch = "lm"`: the GPT-style stack of Transformer blocks.
    Gpt(LanguageModel<B>),
    /// `arch = "notes"`: the lecture notes' one-layer model.
    Notes(NotesModel<B>),
}

/// The decoding cache of a [`DecoderOnly`] model (the variant's own cache).
#[derive(Clone, Debug)]
pub enum DecoderOnlyCache<B: Backend> {
    Gpt(LmCache<B>),
    Notes(NotesCache<B>),
}

impl ModelConfig {
    /// Builds the decoder-only model `self.arch` names for `vocab_size` tokens; `None` for an
    /// encoder-decoder (`arch = "seq2seq"`, built by [`ModelConfig::init_seq2seq`]) or a
    /// bidirectional encoder (`arch = "encoder"`, built by [`ModelConfig::init_lm`] and run with
    /// [`LanguageModel::forward_bidirectional`]).
    pub fn init_decoder_only<B: Backend>(&self, vocab_size: usize, device: &B::Device) -> Option<DecoderOnly<B>> {
        match self.arch {
            Arch::Lm => Some(DecoderOnly::Gpt(self.init_lm(vocab_size, device))),
            Arch::Notes => Some(DecoderOnly::Notes(self.init_notes(vocab_size, device))),
            Arch::Seq2seq | Arch::Encoder => None,
        }
    }
}

impl<B: Backend> DecoderOnly<B> {
    /// Next-token logits at every position.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, len]`
    /// - output: `[batch, len, vocab]`
    pub fn forward(&self, tokens: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        match self {
            DecoderOnly::Gpt(m) => m.forward(tokens),
            DecoderOnly::Notes(m) => m.forward(tokens),
        }
    }

    /// An empty decoding cache.
    pub fn empty_cache(&self) -> DecoderOnlyCache<B> {
        match self {
            DecoderOnly::Gpt(m) => DecoderOnlyCache::Gpt(m.empty_cache()),
            DecoderOnly::Notes(m) => DecoderOnlyCache::Notes(m.empty_cache()),
        }
    }
}

/// The cache of the wrong variant: a programming error (a cache is only ever made by the
/// model that uses it).
const MISMATCH: &str = "DecoderOnly: the cache belongs to the other architecture";

impl<B: Backend> IncrementalDecoder<B> for DecoderOnly<B> {
    type Cache = DecoderOnlyCache<B>;

    fn step(&self, tokens: Tensor<B, 2, Int>, cache: &mut Self::Cache) -> Tensor<B, 2> {
        match (self, cache) {
            (DecoderOnly::Gpt(m), DecoderOnlyCache::Gpt(c)) => m.step(tokens, c),
            (DecoderOnly::Notes(m), DecoderOnlyCache::Notes(c)) => m.step(tokens, c),
            _ => panic!("{MISMATCH}"),
        }
    }

    fn reorder(&self, cache: Self::Cache, indices: Tensor<B, 1, Int>) -> Self::Cache {
        match (self, cache) {
            (DecoderOnly::Gpt(m), DecoderOnlyCache::Gpt(c)) => DecoderOnlyCache::Gpt(m.reorder(c, indices)),
            (DecoderOnly::Notes(m), DecoderOnlyCache::Notes(c)) => DecoderOnlyCache::Notes(m.reorder(c, indices)),
            _ => panic!("{MISMATCH}"),
        }
    }

    fn cached_len(&self, cache: &Self::Cache) -> usize {
        match cache {
            DecoderOnlyCache::Gpt(c) => c.len,
            DecoderOnlyCache::Notes(c) => c.len,
        }
    }

    fn max_len(&self) -> Option<usize> {
        match self {
            DecoderOnly::Gpt(m) => IncrementalDecoder::max_len(m),
            DecoderOnly::Notes(m) => IncrementalDecoder::max_len(m),
        }
    }

    fn restart(&self, _cache: &Self::Cache) -> Option<Self::Cache> {
        Some(self.empty_cache())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use crate::decode::{greedy, GreedyOptions};
    use crate::test_backend::TestBackend;

    /// A small GPT-style model (`arch = "lm"`, learned positions).
    fn lm_config() -> ModelConfig {
        ModelConfig { d_model: 16, d_ff: 32, n_heads: 2, n_layers: 1, block_size: 16, ..ModelConfig::nanogpt_cpu() }
    }

    fn notes_config() -> ModelConfig {
        ModelConfig {
            arch: Arch::Notes,
            n_heads: 1,
            n_layers: 1,
            d_model: 16,
            d_ff: 32,
            block_size: 16,
            ..ModelConfig::nanogpt_cpu()
        }
    }

    #[test]
    fn wrapper_gives_the_logits_and_parameters_of_the_model_it_holds() {
        let device = Default::default();
        for config in [lm_config(), notes_config()] {
            // The held model itself, not a second one from the same seed: the backend's random
            // generator is shared with the tests running beside this one.
            let wrapped = config.init_decoder_only::<TestBackend>(11, &device).expect("decoder-only");
            let tokens = Tensor::<TestBackend, 2, Int>::from_ints([[1, 2, 3, 4]], &device);
            let (direct, params) = match (&wrapped, config.arch) {
                (DecoderOnly::Gpt(m), Arch::Lm) => (m.forward(tokens.clone()), m.num_params()),
                (DecoderOnly::Notes(m), Arch::Notes) => (m.forward(tokens.clone()), m.num_params()),
                _ => panic!("the wrapper holds another model than model.arch = {:?} names", config.arch),
            };
            assert_eq!(wrapped.num_params(), params);
            direct.into_data().assert_approx_eq::<f32>(&wrapped.forward(tokens).into_data(), Default::default());
        }
    }

    #[test]
    fn cached_greedy_decoding_of_the_wrapper_matches_its_full_forward_pass() {
        let device = Default::default();
        let model = notes_config().init_decoder_only::<TestBackend>(9, &device).expect("decoder-only");
        let prompt = Tensor::<TestBackend, 2, Int>::from_ints([[3, 1]], &device);
        let out = greedy(&model, model.empty_cache(), prompt, &GreedyOptions { max_new_tokens: 4, eos: None });
        // Re-derive each token by a full forward pass over the growing sequence.
        let mut seq = vec![3i64, 1];
        for &t in &out[0] {
            let n = seq.len();
            let logits = model.forward(Tensor::from_data(burn::tensor::TensorData::new(seq.clone(), [1, n]), &device));
            let last: Vec<f32> = logits.slice([0..1, n - 1..n]).into_data().to_vec().unwrap();
            let argmax = last.iter().enumerate().fold(0, |b, (i, &v)| if v > last[b] { i } else { b });
            assert_eq!(argmax as u32, t);
            seq.push(t as i64);
        }
    }

    /// Through the wrapper, for both architectures: `step` feeds the model's own cache,
    /// `cached_len` counts what it holds, and `reorder` moves its rows, so that a step after
    /// swapping two rows gives the full forward pass's last logits of the swapped sequences.
    #[test]
    fn wrapper_steps_counts_and_reorders_the_cache_of_the_model_it_holds() {
        let device = Default::default();
        for config in [lm_config(), notes_config()] {
            let model = config.init_decoder_only::<TestBackend>(9, &device).expect("decoder-only");
            let mut cache = model.empty_cache();
            assert_eq!(model.cached_len(&cache), 0, "{:?}", config.arch);
            let prompt = Tensor::<TestBackend, 2, Int>::from_ints([[3, 1], [2, 4]], &device);
            let first = model.step(prompt.clone(), &mut cache);
            assert_eq!(model.cached_len(&cache), 2, "{:?}", config.arch);
            let full = model.forward(prompt).slice([0..2, 1..2]).reshape([2, 9]);
            first.into_data().assert_approx_eq::<f32>(&full.into_data(), Default::default());
            let mut cache = model.reorder(cache, Tensor::from_ints([1, 0], &device));
            let next = model.step(Tensor::from_ints([[5], [6]], &device), &mut cache);
            assert_eq!(model.cached_len(&cache), 3, "{:?}", config.arch);
            let swapped = Tensor::<TestBackend, 2, Int>::from_ints([[2, 4, 5], [3, 1, 6]], &device);
            let full = model.forward(swapped).slice([0..2, 2..3]).reshape([2, 9]);
            next.into_data().assert_approx_eq::<f32>(&full.into_data(), Default::default());
            // Learned positions (both configurations): at most block_size positions; a restart
            // begins again from nothing.
            assert_eq!(model.max_len(), Some(16), "{:?}", config.arch);
            let restarted = model.restart(&cache).expect("a decoder-only model restarts");
            assert_eq!(model.cached_len(&restarted), 0, "{:?}", config.arch);
        }
    }

    #[test]
    fn seq2seq_config_builds_no_decoder_only_model() {
        let config = ModelConfig { arch: Arch::Seq2seq, ..ModelConfig::nanogpt_cpu() };
        assert!(config.init_decoder_only::<TestBackend>(5, &Default::default()).is_none());
    }
}
