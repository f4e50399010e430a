//! The two simplest baselines: the uniform model and the add-one (Laplace) unigram model.
//!
//! Uniform: `p(w) = 1/V`, so its perplexity is exactly the vocabulary size V.
//! Unigram: `p(w) = (c(w) + 1) / (N + V)`, with c(w) the training count of w (one `<eos>` per
//! line included, `<s>` excluded), N = Σ c(w).

use super::{LanguageModel, Vocab};

/// `p(w) = 1/V` for every word and history.
#[derive(Clone, Debug)]
pub struct Uniform {
    vocab_size: usize,
}

impl Uniform {
    /// The uniform distribution over `vocab`'s predictable words.
    pub fn new(vocab: &Vocab) -> Self {
        Uniform { vocab_size: vocab.len() }
    }
}

impl LanguageModel for Uniform {
    fn log_prob(&self, _history: &[u32], _word: u32) -> f64 {
        -(self.vocab_size as f64).ln()
    }
}

/// `p(w) = (c(w) + 1) / (N + V)`, whatever the history.
#[derive(Clone, Debug)]
pub struct AddOneUnigram {
    counts: Vec<u64>,
    total: u64,
}

impl AddOneUnigram {
    /// Counts the words of `sentences` (as [`Vocab::encode_line`] gives them; `<s>` skipped).
    pub fn train(sentences: &[Vec<u32>], vocab: &Vocab) -> Self {
        let mut counts = vec![0u64; vocab.len()];
        for &id in sentences.iter().flatten() {
            if let Some(c) = counts.get_mut(id as usize) {
                *c += 1;
            }
        }
        let total = counts.iter().sum();
        AddOneUnigram { counts, total }
    }
}

impl LanguageModel for AddOneUnigram {
    fn log_prob(&self, _history: &[u32], word: u32) -> f64 {
        let c = self.counts.get(word as usize).copied().unwrap_or(0);
        ((c + 1) as f64 / (self.total + self.counts.len() as u64) as f64).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_one_unigram_probabilities_are_counts_plus_one_over_total_plus_vocab() {
        let vocab = Vocab::from_lines(&["a a b"]);
        let sentences = vec![vocab.encode_line("a a b")];
        let model = AddOneUnigram::train(&sentences, &vocab);
        // Counts a:2 b:1 <eos>:1 <unk>:0, N = 4, V = 4.
        assert!((model.log_prob(&[], vocab.id("a")).exp() - 3.0 / 8.0).abs() < 1e-15);
        assert!((model.log_prob(&[], vocab.unk()).exp() - 1.0 / 8.0).abs() < 1e-15);
        let total: f64 = (0..vocab.len() as u32).map(|w| model.log_prob(&[], w).exp()).sum();
        assert!((total - 1.0).abs() < 1e-12);
    }

    #[test]
    fn uniform_model_gives_every_word_one_over_vocab_size() {
        let vocab = Vocab::from_lines(&["a b c"]);
        assert!((Uniform::new(&vocab).log_prob(&[], 0).exp() - 0.2).abs() < 1e-15);
    }
}
