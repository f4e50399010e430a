//! The BPE trainer (Sennrich et al. 2016, byte-level as GPT-2): start from the 256 bytes and
//! repeatedly merge the most frequent adjacent pair of tokens.
//!
//! Deterministic: the most frequent pair wins, ties go to the smallest `(left, right)` pair
//! of ids, and counts are exact 64-bit integers, so the same input gives the same file.
//! Counts are kept incrementally: merging a pair only touches the words that contain it
//! (an index from pair to words), and a max-heap with lazily corrected entries picks the
//! next pair, so each merge costs time in proportion to the words it changes.

use std::collections::BinaryHeap;
use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};
use rustc_hash::FxHashMap;

use crate::byte_level::byte_to_char;
use crate::corpus::{count_words, count_words_in_files, WordCounts};
use crate::error::{BpeError, Result};
use crate::tokenizer::{AddedToken, Tokenizer};

/// What to train.
#[derive(Clone, Debug)]
pub struct TrainerConfig {
    /// Final number of ids, special tokens and the 256 byte tokens included. Training stops
    /// earlier if no pair reaches `min_frequency`.
    pub vocab_size: usize,
    /// A pair is merged only if it occurs at least this often. HuggingFace's
    /// `ByteLevelBPETokenizer.train` uses 2; so does our command line.
    pub min_frequency: u64,
    /// Special tokens, given ids `0..n` in this order; never split by the encoder.
    pub special_tokens: Vec<String>,
    /// Show progress bars on stderr (hidden when stderr is not a terminal).
    pub show_progress: bool,
}

/// A byte-level BPE trainer.
#[derive(Clone, Debug)]
pub struct Trainer {
    config: TrainerConfig,
}

/// A distinct word: its current tokens and how often it occurs.
struct Word {
    symbols: Vec<u32>,
    count: u64,
}

/// A heap entry: ordered by count, then by the smaller pair.
#[derive(PartialEq, Eq)]
struct Candidate {
    count: u64,
    pair: (u32, u32),
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.count.cmp(&other.count).then_with(|| other.pair.cmp(&self.pair))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Trainer {
    /// Checks the configuration: the vocabulary must hold the bytes and the special tokens,
    /// which must be distinct and non-empty.
    pub fn new(config: TrainerConfig) -> Result<Self> {
        let specials = config.special_tokens.len();
        let minimum = 256 + specials;
        if config.vocab_size < minimum {
            return Err(BpeError::VocabTooSmall { requested: config.vocab_size, minimum, specials });
        }
        for (i, token) in config.special_tokens.iter().enumerate() {
            if token.is_empty() {
                return Err(BpeError::BadSpecialToken { token: token.clone(), reason: "empty" });
            }
            if config.special_tokens[..i].contains(token) {
                return Err(BpeError::BadSpecialToken { token: token.clone(), reason: "given twice" });
            }
        }
        Ok(Trainer { config })
    }

    /// Trains on text files (UTF-8, plain or `.gz`), read line by line.
    pub fn train_files(&self, paths: &[PathBuf]) -> Result<Tokenizer> {
        let counts = count_words_in_files(paths, self.config.show_progress)?;
        Ok(self.train_word_counts(counts))
    }

    /// Trains on in-memory texts, each read line by line as a file would be.
    pub fn train_texts<S: AsRef<str>>(&self, texts: impl IntoIterator<Item = S>) -> Tokenizer {
        let mut counts = WordCounts::default();
        for text in texts {
            count_words(text.as_ref(), &mut counts);
        }
        self.train_word_counts(counts)
    }

    /// Trains on counted words.
    pub fn train_word_counts(&self, counts: WordCounts) -> Tokenizer {
        // 1. Special tokens take ids 0..n.
        let n_special = self.config.special_tokens.len();
        let added: Vec<AddedToken> = self
            .config
            .special_tokens
            .iter()
            .enumerate()
            .map(|(id, content)| AddedToken { id: id as u32, content: content.clone(), special: true })
            .collect();
        // 2. The 256 bytes, ordered by their byte-level character as HuggingFace orders them.
        let mut alphabet: Vec<u8> = (0..=255).collect();
        alphabet.sort_by_key(|&b| byte_to_char(b));
        let mut tokens: Vec<Vec<u8>> = Vec::with_capacity(self.config.vocab_size);
        tokens.extend((0..n_special).map(|_| Vec::new()));
        let mut byte_id = [0u32; 256];
        for &b in &alphabet {
            byte_id[b as usize] = tokens.len() as u32;
            tokens.push(vec![b]);
        }
        // 3. Words as sequences of byte ids.
        let mut words: Vec<Word> = counts
            .into_iter()
            .map(|(bytes, count)| Word { symbols: bytes.iter().map(|&b| byte_id[b as usize]).collect(), count })
            .collect();
        // 4. Merge until the vocabulary is full.
        let merges = self.merge_loop(&mut words, &mut tokens);

        let mut slots: Vec<Option<Vec<u8>>> = tokens.into_iter().map(Some).collect();
        for slot in &mut slots[..n_special] {
            *slot = None;
        }
        Tokenizer::from_parts(slots, added, merges, "trainer".as_ref())
            .expect("the trainer builds consistent tokenizers")
    }

    /// Stage 4: the merges, in order; new tokens are appended to `tokens`.
    fn merge_loop(&self, words: &mut [Word], tokens: &mut Vec<Vec<u8>>) -> Vec<(u32, u32)> {
        let target = self.config.vocab_size;
        let min_count = self.config.min_frequency.max(1);
        let n_special = self.config.special_tokens.len();
        let mut pair_counts: FxHashMap<(u32, u32), u64> = FxHashMap::default();
        let mut where_: FxHashMap<(u32, u32), Vec<u32>> = FxHashMap::default();
        for (w, word) in words.iter().enumerate() {
            for pair in word.symbols.windows(2) {
                let pair = (pair[0], pair[1]);
                *pair_counts.entry(pair).or_insert(0) += word.count;
                let list = where_.entry(pair).or_default();
                if list.last() != Some(&(w as u32)) {
                    list.push(w as u32);
                }
            }
        }
        let mut heap: BinaryHeap<Candidate> =
            pair_counts.iter().map(|(&pair, &count)| Candidate { count, pair }).collect();
        let mut id_of: FxHashMap<Vec<u8>, u32> =
            tokens.iter().enumerate().skip(n_special).map(|(id, t)| (t.clone(), id as u32)).collect();
        let mut merges = Vec::new();
        let mut last_seen = vec![u32::MAX; words.len()];
        let mut new_pairs: Vec<(u32, u32)> = Vec::new();
        let progress = if self.config.show_progress {
            ProgressBar::new(target.saturating_sub(tokens.len()) as u64)
        } else {
            ProgressBar::hidden()
        };
        progress.set_style(ProgressStyle::with_template("merging {bar:40} {pos}/{len} {eta}").expect("valid"));

        while tokens.len() < target {
            let Some(top) = heap.pop() else { break };
            let current = pair_counts.get(&top.pair).copied().unwrap_or(0);
            if current != top.count {
                // Stale entry: counts only fall after a pair appears, so re-queue the truth.
                if current > 0 {
                    heap.push(Candidate { count: current, pair: top.pair });
                }
                continue;
            }
            if current < min_count {
                break;
            }
            let (a, b) = top.pair;
            let joined = [tokens[a as usize].as_slice(), tokens[b as usize].as_slice()].concat();
            let new_id = match id_of.get(&joined) {
                Some(&id) => id,
                None => {
                    let id = tokens.len() as u32;
                    id_of.insert(joined.clone(), id);
                    tokens.push(joined);
                    progress.inc(1);
                    id
                }
            };
            let step = merges.len() as u32;
            merges.push(top.pair);
            pair_counts.remove(&top.pair);
            for w in where_.remove(&top.pair).unwrap_or_default() {
                if last_seen[w as usize] == step {
                    continue;
                }
                last_seen[w as usize] = step;
                let word = &mut words[w as usize];
                let count = word.count;
                merge_word(&mut word.symbols, top.pair, new_id, |pair, delta| {
                    if pair == top.pair {
                        return;
                    }
                    let c = pair_counts.entry(pair).or_insert(0);
                    if delta > 0 {
                        *c += count;
                        let list = where_.entry(pair).or_default();
                        if list.last() != Some(&w) {
                            list.push(w);
                        }
                        new_pairs.push(pair);
                    } else {
                        *c -= count;
                    }
                });
            }
            new_pairs.sort_unstable();
            new_pairs.dedup();
            for pair in new_pairs.drain(..) {
                let count = pair_counts[&pair];
                if count > 0 {
                    heap.push(Candidate { count, pair });
                }
            }
        }
        progress.finish_and_clear();
        merges
    }
}

/// Replaces every non-overlapping occurrence of `pair` in `symbols`, leftmost first, by
/// `new_id`, and reports each change in adjacent-pair counts as `(pair, ±1)`.
///
/// Example: `[a b a b]` with `(a, b) → x` gives `[x x]`, reporting `(b, a) −1`, `(x, a) +1`,
/// `(x, a) −1`, `(x, x) +1` (changes to `(a, b)` itself are reported too, and ignored).
fn merge_word(symbols: &mut Vec<u32>, pair: (u32, u32), new_id: u32, mut change: impl FnMut((u32, u32), i8)) {
    let (a, b) = pair;
    let n = symbols.len();
    let (mut read, mut write) = (0, 0);
    while read < n {
        if read + 1 < n && symbols[read] == a && symbols[read + 1] == b {
            if write > 0 {
                let before = symbols[write - 1];
                change((before, a), -1);
                change((before, new_id), 1);
            }
            if read + 2 < n {
                let after = symbols[read + 2];
                change((b, after), -1);
                change((new_id, after), 1);
            }
            symbols[write] = new_id;
            read += 2;
        } else {
            symbols[write] = symbols[read];
            read += 1;
        }
        write += 1;
    }
    symbols.truncate(write);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_word_reports_the_module_doc_changes() {
        let (a, b, x) = (1, 2, 9);
        let mut symbols = vec![a, b, a, b];
        let mut changes = Vec::new();
        merge_word(&mut symbols, (a, b), x, |p, d| changes.push((p, d)));
        assert_eq!(symbols, [x, x]);
        assert_eq!(changes, [((b, a), -1), ((x, a), 1), ((x, a), -1), ((x, x), 1)]);
    }

    #[test]
    fn merge_word_takes_overlapping_pairs_leftmost_first() {
        let mut symbols = vec![7, 7, 7];
        merge_word(&mut symbols, (7, 7), 8, |_, _| {});
        assert_eq!(symbols, [8, 7]);
    }
}
