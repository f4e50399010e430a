//! Positional encodings (paper section 3.5): the fixed sinusoids
//! `P[t, 2i] = sin(t / 10000^(2i/d))`, `P[t, 2i+1] = cos(t / 10000^(2i/d))`, a learned table
//! (Table 3 row E), or none.

use burn::module::{Module, Param};
use burn::tensor::{backend::Backend, FloatDType, Tensor, TensorData};

use crate::config::{ModelConfig, Positions};
use crate::init::table;

/// Adds position information to embeddings.
#[derive(Module, Debug)]
pub struct PositionalEncoding<B: Backend> {
    /// The learned `[block_size, d_model]` table (`positions = "learned"` only).
    pub learned: Option<Param<Tensor<B, 2>>>,
    /// Which encoding.
    pub kind: Positions,
    /// Longest sequence a learned table covers.
    pub block_size: usize,
}

impl<B: Backend> PositionalEncoding<B> {
    /// Builds the encoding for `config` (`positions`, `block_size`, `d_model`, `init`).
    pub fn new(config: &ModelConfig, device: &B::Device) -> Self {
        let learned = match config.positions {
            Positions::Learned => Some(table(config.block_size, config, device)),
            Positions::Sinusoidal | Positions::None => None,
        };
        Self { learned, kind: config.positions, block_size: config.block_size }
    }

    /// Longest sequence this encoding supports (`None`: unbounded).
    pub fn max_len(&self) -> Option<usize> {
        self.learned.as_ref().map(|_| self.block_size)
    }

    /// `x + P[offset .. offset + len]`.
    ///
    /// # Panics
    /// With learned positions, if `offset + len > block_size`.
    ///
    /// # Shapes
    /// - `x`: `[batch, len, d_model]`
    /// - output: `[batch, len, d_model]`
    pub fn forward(&self, x: Tensor<B, 3>, offset: usize) -> Tensor<B, 3> {
        let [_, len, d_model] = x.dims();
        match self.kind {
            Positions::None => x,
            Positions::Sinusoidal => {
                let table = sinusoid_table(offset, len, d_model);
                let p = Tensor::<B, 2>::from_data(TensorData::new(table, [len, d_model]), &x.device());
                // In the dtype `x` is in (a half-precision step's activations are f16/bf16).
                let p = if p.dtype() == x.dtype() { p } else { p.cast(FloatDType::from(x.dtype())) };
                x + p.unsqueeze::<3>()
            }
            Positions::Learned => {
                let end = offset + len;
                assert!(
                    end <= self.block_size,
                    "sequence reaches position {end}, beyond model.block_size = {}",
                    self.block_size
                );
                let weight = self.learned.as_ref().expect("learned positions have a table").val();
                // The whole table (a training step's usual case) needs no slice, nor its
                // backward a slice assignment into zeros.
                let rows = if offset == 0 && end == self.block_size { weight } else { weight.slice(offset..end) };
                x + rows.unsqueeze::<3>()
            }
        }
    }
}

/// Rows `offset .. offset + len` of the sinusoid table, row-major.
///
/// Example: `sinusoid_table(1, 1, 2) == [sin(1), cos(1)]`.
pub fn sinusoid_table(offset: usize, len: usize, d_model: usize) -> Vec<f32> {
    let mut table = Vec::with_capacity(len * d_model);
    for t in offset..offset + len {
        for j in 0..d_model {
            let two_i = (j - j % 2) as f64;
            let angle = t as f64 / 10_000f64.powf(two_i / d_model as f64);
            table.push(if j % 2 == 0 { angle.sin() } else { angle.cos() } as f32);
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_backend::TestBackend;

    /// Hand values: t = 3, d = 4: [sin 3, cos 3, sin(3/100), cos(3/100)].
    #[test]
    fn sinusoid_matches_the_paper_formula() {
        let row = sinusoid_table(3, 1, 4);
        let expected = [3f64.sin(), 3f64.cos(), 0.03f64.sin(), 0.03f64.cos()];
        for (r, e) in row.iter().zip(expected) {
            assert!((*r as f64 - e).abs() < 1e-6);
        }
        assert_eq!(sinusoid_table(0, 1, 3), vec![0.0, 1.0, 0.0]);
    }

    #[test]
    fn offset_forward_equals_slice_of_full_forward() {
        let device = Default::default();
        for positions in [Positions::Sinusoidal, Positions::Learned] {
            let config = ModelConfig { d_model: 6, positions, block_size: 8, ..ModelConfig::base() };
            let pe = PositionalEncoding::<TestBackend>::new(&config, &device);
            let full = pe.forward(Tensor::zeros([1, 5, 6], &device), 0);
            let part = pe.forward(Tensor::zeros([1, 2, 6], &device), 3);
            full.slice([0..1, 3..5]).into_data().assert_approx_eq::<f32>(&part.into_data(), Default::default());
        }
    }

    /// `forward` adds the table to `x`: over a random `x` (two rows of the batch) the output
    /// minus `x` is the sinusoid table's rows `offset..offset + len`, or the learned table's,
    /// and without positions it is `x` itself.
    #[test]
    fn forward_adds_the_table_rows_of_its_positions_to_every_row_of_the_batch() {
        let device = Default::default();
        for positions in [Positions::Sinusoidal, Positions::Learned, Positions::None] {
            let config = ModelConfig { d_model: 6, positions, block_size: 8, ..ModelConfig::base() };
            let pe = PositionalEncoding::<TestBackend>::new(&config, &device);
            for (offset, len) in [(0, 8), (2, 3)] {
                let x = Tensor::<TestBackend, 3>::random([2, len, 6], burn::tensor::Distribution::Default, &device);
                let added: Vec<f32> = (pe.forward(x.clone(), offset) - x).into_data().to_vec().unwrap();
                let table: Vec<f32> = match &pe.learned {
                    Some(weight) => weight.val().slice(offset..offset + len).into_data().to_vec().unwrap(),
                    None if positions == Positions::Sinusoidal => sinusoid_table(offset, len, 6),
                    None => vec![0.0; len * 6],
                };
                for (i, (a, t)) in added.iter().zip(table.iter().cycle()).enumerate() {
                    assert!(
                        (a - t).abs() < 1e-5,
                        "{positions:?} offset {offset}: element {i} added {a}, the table {t}"
                    );
                }
                assert_eq!(added.len(), 2 * table.len());
            }
        }
    }
}
