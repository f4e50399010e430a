//! [`CausalLm`]: what the language-model training loop and `generate` need from a
//! decoder-only model, so that one generic loop serves the GPT-style [`LanguageModel`] and the
//! notes' [`NotesModel`] alike.

use burn::tensor::{backend::Backend, Int, Tensor};

use crate::decode::IncrementalDecoder;
use crate::lm::LanguageModel;
use crate::notes::NotesModel;

/// A decoder-only model: next-token logits at every position, and cached decoding.
pub trait CausalLm<B: Backend>: IncrementalDecoder<B> {
    /// Next-token logits at every position (position t sees tokens 0..=t).
    ///
    /// # Shapes
    /// - `tokens`: `[batch, len]`
    /// - output: `[batch, len, vocab]`
    fn logits(&self, tokens: Tensor<B, 2, Int>) -> Tensor<B, 3>;

    /// An empty decoding cache.
    fn new_cache(&self) -> Self::Cache;
}

impl<B: Backend> CausalLm<B> for LanguageModel<B> {
    fn logits(&self, tokens: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        self.forward(tokens)
    }

    fn new_cache(&self) -> Self::Cache {
        self.empty_cache()
    }
}

impl<B: Backend> CausalLm<B> for NotesModel<B> {
    fn logits(&self, tokens: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        self.forward(tokens)
    }

    fn new_cache(&self) -> Self::Cache {
        self.empty_cache()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use crate::decode::{sample, SampleOptions};
    use crate::test_backend::TestBackend;

    /// One generic function drives both decoder-only models.
    fn generate<B: Backend, M: CausalLm<B>>(
        model: &M,
        device: &B::Device,
    ) -> (usize, Vec<Vec<u32>>) {
        let prompt = Tensor::<B, 2, Int>::from_ints([[1, 2]], device);
        let vocab = model.logits(prompt.clone()).dims()[2];
        let options = SampleOptions {
            max_new_tokens: 4,
            temperature: 1.0,
            top_k: Some(3),
            top_p: None,
            seed: 5,
            eos: None,
        };
        (vocab, sample(model, model.new_cache(), prompt, &options))
    }

    #[test]
    fn lm_and_notes_model_share_the_causal_lm_interface() {
        let device = Default::default();
        let lm = ModelConfig::nanogpt_cpu().init_lm::<TestBackend>(9, &device);
        let notes = ModelConfig::notes().init_notes::<TestBackend>(9, &device);
        for (vocab, out) in [generate(&lm, &device), generate(&notes, &device)] {
            assert_eq!(vocab, 9);
            assert_eq!(out[0].len(), 4);
            assert!(out[0].iter().all(|&t| t < 9));
        }
    }
}
