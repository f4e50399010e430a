//! Attention masks: causal and padding, combinable.
//!
//! A mask is a `Tensor<B, 4, Bool>` that broadcasts to the scores `[batch, heads, queries,
//! keys]`, with `true` where a query may **not** look. Masked scores are replaced by
//! [`MASKED_SCORE`], a large finite negative number rather than `-inf`: a row whose keys are
//! all masked then gets uniform weights instead of `NaN` (docs/burn.md).

use burn::tensor::{backend::Backend, Bool, Tensor, TensorData};

/// The score given to masked positions before the softmax. `exp(MASKED_SCORE - max)` is
/// exactly 0 in `f32` for any real score, so masked keys get weight 0.
pub const MASKED_SCORE: f32 = -1.0e9;

/// Causal mask: query `i` (at absolute position `offset + i`) may look at keys `0..=offset + i`.
///
/// `offset` is the number of keys already cached before these queries (0 for a full pass).
///
/// # Shapes
/// - output: `[1, 1, queries, keys]`
pub fn causal_mask<B: Backend>(queries: usize, keys: usize, offset: usize, device: &B::Device) -> Tensor<B, 4, Bool> {
    // `tril_mask` marks the cells *outside* the lower triangle (key j > query i + offset).
    Tensor::<B, 2, Bool>::tril_mask([queries, keys], offset as i64, device).reshape([1, 1, queries, keys])
}

/// Padding mask from a per-key padding flag (`true` = padding).
///
/// # Shapes
/// - `key_is_pad`: `[batch, keys]`
/// - output: `[batch, 1, 1, keys]`
pub fn padding_mask<B: Backend>(key_is_pad: Tensor<B, 2, Bool>) -> Tensor<B, 4, Bool> {
    let [batch, keys] = key_is_pad.dims();
    key_is_pad.reshape([batch, 1, 1, keys])
}

/// Padding flags for sequences of the given lengths, right-padded to `max_len`
/// (`true` = padding).
///
/// # Shapes
/// - output: `[lengths.len(), max_len]`
pub fn padding_from_lengths<B: Backend>(lengths: &[usize], max_len: usize, device: &B::Device) -> Tensor<B, 2, Bool> {
    let flags: Vec<bool> = lengths.iter().flat_map(|&len| (0..max_len).map(move |j| j >= len)).collect();
    Tensor::from_data(TensorData::new(flags, [lengths.len(), max_len]), device)
}

/// The union of two masks (a position is masked if either masks it); `None` means no mask.
///
/// # Shapes
/// - `a`, `b`: broadcastable to a common `[batch, 1 or heads, queries, keys]`
/// - output: that common shape
pub fn combine<B: Backend>(a: Option<Tensor<B, 4, Bool>>, b: Option<Tensor<B, 4, Bool>>) -> Option<Tensor<B, 4, Bool>> {
    match (a, b) {
        (Some(a), Some(b)) => {
            let (da, db) = (a.dims(), b.dims());
            let shape: [usize; 4] = core::array::from_fn(|i| da[i].max(db[i]));
            Some(a.expand(shape).bool_or(b.expand(shape)))
        }
        (a, None) => a,
        (None, b) => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_backend::TestBackend;

    fn to_vec(mask: Tensor<TestBackend, 4, Bool>) -> Vec<bool> {
        mask.into_data().to_vec::<bool>().unwrap()
    }

    #[test]
    fn causal_mask_blocks_exactly_the_future() {
        let device = Default::default();
        let mask = to_vec(causal_mask::<TestBackend>(3, 3, 0, &device));
        #[rustfmt::skip]
        let expected = [false, true, true,
                        false, false, true,
                        false, false, false];
        assert_eq!(mask, expected);
    }

    #[test]
    fn causal_mask_with_offset_sees_the_cached_prefix() {
        let device = Default::default();
        // Two new queries at absolute positions 2 and 3, four keys in all.
        let mask = to_vec(causal_mask::<TestBackend>(2, 4, 2, &device));
        assert_eq!(mask, [false, false, false, true, false, false, false, false]);
    }

    #[test]
    fn padding_and_causal_masks_combine_by_union() {
        let device = Default::default();
        let pad = padding_mask(padding_from_lengths::<TestBackend>(&[3, 1], 3, &device));
        let both = combine(Some(causal_mask::<TestBackend>(3, 3, 0, &device)), Some(pad)).unwrap();
        assert_eq!(both.dims(), [2, 1, 3, 3]);
        #[rustfmt::skip]
        let expected = [
            false, true, true,   false, false, true,   false, false, false,
            false, true, true,   false, true, true,    false, true, true,
        ];
        assert_eq!(to_vec(both), expected);
    }
}
