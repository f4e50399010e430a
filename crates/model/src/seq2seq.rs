//! The encoder-decoder translation model (paper Figure 1): shared or separate source/target
//! embeddings (+ positions, dropout), the encoder stack, the decoder stack with cross-attention,
//! and the (tied) pre-softmax projection.

use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig, Linear};
use burn::tensor::{backend::Backend, Bool, Int, Tensor};

use crate::cache::{select_opt, KeyValue, SelfCache};
use crate::config::ModelConfig;
use crate::decoder::Decoder;
use crate::embedding::TokenEmbedding;
use crate::encoder::Encoder;
use crate::init::{linear, materialize, Role};
use crate::mask::{causal_mask, padding_mask};
use crate::positions::PositionalEncoding;

/// The Transformer for translation.
#[derive(Module, Debug)]
pub struct TranslationModel<B: Backend> {
    /// Source embedding; `None` when shared with the target's (`share_embeddings`).
    pub source_embedding: Option<TokenEmbedding<B>>,
    /// Target embedding `E` (also the output projection when tied).
    pub target_embedding: TokenEmbedding<B>,
    /// Positional encoding, shared by both sides.
    pub positions: PositionalEncoding<B>,
    /// Dropout on embeddings + positions.
    pub dropout: Dropout,
    /// The encoder stack.
    pub encoder: Encoder<B>,
    /// The decoder stack.
    pub decoder: Decoder<B>,
    /// Untied output projection (no bias); `None` when tied to `E`.
    pub output: Option<Linear<B>>,
}

/// The encoded source: what the decoder attends to.
#[derive(Clone, Debug)]
pub struct Memory<B: Backend> {
    /// Encoder output `[batch, source_len, d_model]`.
    pub x: Tensor<B, 3>,
    /// Source padding flags `[batch, source_len]` (`true` = padding).
    pub padding: Option<Tensor<B, 2, Bool>>,
}

/// The decoding state: cross-attention keys/values of the source, self-attention caches.
#[derive(Clone, Debug)]
pub struct Seq2seqCache<B: Backend> {
    /// Per decoder layer: keys and values of the encoder output.
    pub memory: Vec<KeyValue<B>>,
    /// Source padding flags `[batch, source_len]`.
    pub source_padding: Option<Tensor<B, 2, Bool>>,
    /// Per decoder layer: self-attention keys and values of the target so far.
    pub layers: Vec<SelfCache<B>>,
    /// Target positions already processed.
    pub len: usize,
}

impl<B: Backend> Seq2seqCache<B> {
    /// Keeps (repeats, reorders) the batch rows `indices`.
    ///
    /// # Shapes
    /// - `indices`: `[new_batch]`
    pub fn select(self, indices: Tensor<B, 1, Int>) -> Self {
        Self {
            memory: self.memory.into_iter().map(|kv| kv.select(indices.clone())).collect(),
            source_padding: self.source_padding.map(|p| p.select(0, indices.clone())),
            layers: self.layers.into_iter().map(|c| select_opt(c, &indices)).collect(),
            len: self.len,
        }
    }

    /// Reorders only the target side (the self-attention caches), for rows that share their
    /// source with their new parent row: the memory and the source padding stay.
    ///
    /// # Shapes
    /// - `indices`: `[batch]`, `memory[indices[i]] == memory[i]` for every `i`
    pub fn select_target(self, indices: Tensor<B, 1, Int>) -> Self {
        Self { layers: self.layers.into_iter().map(|c| select_opt(c, &indices)).collect(), ..self }
    }
}

impl ModelConfig {
    /// Builds the translation model; source and target share the vocabulary of `vocab_size`
    /// tokens (one matrix when `share_embeddings`).
    ///
    /// `self` should have passed [`ModelConfig::validate`]: an invalid configuration (say
    /// `d_model % n_heads != 0`) panics here or in `forward`.
    pub fn init_seq2seq<B: Backend>(&self, vocab_size: usize, device: &B::Device) -> TranslationModel<B> {
        let output_config = ModelConfig { bias: false, ..self.clone() };
        materialize(TranslationModel {
            source_embedding: (!self.share_embeddings).then(|| TokenEmbedding::new(vocab_size, self, device)),
            target_embedding: TokenEmbedding::new(vocab_size, self, device),
            positions: PositionalEncoding::new(self, device),
            dropout: DropoutConfig::new(self.dropout).init(),
            encoder: Encoder::new(self, device),
            decoder: Decoder::new(self, device),
            output: (!self.tie_embeddings)
                .then(|| linear(self.d_model, vocab_size, &output_config, Role::Plain, device)),
        })
    }
}

impl<B: Backend> TranslationModel<B> {
    /// Next-token logits for every target position (teacher forcing).
    ///
    /// # Shapes
    /// - `source`: `[batch, source_len]`
    /// - `source_padding`: `[batch, source_len]`, `true` = padding
    /// - `target`: `[batch, target_len]` (the decoder input, starting with BOS)
    /// - output: `[batch, target_len, vocab]`
    pub fn forward(
        &self,
        source: Tensor<B, 2, Int>,
        source_padding: Option<Tensor<B, 2, Bool>>,
        target: Tensor<B, 2, Int>,
    ) -> Tensor<B, 3> {
        self.forward_with_attention(source, source_padding, target).logits
    }

    /// Logits and all attention weights (for heat maps).
    ///
    /// # Shapes
    /// As [`TranslationModel::forward`]; see [`Seq2seqOutput`] for the weights.
    pub fn forward_with_attention(
        &self,
        source: Tensor<B, 2, Int>,
        source_padding: Option<Tensor<B, 2, Bool>>,
        target: Tensor<B, 2, Int>,
    ) -> Seq2seqOutput<B> {
        let (memory, encoder_weights) = self.encode_with_attention(source, source_padding);
        let mut cache = self.begin(memory);
        let (logits, self_weights, cross_weights) = self.decode_step(target, &mut cache);
        Seq2seqOutput {
            logits,
            encoder_weights,
            decoder_self_weights: self_weights,
            decoder_cross_weights: cross_weights,
        }
    }

    /// Runs the encoder.
    ///
    /// # Shapes
    /// - `source`: `[batch, source_len]`
    /// - `source_padding`: `[batch, source_len]`, `true` = padding
    /// - output: [`Memory`] with `x` `[batch, source_len, d_model]`
    pub fn encode(&self, source: Tensor<B, 2, Int>, source_padding: Option<Tensor<B, 2, Bool>>) -> Memory<B> {
        self.encode_with_attention(source, source_padding).0
    }

    fn encode_with_attention(
        &self,
        source: Tensor<B, 2, Int>,
        source_padding: Option<Tensor<B, 2, Bool>>,
    ) -> (Memory<B>, Vec<Tensor<B, 4>>) {
        let embedding = self.source_embedding.as_ref().unwrap_or(&self.target_embedding);
        let x = crate::fused::dropout(&self.dropout, self.positions.forward(embedding.forward(source), 0));
        let mask = source_padding.clone().map(padding_mask);
        let (x, weights) = self.encoder.forward(x, mask);
        (Memory { x, padding: source_padding }, weights)
    }

    /// The decoding state for `memory`: projects it once into each layer's keys and values.
    pub fn begin(&self, memory: Memory<B>) -> Seq2seqCache<B> {
        Seq2seqCache {
            memory: self.decoder.memory_keys_values(memory.x),
            source_padding: memory.padding,
            layers: vec![None; self.decoder.layers.len()],
            len: 0,
        }
    }

    /// Logits of new target positions continuing the cached ones; extends `cache`.
    ///
    /// # Shapes
    /// - `target`: `[batch, new]`
    /// - output: `[batch, new, vocab]`
    pub fn forward_cached(&self, target: Tensor<B, 2, Int>, cache: &mut Seq2seqCache<B>) -> Tensor<B, 3> {
        self.decode_step(target, cache).0
    }

    #[allow(clippy::type_complexity)]
    fn decode_step(
        &self,
        target: Tensor<B, 2, Int>,
        cache: &mut Seq2seqCache<B>,
    ) -> (Tensor<B, 3>, Vec<Tensor<B, 4>>, Vec<Tensor<B, 4>>) {
        let [_, new] = target.dims();
        let offset = cache.len;
        let x = self.target_embedding.forward(target);
        let x = crate::fused::dropout(&self.dropout, self.positions.forward(x, offset));
        let self_mask = causal_mask::<B>(new, offset + new, offset, &x.device());
        let cross_mask = cache.source_padding.clone().map(padding_mask);
        let (x, outputs) =
            self.decoder.forward_cached(x, &cache.memory, Some(self_mask), Some(offset), cross_mask, &mut cache.layers);
        cache.len += new;
        let logits = match &self.output {
            Some(output) => crate::positionwise::positionwise(output, x),
            None => self.target_embedding.project(x),
        };
        let (self_weights, cross_weights) = outputs
            .into_iter()
            .map(|o| (o.self_weights, o.cross_weights.expect("decoder layers cross-attend")))
            .unzip();
        (logits, self_weights, cross_weights)
    }

    /// Longest target the model can process (`block_size` with learned positions).
    pub fn max_len(&self) -> Option<usize> {
        self.positions.max_len()
    }
}

/// What [`TranslationModel::forward_with_attention`] returns.
#[derive(Clone, Debug)]
pub struct Seq2seqOutput<B: Backend> {
    /// `[batch, target_len, vocab]`
    pub logits: Tensor<B, 3>,
    /// Per encoder layer `[batch, heads, source_len, source_len]`.
    pub encoder_weights: Vec<Tensor<B, 4>>,
    /// Per decoder layer `[batch, heads, target_len, target_len]`.
    pub decoder_self_weights: Vec<Tensor<B, 4>>,
    /// Per decoder layer `[batch, heads, target_len, source_len]`.
    pub decoder_cross_weights: Vec<Tensor<B, 4>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{NormPosition, Positions};
    use crate::params::count;
    use crate::test_backend::TestBackend;
    use burn::tensor::TensorData;

    fn small(share: bool, tie: bool, norm: NormPosition, bias: bool) -> ModelConfig {
        ModelConfig {
            d_model: 16,
            n_heads: 4,
            n_layers: 2,
            d_ff: 32,
            share_embeddings: share,
            tie_embeddings: tie,
            norm,
            bias,
            positions: Positions::Learned,
            block_size: 12,
            ..ModelConfig::base()
        }
    }

    #[test]
    fn seq2seq_param_count_matches_config_count_for_every_sharing() {
        let device = Default::default();
        for (share, tie, norm, bias) in [
            (true, true, NormPosition::Post, true),
            (false, true, NormPosition::Pre, false),
            (true, false, NormPosition::Pre, true),
            (false, false, NormPosition::Post, false),
        ] {
            let config = small(share, tie, norm, bias);
            let model = config.init_seq2seq::<TestBackend>(13, &device);
            assert_eq!(model.num_params() as u64, count(&config, 13).params, "{config:?}");
        }
    }

    /// Beam search moves rows only within a sentence's beams; then leaving the source memory
    /// where it is gives the next step's logits that moving it gives, and moving the target
    /// side is needed (a cache that did not move it would differ).
    #[test]
    fn select_target_equals_select_for_parents_within_their_sentence() {
        let device = Default::default();
        let model = small(true, true, NormPosition::Post, true).init_seq2seq::<TestBackend>(13, &device);
        let ids = |v: Vec<i64>, shape: [usize; 2]| {
            Tensor::<TestBackend, 2, Int>::from_data(TensorData::new(v, shape), &device)
        };
        let index =
            |v: Vec<i64>| Tensor::<TestBackend, 1, Int>::from_data(TensorData::new(v.clone(), [v.len()]), &device);
        let source = ids(vec![3, 4, 5, 6, 7, 8, 2, 9], [2, 4]);
        let cache = model.begin(model.encode(source, None));
        // Two beams per sentence, then a step with a different token in every row.
        let mut cache = cache.select(index(vec![0, 0, 1, 1]));
        model.forward_cached(ids(vec![1, 4, 7, 10], [4, 1]), &mut cache);
        let parents = index(vec![1, 1, 3, 2]);
        let next = ids(vec![5, 6, 7, 8], [4, 1]);
        let mut moved = cache.clone().select(parents.clone());
        let mut kept = cache.clone().select_target(parents);
        let mut unmoved = cache;
        let [a, b, c] = [&mut moved, &mut kept, &mut unmoved].map(|cache| model.forward_cached(next.clone(), cache));
        a.clone().into_data().assert_approx_eq::<f32>(&b.into_data(), burn::tensor::Tolerance::absolute(1e-6));
        let apart = (a - c).abs().max().into_scalar();
        assert!(apart > 1e-4, "the target side must move: {apart}");
    }

    #[test]
    fn seq2seq_shapes_and_attention_weights() {
        let device = Default::default();
        let model = small(true, true, NormPosition::Post, true).init_seq2seq::<TestBackend>(13, &device);
        let source = Tensor::<TestBackend, 2, Int>::ones([2, 5], &device);
        let target = Tensor::<TestBackend, 2, Int>::ones([2, 3], &device);
        let out = model.forward_with_attention(source, None, target);
        assert_eq!(out.logits.dims(), [2, 3, 13]);
        assert_eq!(out.encoder_weights[1].dims(), [2, 4, 5, 5]);
        assert_eq!(out.decoder_self_weights[0].dims(), [2, 4, 3, 3]);
        assert_eq!(out.decoder_cross_weights[0].dims(), [2, 4, 3, 5]);
    }
}
