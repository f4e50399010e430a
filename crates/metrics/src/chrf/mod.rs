//! chrF (Popović, 2015, <https://aclanthology.org/W15-3049>) and chrF++ (Popović, 2017,
//! <https://aclanthology.org/W17-4770>) exactly as sacreBLEU 2.x computes them.
//!
//! Per n-gram order (character orders 1..=6, then word orders 1..=`word_order`), the
//! statistics are hypothesis n-grams, reference n-grams and clipped matches. Character n-grams
//! are taken from the line with its whitespace removed; words come from a whitespace split
//! in which one leading or trailing ASCII punctuation character is split off
//! (`_remove_punctuation`). With several references, a segment keeps the statistics of the
//! reference with the best segment-level F-score (the first on ties). The corpus statistics
//! are the sum over segments; then, by default (`eff:yes`), precision and recall are averaged
//! over the orders where both sides have n-grams, and `chrF = 100 · (1+β²)·P·R / (β²·P + R)`.
//! With `eps_smoothing` the F-scores of all orders are averaged instead (chrF++.py, Moses, NLTK).

use rayon::prelude::*;
use serde::Serialize;
use std::ops::AddAssign;

mod segment;

pub use segment::split_punctuation;
use segment::{match_statistics, preprocess, Side};

use crate::bleu::check_streams;
use crate::signature::ChrfSignature;
use crate::MetricsError;

/// How chrF is computed. The presets are sacreBLEU's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChrfConfig {
    /// Character n-gram order. Default: 6.
    pub char_order: usize,
    /// Word n-gram order: 0 for chrF, 2 for chrF++ (Popović 2017).
    pub word_order: usize,
    /// Recall is β times as important as precision. Default: 2.
    pub beta: u32,
    /// Lowercase hypotheses and references first. Default: no.
    pub lowercase: bool,
    /// Keep whitespace inside character n-grams. Default: no.
    pub whitespace: bool,
    /// Average per-order F-scores with ε = 1e-16 for empty orders (`eff:no`). Default: no.
    pub eps_smoothing: bool,
}

impl ChrfConfig {
    /// sacreBLEU's `CHRF()` defaults: chrF2 with character 6-grams.
    pub fn chrf() -> Self {
        ChrfConfig { char_order: 6, word_order: 0, beta: 2, lowercase: false, whitespace: false, eps_smoothing: false }
    }

    /// sacreBLEU's `CHRF(word_order=2)`: chrF2++.
    pub fn chrf_plus_plus() -> Self {
        ChrfConfig { word_order: 2, ..Self::chrf() }
    }

    /// The signature of scores computed with this configuration against `nrefs` references.
    pub fn signature(&self, nrefs: usize) -> ChrfSignature {
        ChrfSignature {
            nrefs,
            lowercase: self.lowercase,
            eps_smoothing: self.eps_smoothing,
            char_order: self.char_order,
            word_order: self.word_order,
            whitespace: self.whitespace,
        }
    }

    /// The metric's name: `chrF2`, `chrF2++` (one `+` per word order).
    pub fn name(&self) -> String {
        format!("chrF{}{}", self.beta, "+".repeat(self.word_order))
    }

    fn orders(&self) -> usize {
        self.char_order + self.word_order
    }
}

/// Counts for one n-gram order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NgramMatches {
    /// Hypothesis n-grams (0 when the reference has none of this order).
    pub hyp: u64,
    /// Reference n-grams.
    pub reference: u64,
    /// Clipped matches.
    pub matched: u64,
}

/// chrF's sufficient statistics: one [`NgramMatches`] per order, character orders first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChrfStats {
    pub orders: Vec<NgramMatches>,
}

impl AddAssign<&ChrfStats> for ChrfStats {
    fn add_assign(&mut self, other: &ChrfStats) {
        if self.orders.len() < other.orders.len() {
            self.orders.resize(other.orders.len(), NgramMatches::default());
        }
        for (mine, theirs) in self.orders.iter_mut().zip(&other.orders) {
            mine.hyp += theirs.hyp;
            mine.reference += theirs.reference;
            mine.matched += theirs.matched;
        }
    }
}

impl ChrfStats {
    /// The statistics of one hypothesis against its best reference (sacreBLEU's
    /// `_compute_segment_statistics`).
    pub fn of_segment(hyp: &str, refs: &[&str], config: &ChrfConfig) -> ChrfStats {
        let hyp = preprocess(hyp, config);
        let hyp_side = Side::new(&hyp, config);
        let hyp_ngrams = hyp_side.ngrams(config);
        let mut best = ChrfStats::default();
        let mut best_f = -1.0;
        for reference in refs {
            let reference = preprocess(reference, config);
            let ref_side = Side::new(&reference, config);
            let ref_ngrams = ref_side.ngrams(config);
            let stats =
                ChrfStats { orders: hyp_ngrams.iter().zip(&ref_ngrams).map(|(h, r)| match_statistics(h, r)).collect() };
            let f = f_score(&stats, config);
            if f > best_f {
                best_f = f;
                best = stats;
            }
        }
        best
    }
}

/// A chrF score.
#[derive(Clone, Debug, PartialEq)]
pub struct ChrfScore {
    /// `chrF2`, `chrF2++`, ...
    pub name: String,
    /// The score in percent, unrounded.
    pub score: f64,
    /// The corpus statistics it was computed from.
    pub stats: ChrfStats,
}

impl ChrfScore {
    /// The line sacreBLEU's command line prints: `chrF2|<signature> = 55.87`.
    pub fn format(&self, signature: &ChrfSignature) -> String {
        format!("{}|{signature} = {:.2}", self.name, self.score)
    }

    /// The JSON form: sacreBLEU's keys (`score` unrounded) plus the per-order statistics.
    pub fn to_json(&self, signature: &ChrfSignature) -> ChrfJson {
        let [nrefs, case, eff, nc, nw, space, version] = signature.fields().map(|(_, value)| value);
        ChrfJson {
            name: self.name.clone(),
            score: self.score,
            signature: signature.to_string(),
            nrefs,
            case,
            eff,
            nc,
            nw,
            space,
            version,
            stats: self.stats.orders.clone(),
        }
    }
}

/// The JSON object of a chrF score: sacreBLEU's `--format json` keys, then `stats`.
#[derive(Clone, Debug, Serialize)]
pub struct ChrfJson {
    pub name: String,
    pub score: f64,
    pub signature: String,
    pub nrefs: String,
    pub case: String,
    pub eff: String,
    pub nc: String,
    pub nw: String,
    pub space: String,
    pub version: String,
    pub stats: Vec<NgramMatches>,
}

/// Corpus chrF of `hyps` against reference streams `refs`, as sacreBLEU's
/// `CHRF(...).corpus_score(hyps, refs)`.
pub fn corpus_chrf<H, R, S>(hyps: &[H], refs: &[S], config: &ChrfConfig) -> Result<ChrfScore, MetricsError>
where
    H: AsRef<str> + Sync,
    R: AsRef<str> + Sync,
    S: AsRef<[R]> + Sync,
{
    check_config(config)?;
    check_streams(hyps.len(), refs.iter().map(|s| s.as_ref().len()))?;
    let stats = (0..hyps.len())
        .into_par_iter()
        .map(|i| {
            let segment_refs: Vec<&str> = refs.iter().map(|s| s.as_ref()[i].as_ref()).collect();
            ChrfStats::of_segment(hyps[i].as_ref(), &segment_refs, config)
        })
        .reduce(ChrfStats::default, |mut a, b| {
            a += &b;
            a
        });
    Ok(score_from_stats(stats, config))
}

/// Sentence chrF of one hypothesis against its references.
pub fn sentence_chrf(hyp: &str, refs: &[&str], config: &ChrfConfig) -> Result<ChrfScore, MetricsError> {
    check_config(config)?;
    if refs.is_empty() {
        return Err(MetricsError::NoReferences);
    }
    Ok(score_from_stats(ChrfStats::of_segment(hyp, refs, config), config))
}

fn check_config(config: &ChrfConfig) -> Result<(), MetricsError> {
    if config.orders() == 0 {
        return Err(MetricsError::InvalidSetting {
            name: "chrF char_order + word_order",
            value: "0".to_string(),
            reason: "at least one n-gram order is needed",
        });
    }
    Ok(())
}

fn score_from_stats(mut stats: ChrfStats, config: &ChrfConfig) -> ChrfScore {
    stats.orders.resize(config.orders(), NgramMatches::default());
    ChrfScore { name: config.name(), score: f_score(&stats, config), stats }
}

/// sacreBLEU's `CHRF._compute_f_score`, operation for operation.
pub fn f_score(stats: &ChrfStats, config: &ChrfConfig) -> f64 {
    const EPS: f64 = 1e-16;
    let factor = f64::from(config.beta * config.beta);
    let (mut score, mut avg_prec, mut avg_rec, mut effective_order) = (0.0, 0.0, 0.0, 0usize);
    for m in stats.orders.iter().take(config.orders()) {
        let prec = if m.hyp > 0 { m.matched as f64 / m.hyp as f64 } else { EPS };
        let rec = if m.reference > 0 { m.matched as f64 / m.reference as f64 } else { EPS };
        let denom = factor * prec + rec;
        score += if denom > 0.0 { (1.0 + factor) * prec * rec / denom } else { EPS };
        if m.hyp > 0 && m.reference > 0 {
            avg_prec += prec;
            avg_rec += rec;
            effective_order += 1;
        }
    }
    if config.eps_smoothing {
        return 100.0 * score / config.orders() as f64;
    }
    if effective_order == 0 {
        avg_prec = 0.0;
        avg_rec = 0.0;
    } else {
        avg_prec /= effective_order as f64;
        avg_rec /= effective_order as f64;
    }
    if avg_prec + avg_rec != 0.0 {
        let f = (1.0 + factor) * avg_prec * avg_rec;
        100.0 * (f / (factor * avg_prec + avg_rec))
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn punctuation_is_split_from_one_end_only() {
        assert_eq!(split_punctuation("(hi) there, x ."), ["(hi", ")", "there", ",", "x", "."]);
        assert_eq!(split_punctuation("\"quoted"), ["\"", "quoted"]);
    }

    /// Short segments leave the high character orders empty on one side. Without
    /// `eps_smoothing` the average runs over the orders both sides have; with it, an empty
    /// order's precision or recall is ε, and so is the F-score of an order with neither.
    /// sacreBLEU 2.6.0's figures, to the last digit printed.
    #[test]
    fn empty_orders_are_skipped_or_smoothed_as_sacrebleu_does() {
        let eps = ChrfConfig { eps_smoothing: true, ..ChrfConfig::chrf() };
        let cases = [
            ("ab", "abc abd", ChrfConfig::chrf(), 31.25),
            ("ab", "abc abd", ChrfConfig::chrf_plus_plus(), 20.833333333333336),
            ("ab", "abc abd", eps, 10.378510378510379),
            ("abc abd", "ab", ChrfConfig::chrf(), 64.51612903225808),
            ("abc abd", "ab", eps, 21.16402116402116),
            ("", "the cat sat", ChrfConfig::chrf_plus_plus(), 0.0),
            ("", "abc abd", eps, 0.0),
            // No character in common: precision and recall 0 at orders 1 and 2, and ε their
            // F-score, not 0/0.
            ("xy", "ab", eps, 1.0000000000000002e-14),
        ];
        for (hyp, reference, config, expected) in cases {
            let got = sentence_chrf(hyp, &[reference], &config).unwrap().score;
            // The same operations in the same order: the same double, ε's traces included.
            assert_eq!(got, expected, "{hyp:?} / {reference:?}");
        }
    }

    #[test]
    fn identical_segments_score_one_hundred() {
        let s = sentence_chrf("The cat sat.", &["The cat sat."], &ChrfConfig::chrf_plus_plus()).unwrap();
        assert!((s.score - 100.0).abs() < 1e-12);
    }

    #[test]
    fn the_best_reference_is_the_one_with_the_highest_f_score() {
        let config = ChrfConfig::chrf();
        let one = sentence_chrf("the cat", &["a dog"], &config).unwrap().score;
        let both = sentence_chrf("the cat", &["a dog", "the cat"], &config).unwrap().score;
        assert!(one < 50.0 && (both - 100.0).abs() < 1e-12);
    }

    #[test]
    fn names_count_word_orders_in_plus_signs() {
        assert_eq!(ChrfConfig::chrf().name(), "chrF2");
        assert_eq!(ChrfConfig::chrf_plus_plus().name(), "chrF2++");
    }

    #[test]
    fn zero_orders_is_an_error() {
        let config = ChrfConfig { char_order: 0, ..ChrfConfig::chrf() };
        assert!(sentence_chrf("a", &["a"], &config).is_err());
    }
}
