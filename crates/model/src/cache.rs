//! Key/value caches for incremental decoding: each new token costs one position's work.
//!
//! A self-attention layer appends the keys and values of each new position; a cross-attention
//! layer computes the encoder memory's keys and values once. Beam search reorders the rows of
//! every cache with [`KeyValue::select`].

use burn::tensor::{backend::Backend, Int, Tensor};

use crate::fused::cat_pair;

/// Keys and values of one attention layer, split into heads.
#[derive(Clone, Debug)]
pub struct KeyValue<B: Backend> {
    /// `[batch, heads, keys, d_k]`
    pub keys: Tensor<B, 4>,
    /// `[batch, heads, keys, d_v]`
    pub values: Tensor<B, 4>,
}

impl<B: Backend> KeyValue<B> {
    /// Number of cached positions.
    pub fn len(&self) -> usize {
        self.keys.dims()[2]
    }

    /// Whether no position is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cache followed by `new` positions.
    ///
    /// # Shapes
    /// - `new.keys`, `new.values`: `[batch, heads, new_keys, d_k]`
    pub fn append(self, new: KeyValue<B>) -> Self {
        Self { keys: cat_pair(self.keys, new.keys, 2), values: cat_pair(self.values, new.values, 2) }
    }

    /// Keeps (and repeats or reorders) the batch rows `indices`.
    ///
    /// # Shapes
    /// - `indices`: `[new_batch]`, values in `0..batch`
    pub fn select(self, indices: Tensor<B, 1, Int>) -> Self {
        Self { keys: self.keys.select(0, indices.clone()), values: self.values.select(0, indices) }
    }
}

/// The cache of one self-attention layer: empty until the first step.
pub type SelfCache<B> = Option<KeyValue<B>>;

/// Appends `new` to an optional cache and returns the full keys and values.
pub(crate) fn extend<B: Backend>(cache: &mut SelfCache<B>, new: KeyValue<B>) -> KeyValue<B> {
    let full = match cache.take() {
        Some(old) => old.append(new),
        None => new,
    };
    *cache = Some(full.clone());
    full
}

/// Reorders an optional cache's rows.
pub(crate) fn select_opt<B: Backend>(cache: SelfCache<B>, indices: &Tensor<B, 1, Int>) -> SelfCache<B> {
    cache.map(|kv| kv.select(indices.clone()))
}

#[cfg(test)]
mod tests {
    use burn::tensor::TensorData;

    use super::*;
    use crate::test_backend::TestBackend;

    /// Row `r`, position `p` of a `[rows, 1, positions, 1]` cache holds `10 r + p + first`.
    fn numbered(rows: usize, positions: usize, first: usize) -> KeyValue<TestBackend> {
        let values: Vec<f32> =
            (0..rows).flat_map(|r| (0..positions).map(move |p| (10 * r + p + first) as f32)).collect();
        let t = Tensor::from_data(TensorData::new(values, [rows, 1, positions, 1]), &Default::default());
        KeyValue { keys: t.clone(), values: t * 2.0 }
    }

    fn flat(t: Tensor<TestBackend, 4>) -> Vec<f32> {
        t.into_data().to_vec::<f32>().unwrap()
    }

    #[test]
    fn extend_appends_new_positions_after_the_cached_ones_and_counts_them() {
        let mut cache: SelfCache<TestBackend> = None;
        let first = extend(&mut cache, numbered(2, 2, 0));
        assert_eq!((first.len(), first.is_empty()), (2, false));
        let full = extend(&mut cache, numbered(2, 1, 2));
        assert_eq!(full.len(), 3);
        assert_eq!(cache.as_ref().map(KeyValue::len), Some(3));
        assert_eq!(flat(full.keys), vec![0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
        assert_eq!(flat(full.values), vec![0.0, 2.0, 4.0, 20.0, 22.0, 24.0]);
        assert!(numbered(2, 0, 0).is_empty());
    }

    #[test]
    fn select_repeats_and_reorders_the_rows_of_keys_and_values_alike() {
        let indices = Tensor::from_data(TensorData::new(vec![1i64, 1, 0], [3]), &Default::default());
        let chosen = select_opt(Some(numbered(2, 2, 0)), &indices).expect("a cache");
        assert_eq!(flat(chosen.keys), vec![10.0, 11.0, 10.0, 11.0, 0.0, 1.0]);
        assert_eq!(flat(chosen.values), vec![20.0, 22.0, 20.0, 22.0, 0.0, 2.0]);
        assert!(select_opt::<TestBackend>(None, &indices).is_none());
    }
}
