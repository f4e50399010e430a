//! n-gram language-model baselines on whitespace tokens: uniform, add-one unigram and
//! interpolated modified Kneser-Ney of order N.
//!
//! Each line is a sentence `<s> w₁ … wₖ <eos>`: the model predicts w₁ … wₖ and one `<eos>`
//! (Mikolov's convention, so PTB's test set is 82,430 tokens), each from the words before it
//! in the same line; `<s>` is context only. Words missing from the training vocabulary are
//! scored as `<unk>`. The result is [`CrossEntropyStats`], so the baselines report every
//! coding of [`crate::perplexity`].

pub mod kneser_ney;
pub mod unigram;
pub mod vocab;

use rayon::prelude::*;

use crate::{CrossEntropyStats, MetricsError, PerplexityReport, TextCounts};

pub use kneser_ney::KneserNey;
pub use unigram::{AddOneUnigram, Uniform};
pub use vocab::{Vocab, EOS, UNK};

/// A language model over a [`Vocab`]'s ids.
pub trait LanguageModel {
    /// `ln p(word | history)`, `history` being the sentence so far from `<s>` on.
    fn log_prob(&self, history: &[u32], word: u32) -> f64;
}

/// Scores every token after `<s>` of every sentence ([`Vocab::encode_line`]'s form).
///
/// Sentences are scored in parallel; their log-likelihoods are then summed in order, so the
/// result does not depend on the number of threads.
pub fn evaluate<M: LanguageModel + Sync>(model: &M, sentences: &[Vec<u32>]) -> CrossEntropyStats {
    let per_sentence: Vec<CrossEntropyStats> = sentences
        .par_iter()
        .map(|s| {
            let mut stats = CrossEntropyStats::default();
            for t in 1..s.len() {
                stats.add_log_prob(model.log_prob(&s[..t], s[t]));
            }
            stats
        })
        .collect();
    per_sentence.into_iter().fold(CrossEntropyStats::default(), |a, b| a + b)
}

/// The three baselines trained on one text and scored on another.
#[derive(Clone, Debug)]
pub struct BaselineReport {
    /// Kneser-Ney order N.
    pub order: usize,
    /// Predictable vocabulary size V (training words, `<eos>`, `<unk>`).
    pub vocab_size: usize,
    /// Training tokens (words and one `<eos>` per line).
    pub train_tokens: u64,
    /// Evaluation word tokens outside the training vocabulary (scored as `<unk>`).
    pub oov_tokens: u64,
    /// The uniform model.
    pub uniform: PerplexityReport,
    /// The add-one unigram model.
    pub unigram: PerplexityReport,
    /// The interpolated modified Kneser-Ney model.
    pub kneser_ney: PerplexityReport,
    /// Kneser-Ney discounts (D1, D2, D3+) per order.
    pub discounts: Vec<[f64; 3]>,
}

/// Trains the three baselines on `train` lines and scores them on `eval` lines.
pub fn baselines<S: AsRef<str> + Sync>(train: &[S], eval: &[S], order: usize) -> Result<BaselineReport, MetricsError> {
    let vocab = Vocab::from_lines(train);
    let encode = |lines: &[S]| -> Vec<Vec<u32>> { lines.par_iter().map(|l| vocab.encode_line(l.as_ref())).collect() };
    let (train_ids, eval_ids) = (encode(train), encode(eval));
    if train_ids.is_empty() {
        return Err(MetricsError::EmptyTrainingData);
    }
    let kn = KneserNey::train(&train_ids, &vocab, order)?;
    let text = Some(TextCounts::of_lines(eval));
    let oov_tokens =
        eval.iter().flat_map(|l| l.as_ref().split_whitespace()).filter(|w| !vocab.contains(w)).count() as u64;
    Ok(BaselineReport {
        order,
        vocab_size: vocab.len(),
        train_tokens: train_ids.iter().map(|s| s.len() as u64 - 1).sum(),
        oov_tokens,
        uniform: evaluate(&Uniform::new(&vocab), &eval_ids).report(text)?,
        unigram: evaluate(&AddOneUnigram::train(&train_ids, &vocab), &eval_ids).report(text)?,
        kneser_ney: evaluate(&kn, &eval_ids).report(text)?,
        discounts: kn.discounts().to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_contributes_its_words_and_one_eos() {
        let vocab = Vocab::from_lines(&["a b"]);
        let eval: Vec<_> = ["a b", "", "b b b"].iter().map(|l| vocab.encode_line(l)).collect();
        // "a b" → 2 words + <eos>; "" → <eos>; "b b b" → 3 words + <eos>.
        assert_eq!(evaluate(&Uniform::new(&vocab), &eval).tokens(), 3 + 1 + 4);
    }

    #[test]
    fn uniform_baseline_perplexity_is_the_vocabulary_size_and_the_counts_are_the_texts() {
        let report = baselines(&["a b c", "c d"], &["a x", "d"], 2).unwrap();
        assert_eq!(report.vocab_size, 6);
        assert!((report.uniform.ppl - 6.0).abs() < 1e-12);
        assert_eq!(report.oov_tokens, 1);
        // Words and one <eos> a line: 3 + 1 and 2 + 1.
        assert_eq!(report.train_tokens, 7);
    }

    #[test]
    fn kneser_ney_beats_unigram_beats_uniform_on_repetitive_text() {
        let train: Vec<String> = (0..200).map(|i| format!("the cat {} on the mat", ["sat", "lay"][i % 2])).collect();
        let eval = vec!["the cat sat on the mat".to_string(), "the cat lay on the mat".to_string()];
        let r = baselines(&train, &eval, 3).unwrap();
        assert!(r.kneser_ney.ppl < r.unigram.ppl && r.unigram.ppl < r.uniform.ppl, "{r:?}");
    }

    #[test]
    fn empty_training_text_is_an_error() {
        let none: [&str; 0] = [];
        assert!(matches!(baselines(&none, &["a"], 3), Err(MetricsError::EmptyTrainingData)));
    }
}
