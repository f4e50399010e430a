//! Character and word vocabularies (the BPE one is `attend_bpe::Tokenizer`).
//!
//! - Characters: the sorted distinct characters of the text (nanoGPT's `shakespeare_char`:
//!   `chars = sorted(list(set(data)))`).
//! - Words: whitespace-separated words, one `<eos>` at each line end, `<unk>` for words not
//!   in the vocabulary (Mikolov's PTB convention). The vocabulary is `<unk>`, `<eos>` and the
//!   most frequent words of the training text (ties by the word), up to a cap.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

pub const UNK: &str = "<unk>";
pub const EOS: &str = "<eos>";

/// A list of symbols; the id is the index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vocab {
    /// `"char"` or `"word"`.
    pub kind: String,
    pub symbols: Vec<String>,
    #[serde(skip)]
    index: HashMap<String, u32>,
}

impl Vocab {
    fn new(kind: &str, symbols: Vec<String>) -> Self {
        let index = symbols.iter().enumerate().map(|(i, s)| (s.clone(), i as u32)).collect();
        Vocab { kind: kind.into(), symbols, index }
    }

    /// A vocabulary of the given symbols, in id order.
    pub fn from_symbols(kind: &str, symbols: Vec<String>) -> Self {
        Vocab::new(kind, symbols)
    }

    /// Rebuilds the index after deserializing.
    pub fn reindexed(self) -> Self {
        Vocab::new(&self.kind, self.symbols)
    }

    /// The sorted distinct characters of `text`.
    pub fn chars(text: &str) -> Self {
        let mut chars: Vec<char> = text.chars().collect();
        chars.sort_unstable();
        chars.dedup();
        Vocab::new("char", chars.into_iter().map(String::from).collect())
    }

    /// `<unk>`, `<eos>`, then the words of `text` by falling count (ties by word), at most
    /// `cap` symbols in all (0: no cap).
    pub fn words(text: &str, cap: usize) -> Self {
        let mut counts: HashMap<&str, u64> = HashMap::new();
        for w in text.split_whitespace() {
            *counts.entry(w).or_insert(0) += 1;
        }
        let mut words: Vec<(&str, u64)> = counts.into_iter().filter(|(w, _)| *w != UNK && *w != EOS).collect();
        words.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let mut symbols = vec![UNK.to_string(), EOS.to_string()];
        let room = if cap == 0 { usize::MAX } else { cap.saturating_sub(2) };
        symbols.extend(words.into_iter().take(room).map(|(w, _)| w.to_string()));
        Vocab::new("word", symbols)
    }

    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    pub fn id(&self, symbol: &str) -> Option<u32> {
        self.index.get(symbol).copied()
    }

    /// Ids of `text`. Words: unknown words become `<unk>` and each line ends with `<eos>`.
    /// A symbol that cannot be represented (a character outside a character vocabulary, a
    /// word outside a vocabulary without `<unk>`) is the error, for the caller to report.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        if self.kind == "char" {
            return text
                .chars()
                .map(|c| self.index.get(c.to_string().as_str()).copied().ok_or_else(|| c.to_string()))
                .collect();
        }
        let (Some(&unk), Some(&eos)) = (self.index.get(UNK), self.index.get(EOS)) else {
            // A vocabulary without `<unk>`/`<eos>` (generated words): every word must be known.
            return text.split_whitespace().map(|w| self.id(w).ok_or_else(|| w.to_string())).collect();
        };
        let mut ids = Vec::new();
        for line in text.lines() {
            ids.extend(line.split_whitespace().map(|w| self.id(w).unwrap_or(unk)));
            ids.push(eos);
        }
        Ok(ids)
    }

    /// Ids of a prompt: as [`Vocab::encode`], but no `<eos>` is added at its end.
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>, String> {
        let mut ids = self.encode(text)?;
        if self.kind == "word" && !text.ends_with('\n') && self.id(EOS).is_some_and(|eos| ids.last() == Some(&eos)) {
            ids.pop();
        }
        Ok(ids)
    }

    /// Text of `ids`: characters concatenated; words joined by spaces, `<eos>` as a newline.
    pub fn decode(&self, ids: &[u32]) -> String {
        if self.kind == "char" {
            return ids.iter().filter_map(|&i| self.symbols.get(i as usize)).map(String::as_str).collect();
        }
        let mut out = String::new();
        for &i in ids {
            match self.symbols.get(i as usize).map(String::as_str) {
                Some(EOS) => out.push('\n'),
                Some(w) => {
                    if !out.is_empty() && !out.ends_with('\n') {
                        out.push(' ');
                    }
                    out.push_str(w);
                }
                None => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_vocab_is_sorted_and_round_trips() {
        let v = Vocab::chars("hello world\n");
        assert_eq!(v.symbols.concat(), "\n dehlorw");
        let ids = v.encode("low held").unwrap();
        assert_eq!(v.decode(&ids), "low held");
        assert_eq!(v.encode("x"), Err("x".to_string()));
    }

    #[test]
    fn word_vocab_keeps_most_frequent_and_maps_the_rest_to_unk() {
        let v = Vocab::words("a b a c a b\nd\n", 4);
        assert_eq!(v.symbols, ["<unk>", "<eos>", "a", "b"]);
        assert_eq!(v.encode("a b c\nd").unwrap(), [2, 3, 0, 1, 0, 1]);
        assert_eq!(v.decode(&[2, 3, 1, 2]), "a b\na");
    }
}
