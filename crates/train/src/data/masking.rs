//! BERT's masked-language-model inputs (Devlin et al. 2019, section 3.1): each row is
//! `[CLS] w₁ … w_n [SEP]`; every word position is chosen with probability `mask_prob`
//! (0.15), and a chosen position's input becomes `[MASK]` with probability `mask_with_mask`
//! (0.8), a random non-special token with probability `mask_with_random` (0.1), and stays as it
//! is otherwise (0.1). The loss is taken on the chosen positions only, against the original
//! tokens. Every draw comes from a generator derived from `(seed, purpose, index)`, so a batch
//! depends on its number alone (exact resume) and evaluation masks the same positions every time.
//! A batch in which no position was chosen (possible, if unlikely) predicts its first word.

use crate::rng::Rng;

/// The special tokens' names, in the order their ids are assigned.
pub const MLM_SPECIALS: [&str; 4] = ["[PAD]", "[CLS]", "[SEP]", "[MASK]"];

/// The ids of the special tokens in a masked-LM vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MlmSpecials {
    pub pad: u32,
    pub cls: u32,
    pub sep: u32,
    pub mask: u32,
}

impl MlmSpecials {
    fn ids(&self) -> [u32; 4] {
        [self.pad, self.cls, self.sep, self.mask]
    }
}

/// How positions are chosen and replaced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MaskSpec {
    /// Probability that a word position is chosen (predicted).
    pub prob: f64,
    /// Probability that a chosen position's input becomes `[MASK]`.
    pub with_mask: f64,
    /// Probability that a chosen position's input becomes a random non-special token.
    pub with_random: f64,
}

/// One batch of rows `[CLS] words [SEP]`, row-major `[rows, len]`.
#[derive(Clone, Debug, PartialEq)]
pub struct MaskedBatch {
    /// What the model reads.
    pub inputs: Vec<u32>,
    /// The original tokens (the targets at chosen positions).
    pub targets: Vec<u32>,
    /// 1 at chosen positions, 0 elsewhere (the loss weights).
    pub chosen: Vec<f32>,
    pub rows: usize,
    pub len: usize,
}

impl MaskedBatch {
    /// Rows `rows` of this batch (a data-parallel peer's share, masked as the whole batch was).
    pub fn rows(&self, rows: std::ops::Range<usize>) -> MaskedBatch {
        let cells = rows.start * self.len..rows.end * self.len;
        MaskedBatch {
            inputs: self.inputs[cells.clone()].to_vec(),
            targets: self.targets[cells.clone()].to_vec(),
            chosen: self.chosen[cells].to_vec(),
            rows: rows.len(),
            len: self.len,
        }
    }
}

/// Masks `blocks` (each `len − 2` word tokens) into one batch, drawing from `rng`.
/// `vocab` is the vocabulary size; random replacements are uniform over its non-special ids.
pub fn mask_blocks(
    blocks: &[&[u32]],
    spec: MaskSpec,
    specials: MlmSpecials,
    vocab: usize,
    rng: &mut Rng,
) -> MaskedBatch {
    let len = blocks.first().map_or(2, |b| b.len() + 2);
    let mut special = specials.ids();
    special.sort_unstable();
    let plain = vocab as u64 - special.iter().filter(|&&s| (s as usize) < vocab).count() as u64;
    let random_token = |rng: &mut Rng| {
        // The k-th non-special id: step past each special id at or below it.
        let mut id = rng.below(plain) as u32;
        for s in special {
            if s <= id {
                id += 1;
            }
        }
        id
    };
    let mut batch = MaskedBatch {
        inputs: Vec::with_capacity(blocks.len() * len),
        targets: Vec::with_capacity(blocks.len() * len),
        chosen: Vec::with_capacity(blocks.len() * len),
        rows: blocks.len(),
        len,
    };
    let replace = |token: u32, rng: &mut Rng| {
        let u = rng.next_f64();
        if u < spec.with_mask {
            specials.mask
        } else if u < spec.with_mask + spec.with_random {
            random_token(rng)
        } else {
            token
        }
    };
    for block in blocks {
        debug_assert_eq!(block.len() + 2, len, "blocks of one length");
        let row = std::iter::once(specials.cls).chain(block.iter().copied()).chain([specials.sep]);
        for (i, token) in row.enumerate() {
            let word = i > 0 && i + 1 < len;
            let pick = word && rng.next_f64() < spec.prob;
            batch.targets.push(token);
            batch.inputs.push(if pick { replace(token, rng) } else { token });
            batch.chosen.push(if pick { 1.0 } else { 0.0 });
        }
    }
    // A batch with nothing to predict would have no loss: predict its first word then.
    if batch.rows > 0 && len > 2 && !batch.chosen.contains(&1.0) {
        batch.inputs[1] = replace(batch.targets[1], rng);
        batch.chosen[1] = 1.0;
    }
    batch
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECIALS: MlmSpecials = MlmSpecials { pad: 0, cls: 1, sep: 2, mask: 3 };
    const BERT: MaskSpec = MaskSpec { prob: 0.15, with_mask: 0.8, with_random: 0.1 };

    /// Over 200,000 positions the shares are within 5 binomial standard deviations of
    /// BERT's 15% chosen and, of those, 80% [MASK], 10% random, 10% unchanged.
    #[test]
    fn masking_statistics_are_bert_s_within_binomial_bounds() {
        let vocab = 50;
        let words: Vec<u32> = (0..2000u32).map(|i| 4 + i % 46).collect();
        let blocks: Vec<&[u32]> = words.chunks(20).collect();
        let (mut positions, mut chosen, mut masked, mut random, mut kept) = (0u64, 0u64, 0u64, 0u64, 0u64);
        for step in 0..100 {
            let batch = mask_blocks(&blocks, BERT, SPECIALS, vocab, &mut Rng::derive(7, "mlm", step));
            assert_eq!((batch.rows, batch.len), (100, 22));
            for ((&input, &target), &c) in batch.inputs.iter().zip(&batch.targets).zip(&batch.chosen) {
                if target == SPECIALS.cls || target == SPECIALS.sep {
                    assert_eq!((input, c), (target, 0.0), "[CLS] and [SEP] are never chosen");
                    continue;
                }
                positions += 1;
                if c == 0.0 {
                    assert_eq!(input, target, "unchosen inputs are untouched");
                    continue;
                }
                chosen += 1;
                match input {
                    3 => masked += 1,
                    i if i == target => kept += 1,
                    i => {
                        assert!(i >= 4 && (i as usize) < vocab, "random replacements are plain tokens: {i}");
                        random += 1;
                    }
                }
            }
        }
        // A random replacement equal to the target counts as kept: 1/46 of the random draws.
        let within = |count: u64, n: u64, p: f64| {
            let sd = (n as f64 * p * (1.0 - p)).sqrt();
            (count as f64 - n as f64 * p).abs() < 5.0 * sd
        };
        assert_eq!(positions, 200_000);
        assert!(within(chosen, positions, 0.15), "chosen {chosen} of {positions}");
        assert!(within(masked, chosen, 0.8), "[MASK] {masked} of {chosen}");
        assert!(within(random, chosen, 0.1 * 45.0 / 46.0), "random {random} of {chosen}");
        assert!(within(kept, chosen, 0.1 + 0.1 / 46.0), "kept {kept} of {chosen}");
    }

    #[test]
    fn the_same_generator_masks_the_same_positions() {
        let words: Vec<u32> = (4..40).collect();
        let blocks: Vec<&[u32]> = words.chunks(6).collect();
        let a = mask_blocks(&blocks, BERT, SPECIALS, 40, &mut Rng::derive(1, "eval", 3));
        let b = mask_blocks(&blocks, BERT, SPECIALS, 40, &mut Rng::derive(1, "eval", 3));
        assert_eq!(a, b);
        let c = mask_blocks(&blocks, BERT, SPECIALS, 40, &mut Rng::derive(1, "eval", 4));
        assert_ne!(a.chosen, c.chosen);
    }
}
