//! Cross-entropy and perplexity from sufficient statistics, in every coding.
//!
//! A model's quality on a text is its total negative log-likelihood `L = −Σₜ ln p(wₜ | w<ₜ)`
//! (nats). Everything else is `L` divided by a count of the text's units:
//!
//! - cross-entropy per token `H = L / T` nats, `H / ln 2` bits; perplexity `exp(H)`;
//! - perplexity per word `exp(L / W)`; bits per character `L / (C · ln 2)`; per byte
//!   `L / (B · ln 2)`.
//!
//! So perplexities of models with different tokenizations (characters, BPE, words) compare
//! through `L`, provided each model represents the same text faithfully (the seed notes). The
//! statistics add across batches and are finalized once: averaging per-batch perplexities
//! would weight batches wrongly and is never done.

use std::f64::consts::LN_2;
use std::ops::{Add, AddAssign};

use serde::Serialize;

use crate::MetricsError;

/// Sufficient statistics of cross-entropy: total negative log-likelihood and token count.
///
/// The total is summed with Neumaier's compensation, so that millions of per-token terms
/// lose no precision (a uniform model's perplexity comes out as its vocabulary size).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CrossEntropyStats {
    nll: f64,
    compensation: f64,
    tokens: u64,
}

impl CrossEntropyStats {
    /// Statistics of `tokens` tokens with total negative log-likelihood `nll` (nats).
    pub fn new(nll: f64, tokens: u64) -> Self {
        CrossEntropyStats { nll, compensation: 0.0, tokens }
    }

    /// Adds one token the model gave probability `exp(log_prob)` (natural log).
    pub fn add_log_prob(&mut self, log_prob: f64) {
        self.add_nll(-log_prob);
        self.tokens += 1;
    }

    /// Adds `nll` nats to the total (Neumaier summation), without counting a token.
    fn add_nll(&mut self, nll: f64) {
        let sum = self.nll + nll;
        self.compensation += if self.nll.abs() >= nll.abs() { (self.nll - sum) + nll } else { (nll - sum) + self.nll };
        self.nll = sum;
    }

    /// Total negative log-likelihood, in nats.
    pub fn nll(&self) -> f64 {
        self.nll + self.compensation
    }

    /// Number of scored tokens.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// Cross-entropy per token, in nats.
    pub fn nats_per_token(&self) -> Result<f64, MetricsError> {
        if self.tokens == 0 {
            return Err(MetricsError::NoTokens);
        }
        Ok(self.nll() / self.tokens as f64)
    }

    /// Finalizes into every coding; `text` adds the per-word, per-character and per-byte ones.
    pub fn report(&self, text: Option<TextCounts>) -> Result<PerplexityReport, MetricsError> {
        let nats = self.nats_per_token()?;
        let per = |units: u64| (units > 0).then(|| self.nll() / units as f64);
        Ok(PerplexityReport {
            tokens: self.tokens,
            nats_per_token: nats,
            bits_per_token: bits_from_nats(nats),
            ppl: perplexity_from_nats(nats),
            ppl_word: text.and_then(|t| per(t.words)).map(perplexity_from_nats),
            bits_per_char: text.and_then(|t| per(t.chars)).map(bits_from_nats),
            bits_per_byte: text.and_then(|t| per(t.bytes)).map(bits_from_nats),
        })
    }
}

impl AddAssign for CrossEntropyStats {
    fn add_assign(&mut self, other: Self) {
        self.add_nll(other.nll);
        self.add_nll(other.compensation);
        self.tokens += other.tokens;
    }
}

impl Add for CrossEntropyStats {
    type Output = Self;

    fn add(mut self, other: Self) -> Self {
        self += other;
        self
    }
}

/// The size of the underlying text in units other than the model's tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TextCounts {
    /// Whitespace-separated words.
    pub words: u64,
    /// Unicode scalar values.
    pub chars: u64,
    /// UTF-8 bytes.
    pub bytes: u64,
}

impl TextCounts {
    /// The counts of `text`.
    ///
    /// Example: `"ab cé\n"` → 2 words, 6 characters, 7 bytes.
    pub fn of_text(text: &str) -> Self {
        TextCounts {
            words: text.split_whitespace().count() as u64,
            chars: text.chars().count() as u64,
            bytes: text.len() as u64,
        }
    }

    /// The counts of `lines` joined with one `\n` after each, which is the `<eos>` a
    /// line-based model predicts: words exclude it, characters and bytes include it.
    pub fn of_lines<S: AsRef<str>>(lines: &[S]) -> Self {
        lines.iter().fold(TextCounts::default(), |acc, line| {
            let c = TextCounts::of_text(line.as_ref());
            TextCounts { words: acc.words + c.words, chars: acc.chars + c.chars + 1, bytes: acc.bytes + c.bytes + 1 }
        })
    }
}

/// Cross-entropy and perplexity in every coding the text's counts allow.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PerplexityReport {
    /// Scored tokens.
    pub tokens: u64,
    /// Cross-entropy per token, nats.
    pub nats_per_token: f64,
    /// Cross-entropy per token, bits.
    pub bits_per_token: f64,
    /// Perplexity per token, `exp(nats_per_token)`.
    pub ppl: f64,
    /// Perplexity per word, `exp(L / words)`.
    pub ppl_word: Option<f64>,
    /// Bits per character, `L / (chars · ln 2)`.
    pub bits_per_char: Option<f64>,
    /// Bits per byte, `L / (bytes · ln 2)`.
    pub bits_per_byte: Option<f64>,
}

/// `exp(h)`: perplexity of a cross-entropy `h` in nats.
pub fn perplexity_from_nats(nats: f64) -> f64 {
    nats.exp()
}

/// `ln(ppl)`: cross-entropy in nats of a perplexity.
pub fn nats_from_perplexity(ppl: f64) -> f64 {
    ppl.ln()
}

/// `h / ln 2`: nats to bits.
pub fn bits_from_nats(nats: f64) -> f64 {
    nats / LN_2
}

/// `b · ln 2`: bits to nats.
pub fn nats_from_bits(bits: f64) -> f64 {
    bits * LN_2
}

/// Perplexity per `to` unit from perplexity per `from` unit of the same text:
/// `ppl_to = ppl_from^(from / to)`, since both are `exp(L / units)`.
///
/// Example: 100 tokens at perplexity 8 are 50 words at perplexity 64.
pub fn convert_perplexity(ppl: f64, from_units: u64, to_units: u64) -> f64 {
    (nats_from_perplexity(ppl) * from_units as f64 / to_units as f64).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten million tokens of a uniform model over 50,257 symbols: compensated summation keeps
    /// the perplexity at the vocabulary size to 1e-12 (plain summation is 2.7e-9 off
    /// here), and a text with no words has no per-word perplexity rather than an infinite one.
    #[test]
    fn a_long_sum_keeps_its_precision_and_zero_units_give_no_figure() {
        let v = 50_257.0f64;
        let mut stats = CrossEntropyStats::default();
        for _ in 0..10_000_000 {
            stats.add_log_prob(-v.ln());
        }
        let report = stats.report(Some(TextCounts { words: 0, chars: 10, bytes: 10 })).unwrap();
        assert!((report.ppl - v).abs() / v < 1e-12, "{}", report.ppl);
        assert_eq!(report.ppl_word, None);
        assert!(report.bits_per_char.is_some());
    }

    #[test]
    fn uniform_model_has_perplexity_equal_to_vocab_size() {
        for m in [2u32, 10, 65, 10_000, 50_257] {
            let mut stats = CrossEntropyStats::default();
            for _ in 0..1000 {
                stats.add_log_prob(-(m as f64).ln());
            }
            let report = stats.report(None).unwrap();
            assert!((report.ppl - m as f64).abs() <= 1e-12 * m as f64, "m = {m}: {}", report.ppl);
            assert!((report.bits_per_token - (m as f64).log2()).abs() < 1e-12);
        }
    }

    #[test]
    fn uniform_model_over_bytes_has_eight_bits_per_byte() {
        let text = "some text\n";
        let mut stats = CrossEntropyStats::default();
        for _ in 0..text.len() {
            stats.add_log_prob(-(256f64).ln());
        }
        let report = stats.report(Some(TextCounts::of_text(text))).unwrap();
        assert!((report.bits_per_byte.unwrap() - 8.0).abs() < 1e-12);
        assert!((report.ppl - 256.0).abs() < 1e-9);
    }

    #[test]
    fn per_word_perplexity_goes_through_the_total_log_likelihood() {
        // 100 tokens at perplexity 8 = 50 words at perplexity 64.
        let stats = CrossEntropyStats::new(100.0 * 8f64.ln(), 100);
        let report = stats.report(Some(TextCounts { words: 50, chars: 300, bytes: 300 })).unwrap();
        assert!((report.ppl_word.unwrap() - 64.0).abs() < 1e-9);
        assert!((convert_perplexity(8.0, 100, 50) - 64.0).abs() < 1e-9);
        assert!((report.bits_per_char.unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn statistics_add_rather_than_average_perplexities() {
        // Batch 1: 10 tokens at ppl e; batch 2: 30 tokens at ppl e^3 → ppl e^2.5, not e^2.
        let total = CrossEntropyStats::new(10.0, 10) + CrossEntropyStats::new(90.0, 30);
        assert!((total.report(None).unwrap().nats_per_token - 2.5).abs() < 1e-15);
    }

    #[test]
    fn no_tokens_is_an_error_not_nan() {
        assert!(matches!(CrossEntropyStats::default().report(None), Err(MetricsError::NoTokens)));
    }

    #[test]
    fn text_counts_of_lines_include_one_newline_per_line() {
        assert_eq!(TextCounts::of_lines(&["ab cé", ""]), TextCounts { words: 2, chars: 7, bytes: 8 });
        assert_eq!(TextCounts::of_text("ab cé\n"), TextCounts { words: 2, chars: 6, bytes: 7 });
    }
}
