//! BLEU (Papineni et al., 2002, <https://aclanthology.org/P02-1040>) exactly as sacreBLEU 2.x
//! computes it (Post, 2018, <https://aclanthology.org/W18-6319>).
//!
//! - [`stats`]: per segment, the clipped n-gram matches and hypothesis n-grams of orders 1..4,
//!   the hypothesis length and the closest reference length. Corpus statistics are their sum.
//! - [`score`]: from summed statistics, the smoothed precisions, brevity penalty
//!   `min(1, exp(1 − r/c))` and their geometric mean, and the text and JSON forms.
//!
//! A corpus score is computed from summed statistics, never as a mean of sentence scores.

pub mod band;
pub mod score;
pub mod stats;

use rayon::prelude::*;

use crate::signature::BleuSignature;
use crate::{MetricsError, Smoothing, Tokenizer};

pub use band::interpretation;
pub use score::{BleuJson, BleuScore};
pub use stats::BleuStats;

/// BLEU's n-gram orders: 1 to 4.
pub const MAX_NGRAM_ORDER: usize = 4;

/// How BLEU is computed. The presets are sacreBLEU's defaults; change fields as needed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BleuConfig {
    /// Tokenizer applied to hypotheses and references. sacreBLEU default: `13a`.
    pub tokenizer: Tokenizer,
    /// Smoothing of zero precisions. sacreBLEU default: `exp`.
    pub smoothing: Smoothing,
    /// Lowercase hypotheses and references first (`case:lc`). Default: no.
    pub lowercase: bool,
    /// Average only over the n-gram orders the hypothesis has (`eff:yes`). sacreBLEU's
    /// default: no for corpus BLEU, yes for sentence BLEU.
    pub effective_order: bool,
}

impl BleuConfig {
    /// sacreBLEU's `corpus_bleu` defaults: `13a`, `exp`, mixed case, no effective order.
    pub fn corpus() -> Self {
        BleuConfig {
            tokenizer: Tokenizer::Mteval13a,
            smoothing: Smoothing::Exp,
            lowercase: false,
            effective_order: false,
        }
    }

    /// sacreBLEU's `sentence_bleu` defaults: as [`BleuConfig::corpus`] with effective order.
    pub fn sentence() -> Self {
        BleuConfig { effective_order: true, ..Self::corpus() }
    }

    /// The signature of scores computed with this configuration against `nrefs` references.
    pub fn signature(&self, nrefs: usize) -> BleuSignature {
        BleuSignature {
            nrefs,
            lowercase: self.lowercase,
            effective_order: self.effective_order,
            tokenizer: self.tokenizer,
            smoothing: self.smoothing,
        }
    }
}

/// Corpus BLEU of `hyps` against reference streams `refs` (each stream one reference per
/// hypothesis), as sacreBLEU's `BLEU(...).corpus_score(hyps, refs)`.
///
/// Segment statistics are computed in parallel (rayon) and summed.
pub fn corpus_bleu<H, R, S>(hyps: &[H], refs: &[S], config: &BleuConfig) -> Result<BleuScore, MetricsError>
where
    H: AsRef<str> + Sync,
    R: AsRef<str> + Sync,
    S: AsRef<[R]> + Sync,
{
    let stats = corpus_stats(hyps, refs, config)?;
    Ok(BleuScore::from_stats(&stats, config.smoothing, config.effective_order))
}

/// The summed statistics of corpus BLEU; see [`corpus_bleu`].
pub fn corpus_stats<H, R, S>(hyps: &[H], refs: &[S], config: &BleuConfig) -> Result<BleuStats, MetricsError>
where
    H: AsRef<str> + Sync,
    R: AsRef<str> + Sync,
    S: AsRef<[R]> + Sync,
{
    check_streams(hyps.len(), refs.iter().map(|s| s.as_ref().len()))?;
    let stats = (0..hyps.len())
        .into_par_iter()
        .map(|i| {
            let segment_refs: Vec<&str> = refs.iter().map(|s| s.as_ref()[i].as_ref()).collect();
            BleuStats::of_segment(hyps[i].as_ref(), &segment_refs, config)
        })
        .reduce(BleuStats::default, |a, b| a + b);
    Ok(stats)
}

/// Sentence BLEU of one hypothesis against its references, as sacreBLEU's
/// `BLEU(...).sentence_score(hyp, refs)`. Use [`BleuConfig::sentence`] for `sentence_bleu`'s
/// defaults (effective order).
pub fn sentence_bleu(hyp: &str, refs: &[&str], config: &BleuConfig) -> Result<BleuScore, MetricsError> {
    if refs.is_empty() {
        return Err(MetricsError::NoReferences);
    }
    let stats = BleuStats::of_segment(hyp, refs, config);
    Ok(BleuScore::from_stats(&stats, config.smoothing, config.effective_order))
}

/// Checks that there is at least one reference stream and each has one line per hypothesis.
pub(crate) fn check_streams(hyps: usize, stream_lens: impl Iterator<Item = usize>) -> Result<(), MetricsError> {
    let mut any = false;
    for (stream, refs) in stream_lens.enumerate() {
        any = true;
        if refs != hyps {
            return Err(MetricsError::SegmentCountMismatch { stream, hyps, refs });
        }
    }
    if any {
        Ok(())
    } else {
        Err(MetricsError::NoReferences)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readme_example_scores_as_sacrebleu() {
        // sacrebleu 2.6.0 README: BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944
        // hyp_len = 17 ref_len = 18)
        let hyps = ["The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."];
        let refs = [
            vec!["The dog bit the man.", "It was not unexpected.", "The man bit him first."],
            vec!["The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."],
        ];
        let score = corpus_bleu(&hyps, &refs, &BleuConfig::corpus()).unwrap();
        assert_eq!(
            score.format(&BleuConfig::corpus().signature(2)),
            "BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = 48.53 \
             82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)"
        );
    }

    #[test]
    fn reference_stream_of_wrong_length_is_an_error_naming_it() {
        let err = corpus_bleu(&["a", "b"], &[vec!["a", "b"], vec!["a"]], &BleuConfig::corpus()).unwrap_err();
        assert!(matches!(err, MetricsError::SegmentCountMismatch { stream: 1, hyps: 2, refs: 1 }));
    }

    #[test]
    fn no_reference_stream_is_an_error() {
        let none: [Vec<&str>; 0] = [];
        assert!(matches!(corpus_bleu(&["a"], &none, &BleuConfig::corpus()), Err(MetricsError::NoReferences)));
        assert!(matches!(sentence_bleu("a", &[], &BleuConfig::sentence()), Err(MetricsError::NoReferences)));
    }

    /// A two-word hypothesis equal to its reference has no 3- or 4-grams. sentence_bleu's
    /// effective order scores the orders it has (unigram and bigram precision 1): 100.
    /// Without it all four orders count, and an order with no n-grams at all has precision 0
    /// (sacreBLEU stops smoothing at the first empty order): 0. sacreBLEU 2.6.0 gives
    /// 100.00000000000004 and 0.0.
    #[test]
    fn sentence_defaults_use_the_effective_order_and_corpus_defaults_do_not() {
        let sentence = sentence_bleu("the cat", &["the cat"], &BleuConfig::sentence()).unwrap();
        assert!((sentence.score - 100.0).abs() < 1e-9, "{}", sentence.score);
        let corpus = sentence_bleu("the cat", &["the cat"], &BleuConfig::corpus()).unwrap();
        assert_eq!(corpus.score, 0.0);
    }

    #[test]
    fn empty_corpus_scores_zero() {
        let empty: [&str; 0] = [];
        let score = corpus_bleu(&empty, &[empty], &BleuConfig::corpus()).unwrap();
        assert_eq!(score.score, 0.0);
    }
}
