//! Language-model batches from one token stream.
//!
//! A batch is `batch` rows of `block` inputs and the `block` targets one position later:
//! `x[b, t] = s[o_b + t]`, `y[b, t] = s[o_b + t + 1]`.
//! - random: offsets `o_b` uniform in `0..len − block` for every step, from a generator
//!   derived from `(seed, step)` (nanoGPT's `get_batch`; reproducible on resume);
//! - sequential: the stream cut into `batch` contiguous lanes read block after block, wrapping
//!   around at the end (the PTB scheme); batch `i` depends on `i` only.

use crate::rng::Rng;

/// One batch, row-major `[batch, block]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LmBatch {
    pub inputs: Vec<u32>,
    pub targets: Vec<u32>,
    pub batch: usize,
    pub block: usize,
}

/// Blocks at random offsets for training step `step`.
pub fn random_batch(stream: &[u32], batch: usize, block: usize, seed: u64, step: u64) -> LmBatch {
    assert!(stream.len() > block, "stream of {} tokens is too short for block {block}", stream.len());
    let mut rng = Rng::derive(seed, "lm-batch", step);
    let offsets: Vec<usize> = (0..batch).map(|_| rng.below((stream.len() - block) as u64) as usize).collect();
    gather(stream, &offsets, block)
}

/// Number of sequential batches in one pass over `stream`.
pub fn sequential_len(stream: &[u32], batch: usize, block: usize) -> usize {
    let lane = (stream.len() - 1) / batch;
    (lane / block).max(1)
}

/// Sequential batch number `index` (wrapping to the start after a pass).
pub fn sequential_batch(stream: &[u32], batch: usize, block: usize, index: usize) -> LmBatch {
    let lane = (stream.len() - 1) / batch;
    assert!(lane >= block, "stream of {} tokens is too short for {batch} lanes of block {block}", stream.len());
    let i = index % sequential_len(stream, batch, block);
    let offsets: Vec<usize> = (0..batch).map(|b| b * lane + i * block).collect();
    gather(stream, &offsets, block)
}

fn gather(stream: &[u32], offsets: &[usize], block: usize) -> LmBatch {
    let mut inputs = Vec::with_capacity(offsets.len() * block);
    let mut targets = Vec::with_capacity(offsets.len() * block);
    for &o in offsets {
        inputs.extend_from_slice(&stream[o..o + block]);
        targets.extend_from_slice(&stream[o + 1..o + block + 1]);
    }
    LmBatch { inputs, targets, batch: offsets.len(), block }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_inputs_shifted_by_one() {
        let stream: Vec<u32> = (0..100).collect();
        let b = random_batch(&stream, 4, 8, 1, 5);
        for row in 0..4 {
            for t in 0..8 {
                assert_eq!(b.targets[row * 8 + t], b.inputs[row * 8 + t] + 1);
            }
        }
        assert_eq!(b, random_batch(&stream, 4, 8, 1, 5), "same (seed, step), same batch");
    }

    #[test]
    fn sequential_lanes_continue_block_after_block() {
        let stream: Vec<u32> = (0..41).collect();
        let (first, second) = (sequential_batch(&stream, 2, 5, 0), sequential_batch(&stream, 2, 5, 1));
        assert_eq!(&first.inputs[..5], &[0, 1, 2, 3, 4]);
        assert_eq!(&second.inputs[..5], &[5, 6, 7, 8, 9]);
        assert_eq!(&first.inputs[5..], &[20, 21, 22, 23, 24]);
        assert_eq!(sequential_len(&stream, 2, 5), 4);
        assert_eq!(sequential_batch(&stream, 2, 5, 4), first, "wraps after a pass");
    }
}
