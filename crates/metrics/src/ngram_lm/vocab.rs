//! The word vocabulary of the n-gram baselines: training types plus `<eos>` and `<unk>`.
//!
//! Ids follow first occurrence in the training text; `<eos>` and `<unk>` get the next ids if
//! the text does not contain them. The sentence start `<s>` has the id just past the
//! vocabulary ([`Vocab::bos`]): it is a context, never a prediction, so it is not one of the
//! `len()` outcomes a model distributes probability over.

use rustc_hash::FxHashMap;

/// The end-of-sentence token, predicted once per line.
pub const EOS: &str = "<eos>";
/// The unknown-word token; words outside the training vocabulary map to it.
pub const UNK: &str = "<unk>";

/// Word ↔ id over the training vocabulary.
#[derive(Clone, Debug)]
pub struct Vocab {
    words: Vec<String>,
    ids: FxHashMap<String, u32>,
}

impl Vocab {
    /// The vocabulary of whitespace-separated words in `lines`, plus `<eos>` and `<unk>`.
    ///
    /// Example: `["b a", "a"]` → `b`=0, `a`=1, `<eos>`=2, `<unk>`=3; `<s>` = 4.
    pub fn from_lines<S: AsRef<str>>(lines: &[S]) -> Self {
        let mut vocab = Vocab { words: Vec::new(), ids: FxHashMap::default() };
        for line in lines {
            for word in line.as_ref().split_whitespace() {
                vocab.insert(word);
            }
        }
        vocab.insert(EOS);
        vocab.insert(UNK);
        vocab
    }

    fn insert(&mut self, word: &str) {
        if !self.ids.contains_key(word) {
            self.ids.insert(word.to_string(), self.words.len() as u32);
            self.words.push(word.to_string());
        }
    }

    /// Number of predictable words (`<eos>` and `<unk>` included, `<s>` not).
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Always false: `<eos>` and `<unk>` are always in.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The id of `word`, or `<unk>`'s.
    pub fn id(&self, word: &str) -> u32 {
        self.ids.get(word).copied().unwrap_or_else(|| self.unk())
    }

    /// Whether `word` is in the vocabulary.
    pub fn contains(&self, word: &str) -> bool {
        self.ids.contains_key(word)
    }

    /// The word of `id` (`<s>` for [`Vocab::bos`]).
    pub fn word(&self, id: u32) -> &str {
        self.words.get(id as usize).map_or("<s>", String::as_str)
    }

    /// `<eos>`'s id.
    pub fn eos(&self) -> u32 {
        self.ids[EOS]
    }

    /// `<unk>`'s id.
    pub fn unk(&self) -> u32 {
        self.ids[UNK]
    }

    /// The sentence-start id, one past the predictable words.
    pub fn bos(&self) -> u32 {
        self.words.len() as u32
    }

    /// A line as a sentence: `<s>`, its words' ids (unknown → `<unk>`), `<eos>`.
    ///
    /// Example: `"a zz"` with the vocabulary above → `[4, 1, 3, 2]`.
    pub fn encode_line(&self, line: &str) -> Vec<u32> {
        let mut ids = vec![self.bos()];
        ids.extend(line.split_whitespace().map(|w| self.id(w)));
        ids.push(self.eos());
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_first_occurrence_then_eos_and_unk() {
        let v = Vocab::from_lines(&["b a", "a"]);
        assert_eq!((v.id("b"), v.id("a"), v.eos(), v.unk(), v.bos(), v.len()), (0, 1, 2, 3, 4, 4));
        assert_eq!(v.encode_line("a zz"), [4, 1, 3, 2]);
    }

    #[test]
    fn a_vocabulary_of_no_text_still_holds_eos_and_unk() {
        let v = Vocab::from_lines::<&str>(&[]);
        assert_eq!((v.len(), v.is_empty()), (2, false));
    }

    #[test]
    fn eos_and_unk_already_in_the_text_are_not_duplicated() {
        let v = Vocab::from_lines(&["x <unk> y"]);
        assert_eq!(v.len(), 4);
        assert_eq!(v.word(v.unk()), UNK);
    }
}
