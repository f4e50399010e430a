//! Scaled dot-product attention and multi-head attention (paper section 3.2).
//!
//! `Attention(Q, K, V) = softmax(QKᵀ/√d_k) V` (eq. 1), row-wise softmax;
//! `MultiHead(Q, K, V) = Concat(head₁..head_h) Wᴼ`, `headᵢ = Attention(QWᵢ^Q, KWᵢ^K, VWᵢ^V)`,
//! `d_k = d_v = d_model/h` unless `model.d_k`, `model.d_v` set them apart (Table 3 rows A, B);
//! the `1/√d_k` scale can be turned off (`model.attention_scale`) to show what it is for.
//! Optional LoRA adapters ([`crate::lora`]) sit beside the projections.

use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig, Linear};
use burn::tensor::{backend::Backend, Bool, Tensor};

use crate::cache::KeyValue;
use crate::config::ModelConfig;
use crate::fused::{attention, attention_context, attention_scores, attention_weights, reshape, Weight};
use crate::init::{linear, Role};
use crate::lora::{AttentionAdapters, Lora};
use crate::positionwise::positionwise;

/// `softmax(QKᵀ/√d_k + mask) V`, with dropout on the weights.
///
/// Returns the context and the attention weights (every row sums to 1; masked keys get 0).
///
/// # Shapes
/// - `q`: `[batch, heads, queries, d_k]`
/// - `k`: `[batch, heads, keys, d_k]`
/// - `v`: `[batch, heads, keys, d_v]`
/// - `mask`: broadcastable to `[batch, heads, queries, keys]`, `true` = may not attend
/// - output: (`[batch, heads, queries, d_v]`, `[batch, heads, queries, keys]`)
pub fn scaled_dot_product_attention<B: Backend>(
    q: Tensor<B, 4>,
    k: Tensor<B, 4>,
    v: Tensor<B, 4>,
    mask: Option<Tensor<B, 4, Bool>>,
    dropout: &Dropout,
) -> (Tensor<B, 4>, Tensor<B, 4>) {
    let scale = 1.0 / (q.dims()[3] as f64).sqrt();
    attention_with_scale(q, k, v, mask, None, dropout, scale)
}

/// `softmax(s·QKᵀ + mask) V` with dropout on the weights: [`scaled_dot_product_attention`]
/// with the scale `s` given (1 turns the paper's `1/√d_k` off). Shapes as there. `causal`:
/// the offset of a [`crate::mask::causal_mask`] that `mask` includes (alone or combined with
/// padding), which lets a GPU's products leave the masked half out
/// ([`crate::fused::attention_scores`]); `None` where that is not known.
pub fn attention_with_scale<B: Backend>(
    q: Tensor<B, 4>,
    k: Tensor<B, 4>,
    v: Tensor<B, 4>,
    mask: Option<Tensor<B, 4, Bool>>,
    causal: Option<usize>,
    dropout: &Dropout,
    scale: f64,
) -> (Tensor<B, 4>, Tensor<B, 4>) {
    if dropout.prob == 0.0 {
        // One fused operation (crate::fused::attention); the weights it returns are not
        // differentiable, which no caller needs (they are for heat maps).
        let [context, weights] = attention(q, k, v, mask, scale);
        return (context, weights);
    }
    // The scale after the product, as nanoGPT does (and as burn-fusion needs: fused/attention.rs).
    // The products are Burn's, or on a GPU our kernel's (crate::fused::attention_products).
    let scores = attention_scores(q, k, causal); // [batch, heads, queries, keys]
                                                 // The scale, the mask, the softmax and the dropout: one operation (a kernel each way on
                                                 // the GPU where `ATTEND_GPU_KERNELS` says so).
    let [weights, dropped] = attention_weights(scores, mask, scale, dropout);
    (attention_context(dropped, v, causal), weights)
}

/// What [`MultiHeadAttention`] returns.
#[derive(Clone, Debug)]
pub struct AttentionOutput<B: Backend> {
    /// `[batch, queries, d_model]`
    pub context: Tensor<B, 3>,
    /// `[batch, heads, queries, keys]`, for heat maps.
    pub weights: Tensor<B, 4>,
}

/// Multi-head attention with its four projections `W^Q, W^K, W^V, Wᴼ`.
#[derive(Module, Debug)]
pub struct MultiHeadAttention<B: Backend> {
    /// `W^Q` for all heads, `d_model → h·d_k`.
    pub query: Linear<B>,
    /// `W^K` for all heads, `d_model → h·d_k`.
    pub key: Linear<B>,
    /// `W^V` for all heads, `d_model → h·d_v`.
    pub value: Linear<B>,
    /// `Wᴼ`, applied to the concatenated heads, `h·d_v → d_model`.
    pub output: Linear<B>,
    /// LoRA adapters beside the projections (`model.lora_rank` > 0).
    pub adapters: Option<AttentionAdapters<B>>,
    /// Dropout on the attention weights (`attention_dropout`).
    pub dropout: Dropout,
    /// Number of heads `h`.
    pub n_heads: usize,
    /// Whether scores are divided by `√d_k` (`model.attention_scale`).
    pub scaled: bool,
}

impl<B: Backend> MultiHeadAttention<B> {
    /// Builds the layer for `config` (its `d_model`, `n_heads`, `d_k`, `d_v`, `bias`, `init`,
    /// `attention_scale` and `lora_*`).
    pub fn new(config: &ModelConfig, device: &B::Device) -> Self {
        let (d, h) = (config.d_model, config.n_heads);
        let (qk, v) = (h * config.d_k(), h * config.d_v());
        let adapters = (config.lora_rank > 0).then(|| {
            let adapter = |name: &str, d_in: usize, d_out: usize| {
                config
                    .lora_targets
                    .iter()
                    .any(|t| t == name)
                    .then(|| Lora::new(d_in, d_out, config.lora_rank, config.lora_alpha, device))
            };
            AttentionAdapters {
                query: adapter("query", d, qk),
                key: adapter("key", d, qk),
                value: adapter("value", d, v),
                output: adapter("output", v, d),
            }
        });
        Self {
            query: linear(d, qk, config, Role::Plain, device),
            key: linear(d, qk, config, Role::Plain, device),
            value: linear(d, v, config, Role::Plain, device),
            output: linear(v, d, config, Role::ResidualOutput, device),
            adapters,
            dropout: DropoutConfig::new(config.attention_dropout).init(),
            n_heads: h,
            scaled: config.attention_scale,
        }
    }

    /// `x W` (+ its adapter's `(α/r)·x a b`) for every position of `x`.
    fn project(
        &self,
        layer: &Linear<B>,
        adapter: impl Fn(&AttentionAdapters<B>) -> &Option<Lora<B>>,
        x: Tensor<B, 3>,
    ) -> Tensor<B, 3> {
        match self.adapters.as_ref().and_then(|a| adapter(a).as_ref()) {
            Some(lora) => positionwise(layer, x.clone()) + lora.delta_positionwise(x),
            None => positionwise(layer, x),
        }
    }

    /// Attention of `x_query` over `x_memory` (the same tensor for self-attention).
    ///
    /// # Shapes
    /// - `x_query`: `[batch, queries, d_model]`
    /// - `x_memory`: `[batch, keys, d_model]`
    /// - `mask`: broadcastable to `[batch, heads, queries, keys]`
    /// - output: see [`AttentionOutput`]
    pub fn forward(
        &self,
        x_query: Tensor<B, 3>,
        x_memory: Tensor<B, 3>,
        mask: Option<Tensor<B, 4, Bool>>,
    ) -> AttentionOutput<B> {
        let kv = self.keys_values(x_memory);
        self.attend(x_query, &kv, mask)
    }

    /// Projects `x` to keys and values, split into heads (what a cache stores).
    ///
    /// # Shapes
    /// - `x`: `[batch, keys, d_model]`
    /// - output: `[batch, heads, keys, d_k]` each
    pub fn keys_values(&self, x: Tensor<B, 3>) -> KeyValue<B> {
        KeyValue {
            keys: self.split_heads(self.project(&self.key, |a| &a.key, x.clone())),
            values: self.split_heads(self.project(&self.value, |a| &a.value, x)),
        }
    }

    /// Attention of `x_query` over already projected keys and values.
    ///
    /// # Shapes
    /// - `x_query`: `[batch, queries, d_model]`
    /// - `kv`: `[batch, heads, keys, d_k]`
    /// - `mask`: broadcastable to `[batch, heads, queries, keys]`
    /// - output: see [`AttentionOutput`]
    pub fn attend(
        &self,
        x_query: Tensor<B, 3>,
        kv: &KeyValue<B>,
        mask: Option<Tensor<B, 4, Bool>>,
    ) -> AttentionOutput<B> {
        let q = self.split_heads(self.project(&self.query, |a| &a.query, x_query));
        self.attend_queries(q, kv, mask, None)
    }

    /// Self-attention's three projections of `x`: its queries, and its keys and values (what a
    /// cache stores), split into heads.
    ///
    /// Without adapters, and where [`crate::projections`] says so (`ATTEND_QKV=merged`; by default
    /// they are three), they are one product of `x` with
    /// `[W^Q | W^K | W^V]`, sliced.
    ///
    /// # Shapes
    /// - `x`: `[batch, len, d_model]`
    /// - output: `[batch, heads, len, d_k]` queries; keys and values as
    ///   [`MultiHeadAttention::keys_values`]
    pub fn self_projections(&self, x: Tensor<B, 3>) -> (Tensor<B, 4>, KeyValue<B>) {
        let layers = [&self.query, &self.key, &self.value];
        let biases = layers.iter().filter(|l| l.bias.is_some()).count();
        let mixed_biases = !(biases == 0 || biases == layers.len());
        if self.adapters.is_some() || mixed_biases || !crate::projections::merges() {
            return self.separate_projections(x);
        }
        self.merged_projections(x)
    }

    /// [`MultiHeadAttention::self_projections`] as three products (keys and values first, as
    /// [`MultiHeadAttention::forward`] orders them: the same order of operations, the same
    /// bits).
    pub(crate) fn separate_projections(&self, x: Tensor<B, 3>) -> (Tensor<B, 4>, KeyValue<B>) {
        let kv = self.keys_values(x.clone());
        (self.split_heads(self.project(&self.query, |a| &a.query, x)), kv)
    }

    /// [`MultiHeadAttention::self_projections`] as one product (no adapters; every projection
    /// with a bias or none).
    pub(crate) fn merged_projections(&self, x: Tensor<B, 3>) -> (Tensor<B, 4>, KeyValue<B>) {
        let [qk, v] = [&self.query, &self.value].map(|l| l.weight.dims()[1]);
        let y = self.joined_projections(x);
        let (queries, keys, values) = (y.clone().narrow(2, 0, qk), y.clone().narrow(2, qk, qk), y.narrow(2, 2 * qk, v));
        let kv = KeyValue { keys: self.split_heads(keys), values: self.split_heads(values) };
        (self.split_heads(queries), kv)
    }

    /// `x·[W^Q | W^K | W^V]` (+ the biases side by side, where every projection has one):
    /// the three projections as one product, `[batch, len, 2·h·d_k + h·d_v]`.
    pub(crate) fn joined_projections(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let layers = [&self.query, &self.key, &self.value];
        let weights = layers.map(|l| l.weight.val());
        // On the CPU under autodiff: one step whose parents are the three weights (their
        // gradients then computed beside the rest of the backward pass).
        if let Some(y) = crate::fused::linear_joined(&x, &weights, &layers.map(|l| l.bias.as_ref().map(|b| b.val()))) {
            return y;
        }
        let weight = crate::fused::cat_columns(weights);
        let biases: Vec<_> = layers.iter().filter_map(|l| l.bias.as_ref().map(|b| b.val())).collect();
        let bias = (!biases.is_empty()).then(|| Tensor::cat(biases, 0));
        crate::fused::linear(x, weight, bias, Weight::InOut)
    }

    /// Attention of queries already projected and split into heads over `kv`.
    ///
    /// # Shapes
    /// - `q`: `[batch, heads, queries, d_k]`
    /// - `kv`: `[batch, heads, keys, d_k]`
    /// - `mask`: broadcastable to `[batch, heads, queries, keys]`; `causal`: as
    ///   [`attention_with_scale`]'s
    /// - output: see [`AttentionOutput`]
    pub fn attend_queries(
        &self,
        q: Tensor<B, 4>,
        kv: &KeyValue<B>,
        mask: Option<Tensor<B, 4, Bool>>,
        causal: Option<usize>,
    ) -> AttentionOutput<B> {
        let scale = if self.scaled { 1.0 / (q.dims()[3] as f64).sqrt() } else { 1.0 };
        let (context, weights) =
            attention_with_scale(q, kv.keys.clone(), kv.values.clone(), mask, causal, &self.dropout, scale);
        self.joined(context, weights)
    }

    /// The heads' contexts (`[batch, heads, queries, d_v]`) joined and projected by `Wᴼ`,
    /// beside the weights.
    pub(crate) fn joined(&self, context: Tensor<B, 4>, weights: Tensor<B, 4>) -> AttentionOutput<B> {
        let [batch, heads, queries, d_v] = context.dims();
        // Concat(head₁..head_h): [batch, heads, queries, d_v] → [batch, queries, heads·d_v].
        let concat = reshape(context.swap_dims(1, 2), [batch, queries, heads * d_v]);
        AttentionOutput { context: self.project(&self.output, |a| &a.output, concat), weights }
    }

    /// `[batch, len, heads·width]` → `[batch, heads, len, width]`.
    fn split_heads(&self, x: Tensor<B, 3>) -> Tensor<B, 4> {
        let [batch, len, all] = x.dims();
        reshape(x, [batch, len, self.n_heads, all / self.n_heads]).swap_dims(1, 2)
    }
}

#[cfg(test)]
mod tests;
