//! Token embeddings (paper section 3.4): a `[vocab, d_model]` matrix `E`, looked up and
//! multiplied by √d_model, and reused transposed as the pre-softmax projection `x Eᵀ` when
//! weights are tied.

use burn::module::{Module, Param};
use burn::tensor::{backend::Backend, Int, Tensor};

use crate::config::ModelConfig;
use crate::fused::embedding;
use crate::init::table;
use crate::positionwise::positionwise_transposed;

/// The embedding matrix `E` and its scale.
#[derive(Module, Debug)]
pub struct TokenEmbedding<B: Backend> {
    /// `E`: `[vocab, d_model]`.
    pub weight: Param<Tensor<B, 2>>,
    /// √d_model when `scale_embeddings`, else 1.
    pub scale: f64,
}

impl<B: Backend> TokenEmbedding<B> {
    /// Builds `E` for `vocab_size` tokens with `config`'s width, scaling and initialization.
    pub fn new(vocab_size: usize, config: &ModelConfig, device: &B::Device) -> Self {
        let scale = if config.scale_embeddings { (config.d_model as f64).sqrt() } else { 1.0 };
        Self { weight: table(vocab_size, config, device), scale }
    }

    /// Vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.weight.shape().dims::<2>()[0]
    }

    /// `scale · E[tokens]` (on the GPU backends with the lookup's gradient as a product,
    /// [`crate::fused::embedding`]).
    ///
    /// # Shapes
    /// - `tokens`: `[batch, len]`
    /// - output: `[batch, len, d_model]`
    pub fn forward(&self, tokens: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        let x = embedding(self.weight.val(), tokens);
        if self.scale == 1.0 {
            x
        } else {
            x.mul_scalar(self.scale)
        }
    }

    /// The tied output projection `x Eᵀ` (logits over the vocabulary).
    ///
    /// # Shapes
    /// - `x`: `[batch, len, d_model]`
    /// - output: `[batch, len, vocab]`
    pub fn project(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        positionwise_transposed(x, self.weight.val())
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::TensorData;

    use super::*;
    use crate::test_backend::TestBackend;

    /// `forward` looks up the rows of `E` and multiplies them by √d_model (here 2) only when
    /// `scale_embeddings` is on.
    #[test]
    fn forward_gives_the_rows_of_e_times_the_square_root_of_d_model_when_scaled() {
        let device = Default::default();
        for (scaled, factor) in [(true, 2.0f32), (false, 1.0)] {
            let config = ModelConfig { d_model: 4, scale_embeddings: scaled, ..ModelConfig::base() };
            let embedding = TokenEmbedding::<TestBackend>::new(5, &config, &device);
            assert_eq!(embedding.vocab_size(), 5);
            let rows = embedding.weight.val().into_data().to_vec::<f32>().unwrap();
            let tokens = Tensor::from_data(TensorData::new(vec![3i64, 0, 3], [1, 3]), &device);
            let got = embedding.forward(tokens).into_data().to_vec::<f32>().unwrap();
            let want: Vec<f32> =
                [3, 0, 3].iter().flat_map(|&t| rows[t * 4..t * 4 + 4].iter().map(|v| v * factor)).collect();
            assert_eq!(got, want, "scale_embeddings = {scaled}");
        }
    }
}
