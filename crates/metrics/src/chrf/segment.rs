//! One segment's side of chrF: the text its character n-grams are read from (whitespace
//! removed unless `whitespace`), its words with punctuation split off as sacreBLEU does, the
//! n-gram counts per order, and the clipped matches of a hypothesis against a reference.

use rustc_hash::FxHashMap;

use super::{ChrfConfig, NgramMatches};
use crate::text::{py_lower, py_split};

pub(super) fn preprocess<'a>(line: &'a str, config: &ChrfConfig) -> std::borrow::Cow<'a, str> {
    if config.lowercase {
        py_lower(line).into()
    } else {
        line.into()
    }
}

/// One side of a comparison: the text character n-grams are read from, and the words.
pub(super) struct Side<'a> {
    chars_text: std::borrow::Cow<'a, str>,
    words: Vec<&'a str>,
}

impl<'a> Side<'a> {
    pub(super) fn new(line: &'a str, config: &ChrfConfig) -> Self {
        let chars_text = if config.whitespace { line.into() } else { py_split(line).collect::<String>().into() };
        let words = if config.word_order > 0 { split_punctuation(line) } else { Vec::new() };
        Side { chars_text, words }
    }

    /// Counts per order: character orders 1..=char_order, then word orders 1..=word_order.
    pub(super) fn ngrams(&self, config: &ChrfConfig) -> Vec<FxHashMap<Ngram<'_>, u32>> {
        let bounds: Vec<usize> =
            self.chars_text.char_indices().map(|(i, _)| i).chain([self.chars_text.len()]).collect();
        let n_chars = bounds.len() - 1;
        let mut out = Vec::with_capacity(config.orders());
        for n in 1..=config.char_order {
            let mut counts = FxHashMap::default();
            for i in 0..(n_chars + 1).saturating_sub(n) {
                *counts.entry(Ngram::Chars(&self.chars_text[bounds[i]..bounds[i + n]])).or_insert(0) += 1;
            }
            out.push(counts);
        }
        for n in 1..=config.word_order {
            let mut counts = FxHashMap::default();
            for window in self.words.windows(n) {
                *counts.entry(Ngram::Words(window)).or_insert(0) += 1;
            }
            out.push(counts);
        }
        out
    }
}

/// A character n-gram (a substring) or a word n-gram (a run of words).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Ngram<'a> {
    Chars(&'a str),
    Words(&'a [&'a str]),
}

/// sacreBLEU's `_get_match_statistics`.
pub(super) fn match_statistics(hyp: &FxHashMap<Ngram<'_>, u32>, reference: &FxHashMap<Ngram<'_>, u32>) -> NgramMatches {
    let mut m = NgramMatches::default();
    for (ngram, &count) in hyp {
        m.hyp += u64::from(count);
        if let Some(&r) = reference.get(ngram) {
            m.matched += u64::from(count.min(r));
        }
    }
    if reference.is_empty() {
        m.hyp = 0;
    }
    m.reference = reference.values().map(|&c| u64::from(c)).sum();
    m
}

/// sacreBLEU's `CHRF._remove_punctuation`: whitespace split; a word longer than one character
/// ending in ASCII punctuation loses that last character to a token of its own, else one
/// starting with it loses the first.
///
/// Example: `"(hi) there, x"` → `["(hi", ")", "there", ",", "x"]` (sacreBLEU issue #124).
pub fn split_punctuation(line: &str) -> Vec<&str> {
    let mut words = Vec::new();
    for w in py_split(line) {
        let mut chars = w.chars();
        let (first, last) = (chars.next(), chars.next_back());
        match (first, last) {
            (Some(_), Some(l)) if is_punct(l) => {
                let cut = w.len() - l.len_utf8();
                words.extend([&w[..cut], &w[cut..]]);
            }
            (Some(f), Some(_)) if is_punct(f) => {
                let cut = f.len_utf8();
                words.extend([&w[..cut], &w[cut..]]);
            }
            _ => words.push(w),
        }
    }
    words
}

/// Python's `string.punctuation`.
fn is_punct(c: char) -> bool {
    c.is_ascii_punctuation()
}
