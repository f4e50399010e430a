//! BLEU from its sufficient statistics, and the forms sacreBLEU prints it in.
//!
//! `BLEU = BP · exp((1/N) Σₙ log pₙ)` with `pₙ` the smoothed precisions (percent), `N` the
//! number of orders (4, or the effective order), and the brevity penalty
//! `BP = min(1, exp(1 − r/c))` (c = hypothesis length, r = reference length; 0 when c = 0).
//! A zero precision enters the sum as sacreBLEU's `my_log(0) = −9999999999`, so the score is
//! then 0. With no match of any order the score is 0 outright (sacreBLEU issue #141).
//! The operations are sacreBLEU's `compute_bleu`, in its order, so results agree to the bit.

use serde::Serialize;

use super::{BleuStats, MAX_NGRAM_ORDER};
use crate::signature::BleuSignature;
use crate::smoothing::smoothed_precisions;
use crate::Smoothing;

/// A BLEU score with the numbers behind it.
#[derive(Clone, Debug, PartialEq)]
pub struct BleuScore {
    /// BLEU in percent, unrounded.
    pub score: f64,
    /// Clipped n-gram matches per order (raw, before any smoothing).
    pub counts: [u64; MAX_NGRAM_ORDER],
    /// Hypothesis n-grams per order (raw, before any smoothing).
    pub totals: [u64; MAX_NGRAM_ORDER],
    /// Smoothed precisions per order, in percent.
    pub precisions: [f64; MAX_NGRAM_ORDER],
    /// Brevity penalty.
    pub bp: f64,
    /// Hypothesis length (`hyp_len`).
    pub sys_len: u64,
    /// Reference length (`ref_len`).
    pub ref_len: u64,
}

impl BleuScore {
    /// BLEU from summed statistics: sacreBLEU's `BLEU.compute_bleu`.
    pub fn from_stats(stats: &BleuStats, smoothing: Smoothing, effective_order: bool) -> BleuScore {
        let bp = brevity_penalty(stats.sys_len, stats.ref_len);
        let mut score = BleuScore {
            score: 0.0,
            counts: stats.correct,
            totals: stats.total,
            precisions: [0.0; MAX_NGRAM_ORDER],
            bp,
            sys_len: stats.sys_len,
            ref_len: stats.ref_len,
        };
        // No match of any order: 0, with precisions left at 0 (sacreBLEU #141).
        if stats.correct.iter().all(|&c| c == 0) {
            return score;
        }
        let (precisions, eff_order) = smoothed_precisions(&stats.correct, &stats.total, smoothing, effective_order);
        let log_sum = precisions[..eff_order].iter().fold(0.0, |sum, &p| sum + floored_log(p));
        score.precisions = precisions;
        score.score = bp * (log_sum / eff_order as f64).exp();
        score
    }

    /// Hypothesis length over reference length, 0 without reference tokens.
    pub fn ratio(&self) -> f64 {
        if self.ref_len == 0 {
            0.0
        } else {
            self.sys_len as f64 / self.ref_len as f64
        }
    }

    /// The part after the score: `67.1/42.3/28.6/19.7 (BP = 1.000 ratio = 1.012 hyp_len = …
    /// ref_len = …)`.
    pub fn verbose(&self) -> String {
        let precisions: Vec<String> = self.precisions.iter().map(|p| format!("{p:.1}")).collect();
        format!(
            "{} (BP = {:.3} ratio = {:.3} hyp_len = {} ref_len = {})",
            precisions.join("/"),
            self.bp,
            self.ratio(),
            self.sys_len,
            self.ref_len
        )
    }

    /// The line sacreBLEU's command line prints: `BLEU|<signature> = 36.52 <verbose>`.
    pub fn format(&self, signature: &BleuSignature) -> String {
        format!("BLEU|{signature} = {:.2} {}", self.score, self.verbose())
    }

    /// The JSON form: sacreBLEU's keys (`score` unrounded) plus the statistics.
    pub fn to_json(&self, signature: &BleuSignature) -> BleuJson {
        let [nrefs, case, eff, tok, smooth, version] = signature.fields().map(|(_, value)| value);
        BleuJson {
            name: "BLEU",
            score: self.score,
            signature: signature.to_string(),
            verbose_score: self.verbose(),
            nrefs,
            case,
            eff,
            tok,
            smooth,
            version,
            counts: self.counts,
            totals: self.totals,
            bp: self.bp,
            sys_len: self.sys_len,
            ref_len: self.ref_len,
        }
    }
}

/// The JSON object of a BLEU score, keys in this order: sacreBLEU's `--format json` keys
/// (`score` unrounded, signature fields as strings), then the statistics.
#[derive(Clone, Debug, Serialize)]
pub struct BleuJson {
    pub name: &'static str,
    pub score: f64,
    pub signature: String,
    pub verbose_score: String,
    pub nrefs: String,
    pub case: String,
    pub eff: String,
    pub tok: String,
    pub smooth: String,
    pub version: String,
    pub counts: [u64; MAX_NGRAM_ORDER],
    pub totals: [u64; MAX_NGRAM_ORDER],
    pub bp: f64,
    pub sys_len: u64,
    pub ref_len: u64,
}

/// `min(1, exp(1 − r/c))`, and 0 for an empty hypothesis side (c = 0 < r).
///
/// Example: c = 17, r = 18 → exp(1 − 18/17) = 0.9429.
pub fn brevity_penalty(sys_len: u64, ref_len: u64) -> f64 {
    if sys_len >= ref_len {
        1.0
    } else if sys_len == 0 {
        0.0
    } else {
        (1.0 - ref_len as f64 / sys_len as f64).exp()
    }
}

/// sacreBLEU's `my_log`: `ln(p)`, and −9999999999 for 0.
fn floored_log(p: f64) -> f64 {
    if p == 0.0 {
        -9_999_999_999.0
    } else {
        p.ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brevity_penalty_is_one_for_long_hypotheses_and_zero_for_empty_ones() {
        assert_eq!(brevity_penalty(10, 9), 1.0);
        assert_eq!(brevity_penalty(10, 10), 1.0);
        assert_eq!(brevity_penalty(0, 5), 0.0);
        assert_eq!(brevity_penalty(0, 0), 1.0);
        assert!((brevity_penalty(17, 18) - (1.0f64 - 18.0 / 17.0).exp()).abs() < 1e-15);
    }

    #[test]
    fn identical_hypothesis_and_reference_score_one_hundred() {
        let stats = BleuStats { sys_len: 5, ref_len: 5, correct: [5, 4, 3, 2], total: [5, 4, 3, 2] };
        let score = BleuScore::from_stats(&stats, Smoothing::Exp, false);
        assert!((score.score - 100.0).abs() < 1e-12);
    }

    #[test]
    fn no_matches_score_zero_with_zero_precisions() {
        let stats = BleuStats { sys_len: 3, ref_len: 4, correct: [0; 4], total: [3, 2, 1, 0] };
        let score = BleuScore::from_stats(&stats, Smoothing::Floor(0.1), false);
        assert_eq!((score.score, score.precisions), (0.0, [0.0; 4]));
    }

    #[test]
    fn a_missing_order_without_smoothing_scores_zero_unless_effective_order() {
        let stats = BleuStats { sys_len: 2, ref_len: 2, correct: [2, 1, 0, 0], total: [2, 1, 0, 0] };
        assert_eq!(BleuScore::from_stats(&stats, Smoothing::None, false).score, 0.0);
        let eff = BleuScore::from_stats(&stats, Smoothing::None, true);
        assert!((eff.score - 100.0).abs() < 1e-12);
    }

    #[test]
    fn ratio_of_empty_references_is_zero() {
        let stats = BleuStats { sys_len: 3, ref_len: 0, correct: [0; 4], total: [3, 2, 1, 0] };
        assert_eq!(BleuScore::from_stats(&stats, Smoothing::Exp, false).ratio(), 0.0);
    }
}
