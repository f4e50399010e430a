//! The trained tokenizer: vocabulary, merges in rank order, added (special) tokens; decoding.
//!
//! Ids are dense: `0..vocab_size`. Every one of the 256 bytes has a token of its own, so any
//! text is representable, and decoding concatenates token bytes: `decode(encode(s)) == s`.

use aho_corasick::{AhoCorasick, MatchKind};
use rustc_hash::FxHashMap;

use crate::error::{BpeError, Result};

/// One merge rule: `left` followed by `right` becomes `merged`. Its rank is its index in
/// [`Tokenizer::merges`]: lower ranks are applied first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Merge {
    pub left: u32,
    pub right: u32,
    pub merged: u32,
}

/// A token matched verbatim in the input before pre-tokenization, never split (HuggingFace's
/// "added tokens"); `special` marks control tokens such as `<pad>` or `</s>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddedToken {
    pub id: u32,
    pub content: String,
    pub special: bool,
}

/// A byte-level BPE tokenizer.
#[derive(Clone, Debug)]
pub struct Tokenizer {
    /// Token bytes by id. For added tokens: their UTF-8 content.
    pub(crate) tokens: Vec<Vec<u8>>,
    /// Whether an id is an added token (so its bytes are never produced by merges).
    pub(crate) is_added: Vec<bool>,
    pub(crate) added: Vec<AddedToken>,
    pub(crate) merges: Vec<Merge>,
    /// `(left, right)` → `(rank, merged)`.
    pub(crate) ranks: FxHashMap<(u32, u32), (u32, u32)>,
    /// The token of each single byte.
    pub(crate) byte_ids: [u32; 256],
    /// Finds added tokens in text, leftmost-longest (as HuggingFace does).
    pub(crate) added_matcher: Option<AhoCorasick>,
}

impl Tokenizer {
    /// Builds a tokenizer from its parts, checking that they form one.
    ///
    /// `tokens[id]` is `None` for the ids of `added` tokens, the bytes of a model token
    /// otherwise. `origin` names the source in errors (a file path, or "trainer").
    pub(crate) fn from_parts(
        tokens: Vec<Option<Vec<u8>>>,
        added: Vec<AddedToken>,
        merge_pairs: Vec<(u32, u32)>,
        origin: &std::path::Path,
    ) -> Result<Self> {
        let foreign = |field: String, message: String| BpeError::Foreign { path: origin.to_path_buf(), field, message };
        let n = tokens.len();
        let mut is_added = vec![false; n];
        let mut bytes_of: Vec<Vec<u8>> = Vec::with_capacity(n);
        let mut slots = tokens;
        for a in &added {
            let slot = slots.get_mut(a.id as usize).ok_or_else(|| {
                foreign(format!("added_tokens[{:?}]", a.content), format!("id {} out of range", a.id))
            })?;
            *slot = Some(a.content.as_bytes().to_vec());
            is_added[a.id as usize] = true;
        }
        for (id, slot) in slots.into_iter().enumerate() {
            let bytes =
                slot.ok_or_else(|| foreign("model.vocab".into(), format!("ids are not dense: no token has id {id}")))?;
            bytes_of.push(bytes);
        }
        let mut byte_ids = [u32::MAX; 256];
        let mut by_bytes: FxHashMap<&[u8], u32> = FxHashMap::default();
        for (id, bytes) in bytes_of.iter().enumerate() {
            if is_added[id] {
                continue;
            }
            if bytes.len() == 1 {
                byte_ids[bytes[0] as usize] = id as u32;
            }
            by_bytes.insert(bytes, id as u32);
        }
        if let Some(b) = byte_ids.iter().position(|&id| id == u32::MAX) {
            return Err(foreign(
                "model.vocab".into(),
                format!("no token for byte 0x{b:02X}: not a byte-level vocabulary"),
            ));
        }
        let mut merges = Vec::with_capacity(merge_pairs.len());
        let mut ranks = FxHashMap::default();
        for (rank, &(left, right)) in merge_pairs.iter().enumerate() {
            let bad = |m: &str| foreign(format!("model.merges[{rank}]"), m.to_string());
            let (l, r) = (left as usize, right as usize);
            if l >= n || r >= n || is_added[l] || is_added[r] {
                return Err(bad("a part is not a model token"));
            }
            let joined = [bytes_of[l].as_slice(), bytes_of[r].as_slice()].concat();
            let merged =
                *by_bytes.get(joined.as_slice()).ok_or_else(|| bad("the merged token is not in the vocabulary"))?;
            // A pair listed twice keeps its last rank, as HuggingFace's map does.
            ranks.insert((left, right), (rank as u32, merged));
            merges.push(Merge { left, right, merged });
        }
        let added_matcher = if added.is_empty() {
            None
        } else {
            let matcher = AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(added.iter().map(|a| a.content.as_str()))
                .map_err(|e| foreign("added_tokens".into(), e.to_string()))?;
            Some(matcher)
        };
        Ok(Tokenizer { tokens: bytes_of, is_added, added, merges, ranks, byte_ids, added_matcher })
    }

    /// Number of ids, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// The merges in rank order.
    pub fn merges(&self) -> &[Merge] {
        &self.merges
    }

    /// The added (special) tokens.
    pub fn added_tokens(&self) -> &[AddedToken] {
        &self.added
    }

    /// The id of an added token, by content (`"<pad>"`).
    pub fn added_token_id(&self, content: &str) -> Option<u32> {
        self.added.iter().find(|a| a.content == content).map(|a| a.id)
    }

    /// The bytes of token `id` (the content of an added token).
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        self.tokens.get(id as usize).map(Vec::as_slice)
    }

    /// Whether `id` is an added (special) token.
    pub fn is_added_token(&self, id: u32) -> bool {
        self.is_added.get(id as usize).copied().unwrap_or(false)
    }

    /// The bytes that `ids` stand for, concatenated.
    pub fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            let bytes = self.token_bytes(id).ok_or(BpeError::UnknownId { id, vocab_size: self.vocab_size() })?;
            out.extend_from_slice(bytes);
        }
        Ok(out)
    }

    /// The text that `ids` stand for. Exact for ids produced by encoding text; a byte
    /// sequence that is not UTF-8 (ids cut mid-character) decodes with U+FFFD in its place,
    /// as HuggingFace's `ByteLevel` decoder does.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let bytes = self.decode_bytes(ids)?;
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }
}
