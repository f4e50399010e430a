//! The encoder layer (paper section 3.1): self-attention then the feed-forward network, each
//! wrapped in a residual connection with LayerNorm. With a causal mask and a key/value cache the
//! same layer is the block of a decoder-only language model (GPT's `Block`).

use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig};
use burn::tensor::{backend::Backend, Bool, Tensor};

use crate::attention::MultiHeadAttention;
use crate::cache::{extend, SelfCache};
use crate::config::{ModelConfig, NormPosition};
use crate::feed_forward::FeedForward;
use crate::norm::LayerNorm;
use crate::sublayer::{layer_norm, residual};

/// What a layer returns: its output and the attention weights it used.
#[derive(Clone, Debug)]
pub struct LayerOutput<B: Backend> {
    /// `[batch, len, d_model]`
    pub x: Tensor<B, 3>,
    /// Self-attention weights `[batch, heads, len, keys]`.
    pub self_weights: Tensor<B, 4>,
    /// Cross-attention weights `[batch, heads, len, source_len]` (decoder layers only).
    pub cross_weights: Option<Tensor<B, 4>>,
}

/// Self-attention + feed-forward, each with residual, dropout and LayerNorm.
#[derive(Module, Debug)]
pub struct EncoderLayer<B: Backend> {
    /// Multi-head self-attention.
    pub self_attention: MultiHeadAttention<B>,
    /// Position-wise feed-forward network.
    pub feed_forward: FeedForward<B>,
    /// LayerNorm of the attention sub-layer.
    pub norm_attention: LayerNorm<B>,
    /// LayerNorm of the feed-forward sub-layer.
    pub norm_feed_forward: LayerNorm<B>,
    /// Dropout on each sub-layer's output (`P_drop`).
    pub dropout: Dropout,
    /// Post-norm (paper) or pre-norm.
    pub norm: NormPosition,
}

impl<B: Backend> EncoderLayer<B> {
    /// Builds one layer for `config`.
    pub fn new(config: &ModelConfig, device: &B::Device) -> Self {
        Self {
            self_attention: MultiHeadAttention::new(config, device),
            feed_forward: FeedForward::new(config, device),
            norm_attention: layer_norm(config, device),
            norm_feed_forward: layer_norm(config, device),
            dropout: DropoutConfig::new(config.dropout).init(),
            norm: config.norm,
        }
    }

    /// Full-sequence forward pass.
    ///
    /// # Shapes
    /// - `x`: `[batch, len, d_model]`
    /// - `mask`: broadcastable to `[batch, heads, len, len]` (padding and/or causal)
    /// - output: `x` `[batch, len, d_model]`
    pub fn forward(&self, x: Tensor<B, 3>, mask: Option<Tensor<B, 4, Bool>>) -> LayerOutput<B> {
        self.forward_cached(x, mask, &mut None)
    }

    /// Forward pass of new positions, attending to the cached ones too; appends their keys
    /// and values to `cache`.
    ///
    /// # Shapes
    /// - `x`: `[batch, new, d_model]`
    /// - `mask`: broadcastable to `[batch, heads, new, cached + new]`
    /// - output: `x` `[batch, new, d_model]`
    pub fn forward_cached(
        &self,
        x: Tensor<B, 3>,
        mask: Option<Tensor<B, 4, Bool>>,
        cache: &mut SelfCache<B>,
    ) -> LayerOutput<B> {
        let attention = &self.self_attention;
        let (x, self_weights) = residual(x, &self.norm_attention, self.norm, &self.dropout, |h| {
            let kv = extend(cache, attention.keys_values(h.clone()));
            let out = attention.attend(h, &kv, mask);
            (out.context, out.weights)
        });
        let (x, ()) =
            residual(x, &self.norm_feed_forward, self.norm, &self.dropout, |h| (self.feed_forward.forward(h), ()));
        LayerOutput { x, self_weights, cross_weights: None }
    }
}

/// A stack of encoder layers, with the final LayerNorm that pre-norm needs.
#[derive(Module, Debug)]
pub struct Encoder<B: Backend> {
    /// The `N` layers.
    pub layers: Vec<EncoderLayer<B>>,
    /// LayerNorm after the last layer (pre-norm only).
    pub final_norm: Option<LayerNorm<B>>,
}

impl<B: Backend> Encoder<B> {
    /// Builds `n_layers` layers for `config`.
    pub fn new(config: &ModelConfig, device: &B::Device) -> Self {
        Self {
            layers: (0..config.n_layers).map(|_| EncoderLayer::new(config, device)).collect(),
            final_norm: (config.norm == NormPosition::Pre).then(|| layer_norm(config, device)),
        }
    }

    /// Runs every layer; returns the output and each layer's attention weights.
    ///
    /// # Shapes
    /// - `x`: `[batch, len, d_model]`
    /// - `mask`: broadcastable to `[batch, heads, len, len]`
    /// - output: (`[batch, len, d_model]`, `n_layers` × `[batch, heads, len, len]`)
    pub fn forward(&self, x: Tensor<B, 3>, mask: Option<Tensor<B, 4, Bool>>) -> (Tensor<B, 3>, Vec<Tensor<B, 4>>) {
        let mut x = x;
        let mut weights = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            let out = layer.forward(x, mask.clone());
            x = out.x;
            weights.push(out.self_weights);
        }
        (apply_final_norm(&self.final_norm, x), weights)
    }
}

/// Applies an optional final LayerNorm.
///
/// # Shapes
/// - `x`: `[batch, len, d_model]`; output: same
pub(crate) fn apply_final_norm<B: Backend>(norm: &Option<LayerNorm<B>>, x: Tensor<B, 3>) -> Tensor<B, 3> {
    match norm {
        Some(norm) => norm.forward(x),
        None => x,
    }
}
