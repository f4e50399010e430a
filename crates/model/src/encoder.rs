//! The encoder layer (paper section 3.1): self-attention then the feed-forward network, each
//! wrapped in a residual connection with LayerNorm. With a causal mask and a key/value cache the
//! same layer is the block of a decoder-only language model (GPT's `Block`).

use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig};
use burn::tensor::{backend::Backend, Bool, Tensor};

use crate::attention::MultiHeadAttention;
use crate::cache::SelfCache;
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
    /// - `mask`: broadcastable to `[batch, heads, len, len]` (padding and/or causal); `causal`:
    ///   the offset of a causal mask `mask` includes, where it does
    ///   ([`crate::attention::attention_with_scale`])
    /// - output: `x` `[batch, len, d_model]`
    pub fn forward(&self, x: Tensor<B, 3>, mask: Option<Tensor<B, 4, Bool>>, causal: Option<usize>) -> LayerOutput<B> {
        self.layer(x, mask, causal, None)
    }

    /// Forward pass of new positions, attending to the cached ones too; appends their keys
    /// and values to `cache`.
    ///
    /// # Shapes
    /// - `x`: `[batch, new, d_model]`
    /// - `mask`: broadcastable to `[batch, heads, new, cached + new]`; `causal` as
    ///   [`Self::forward`]'s
    /// - output: `x` `[batch, new, d_model]`
    pub fn forward_cached(
        &self,
        x: Tensor<B, 3>,
        mask: Option<Tensor<B, 4, Bool>>,
        causal: Option<usize>,
        cache: &mut SelfCache<B>,
    ) -> LayerOutput<B> {
        self.layer(x, mask, causal, Some(cache))
    }

    /// The layer, with a cache or without one (self-attention may then read its three
    /// projections from one product: [`MultiHeadAttention::self_attention`]).
    fn layer(
        &self,
        x: Tensor<B, 3>,
        mask: Option<Tensor<B, 4, Bool>>,
        causal: Option<usize>,
        cache: Option<&mut SelfCache<B>>,
    ) -> LayerOutput<B> {
        let attention = &self.self_attention;
        let (x, self_weights) = residual(x, &self.norm_attention, self.norm, &self.dropout, |h| {
            let out = attention.self_attention(h, mask, causal, cache);
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
            let out = layer.forward(x, mask.clone(), None);
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

#[cfg(test)]
mod tests {
    use burn::module::{ModuleMapper, Param};
    use burn_ndarray::NdArray;

    use super::*;

    type B = NdArray<f32>;

    struct Zero;
    impl ModuleMapper<B> for Zero {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            param.map(|t| t.zeros_like())
        }
    }

    /// One layer whose attention and feed-forward weights are all zero but the feed-forward's
    /// output bias b₂ = (1, 0, 0, 0), LayerNorm gains 1 and shifts 0, on x = (1, 2, 3, 4).
    /// Both sub-layers' outputs are then known by hand: attention gives 0, the FFN gives b₂.
    /// Pre-norm (`x + F(LN(x))`): x + 0 + b₂ = (2, 2, 3, 4).
    /// Post-norm (`LN(x + F(x))`): LN(x) = (−1.341635, −0.447212, 0.447212, 1.341635), then
    /// LN(LN(x) + b₂) = (−0.823079, −0.969956, 0.274360, 1.518676) (ε = 1e-5).
    fn one_layer_output(norm: NormPosition) -> Vec<f32> {
        let device = Default::default();
        let config = ModelConfig { d_model: 4, n_heads: 1, d_ff: 8, dropout: 0.0, norm, ..ModelConfig::base() };
        let mut layer = EncoderLayer::<B>::new(&config, &device).map(&mut Zero);
        for norm in [&mut layer.norm_attention, &mut layer.norm_feed_forward] {
            norm.gamma = Param::from_tensor(Tensor::ones([4], &device));
        }
        layer.feed_forward.w_2.bias = Some(Param::from_tensor(Tensor::from_data([1.0f32, 0.0, 0.0, 0.0], &device)));
        let x = Tensor::<B, 3>::from_data([[[1.0f32, 2.0, 3.0, 4.0]]], &device);
        layer.forward(x, None, None).x.into_data().to_vec().unwrap()
    }

    #[test]
    fn pre_norm_and_post_norm_layers_give_their_hand_derived_outputs() {
        let close = |got: Vec<f32>, want: [f32; 4]| got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-5);
        let pre = one_layer_output(NormPosition::Pre);
        assert!(close(pre.clone(), [2.0, 2.0, 3.0, 4.0]), "{pre:?}");
        let post = one_layer_output(NormPosition::Post);
        assert!(close(post.clone(), [-0.823_079, -0.969_956, 0.274_360, 1.518_676]), "{post:?}");
    }
}
