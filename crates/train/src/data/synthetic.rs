//! The generated datasets of docs/math.md (Generated data), built from a seed.
//!
//! - `synthetic-lm`: a word stream from a [`MarkovSource`]; its exact entropy rate is the
//!   floor any model's cross-entropy can reach.
//! - `synthetic-mt`: source sentences from a Markov source, targets by a deterministic
//!   transduction: a word-by-word lexicon, then a local reordering (a "modifier" word swaps
//!   places with the non-modifier word after it, as adjectives do between English and
//!   French). BLEU 100 is reachable, so learning is checkable end to end.

use super::markov::{make_words, MarkovSource, MarkovSpec};
use crate::rng::Rng;

/// Train / valid / test splits of one dataset.
#[derive(Clone, Debug, PartialEq)]
pub struct Splits<T> {
    pub train: T,
    pub valid: T,
    pub test: T,
}

/// The language-modeling source and its three word streams.
pub struct SyntheticLm {
    pub source: MarkovSource,
    pub splits: Splits<Vec<u32>>,
}

/// Builds `synthetic-lm`: `train_tokens` words for training, a tenth as many for valid and
/// for test, each split from its own stream of the seed.
pub fn synthetic_lm(spec: MarkovSpec, seed: u64, train_tokens: usize) -> SyntheticLm {
    let source = MarkovSource::new(spec, seed);
    let held_out = (train_tokens / 10).max(1);
    let stream = |purpose: &str, n: usize| source.sample(n, &mut Rng::derive(seed, purpose, 0));
    let splits = Splits {
        train: stream("lm-train", train_tokens),
        valid: stream("lm-valid", held_out),
        test: stream("lm-test", held_out),
    };
    SyntheticLm { source, splits }
}

/// The transduction from source word ids to target word ids.
pub struct Transducer {
    /// Whether each source word is a modifier (swaps with the next non-modifier).
    modifier: Vec<bool>,
    pub source_words: Vec<String>,
    pub target_words: Vec<String>,
}

impl Transducer {
    /// A transducer over `vocab` words; about a quarter of them are modifiers.
    pub fn new(vocab: usize, seed: u64) -> Self {
        let mut rng = Rng::derive(seed, "mt-modifiers", 0);
        let modifier = (0..vocab).map(|_| rng.below(4) == 0).collect();
        Transducer {
            modifier,
            source_words: make_words(vocab, "bdfgklmnprstvz", "aeiou"),
            target_words: make_words(vocab, "BDFGKLMNPRSTVZ", "AEIOU"),
        }
    }

    /// Translates a sentence of source ids into target ids.
    ///
    /// Example: with `a` a modifier, `[a n x]` → `[t(n) t(a) t(x)]`.
    pub fn translate(&self, source: &[u32]) -> Vec<u32> {
        let mut out = Vec::with_capacity(source.len());
        let mut i = 0;
        while i < source.len() {
            let w = source[i];
            if self.modifier[w as usize] && i + 1 < source.len() && !self.modifier[source[i + 1] as usize] {
                out.extend([source[i + 1], w]);
                i += 2;
            } else {
                out.push(w);
                i += 1;
            }
        }
        out
    }
}

/// Sentence pairs as text, `(source, target)`, one list per split.
pub type TextPairs = Vec<(String, String)>;

/// Builds `synthetic-mt`: `train_pairs` sentence pairs for training, a tenth as many for
/// valid and test; sentences have 3 to 10 words from an order-1 source of `vocab` words.
pub fn synthetic_mt(vocab: usize, seed: u64, train_pairs: usize) -> Splits<TextPairs> {
    let spec = MarkovSpec { vocab, order: 1, branching: 4, epsilon: 0.2 };
    let source = MarkovSource::new(spec, seed);
    let transducer = Transducer::new(vocab, seed);
    let pairs = |purpose: &str, n: usize| -> TextPairs {
        let mut rng = Rng::derive(seed, purpose, 0);
        (0..n)
            .map(|_| {
                let len = 3 + rng.below(8) as usize;
                let src = source.sample(len, &mut rng);
                let tgt = transducer.translate(&src);
                let text = |ids: &[u32], words: &[String]| {
                    ids.iter().map(|&i| words[i as usize].as_str()).collect::<Vec<_>>().join(" ")
                };
                (text(&src, &transducer.source_words), text(&tgt, &transducer.target_words))
            })
            .collect()
    };
    let held_out = (train_pairs / 10).max(1);
    Splits {
        train: pairs("mt-train", train_pairs),
        valid: pairs("mt-valid", held_out),
        test: pairs("mt-test", held_out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modifier_swaps_with_the_following_non_modifier() {
        let t = Transducer { modifier: vec![true, false, false], source_words: vec![], target_words: vec![] };
        assert_eq!(t.translate(&[0, 1, 2]), [1, 0, 2]);
        assert_eq!(t.translate(&[0, 0, 1]), [0, 1, 0]);
        assert_eq!(t.translate(&[2, 0]), [2, 0]);
    }

    #[test]
    fn generated_datasets_are_reproducible_from_the_seed() {
        let spec = MarkovSpec { vocab: 8, order: 2, branching: 2, epsilon: 0.1 };
        assert_eq!(synthetic_lm(spec, 4, 500).splits, synthetic_lm(spec, 4, 500).splits);
        assert_ne!(synthetic_lm(spec, 4, 500).splits.train, synthetic_lm(spec, 5, 500).splits.train);
        assert_eq!(synthetic_mt(10, 1, 50), synthetic_mt(10, 1, 50));
    }

    #[test]
    fn translation_pairs_keep_the_word_count() {
        for (src, tgt) in synthetic_mt(12, 3, 100).train {
            assert_eq!(src.split(' ').count(), tgt.split(' ').count());
        }
    }
}
