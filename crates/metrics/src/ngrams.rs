//! Word n-gram counting for BLEU without allocating a string per n-gram.
//!
//! A segment's tokens are interned to small ids (1, 2, ...), and an n-gram of up to four ids
//! packs into one `u128` key, 32 bits per position: `ids[0] | ids[1] << 32 | ...`. Ids start
//! at 1, so the unused high positions of a shorter n-gram are zero and n-grams of different
//! orders never collide; the order is the number of non-zero 32-bit positions.

use rustc_hash::FxHashMap;

/// The highest n-gram order a key holds.
pub(crate) const MAX_KEY_ORDER: usize = 4;

/// n-gram key → count.
pub(crate) type NgramCounts = FxHashMap<u128, u32>;

/// Maps the distinct tokens of one segment (hypothesis and references) to ids 1, 2, ...
#[derive(Default)]
pub(crate) struct Interner<'a> {
    ids: FxHashMap<&'a str, u32>,
}

impl<'a> Interner<'a> {
    /// An interner with room for `capacity` distinct tokens.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Interner { ids: FxHashMap::with_capacity_and_hasher(capacity, Default::default()) }
    }

    /// The id of `token`, assigning the next one on first sight.
    ///
    /// Example: interning `a b a` gives ids `1 2 1`.
    pub(crate) fn id(&mut self, token: &'a str) -> u32 {
        let next = self.ids.len() as u32 + 1;
        *self.ids.entry(token).or_insert(next)
    }
}

/// The key of the n-gram `ids` (1 ≤ `ids.len()` ≤ 4).
///
/// Example: `[3, 1]` → `3 | 1 << 32`.
#[inline]
pub(crate) fn ngram_key(ids: &[u32]) -> u128 {
    debug_assert!(!ids.is_empty() && ids.len() <= MAX_KEY_ORDER);
    ids.iter().enumerate().fold(0u128, |key, (k, &id)| key | (u128::from(id) << (32 * k)))
}

/// The order (1..=4) of an n-gram key.
#[inline]
pub(crate) fn key_order(key: u128) -> usize {
    (0..MAX_KEY_ORDER).take_while(|k| (key >> (32 * k)) as u32 != 0).count()
}

/// Adds the counts of every n-gram of order 1..=`max_order` in `ids` to `counts`.
///
/// Example: `[1, 2, 1]`, max order 2 → `{1: 2, 2: 1, (1,2): 1, (2,1): 1}`.
pub(crate) fn count_ngrams(ids: &[u32], max_order: usize, counts: &mut NgramCounts) {
    for n in 1..=max_order.min(MAX_KEY_ORDER) {
        for window in ids.windows(n) {
            *counts.entry(ngram_key(window)).or_insert(0) += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_different_orders_never_collide_and_know_their_order() {
        let keys = [ngram_key(&[1]), ngram_key(&[1, 1]), ngram_key(&[1, 1, 1]), ngram_key(&[1, 1, 1, 1])];
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(key_order(k), i + 1);
            assert!(keys[..i].iter().all(|&other| other != k));
        }
    }

    #[test]
    fn counting_finds_every_window_of_every_order() {
        let mut counts = NgramCounts::default();
        count_ngrams(&[1, 2, 1], 2, &mut counts);
        assert_eq!(counts.len(), 4);
        assert_eq!(counts[&ngram_key(&[1])], 2);
        assert_eq!(counts[&ngram_key(&[2, 1])], 1);
    }

    #[test]
    fn interner_gives_repeated_tokens_the_same_id() {
        let mut interner = Interner::default();
        let ids: Vec<u32> = ["a", "b", "a"].into_iter().map(|t| interner.id(t)).collect();
        assert_eq!(ids, [1, 2, 1]);
    }
}
