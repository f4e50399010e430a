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
