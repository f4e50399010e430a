//! The decoder layer (paper section 3.1): masked self-attention, attention over the encoder's
//! output ("encoder-decoder attention"), then the feed-forward network; each sub-layer with
//! residual, dropout and LayerNorm.

use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig};
use burn::tensor::{backend::Backend, Bool, Tensor};

use crate::attention::MultiHeadAttention;
use crate::cache::{extend, KeyValue, SelfCache};
use crate::config::{ModelConfig, NormPosition};
use crate::encoder::{apply_final_norm, LayerOutput};
use crate::feed_forward::FeedForward;
use crate::norm::LayerNorm;
use crate::sublayer::{layer_norm, residual};

/// Masked self-attention + cross-attention + feed-forward.
#[derive(Module, Debug)]
pub struct DecoderLayer<B: Backend> {
    /// Masked multi-head self-attention.
    pub self_attention: MultiHeadAttention<B>,
    /// Attention over the encoder output (queries from the decoder).
    pub cross_attention: MultiHeadAttention<B>,
    /// Position-wise feed-forward network.
    pub feed_forward: FeedForward<B>,
    /// LayerNorm of the self-attention sub-layer.
    pub norm_self: LayerNorm<B>,
    /// LayerNorm of the cross-attention sub-layer.
    pub norm_cross: LayerNorm<B>,
    /// LayerNorm of the feed-forward sub-layer.
    pub norm_feed_forward: LayerNorm<B>,
    /// Dropout on each sub-layer's output.
    pub dropout: Dropout,
    /// Post-norm (paper) or pre-norm.
    pub norm: NormPosition,
}

impl<B: Backend> DecoderLayer<B> {
    /// Builds one layer for `config`.
    pub fn new(config: &ModelConfig, device: &B::Device) -> Self {
        Self {
            self_attention: MultiHeadAttention::new(config, device),
            cross_attention: MultiHeadAttention::new(config, device),
            feed_forward: FeedForward::new(config, device),
            norm_self: layer_norm(config, device),
            norm_cross: layer_norm(config, device),
            norm_feed_forward: layer_norm(config, device),
            dropout: DropoutConfig::new(config.dropout).init(),
            norm: config.norm,
        }
    }

    /// Forward pass of new target positions, appending their keys and values to `cache`.
    ///
    /// # Shapes
    /// - `x`: `[batch, new, d_model]`
    /// - `memory`: this layer's cross-attention keys/values of the encoder output,
    ///   `[batch, heads, source_len, d_k]`
    /// - `self_mask`: broadcastable to `[batch, heads, new, cached + new]`; `causal`: the offset
    ///   of a causal mask it includes ([`crate::attention::attention_with_scale`])
    /// - `cross_mask`: broadcastable to `[batch, heads, new, source_len]`
    /// - output: `x` `[batch, new, d_model]`
    pub fn forward_cached(
        &self,
        x: Tensor<B, 3>,
        memory: &KeyValue<B>,
        self_mask: Option<Tensor<B, 4, Bool>>,
        causal: Option<usize>,
        cross_mask: Option<Tensor<B, 4, Bool>>,
        cache: &mut SelfCache<B>,
    ) -> LayerOutput<B> {
        let attention = &self.self_attention;
        let (x, self_weights) = residual(x, &self.norm_self, self.norm, &self.dropout, |h| {
            let (q, kv) = attention.self_projections(h);
            let kv = extend(cache, kv);
            let out = attention.attend_queries(q, &kv, self_mask, causal);
            (out.context, out.weights)
        });
        let (x, cross_weights) = residual(x, &self.norm_cross, self.norm, &self.dropout, |h| {
            let out = self.cross_attention.attend(h, memory, cross_mask);
            (out.context, out.weights)
        });
        let (x, ()) =
            residual(x, &self.norm_feed_forward, self.norm, &self.dropout, |h| (self.feed_forward.forward(h), ()));
        LayerOutput { x, self_weights, cross_weights: Some(cross_weights) }
    }
}

/// A stack of decoder layers, with the final LayerNorm that pre-norm needs.
#[derive(Module, Debug)]
pub struct Decoder<B: Backend> {
    /// The `N` layers.
    pub layers: Vec<DecoderLayer<B>>,
    /// LayerNorm after the last layer (pre-norm only).
    pub final_norm: Option<LayerNorm<B>>,
}

impl<B: Backend> Decoder<B> {
    /// Builds `n_layers` layers for `config`.
    pub fn new(config: &ModelConfig, device: &B::Device) -> Self {
        Self {
            layers: (0..config.n_layers).map(|_| DecoderLayer::new(config, device)).collect(),
            final_norm: (config.norm == NormPosition::Pre).then(|| layer_norm(config, device)),
        }
    }

    /// Each layer's cross-attention keys and values of the encoder output (computed once per
    /// source batch).
    ///
    /// # Shapes
    /// - `memory`: `[batch, source_len, d_model]`
    /// - output: `n_layers` × `[batch, heads, source_len, d_k]`
    pub fn memory_keys_values(&self, memory: Tensor<B, 3>) -> Vec<KeyValue<B>> {
        self.layers.iter().map(|layer| layer.cross_attention.keys_values(memory.clone())).collect()
    }

    /// Runs every layer over new target positions, extending `caches` (one per layer).
    ///
    /// # Shapes
    /// - `x`: `[batch, new, d_model]`
    /// - `memory`: see [`Decoder::memory_keys_values`]
    /// - `self_mask`: broadcastable to `[batch, heads, new, cached + new]`; `causal` as
    ///   [`DecoderLayer::forward_cached`]'s
    /// - `cross_mask`: broadcastable to `[batch, heads, new, source_len]`
    /// - output: (`[batch, new, d_model]`, each layer's self- and cross-attention weights)
    pub fn forward_cached(
        &self,
        x: Tensor<B, 3>,
        memory: &[KeyValue<B>],
        self_mask: Option<Tensor<B, 4, Bool>>,
        causal: Option<usize>,
        cross_mask: Option<Tensor<B, 4, Bool>>,
        caches: &mut [SelfCache<B>],
    ) -> (Tensor<B, 3>, Vec<LayerOutput<B>>) {
        let mut x = x;
        let mut outputs = Vec::with_capacity(self.layers.len());
        for ((layer, kv), cache) in self.layers.iter().zip(memory).zip(caches.iter_mut()) {
            let out = layer.forward_cached(x, kv, self_mask.clone(), causal, cross_mask.clone(), cache);
            x = out.x.clone();
            outputs.push(out);
        }
        (apply_final_norm(&self.final_norm, x), outputs)
    }
}
