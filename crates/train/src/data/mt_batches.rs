//! Translation batches: sentence pairs grouped by length under a token budget, then padded.
//!
//! Each epoch the pairs are shuffled (a generator derived from `(seed, epoch)`), stably
//! sorted by `(source length, target length)`, and cut greedily into batches whose padded
//! size `rows · max(longest source, longest target)` stays within `batch_tokens` (fairseq's
//! `--max-tokens`); the order of the batches is then shuffled. Padding is on the right and
//! comes with masks, so padding never changes the outputs at real positions (a model test).

use crate::rng::Rng;

/// A tokenized sentence pair, without BOS/EOS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    pub source: Vec<u32>,
    pub target: Vec<u32>,
}

/// The batches (lists of pair indices) of one epoch.
pub fn token_budget_batches(
    pairs: &[Pair],
    batch_tokens: usize,
    max_rows: usize,
    seed: u64,
    epoch: u64,
) -> Vec<Vec<usize>> {
    let mut rng = Rng::derive(seed, "mt-epoch", epoch);
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    // +2 for BOS/EOS on the target side, +1 for EOS on the source side.
    let size = |i: usize| (pairs[i].source.len() + 1).max(pairs[i].target.len() + 2);
    order.sort_by_key(|&i| (pairs[i].source.len(), pairs[i].target.len()));
    let mut batches = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut longest = 0;
    for i in order {
        let l = longest.max(size(i));
        let fits = (current.len() + 1) * l <= batch_tokens.max(size(i));
        if !current.is_empty() && (!fits || current.len() == max_rows) {
            batches.push(std::mem::take(&mut current));
            longest = 0;
        }
        longest = longest.max(size(i));
        current.push(i);
    }
    if !current.is_empty() {
        batches.push(current);
    }
    for i in (1..batches.len()).rev() {
        batches.swap(i, rng.below(i as u64 + 1) as usize);
    }
    batches
}

/// A padded translation batch, row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MtBatch {
    /// `[rows, src_len]`: source tokens then EOS, padded.
    pub source: Vec<u32>,
    /// `[rows, tgt_len]`: BOS then target tokens (decoder input), padded.
    pub target_in: Vec<u32>,
    /// `[rows, tgt_len]`: target tokens then EOS (what is predicted), padded.
    pub target_out: Vec<u32>,
    pub rows: usize,
    pub src_len: usize,
    pub tgt_len: usize,
}

/// Special ids used when padding.
#[derive(Clone, Copy, Debug)]
pub struct SpecialIds {
    pub pad: u32,
    pub bos: u32,
    pub eos: u32,
}

/// Pads the pairs `indices` into one batch.
pub fn pad_batch(pairs: &[Pair], indices: &[usize], ids: SpecialIds) -> MtBatch {
    let rows = indices.len();
    let src_len = indices.iter().map(|&i| pairs[i].source.len() + 1).max().unwrap_or(1);
    let tgt_len = indices.iter().map(|&i| pairs[i].target.len() + 1).max().unwrap_or(1);
    let mut b = MtBatch {
        source: vec![ids.pad; rows * src_len],
        target_in: vec![ids.pad; rows * tgt_len],
        target_out: vec![ids.pad; rows * tgt_len],
        rows,
        src_len,
        tgt_len,
    };
    for (r, &i) in indices.iter().enumerate() {
        let p = &pairs[i];
        let src = &mut b.source[r * src_len..];
        src[..p.source.len()].copy_from_slice(&p.source);
        src[p.source.len()] = ids.eos;
        let tin = &mut b.target_in[r * tgt_len..];
        tin[0] = ids.bos;
        tin[1..=p.target.len()].copy_from_slice(&p.target);
        let tout = &mut b.target_out[r * tgt_len..];
        tout[..p.target.len()].copy_from_slice(&p.target);
        tout[p.target.len()] = ids.eos;
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs() -> Vec<Pair> {
        (0..50).map(|i| Pair { source: vec![7; 1 + i % 9], target: vec![8; 1 + (i * 3) % 11] }).collect()
    }

    #[test]
    fn batches_cover_every_pair_once_within_the_budget() {
        let pairs = pairs();
        let batches = token_budget_batches(&pairs, 40, 1000, 3, 0);
        let mut seen: Vec<usize> = batches.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..50).collect::<Vec<_>>());
        for b in &batches {
            let longest = b.iter().map(|&i| (pairs[i].source.len() + 1).max(pairs[i].target.len() + 2)).max().unwrap();
            assert!(b.len() == 1 || b.len() * longest <= 40);
        }
        assert_eq!(batches, token_budget_batches(&pairs, 40, 1000, 3, 0));
        assert_ne!(batches, token_budget_batches(&pairs, 40, 1000, 3, 1), "reshuffled each epoch");
    }

    #[test]
    fn padding_puts_bos_and_eos_around_the_target() {
        let pairs = vec![Pair { source: vec![5, 6], target: vec![9] }, Pair { source: vec![5], target: vec![9, 9, 9] }];
        let ids = SpecialIds { pad: 0, bos: 1, eos: 2 };
        let b = pad_batch(&pairs, &[0, 1], ids);
        assert_eq!((b.src_len, b.tgt_len), (3, 4));
        assert_eq!(b.source, [5, 6, 2, 5, 2, 0]);
        assert_eq!(b.target_in, [1, 9, 0, 0, 1, 9, 9, 9]);
        assert_eq!(b.target_out, [9, 2, 0, 0, 9, 9, 9, 2]);
    }
}
