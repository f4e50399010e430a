//! A table-driven bigram "model" for testing the decoding algorithms with known
//! probabilities: the next-token distribution depends only on the last token.
//!
//! Tokens: 0 = EOS, 1 = a, 2 = b, 3 = BOS.
//! - after BOS: a 0.6, b 0.4
//! - after a: EOS 0.3, a 0.35, b 0.35
//! - after b: EOS 0.9, a 0.05, b 0.05
//! - after EOS: EOS 1
//!
//! [`Watched`] can run [`LONG_A`] instead, a table whose `a` rows go on to any length.

use burn::tensor::{Int, Tensor, TensorData};

use super::IncrementalDecoder;
use crate::test_backend::TestBackend;

pub const EOS: u32 = 0;
pub const A: u32 = 1;
pub const B: u32 = 2;
pub const BOS: u32 = 3;

/// Next-token probabilities, one row per last token: `TABLE[last][next]`.
pub type Table = [[f64; 4]; 4];

/// The table of [`Toy`] (the module's top doc spells it out).
pub const TABLE: Table = [[1.0, 0.0, 0.0, 0.0], [0.3, 0.35, 0.35, 0.0], [0.9, 0.05, 0.05, 0.0], [0.0, 0.6, 0.4, 0.0]];

/// A table where a beam search from `a` never finishes early: after a, a 0.6 and BOS 0.3 outrank
/// EOS 0.1, and after BOS there is no EOS. From b it ends as [`TABLE`] does (EOS 0.9).
pub const LONG_A: Table = [[1.0, 0.0, 0.0, 0.0], [0.1, 0.6, 0.0, 0.3], [0.9, 0.05, 0.05, 0.0], [0.0, 0.6, 0.4, 0.0]];

/// The toy model; its cache is each row's history.
pub struct Toy;

impl IncrementalDecoder<TestBackend> for Toy {
    type Cache = Vec<Vec<u32>>;

    fn step(&self, tokens: Tensor<TestBackend, 2, Int>, cache: &mut Self::Cache) -> Tensor<TestBackend, 2> {
        step_table(&TABLE, tokens, cache)
    }

    fn reorder(&self, cache: Self::Cache, indices: Tensor<TestBackend, 1, Int>) -> Self::Cache {
        let indices = indices.into_data().convert::<i64>().to_vec::<i64>().unwrap();
        indices.iter().map(|&i| cache[i as usize].clone()).collect()
    }

    fn cached_len(&self, cache: &Self::Cache) -> usize {
        cache.first().map_or(0, Vec::len)
    }

    fn max_len(&self) -> Option<usize> {
        None
    }

    fn restart(&self, _cache: &Self::Cache) -> Option<Self::Cache> {
        None
    }
}

/// One step of the bigram model `table`: appends `tokens` to each row's history and returns
/// the log-probabilities after each row's last token.
fn step_table(table: &Table, tokens: Tensor<TestBackend, 2, Int>, cache: &mut Vec<Vec<u32>>) -> Tensor<TestBackend, 2> {
    let [batch, new] = tokens.dims();
    let flat = tokens.into_data().convert::<i64>().to_vec::<i64>().unwrap();
    if cache.is_empty() {
        *cache = vec![Vec::new(); batch];
    }
    let mut logits = Vec::with_capacity(batch * 4);
    for (row, history) in flat.chunks(new).zip(cache.iter_mut()) {
        history.extend(row.iter().map(|&t| t as u32));
        let last = *history.last().unwrap() as usize;
        logits.extend(table[last].iter().map(|&p| if p > 0.0 { p.ln() as f32 } else { -1e9 }));
    }
    Tensor::from_data(TensorData::new(logits, [batch, 4]), &Default::default())
}

/// A `[rows.len(), len]` prompt.
pub fn prompt(rows: &[&[u32]]) -> Tensor<TestBackend, 2, Int> {
    let owned: Vec<Vec<u32>> = rows.iter().map(|r| r.to_vec()).collect();
    super::token_tensor(&owned, &Default::default())
}

/// A table model watched: counts its steps, and checks that every `reorder_beams` keeps each
/// new row's parent within its own group of `width` rows (beam search's promise to a model whose
/// groups share what does not move, an encoder-decoder's source memory).
pub struct Watched {
    pub width: usize,
    pub table: &'static Table,
    pub steps: std::cell::Cell<usize>,
}

impl Watched {
    /// Watches `table` for beams of `width`, no steps yet.
    pub fn new(width: usize, table: &'static Table) -> Self {
        Self { width, table, steps: Default::default() }
    }
}

impl IncrementalDecoder<TestBackend> for Watched {
    type Cache = Vec<Vec<u32>>;

    fn step(&self, tokens: Tensor<TestBackend, 2, Int>, cache: &mut Self::Cache) -> Tensor<TestBackend, 2> {
        self.steps.set(self.steps.get() + 1);
        step_table(self.table, tokens, cache)
    }

    fn reorder(&self, cache: Self::Cache, indices: Tensor<TestBackend, 1, Int>) -> Self::Cache {
        Toy.reorder(cache, indices)
    }

    fn reorder_beams(&self, cache: Self::Cache, indices: Tensor<TestBackend, 1, Int>) -> Self::Cache {
        let parents = indices.clone().into_data().convert::<i64>().to_vec::<i64>().unwrap();
        for (row, &parent) in parents.iter().enumerate() {
            assert_eq!(
                parent as usize / self.width,
                row / self.width,
                "row {row}'s parent {parent} is another group's"
            );
        }
        Toy.reorder(cache, indices)
    }

    fn cached_len(&self, cache: &Self::Cache) -> usize {
        Toy.cached_len(cache)
    }

    fn max_len(&self) -> Option<usize> {
        None
    }

    fn restart(&self, _cache: &Self::Cache) -> Option<Self::Cache> {
        None
    }
}
