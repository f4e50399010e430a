//! The decoder-only language model: token embedding (+ positions, dropout), `N` causal
//! self-attention blocks, optional final LayerNorm, and the (tied) pre-softmax projection.
//!
//! By configuration alone this is the paper's decoder without cross-attention (post-norm,
//! sinusoids, ReLU) or nanoGPT's GPT ([`ModelConfig::nanogpt_cpu`]: pre-norm, learned positions,
//! no bias, final LayerNorm, tied, GELU, GPT-2 init).

use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig, Linear};
use burn::tensor::{backend::Backend, Bool, Int, Tensor};

use crate::cache::{select_opt, SelfCache};
use crate::config::{ModelConfig, NormPosition};
use crate::embedding::TokenEmbedding;
use crate::encoder::{apply_final_norm, EncoderLayer};
use crate::init::{linear, materialize, Role};
use crate::mask::{causal_mask, combine};
use crate::norm::LayerNorm;
use crate::positions::PositionalEncoding;
use crate::sublayer::layer_norm;

/// A GPT-style language model.
#[derive(Module, Debug)]
pub struct LanguageModel<B: Backend> {
    /// Token embedding `E` (also the output projection when tied).
    pub embedding: TokenEmbedding<B>,
    /// Positional encoding.
    pub positions: PositionalEncoding<B>,
    /// Dropout on embeddings + positions.
    pub dropout: Dropout,
    /// The causal self-attention blocks.
    pub layers: Vec<EncoderLayer<B>>,
    /// Final LayerNorm (pre-norm only).
    pub final_norm: Option<LayerNorm<B>>,
    /// Untied output projection `d_model → vocab` (no bias); `None` when tied to `E`.
    pub output: Option<Linear<B>>,
}

/// The key/value cache of a [`LanguageModel`]: one per layer, plus the number of positions.
#[derive(Clone, Debug)]
pub struct LmCache<B: Backend> {
    /// One self-attention cache per layer.
    pub layers: Vec<SelfCache<B>>,
    /// Positions already processed.
    pub len: usize,
}

impl<B: Backend> LmCache<B> {
    /// Keeps (repeats, reorders) the batch rows `indices`.
    ///
    /// # Shapes
    /// - `indices`: `[new_batch]`
    pub fn select(self, indices: Tensor<B, 1, Int>) -> Self {
        Self { layers: self.layers.into_iter().map(|c| select_opt(c, &indices)).collect(), len: self.len }
    }
}

impl ModelConfig {
    /// Builds the language model for a vocabulary of `vocab_size` tokens.
    ///
    /// `self` should have passed [`ModelConfig::validate`]: an invalid configuration (say
    /// `d_model % n_heads != 0`) panics here or in `forward`.
    pub fn init_lm<B: Backend>(&self, vocab_size: usize, device: &B::Device) -> LanguageModel<B> {
        let output_config = ModelConfig { bias: false, ..self.clone() };
        materialize(LanguageModel {
            embedding: TokenEmbedding::new(vocab_size, self, device),
            positions: PositionalEncoding::new(self, device),
            dropout: DropoutConfig::new(self.dropout).init(),
            layers: (0..self.n_layers).map(|_| EncoderLayer::new(self, device)).collect(),
            final_norm: (self.norm == NormPosition::Pre).then(|| layer_norm(self, device)),
            output: (!self.tie_embeddings)
                .then(|| linear(self.d_model, vocab_size, &output_config, Role::Plain, device)),
        })
    }
}

impl<B: Backend> LanguageModel<B> {
    /// Next-token logits at every position.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, len]`
    /// - output: `[batch, len, vocab]`
    pub fn forward(&self, tokens: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        self.run(tokens, None, None).0
    }

    /// Logits and every layer's attention weights (for heat maps).
    ///
    /// # Shapes
    /// - `tokens`: `[batch, len]`
    /// - output: (`[batch, len, vocab]`, `n_layers` × `[batch, heads, len, len]`)
    pub fn forward_with_attention(&self, tokens: Tensor<B, 2, Int>) -> (Tensor<B, 3>, Vec<Tensor<B, 4>>) {
        self.run(tokens, None, None)
    }

    /// Logits at every position with bidirectional attention (no causal mask): the
    /// encoder-only masked language model (`arch = "encoder"`), and its attention weights.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, len]`
    /// - output: (`[batch, len, vocab]`, `n_layers` × `[batch, heads, len, len]`)
    pub fn forward_bidirectional(&self, tokens: Tensor<B, 2, Int>) -> (Tensor<B, 3>, Vec<Tensor<B, 4>>) {
        let mut x = crate::fused::dropout(&self.dropout, self.positions.forward(self.embedding.forward(tokens), 0));
        let mut weights = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            let out = layer.forward(x, None, None);
            x = out.x;
            weights.push(out.self_weights);
        }
        (self.project(apply_final_norm(&self.final_norm, x)), weights)
    }

    /// An empty cache for incremental decoding.
    pub fn empty_cache(&self) -> LmCache<B> {
        LmCache { layers: vec![None; self.layers.len()], len: 0 }
    }

    /// Logits of new positions that continue the cached ones; extends `cache`.
    /// `key_padding` (`true` = padding) covers every key, cached and new.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, new]`
    /// - `key_padding`: `[batch, cached + new]`
    /// - output: (`[batch, new, vocab]`, `n_layers` × `[batch, heads, new, cached + new]`)
    pub fn forward_cached(
        &self,
        tokens: Tensor<B, 2, Int>,
        cache: &mut LmCache<B>,
        key_padding: Option<Tensor<B, 2, Bool>>,
    ) -> (Tensor<B, 3>, Vec<Tensor<B, 4>>) {
        self.run(tokens, Some(cache), key_padding)
    }

    /// [`Self::forward_cached`] with a cache, or from the first position without keeping one
    /// (self-attention may then read its projections from one product).
    fn run(
        &self,
        tokens: Tensor<B, 2, Int>,
        mut cache: Option<&mut LmCache<B>>,
        key_padding: Option<Tensor<B, 2, Bool>>,
    ) -> (Tensor<B, 3>, Vec<Tensor<B, 4>>) {
        let [_, new] = tokens.dims();
        let offset = cache.as_ref().map_or(0, |cache| cache.len);
        let device = tokens.device();
        // The mask first: under burn-fusion, built between the embedding and the first
        // LayerNorm, its operations (one of them never fused) kept that LayerNorm's from
        // fusing, eight kernels where the others take three (docs/benchmarks.md).
        let causal = causal_mask::<B>(new, offset + new, offset, &device);
        let mask = combine(Some(causal), key_padding.map(crate::mask::padding_mask));
        let mut x =
            crate::fused::dropout(&self.dropout, self.positions.forward(self.embedding.forward(tokens), offset));
        let mut weights = Vec::with_capacity(self.layers.len());
        for (i, layer) in self.layers.iter().enumerate() {
            let out = match cache.as_deref_mut() {
                Some(cache) => layer.forward_cached(x, mask.clone(), Some(offset), &mut cache.layers[i]),
                None => layer.forward(x, mask.clone(), Some(offset)),
            };
            x = out.x;
            weights.push(out.self_weights);
        }
        if let Some(cache) = cache {
            cache.len += new;
        }
        (self.project(apply_final_norm(&self.final_norm, x)), weights)
    }

    /// The pre-softmax projection: `x Eᵀ` when tied, else the output linear map.
    ///
    /// # Shapes
    /// - `x`: `[batch, len, d_model]`
    /// - output: `[batch, len, vocab]`
    pub fn project(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        match &self.output {
            Some(output) => crate::positionwise::positionwise(output, x),
            None => self.embedding.project(x),
        }
    }

    /// Longest sequence the model can process (`block_size` with learned positions).
    pub fn max_len(&self) -> Option<usize> {
        self.positions.max_len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Arch, Init, Positions};
    use crate::params::count;
    use crate::test_backend::{TestAutodiffBackend, TestBackend};
    use burn::tensor::TensorData;

    fn tokens<B: Backend>(ids: &[i64], batch: usize, device: &B::Device) -> Tensor<B, 2, Int> {
        Tensor::from_data(TensorData::new(ids.to_vec(), [batch, ids.len() / batch]), device)
    }

    #[test]
    fn nanogpt_cpu_config_builds_with_the_nanogpt_param_count() {
        let device = Default::default();
        let model = ModelConfig::nanogpt_cpu().init_lm::<TestBackend>(65, &device);
        assert_eq!(model.num_params(), 804_096);
        let logits = model.forward(tokens(&[1, 2, 3, 4, 5, 6], 2, &device));
        assert_eq!(logits.dims(), [2, 3, 65]);
    }

    #[test]
    fn untied_lm_param_count_matches_config_count() {
        let device = Default::default();
        let config = ModelConfig {
            arch: Arch::Lm,
            d_model: 16,
            n_heads: 2,
            n_layers: 2,
            d_ff: 24,
            tie_embeddings: false,
            positions: Positions::Learned,
            block_size: 10,
            ..ModelConfig::base()
        };
        let model = config.init_lm::<TestBackend>(11, &device);
        assert_eq!(model.num_params() as u64, count(&config, 11).params);
        // Heads of their own widths (Table 3 rows A, B; 3 heads do not divide 16), and LoRA
        // adapters on two projections: r·(d_in + d_out) each, per layer.
        let apart = ModelConfig { n_heads: 3, d_k: 5, d_v: 7, ..config.clone() };
        let model = apart.init_lm::<TestBackend>(11, &device);
        assert_eq!(model.num_params() as u64, count(&apart, 11).params);
        assert_eq!(model.forward(tokens(&[1, 2, 3, 4], 2, &device)).dims(), [2, 2, 11]);
        let targets = vec!["query".to_string(), "output".to_string()];
        let lora = ModelConfig { lora_rank: 2, lora_targets: targets, ..apart.clone() };
        let adapters = 2 * (2 * (16 + 15) + 2 * (21 + 16));
        assert_eq!(count(&lora, 11).params, count(&apart, 11).params + adapters);
        assert_eq!(lora.init_lm::<TestBackend>(11, &device).num_params() as u64, count(&lora, 11).params);
    }

    /// `B = 0` at the start: a model with fresh adapters computes exactly what the same
    /// weights compute without them.
    #[test]
    fn a_lora_model_at_initialization_equals_its_base_model_exactly() {
        let device = Default::default();
        let config = ModelConfig {
            arch: Arch::Lm,
            d_model: 16,
            n_heads: 2,
            n_layers: 2,
            d_ff: 24,
            dropout: 0.0,
            lora_rank: 4,
            ..ModelConfig::base()
        };
        let lora = config.init_lm::<TestBackend>(11, &device);
        assert!(lora.layers.iter().all(|l| l.self_attention.adapters.is_some()));
        let mut base = lora.clone();
        for layer in &mut base.layers {
            layer.self_attention.adapters = None;
        }
        let x = tokens(&[1, 2, 3, 4, 5, 6, 7, 8], 2, &device);
        assert_eq!(lora.forward(x.clone()).into_data(), base.forward(x).into_data());
    }

    /// The encoder sees the future: changing the token at position j changes the outputs at
    /// i < j (the causal model's stay the same).
    #[test]
    fn the_bidirectional_encoder_sees_the_future_and_the_causal_model_does_not() {
        let device = Default::default();
        let config = ModelConfig {
            arch: Arch::Encoder,
            d_model: 16,
            n_heads: 2,
            n_layers: 2,
            d_ff: 24,
            dropout: 0.0,
            ..ModelConfig::base()
        };
        let model = config.init_lm::<TestBackend>(11, &device);
        let (a, b) = (tokens(&[1, 2, 3, 4, 5], 1, &device), tokens(&[1, 2, 3, 4, 9], 1, &device));
        let first = |t: Tensor<TestBackend, 3>| t.slice([0..1, 0..4]).into_data();
        let (ea, eb) = (model.forward_bidirectional(a.clone()).0, model.forward_bidirectional(b.clone()).0);
        assert_ne!(first(ea), first(eb), "the encoder's earlier outputs read the last token");
        assert_eq!(first(model.forward(a)), first(model.forward(b)), "the causal model's do not");
    }

    /// Without `1/√d_k` the scores are `√d_k` times larger: the output changes.
    #[test]
    fn turning_the_attention_scale_off_changes_the_output() {
        let device = Default::default();
        let config = ModelConfig {
            arch: Arch::Lm,
            d_model: 16,
            n_heads: 2,
            n_layers: 1,
            d_ff: 24,
            dropout: 0.0,
            ..ModelConfig::base()
        };
        let scaled = config.init_lm::<TestBackend>(11, &device);
        let mut unscaled = scaled.clone();
        unscaled.layers[0].self_attention.scaled = false;
        let x = tokens(&[1, 2, 3, 4, 5, 6, 7, 8], 2, &device);
        let (a, b) = (scaled.forward(x.clone()).into_data(), unscaled.forward(x).into_data());
        let diff = a.iter::<f32>().zip(b.iter::<f32>()).map(|(p, q)| (p - q).abs()).fold(0.0, f32::max);
        assert!(diff > 1e-3, "{diff}");
    }

    /// The tied matrix is one parameter: its gradient is the sum of the gradients that the
    /// input embedding and the output projection would each receive if they were separate
    /// copies of the same values, and an SGD step therefore moves both uses identically.
    #[test]
    fn tied_weights_are_one_parameter() {
        let device = Default::default();
        let config = ModelConfig {
            arch: Arch::Lm,
            d_model: 8,
            n_heads: 2,
            n_layers: 1,
            d_ff: 16,
            dropout: 0.0,
            init: Init::Gpt2,
            ..ModelConfig::base()
        };
        let tied = config.init_lm::<TestAutodiffBackend>(7, &device);
        let mut untied = tied.clone();
        let copy = Tensor::<TestAutodiffBackend, 2>::from_data(tied.embedding.weight.val().into_data(), &device);
        untied.output = Some(Linear { weight: burn::module::Param::from_tensor(copy.transpose()), bias: None });
        assert_eq!(tied.num_params() + 7 * 8, untied.num_params());

        let input = tokens::<TestAutodiffBackend>(&[1, 4, 2, 6, 0, 3], 1, &device);
        let loss = |m: &LanguageModel<TestAutodiffBackend>| m.forward(input.clone()).powi_scalar(2).mean();
        let tied_grads = loss(&tied).backward();
        let untied_grads = loss(&untied).backward();
        let tied_grad = tied.embedding.weight.grad(&tied_grads).unwrap();
        let input_grad = untied.embedding.weight.grad(&untied_grads).unwrap();
        let output_grad = untied.output.as_ref().unwrap().weight.grad(&untied_grads).unwrap().transpose();
        tied_grad.into_data().assert_approx_eq::<f32>(&(input_grad + output_grad).into_data(), Default::default());
    }
}
