//! Attention's mask on the CPU, row by row: its flags read once per call, and the softmax of a
//! row of scores under it. A row whose unmasked keys all lead (a causal mask's, a right-padded
//! batch's) is normalized over those keys alone, rounded up to 16, when that fits in the row;
//! other rows (no unmasked key, unmasked keys after masked ones, a rounded width past the
//! row's end) are masked and normalized whole. Masks have at least one key (attention's
//! kernel takes no empty rows).

use burn::tensor::ops::BoolTensor;
use burn::tensor::{Bool, Tensor};
use burn_ndarray::{NdArray, NdArrayTensor};

use super::cpu::{gather_rows, softmax_in_place};
use crate::mask::MASKED_SCORE;

/// The mask's values and its strides over `[batch, heads, queries, keys]` (0 on a broadcast axis).
pub(super) struct Mask {
    values: Vec<bool>,
    strides: [usize; 4],
    /// Where the keys' axis is not broadcast: for each row of `values`, how many keys lead
    /// unmasked when every key after them is masked (a causal or right-padded row), else
    /// [`NOT_PREFIX`].
    prefixes: Vec<usize>,
    /// `strides` in rows of `values` (the keys' axis not broadcast), to index `prefixes`.
    row_strides: [usize; 3],
}

/// A row whose unmasked keys are not one leading run.
const NOT_PREFIX: usize = usize::MAX;

/// The flags of a bool tensor in row-major order, copied whole or by lanes
/// ([`gather_rows`]): `into_data`'s element-wise walk took 200 µs for a 64 × 64 causal mask,
/// more than the attention's arithmetic.
fn flags(mask: BoolTensor<NdArray<f32>>) -> Vec<bool> {
    match &mask {
        NdArrayTensor::Bool(storage) => {
            let view = storage.view();
            match view.as_slice() {
                Some(flags) => flags.to_vec(),
                None => gather_rows(view),
            }
        }
        _ => Tensor::<NdArray<f32>, 4, Bool>::from_primitive(mask)
            .into_data()
            .convert::<bool>()
            .into_vec::<bool>()
            .expect("bool mask"),
    }
}

impl Mask {
    pub(super) fn new(mask: BoolTensor<NdArray<f32>>) -> Mask {
        let dims: [usize; 4] = burn::tensor::TensorMetadata::shape(&mask).dims();
        let values = flags(mask);
        let mut strides = [0; 4];
        let mut stride = 1;
        for axis in (0..4).rev() {
            strides[axis] = if dims[axis] == 1 { 0 } else { stride };
            stride *= dims[axis];
        }
        let keys = dims[3];
        let prefixes = if strides[3] == 1 && keys > 0 {
            values
                .chunks(keys)
                .map(|row| {
                    let valid = row.iter().position(|&masked| masked).unwrap_or(keys);
                    if row[valid..].iter().all(|&masked| masked) {
                        valid
                    } else {
                        NOT_PREFIX
                    }
                })
                .collect()
        } else {
            Vec::new()
        };
        let row_strides = [0, 1, 2].map(|axis| strides[axis] / keys.max(1));
        Mask { values, strides, prefixes, row_strides }
    }

    /// The softmax of the scores of row `q` of head `(b, h)`, the masked entries first set to
    /// [`MASKED_SCORE`] (their weights come out 0). Inline it into a
    /// [`wide`](super::wide::wide) loop.
    ///
    /// A row whose unmasked keys lead is normalized over them alone, rounded up to 16 (a whole
    /// number of the softmax's 8 partial sums, and of AVX-512's 16 lanes, so that no scalar
    /// tail loop runs), and its other weights set to 0: the same bits as the whole row (the
    /// masked entries' exponentials are exactly 0, and the partial sums get the same terms in
    /// the same order), with the masking and the exponentials of most of a causal mask's
    /// upper triangle left out. The same bits, that is, while the row's unmasked scores are
    /// finite and its largest is above `MASKED_SCORE + 80`: a NaN or infinite score, or scores
    /// all below −1e9, give the whole row other weights (NaN, or the weight on the masked
    /// keys), where this gives the masked keys 0. Only a diverged model has such scores.
    #[inline(always)]
    pub(super) fn softmax(&self, b: usize, h: usize, q: usize, scores: &mut [f32]) {
        let s = &self.strides;
        let start = b * s[0] + h * s[1] + q * s[2];
        if s[3] == 1 {
            let keys = scores.len();
            let r = &self.row_strides;
            let valid = self.prefixes[b * r[0] + h * r[1] + q * r[2]];
            let width = valid.saturating_add(15) / 16 * 16;
            if valid > 0 && width <= keys {
                let (leading, rest) = scores.split_at_mut(width);
                // Whole groups of 16, as vector compares, selects and stores: `fill` on these
                // short, varying lengths (a `memset` call, a scalar tail) cost more than it saved.
                for (key, score) in leading.iter_mut().enumerate() {
                    *score = if key >= valid { MASKED_SCORE } else { *score };
                }
                softmax_in_place(leading);
                let mut zeros = rest.chunks_exact_mut(16);
                for group in &mut zeros {
                    group.copy_from_slice(&[0.0; 16]);
                }
                zeros.into_remainder().fill(0.0);
                return;
            }
            // The row's flags lie side by side: a loop the compiler turns into vector selects.
            let flags = &self.values[start..start + keys];
            for (score, &masked) in scores.iter_mut().zip(flags) {
                *score = if masked { MASKED_SCORE } else { *score };
            }
        } else if self.values[start] {
            // One flag for every key of the row (the keys' axis broadcast).
            scores.fill(MASKED_SCORE);
        }
        softmax_in_place(scores);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fused::tests::values;
    use crate::fused::wide::wide;
    use burn::tensor::TensorData;

    fn mask(flags: Vec<bool>, dims: [usize; 4]) -> Mask {
        let device = Default::default();
        Mask::new(Tensor::<NdArray<f32>, 4, Bool>::from_data(TensorData::new(flags, dims), &device).into_primitive())
    }

    /// Normalizing a causal row over its leading unmasked keys alone gives the bits of masking
    /// and normalizing the whole row (the flags' path), for row lengths that are and are not
    /// multiples of the 8 partial sums and 16 lanes; and the causal rows are found to lead.
    #[test]
    fn softmax_over_the_leading_unmasked_keys_gives_the_whole_rows_bits() {
        for keys in [5, 8, 16, 17, 40, 64, 100] {
            let causal: Vec<bool> = (0..keys * keys).map(|i| i % keys > i / keys).collect();
            let leading = mask(causal.clone(), [1, 1, keys, keys]);
            assert_eq!(leading.prefixes, (1..=keys).collect::<Vec<_>>(), "{keys} keys");
            let by_flags = Mask { prefixes: vec![NOT_PREFIX; keys], ..mask(causal, [1, 1, keys, keys]) };
            for q in 0..keys {
                // Scores spread widely, so that some exponentials underflow to 0.
                let scores = values(keys, 31 + q as u64, 60.0);
                let (mut fast, mut whole) = (scores.clone(), scores);
                wide(|| leading.softmax(0, 0, q, &mut fast));
                wide(|| by_flags.softmax(0, 0, q, &mut whole));
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&fast), bits(&whole), "{keys} keys, row {q}");
                assert!(fast[q + 1..].iter().all(|&w| w == 0.0), "{keys} keys, row {q}: masked weights are 0");
            }
        }
    }

    /// A row whose unmasked keys do not all lead (left padding) is not taken for a leading run,
    /// and a broadcast query or head axis is read through strides of 0.
    #[test]
    fn rows_with_masked_keys_before_unmasked_ones_are_not_leading_runs() {
        let left_padded = mask(vec![true, false, false, false, false, true, false, true], [2, 1, 1, 4]);
        assert_eq!(left_padded.prefixes, vec![NOT_PREFIX, NOT_PREFIX]);
        assert_eq!(left_padded.strides, [4, 0, 0, 1]);
        let right_padded = mask(vec![false, false, true, true], [1, 1, 1, 4]);
        assert_eq!(right_padded.prefixes, vec![2]);
        let mut scores = vec![1.0, 2.0, 3.0, 4.0];
        wide(|| left_padded.softmax(1, 0, 0, &mut scores));
        assert_eq!((scores[1], scores[3]), (0.0, 0.0));
        assert!((scores[0] + scores[2] - 1.0).abs() < 1e-6);
    }

    /// Masks with every axis of their own (`[batch, heads, queries, keys]`: causal, with a
    /// different right padding per batch entry and head) and with broadcast queries and heads
    /// (`[batch, 1, 1, keys]`): the leading-run path indexes each row right and gives the
    /// flags' path's bits, and an all-masked row takes the flags' path (uniform weights).
    #[test]
    fn leading_runs_of_masks_with_batch_and_head_axes_give_the_flags_bits() {
        let (batch, heads, queries, keys) = (3, 2, 5, 40);
        // Row (b, h, q): keys from min(q + 20, 40 − 9b − 5h) on masked; (2, 1, *) all masked.
        let valid =
            |b: usize, h: usize, q: usize| if (b, h) == (2, 1) { 0 } else { (q + 20).min(keys - 9 * b - 5 * h) };
        let mut flags = Vec::new();
        for b in 0..batch {
            for h in 0..heads {
                for q in 0..queries {
                    flags.extend((0..keys).map(|k| k >= valid(b, h, q)));
                }
            }
        }
        let full = mask(flags.clone(), [batch, heads, queries, keys]);
        let by_flags =
            Mask { prefixes: vec![NOT_PREFIX; batch * heads * queries], ..mask(flags, [batch, heads, queries, keys]) };
        let padding: Vec<bool> = (0..batch * keys).map(|i| i % keys >= keys - 9 * (i / keys)).collect();
        let padded = mask(padding.clone(), [batch, 1, 1, keys]);
        assert_eq!(padded.prefixes, vec![40, 31, 22]);
        let padded_flags = Mask { prefixes: vec![NOT_PREFIX; batch], ..mask(padding, [batch, 1, 1, keys]) };
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for b in 0..batch {
            for h in 0..heads {
                for q in 0..queries {
                    for (fast, whole, what) in [(&full, &by_flags, "full"), (&padded, &padded_flags, "padding")] {
                        let scores = values(keys, (b * 100 + h * 10 + q) as u64, 30.0);
                        let (mut a, mut c) = (scores.clone(), scores);
                        wide(|| fast.softmax(b, h, q, &mut a));
                        wide(|| whole.softmax(b, h, q, &mut c));
                        assert_eq!(bits(&a), bits(&c), "{what} mask, row ({b}, {h}, {q})");
                    }
                }
            }
        }
        let mut all_masked = values(keys, 7, 3.0);
        wide(|| full.softmax(2, 1, 0, &mut all_masked));
        assert!(all_masked.iter().all(|&w| (w - 1.0 / keys as f32).abs() < 1e-7), "an all-masked row is uniform");
    }

    /// A mask stored transposed (a strided view) is read in its logical order, and a mask with
    /// one key broadcast over all (`[.., 1]`) masks a whole row by its one flag.
    #[test]
    fn strided_and_key_broadcast_masks_read_their_logical_flags() {
        let device = Default::default();
        let stored: Vec<bool> = (0..4 * 4).map(|i| i % 4 > i / 4).collect(); // upper triangle
        let transposed =
            Tensor::<NdArray<f32>, 4, Bool>::from_data(TensorData::new(stored, [1, 1, 4, 4]), &device).swap_dims(2, 3);
        let logical: Vec<bool> = transposed.clone().into_data().to_vec().unwrap();
        let read = Mask::new(transposed.into_primitive());
        assert_eq!(read.values, logical);
        assert_eq!(read.prefixes, vec![4, NOT_PREFIX, NOT_PREFIX, NOT_PREFIX]);
        let one_key = mask(vec![false, true], [2, 1, 1, 1]);
        assert_eq!(one_key.strides[3], 0);
        let (mut kept, mut masked) = (vec![1.0, 2.0, 3.0], vec![1.0, 2.0, 3.0]);
        wide(|| one_key.softmax(0, 0, 0, &mut kept));
        wide(|| one_key.softmax(1, 0, 0, &mut masked));
        assert!(kept[2] > kept[1] && kept[1] > kept[0], "unmasked scores keep their order");
        assert!(masked.iter().all(|&w| (w - 1.0 / 3.0).abs() < 1e-7), "a masked row is uniform");
    }
}
