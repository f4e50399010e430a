//! BLEU's sufficient statistics: per segment, then summed over the corpus.
//!
//! For a hypothesis and its references (sacreBLEU's `_compute_segment_statistics`):
//! - each side is lowercased (optionally), right-stripped and tokenized, then split on
//!   whitespace;
//! - a reference n-gram's count is its largest count in any one reference;
//! - `correct[n-1]` sums, over the distinct hypothesis n-grams of order n, the count clipped
//!   to the reference count; `total[n-1]` sums the hypothesis counts;
//! - `ref_len` is the reference length closest to the hypothesis length, the shorter one on
//!   a tie.

use std::borrow::Cow;
use std::cell::RefCell;
use std::iter::Sum;
use std::ops::{Add, AddAssign};

use super::{BleuConfig, MAX_NGRAM_ORDER};
use crate::ngrams::{count_ngrams, key_order, Interner, NgramCounts};
use crate::text::{py_lower, py_rstrip, py_split};

/// The statistics BLEU is computed from; they add across segments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BleuStats {
    /// Hypothesis length in tokens (`hyp_len`).
    pub sys_len: u64,
    /// Closest reference length in tokens (`ref_len`).
    pub ref_len: u64,
    /// Clipped n-gram matches, orders 1..=4.
    pub correct: [u64; MAX_NGRAM_ORDER],
    /// Hypothesis n-grams, orders 1..=4.
    pub total: [u64; MAX_NGRAM_ORDER],
}

impl BleuStats {
    /// The statistics of one hypothesis against its references (at least one).
    ///
    /// Example: `"the cat"` against `["the cat sat"]` → sys_len 2, ref_len 3,
    /// correct `[2, 1, 0, 0]`, total `[2, 1, 0, 0]`.
    pub fn of_segment(hyp: &str, refs: &[&str], config: &BleuConfig) -> BleuStats {
        SCRATCH.with(|scratch| segment_stats(hyp, refs, config, &mut scratch.borrow_mut()))
    }
}

thread_local! {
    /// Per-thread n-gram maps and id buffer, reused across segments (cleared, not freed).
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

#[derive(Default)]
struct Scratch {
    ref_counts: NgramCounts,
    one_ref: NgramCounts,
    hyp_counts: NgramCounts,
    ids: Vec<u32>,
}

impl Scratch {
    /// Empties the maps; one grown huge by a very long segment is dropped instead, so that
    /// clearing it does not cost every later segment.
    fn reset(&mut self) {
        for map in [&mut self.ref_counts, &mut self.one_ref, &mut self.hyp_counts] {
            if map.capacity() > 1 << 12 {
                *map = NgramCounts::default();
            } else {
                map.clear();
            }
        }
        self.ids.clear();
    }
}

fn segment_stats(hyp: &str, refs: &[&str], config: &BleuConfig, s: &mut Scratch) -> BleuStats {
    s.reset();
    // 1. Preprocess: lowercase, strip, tokenize.
    let hyp = preprocess(hyp, config);
    let refs: Vec<Cow<'_, str>> = refs.iter().map(|r| preprocess(r, config)).collect();

    // 2. Reference n-gram counts, the maximum over references, and reference lengths.
    let mut interner = Interner::with_capacity(hyp.len() / 4 + 8);
    let mut ref_lens = Vec::with_capacity(refs.len());
    for (k, reference) in refs.iter().enumerate() {
        s.ids.clear();
        s.ids.extend(py_split(reference).map(|t| interner.id(t)));
        ref_lens.push(s.ids.len() as u64);
        if k == 0 {
            count_ngrams(&s.ids, MAX_NGRAM_ORDER, &mut s.ref_counts);
        } else {
            s.one_ref.clear();
            count_ngrams(&s.ids, MAX_NGRAM_ORDER, &mut s.one_ref);
            for (&key, &count) in &s.one_ref {
                let best = s.ref_counts.entry(key).or_insert(0);
                *best = (*best).max(count);
            }
        }
    }

    // 3. Hypothesis n-grams, clipped against the references.
    s.ids.clear();
    s.ids.extend(py_split(&hyp).map(|t| interner.id(t)));
    let sys_len = s.ids.len() as u64;
    count_ngrams(&s.ids, MAX_NGRAM_ORDER, &mut s.hyp_counts);
    let mut stats = BleuStats { sys_len, ref_len: closest_ref_len(sys_len, &ref_lens), ..Default::default() };
    for (key, &count) in &s.hyp_counts {
        let n = key_order(*key) - 1;
        stats.total[n] += u64::from(count);
        if let Some(&in_ref) = s.ref_counts.get(key) {
            stats.correct[n] += u64::from(count.min(in_ref));
        }
    }
    stats
}

/// sacreBLEU's `_preprocess_segment`: lowercase (optionally), `rstrip`, tokenize. The result
/// is only ever split on whitespace, so the tokenizers' final whitespace collapse is skipped.
pub(crate) fn preprocess<'a>(line: &'a str, config: &BleuConfig) -> Cow<'a, str> {
    if config.lowercase {
        Cow::Owned(config.tokenizer.tokenize_for_split(py_rstrip(&py_lower(line))).into_owned())
    } else {
        config.tokenizer.tokenize_for_split(py_rstrip(line))
    }
}

/// The reference length closest to `hyp_len`; the shorter on a tie; 0 without references.
///
/// Example: hyp_len 6, refs `[4, 8, 9]` → 4 (|6−4| = |6−8|, and 4 < 8).
pub fn closest_ref_len(hyp_len: u64, ref_lens: &[u64]) -> u64 {
    ref_lens.iter().copied().min_by_key(|&r| (r.abs_diff(hyp_len), r)).unwrap_or(0)
}

impl AddAssign for BleuStats {
    fn add_assign(&mut self, other: BleuStats) {
        self.sys_len += other.sys_len;
        self.ref_len += other.ref_len;
        for n in 0..MAX_NGRAM_ORDER {
            self.correct[n] += other.correct[n];
            self.total[n] += other.total[n];
        }
    }
}

impl Add for BleuStats {
    type Output = BleuStats;

    fn add(mut self, other: BleuStats) -> BleuStats {
        self += other;
        self
    }
}

impl Sum for BleuStats {
    fn sum<I: Iterator<Item = BleuStats>>(iter: I) -> BleuStats {
        iter.fold(BleuStats::default(), Add::add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_are_clipped_to_the_reference_count() {
        // Papineni et al.'s example: "the the the the the the the" vs "the cat is on the mat".
        let s = BleuStats::of_segment("the the the the the the the", &["the cat is on the mat"], &BleuConfig::corpus());
        assert_eq!((s.correct[0], s.total[0]), (2, 7));
    }

    #[test]
    fn reference_counts_are_the_maximum_over_references() {
        let s = BleuStats::of_segment("a a a", &["a b", "a a c"], &BleuConfig::corpus());
        assert_eq!((s.correct[0], s.correct[1]), (2, 1));
    }

    #[test]
    fn closest_reference_length_prefers_the_shorter_on_ties() {
        assert_eq!(closest_ref_len(6, &[8, 4, 9]), 4);
        assert_eq!(closest_ref_len(6, &[7, 5]), 5);
        assert_eq!(closest_ref_len(3, &[]), 0);
    }

    #[test]
    fn short_segment_statistics_are_as_worked_out_by_hand() {
        let s = BleuStats::of_segment("the cat", &["the cat sat"], &BleuConfig::corpus());
        assert_eq!(s, BleuStats { sys_len: 2, ref_len: 3, correct: [2, 1, 0, 0], total: [2, 1, 0, 0] });
    }
}
