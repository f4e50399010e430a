//! sacreBLEU's reproducibility signatures: the settings a score was computed with, printed
//! beside it (`nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0`).
//!
//! The `version` field names the sacreBLEU release whose numbers ours are tested equal to
//! ([`SACREBLEU_VERSION`], the version that generated `tests/fixtures/`), so that a signature
//! printed by attend means what the same signature printed by sacreBLEU means.

use std::fmt;

use crate::{Smoothing, Tokenizer};

/// The sacreBLEU release our BLEU and chrF are tested against (`tests/fixtures/`).
pub const SACREBLEU_VERSION: &str = "2.6.0";

/// The signature of a BLEU score, field for field sacreBLEU's `BLEUSignature`.
#[derive(Clone, Debug, PartialEq)]
pub struct BleuSignature {
    /// Number of reference streams.
    pub nrefs: usize,
    /// `case:lc` when lowercased, else `case:mixed`.
    pub lowercase: bool,
    /// `eff:yes` with effective order (sentence BLEU), else `eff:no`.
    pub effective_order: bool,
    /// `tok:13a`, ...
    pub tokenizer: Tokenizer,
    /// `smooth:exp`, `smooth:floor[0.10]`, ...
    pub smoothing: Smoothing,
}

impl BleuSignature {
    /// The `key:value` fields in sacreBLEU's order (version last).
    pub fn fields(&self) -> [(&'static str, String); 6] {
        [
            ("nrefs", self.nrefs.to_string()),
            ("case", case(self.lowercase).to_string()),
            ("eff", yes_no(self.effective_order).to_string()),
            ("tok", self.tokenizer.name().to_string()),
            ("smooth", self.smoothing.to_string()),
            ("version", SACREBLEU_VERSION.to_string()),
        ]
    }
}

impl fmt::Display for BleuSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_fields(f, &self.fields())
    }
}

/// The signature of a chrF score, field for field sacreBLEU's `CHRFSignature`.
#[derive(Clone, Debug, PartialEq)]
pub struct ChrfSignature {
    /// Number of reference streams.
    pub nrefs: usize,
    /// `case:lc` when lowercased, else `case:mixed`.
    pub lowercase: bool,
    /// `eff:no` with epsilon smoothing, `eff:yes` with effective-order averaging (default).
    pub eps_smoothing: bool,
    /// `nc:6`: character n-gram order.
    pub char_order: usize,
    /// `nw:0` (chrF) or `nw:2` (chrF++): word n-gram order.
    pub word_order: usize,
    /// `space:yes` when whitespace is part of the character n-grams.
    pub whitespace: bool,
}

impl ChrfSignature {
    /// The `key:value` fields in sacreBLEU's order (version last).
    pub fn fields(&self) -> [(&'static str, String); 7] {
        [
            ("nrefs", self.nrefs.to_string()),
            ("case", case(self.lowercase).to_string()),
            ("eff", yes_no(!self.eps_smoothing).to_string()),
            ("nc", self.char_order.to_string()),
            ("nw", self.word_order.to_string()),
            ("space", yes_no(self.whitespace).to_string()),
            ("version", SACREBLEU_VERSION.to_string()),
        ]
    }
}

impl fmt::Display for ChrfSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_fields(f, &self.fields())
    }
}

fn case(lowercase: bool) -> &'static str {
    if lowercase {
        "lc"
    } else {
        "mixed"
    }
}

fn yes_no(flag: bool) -> &'static str {
    if flag {
        "yes"
    } else {
        "no"
    }
}

fn write_fields(f: &mut fmt::Formatter<'_>, fields: &[(&'static str, String)]) -> fmt::Result {
    for (i, (key, value)) in fields.iter().enumerate() {
        if i > 0 {
            f.write_str("|")?;
        }
        write!(f, "{key}:{value}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_bleu_signature_reads_as_sacrebleus() {
        let sig = BleuSignature {
            nrefs: 1,
            lowercase: false,
            effective_order: false,
            tokenizer: Tokenizer::Mteval13a,
            smoothing: Smoothing::Exp,
        };
        assert_eq!(sig.to_string(), "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
    }

    #[test]
    fn chrf_plus_plus_signature_reads_as_sacrebleus() {
        let sig = ChrfSignature {
            nrefs: 2,
            lowercase: true,
            eps_smoothing: false,
            char_order: 6,
            word_order: 2,
            whitespace: false,
        };
        assert_eq!(sig.to_string(), "nrefs:2|case:lc|eff:yes|nc:6|nw:2|space:no|version:2.6.0");
    }
}
