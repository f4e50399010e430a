//! The one-layer model of the lecture notes (Kakade), implemented literally:
//!
//! ```text
//! x ← xE + P                       token embeddings plus positions
//! V, Q, K = xW_V, xW_Q, xW_K       one head, d_hidden = d_model
//! h = softmax(QKᵀ/√d_hidden) V     (causal: position t sees 0..=t)
//! O = ReLU(ReLU(hW₁)W₂)
//! Õ = OEᵀ                          the embedding, tied, is the output map
//! p(w_{t+1} | w_{≤t}) = softmax(Õ_t)
//! ```
//!
//! No residual connection, no LayerNorm, no `Wᴼ`. The causal mask is what makes `softmax(Õ_t)`
//! a next-token distribution.

use burn::module::Module;
use burn::nn::{DropoutConfig, Linear};
use burn::tensor::{backend::Backend, Int, Tensor};

use crate::attention::scaled_dot_product_attention;
use crate::cache::{extend, select_opt, KeyValue, SelfCache};
use crate::config::{Activation, ModelConfig};
use crate::embedding::TokenEmbedding;
use crate::feed_forward::activate;
use crate::init::{linear, materialize, Role};
use crate::mask::causal_mask;
use crate::positions::PositionalEncoding;
use crate::positionwise::positionwise;

/// The notes' model.
#[derive(Module, Debug)]
pub struct NotesModel<B: Backend> {
    /// `E`: `[vocab, d_model]`, input embedding and (transposed) output map.
    pub embedding: TokenEmbedding<B>,
    /// `P`.
    pub positions: PositionalEncoding<B>,
    /// `W_Q`: `d_model → d_model`.
    pub w_q: Linear<B>,
    /// `W_K`: `d_model → d_model`.
    pub w_k: Linear<B>,
    /// `W_V`: `d_model → d_model`.
    pub w_v: Linear<B>,
    /// `W₁`: `d_model → d_ff`.
    pub w_1: Linear<B>,
    /// `W₂`: `d_ff → d_model`.
    pub w_2: Linear<B>,
    /// ReLU in the notes.
    pub activation: Activation,
}

/// The key/value cache of a [`NotesModel`].
#[derive(Clone, Debug)]
pub struct NotesCache<B: Backend> {
    /// Keys and values of the processed positions.
    pub kv: SelfCache<B>,
    /// Positions already processed.
    pub len: usize,
}

impl<B: Backend> NotesCache<B> {
    /// Keeps (repeats, reorders) the batch rows `indices`.
    ///
    /// # Shapes
    /// - `indices`: `[new_batch]`
    pub fn select(self, indices: Tensor<B, 1, Int>) -> Self {
        Self { kv: select_opt(self.kv, &indices), len: self.len }
    }
}

impl ModelConfig {
    /// Builds the notes' model for a vocabulary of `vocab_size` tokens.
    ///
    /// `self` should have passed [`ModelConfig::validate`]: an invalid configuration (say
    /// `d_model % n_heads != 0`) panics here or in `forward`.
    pub fn init_notes<B: Backend>(&self, vocab_size: usize, device: &B::Device) -> NotesModel<B> {
        let (d, f) = (self.d_model, self.d_ff);
        materialize(NotesModel {
            embedding: TokenEmbedding::new(vocab_size, self, device),
            positions: PositionalEncoding::new(self, device),
            w_q: linear(d, d, self, Role::Plain, device),
            w_k: linear(d, d, self, Role::Plain, device),
            w_v: linear(d, d, self, Role::Plain, device),
            w_1: linear(d, f, self, Role::Plain, device),
            w_2: linear(f, d, self, Role::Plain, device),
            activation: self.activation,
        })
    }
}

impl<B: Backend> NotesModel<B> {
    /// Next-token logits `Õ` at every position.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, len]`
    /// - output: `[batch, len, vocab]`
    pub fn forward(&self, tokens: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        self.forward_cached(tokens, &mut self.empty_cache()).0
    }

    /// An empty cache for incremental decoding.
    pub fn empty_cache(&self) -> NotesCache<B> {
        NotesCache { kv: None, len: 0 }
    }

    /// Logits `Õ` of new positions continuing the cached ones, and the attention weights.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, new]`
    /// - output: (`[batch, new, vocab]`, `[batch, 1, new, cached + new]`)
    pub fn forward_cached(&self, tokens: Tensor<B, 2, Int>, cache: &mut NotesCache<B>) -> (Tensor<B, 3>, Tensor<B, 4>) {
        let [_, new] = tokens.dims();
        let offset = cache.len;
        // x ← xE + P
        let x = self.positions.forward(self.embedding.forward(tokens), offset);
        // Q, K, V with a single head: [batch, 1, new, d].
        let q = positionwise(&self.w_q, x.clone()).unsqueeze_dim::<4>(1);
        let kv = KeyValue {
            keys: positionwise(&self.w_k, x.clone()).unsqueeze_dim(1),
            values: positionwise(&self.w_v, x).unsqueeze_dim(1),
        };
        let kv = extend(&mut cache.kv, kv);
        let mask = causal_mask::<B>(new, offset + new, offset, &q.device());
        // h = softmax(QKᵀ/√d_hidden) V
        let no_dropout = DropoutConfig::new(0.0).init();
        let (h, weights) = scaled_dot_product_attention(q, kv.keys, kv.values, Some(mask), &no_dropout);
        let h: Tensor<B, 3> = h.squeeze_dim(1);
        // O = ReLU(ReLU(hW₁)W₂)
        let o =
            activate(positionwise(&self.w_2, activate(positionwise(&self.w_1, h), self.activation)), self.activation);
        cache.len += new;
        // Õ = OEᵀ
        (self.embedding.project(o), weights)
    }

    /// Longest sequence the model can process (`block_size` with learned positions).
    pub fn max_len(&self) -> Option<usize> {
        self.positions.max_len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::count;
    use crate::test_backend::TestBackend;
    use burn::tensor::activation::relu;
    use burn::tensor::TensorData;

    #[test]
    fn notes_preset_param_count_matches_config_count() {
        let device = Default::default();
        let config = ModelConfig::notes();
        let model = config.init_notes::<TestBackend>(50, &device);
        assert_eq!(model.num_params() as u64, count(&config, 50).params);
        // E, W_Q, W_K, W_V, W₁, W₂ and nothing else.
        assert_eq!(model.num_params(), 50 * 64 + 3 * 64 * 64 + 2 * 64 * 256);
    }

    /// The model computes the notes' equations: recompute them by hand from its matrices.
    #[test]
    fn notes_forward_is_the_notes_equations() {
        let device = Default::default();
        let config = ModelConfig { d_model: 4, d_ff: 6, ..ModelConfig::notes() };
        let model = config.init_notes::<TestBackend>(5, &device);
        let tokens = Tensor::<TestBackend, 2, Int>::from_data(TensorData::new(vec![3i64, 0, 4], [1, 3]), &device);
        let e = model.embedding.weight.val();
        let p = Tensor::<TestBackend, 2>::from_data(
            TensorData::new(crate::positions::sinusoid_table(0, 3, 4), [3, 4]),
            &device,
        );
        let x = e.clone().select(0, tokens.clone().reshape([3])) + p;
        let (q, k, v) = (
            x.clone().matmul(model.w_q.weight.val()),
            x.clone().matmul(model.w_k.weight.val()),
            x.matmul(model.w_v.weight.val()),
        );
        let scores = q.matmul(k.transpose()).div_scalar(2.0); // √d_hidden = √4
        let causal = Tensor::<TestBackend, 2, burn::tensor::Bool>::tril_mask([3, 3], 0, &device);
        let a = burn::tensor::activation::softmax(scores.mask_fill(causal, -1e9), 1);
        let h = a.matmul(v);
        let o = relu(relu(h.matmul(model.w_1.weight.val())).matmul(model.w_2.weight.val()));
        let expected = o.matmul(e.transpose());
        let got: Tensor<TestBackend, 2> = model.forward(tokens).squeeze_dim(0);
        got.into_data().assert_approx_eq::<f32>(&expected.into_data(), Default::default());
    }
}
