//! Encoding: added tokens first, then pre-tokenization, then merges by rank within each
//! piece, with a cache by piece.
//!
//! Within a piece the lowest-ranked adjacent pair is merged first; among equal ranks (the
//! same pair occurring several times) the leftmost goes first. Example, with merges
//! `0: (a, b)` and `1: (ab, c)`: `"abcab"` → `[a b c a b]` → `[ab c ab]` → `[abc ab]`.
//!
//! Long pieces (a 1 MB line of letters is one piece) merge with a heap over a linked list,
//! `O(n log n)`, never quadratic; short pieces use a plain scan, which is faster for them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::pretokenize::for_each_piece;
use crate::tokenizer::Tokenizer;

/// Pieces up to this many bytes merge by repeated scanning; longer ones with a heap.
const SCAN_LIMIT: usize = 24;
/// The cache is cleared when it holds this many pieces, bounding its memory.
const CACHE_LIMIT: usize = 1 << 18;

/// An encoder over a tokenizer, with its own cache of encoded pieces. Make one per thread.
pub struct Encoder<'t> {
    tokenizer: &'t Tokenizer,
    cache: FxHashMap<Box<[u8]>, Box<[u32]>>,
}

impl<'t> Encoder<'t> {
    pub fn new(tokenizer: &'t Tokenizer) -> Self {
        Encoder { tokenizer, cache: FxHashMap::default() }
    }

    /// The ids of `text`.
    pub fn encode(&mut self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        self.encode_into(text, &mut out);
        out
    }

    /// Appends the ids of `text` to `out`.
    pub fn encode_into(&mut self, text: &str, out: &mut Vec<u32>) {
        let Some(matcher) = &self.tokenizer.added_matcher else {
            self.encode_ordinary(text, out);
            return;
        };
        let mut start = 0;
        for m in matcher.find_iter(text) {
            self.encode_ordinary(&text[start..m.start()], out);
            out.push(self.tokenizer.added[m.pattern().as_usize()].id);
            start = m.end();
        }
        self.encode_ordinary(&text[start..], out);
    }

    /// Encodes text that holds no added token.
    fn encode_ordinary(&mut self, text: &str, out: &mut Vec<u32>) {
        let tok = self.tokenizer;
        let cache = &mut self.cache;
        for_each_piece(text, |piece| {
            let bytes = piece.as_bytes();
            if bytes.len() == 1 {
                out.push(tok.byte_ids[bytes[0] as usize]);
                return;
            }
            if let Some(ids) = cache.get(bytes) {
                out.extend_from_slice(ids);
                return;
            }
            let start = out.len();
            merge_piece(tok, bytes, out);
            if cache.len() >= CACHE_LIMIT {
                cache.clear();
            }
            cache.insert(bytes.into(), out[start..].into());
        });
    }
}

impl Tokenizer {
    /// The ids of `text`. For many texts, prefer [`Encoder`] (it keeps its cache) or
    /// [`Tokenizer::encode_batch`].
    pub fn encode(&self, text: &str) -> Vec<u32> {
        Encoder::new(self).encode(text)
    }

    /// The ids of each text, encoded in parallel: a few large chunks of texts, each with an
    /// encoder (and cache) of its own, so the cache stays warm.
    pub fn encode_batch<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Vec<Vec<u32>> {
        let chunk = texts.len().div_ceil(4 * rayon::current_num_threads()).max(1);
        let chunks: Vec<Vec<Vec<u32>>> = texts
            .par_chunks(chunk)
            .map(|part| {
                let mut enc = Encoder::new(self);
                part.iter().map(|t| enc.encode(t.as_ref())).collect()
            })
            .collect();
        chunks.into_iter().flatten().collect()
    }
}

/// Appends the ids of one pre-tokenized piece (at least two bytes) to `out`.
fn merge_piece(tok: &Tokenizer, bytes: &[u8], out: &mut Vec<u32>) {
    if bytes.len() <= SCAN_LIMIT {
        merge_by_scan(tok, bytes, out);
    } else {
        merge_by_heap(tok, bytes, out);
    }
}

/// Repeatedly merges the leftmost lowest-ranked pair: `O(n²)`, fast for short pieces.
fn merge_by_scan(tok: &Tokenizer, bytes: &[u8], out: &mut Vec<u32>) {
    let start = out.len();
    out.extend(bytes.iter().map(|&b| tok.byte_ids[b as usize]));
    loop {
        let syms = &out[start..];
        let mut best: Option<(u32, usize, u32)> = None;
        for i in 0..syms.len().saturating_sub(1) {
            if let Some(&(rank, merged)) = tok.ranks.get(&(syms[i], syms[i + 1])) {
                if best.is_none_or(|(r, _, _)| rank < r) {
                    best = Some((rank, i, merged));
                }
            }
        }
        let Some((_, i, merged)) = best else { break };
        out[start + i] = merged;
        out.remove(start + i + 1);
    }
}

/// Merges with a min-heap of `(rank, position)` over a doubly linked list of symbols:
/// `O(n log n)` for a piece of `n` bytes.
fn merge_by_heap(tok: &Tokenizer, bytes: &[u8], out: &mut Vec<u32>) {
    const NONE: usize = usize::MAX;
    let n = bytes.len();
    let mut sym: Vec<u32> = bytes.iter().map(|&b| tok.byte_ids[b as usize]).collect();
    let mut next: Vec<usize> = (1..=n).map(|i| if i == n { NONE } else { i }).collect();
    let mut prev: Vec<usize> = (0..n).map(|i| if i == 0 { NONE } else { i - 1 }).collect();
    let mut alive = vec![true; n];
    // Entries: (rank, left position, left symbol, right symbol); stale ones are skipped.
    let mut heap = BinaryHeap::new();
    let push = |heap: &mut BinaryHeap<_>, sym: &[u32], i: usize, j: usize| {
        if let Some(&(rank, _)) = tok.ranks.get(&(sym[i], sym[j])) {
            heap.push(Reverse((rank, i, sym[i], sym[j])));
        }
    };
    for i in 0..n - 1 {
        push(&mut heap, &sym, i, i + 1);
    }
    while let Some(Reverse((_, i, left, right))) = heap.pop() {
        let j = next[i];
        if !alive[i] || j == NONE || sym[i] != left || sym[j] != right {
            continue;
        }
        sym[i] = tok.ranks[&(left, right)].1;
        alive[j] = false;
        next[i] = next[j];
        if next[j] != NONE {
            prev[next[j]] = i;
        }
        if prev[i] != NONE {
            push(&mut heap, &sym, prev[i], i);
        }
        if next[i] != NONE {
            push(&mut heap, &sym, i, next[i]);
        }
    }
    let mut i = 0;
    while i != NONE {
        out.push(sym[i]);
        i = next[i];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::AddedToken;

    /// Bytes a, b, c plus merges `0: (a, b)` and `1: (ab, c)`, as in the module doc.
    fn abc_tokenizer() -> Tokenizer {
        let mut tokens: Vec<Option<Vec<u8>>> = (0..=255u8).map(|b| Some(vec![b])).collect();
        tokens.push(Some(b"ab".to_vec())); // 256
        tokens.push(Some(b"abc".to_vec())); // 257
        tokens.push(None); // 258: <s>
        let added = vec![AddedToken { id: 258, content: "<s>".into(), special: true }];
        let merges = vec![(u32::from(b'a'), u32::from(b'b')), (256, u32::from(b'c'))];
        Tokenizer::from_parts(tokens, added, merges, "test".as_ref()).unwrap()
    }

    #[test]
    fn module_doc_example_merges_lowest_rank_first() {
        let tok = abc_tokenizer();
        assert_eq!(tok.encode("abcab"), [257, 256]);
    }

    #[test]
    fn heap_and_scan_merging_agree_on_long_pieces() {
        let tok = abc_tokenizer();
        let text = "abcabcaabbcab".repeat(20);
        let (mut by_scan, mut by_heap) = (Vec::new(), Vec::new());
        merge_by_scan(&tok, text.as_bytes(), &mut by_scan);
        merge_by_heap(&tok, text.as_bytes(), &mut by_heap);
        assert_eq!(by_scan, by_heap);
    }

    /// Strings over `alphabet` of lengths 2 to 200 (one piece each: letters only), seeded.
    fn letter_strings(alphabet: &[u8], count: usize) -> Vec<String> {
        let mut next = crate::test_rng::xorshift(0x9E37_79B9_7F4A_7C15);
        (0..count)
            .map(|_| {
                let len = 2 + (next() % 199) as usize;
                (0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize] as char).collect()
            })
            .collect()
    }

    /// A trained vocabulary's merges chain and overlap (`aa`, `aaa`, `aab`, …), so that the
    /// heap holds stale entries of every kind: a dead left symbol, a dead or changed right
    /// one, a left one merged since.
    #[test]
    fn heap_and_scan_merging_agree_with_a_trained_vocabulary() {
        let alphabet = b"aab";
        let training = letter_strings(alphabet, 300).join(" ");
        let config =
            crate::TrainerConfig { vocab_size: 400, min_frequency: 2, special_tokens: vec![], show_progress: false };
        let tok = crate::Trainer::new(config).unwrap().train_texts([training]);
        assert!(tok.merges().len() > 100, "{} merges", tok.merges().len());
        for piece in letter_strings(b"abba", 200) {
            let (mut by_scan, mut by_heap) = (Vec::new(), Vec::new());
            merge_by_scan(&tok, piece.as_bytes(), &mut by_scan);
            merge_by_heap(&tok, piece.as_bytes(), &mut by_heap);
            assert_eq!(by_scan, by_heap, "{piece}");
        }
    }

    #[test]
    fn a_batch_encodes_each_text_as_encode_does_in_order() {
        let tok = abc_tokenizer();
        let texts: Vec<String> =
            (0..101).map(|i| "abc ".repeat(i % 7) + &"ab<s>c".repeat(i % 3) + &i.to_string()).collect();
        let batch = tok.encode_batch(&texts);
        assert_eq!(batch.len(), texts.len());
        for (text, ids) in texts.iter().zip(&batch) {
            assert_eq!(ids, &tok.encode(text), "{text:?}");
        }
    }

    #[test]
    fn added_tokens_are_matched_before_pre_tokenization() {
        let tok = abc_tokenizer();
        assert_eq!(tok.encode("<s>ab<s>"), [258, 256, 258]);
    }
}
