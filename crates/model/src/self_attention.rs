//! Self-attention as one call ([`MultiHeadAttention::self_attention`]): queries, keys and
//! values all projected from `x`, with or without a cache of keys and values.
//!
//! Without a cache, on the CPU backend (and where [`crate::projections`] allows it), the three
//! projections are one product `x·[W^Q | W^K | W^V]` whose rows attention reads in place
//! ([`crate::fused::attention_packed`]): one pass over `x` forward, and backward one gradient
//! in the product's layout, so one `dx` product and one weight gradient, where three
//! products would leave Burn's autodiff two `[rows, d_model]` sums of `dx` per layer.

use burn::tensor::{backend::Backend, Bool, Tensor};

use crate::attention::{AttentionOutput, MultiHeadAttention};
use crate::cache::{extend, SelfCache};
use crate::fused::{attention_packed, Packing};

impl<B: Backend> MultiHeadAttention<B> {
    /// Self-attention of `x`: with a cache, its keys and values appended to the cached ones
    /// and attended over together; without, from one packed product where [`Self::packs`].
    ///
    /// # Shapes
    /// - `x`: `[batch, new, d_model]`
    /// - `mask`: broadcastable to `[batch, heads, new, cached + new]`; `causal`: as
    ///   [`crate::attention::attention_with_scale`]'s
    /// - output: see [`AttentionOutput`]
    pub fn self_attention(
        &self,
        x: Tensor<B, 3>,
        mask: Option<Tensor<B, 4, Bool>>,
        causal: Option<usize>,
        cache: Option<&mut SelfCache<B>>,
    ) -> AttentionOutput<B> {
        if cache.is_none() && self.packs() {
            return self.packed_self_attention(x, mask);
        }
        let (q, kv) = self.self_projections(x);
        let kv = match cache {
            Some(cache) => extend(cache, kv),
            None => kv,
        };
        self.attend_queries(q, &kv, mask, causal)
    }

    /// Whether self-attention without a cache runs on one packed product: on the CPU backend
    /// unless `ATTEND_QKV=separate`, for layers without adapters whose projections all have a
    /// bias or none, and without dropout on the weights (the packed kernel has none).
    pub fn packs(&self) -> bool {
        let biases = [&self.query, &self.key, &self.value].iter().filter(|l| l.bias.is_some()).count();
        self.adapters.is_none()
            && (biases == 0 || biases == 3)
            && self.dropout.prob == 0.0
            && crate::projections::packs::<B>()
    }

    /// Self-attention of `x` through one product `x·[W^Q | W^K | W^V]` (+ the biases side by
    /// side, `joined_projections`), read in place by [`attention_packed`].
    pub(crate) fn packed_self_attention(
        &self,
        x: Tensor<B, 3>,
        mask: Option<Tensor<B, 4, Bool>>,
    ) -> AttentionOutput<B> {
        let [qk, v] = [&self.query, &self.value].map(|l| l.weight.dims()[1]);
        let qkv = self.joined_projections(x);
        let packing = Packing { heads: self.n_heads, d_k: qk / self.n_heads, d_v: v / self.n_heads };
        let scale = if self.scaled { 1.0 / (packing.d_k as f64).sqrt() } else { 1.0 };
        let [context, weights] = attention_packed(qkv, packing, mask, scale);
        self.joined(context, weights)
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::Autodiff;
    use burn::module::Param;
    use burn::tensor::{Distribution, Tensor, TensorData};
    use burn_ndarray::NdArray;

    use crate::attention::MultiHeadAttention;
    use crate::config::ModelConfig;
    use crate::mask::causal_mask;
    use crate::projections::{Projections, TEST_PROJECTIONS};

    type Ad = Autodiff<NdArray<f32>>;

    /// The output, the weights, and the gradients of `x` and of every parameter of the layer
    /// for the loss `Σ out²`, by the packed path or the three products.
    fn run(attention: &MultiHeadAttention<Ad>, x: TensorData, packed: bool, causal: bool) -> Vec<Vec<f32>> {
        let device = attention.query.weight.device();
        let x = Tensor::<Ad, 3>::from_data(x, &device).require_grad();
        let len = x.dims()[1];
        let mask = causal.then(|| causal_mask::<Ad>(len, len, 0, &device));
        let out = if packed {
            attention.packed_self_attention(x.clone(), mask)
        } else {
            let (q, kv) = attention.separate_projections(x.clone());
            attention.attend_queries(q, &kv, mask, causal.then_some(0))
        };
        let grads = out.context.clone().powi_scalar(2).sum().backward();
        let values = |t: TensorData| t.convert::<f32>().to_vec::<f32>().unwrap();
        let mut all = vec![values(out.context.into_data()), values(out.weights.into_data())];
        all.push(values(x.grad(&grads).unwrap().into_data()));
        for layer in [&attention.query, &attention.key, &attention.value, &attention.output] {
            all.push(values(layer.weight.grad(&grads).unwrap().into_data()));
            if let Some(bias) = &layer.bias {
                all.push(values(bias.grad(&grads).unwrap().into_data()));
            }
        }
        all
    }

    /// Reading the queries, keys and values in place from one product gives the outputs,
    /// weights and gradients (of `x` and of all four projections) that three products give:
    /// with and without biases and a causal mask, `d_v` apart from `d_k`.
    #[test]
    fn packed_self_attention_equals_three_products_in_values_and_gradients() {
        for (bias, d_k, d_v, causal) in [(false, 0, 0, true), (true, 3, 5, false), (true, 4, 2, true)] {
            let config = ModelConfig { d_model: 8, n_heads: 2, bias, d_k, d_v, ..ModelConfig::base() };
            let device = Default::default();
            let mut attention = MultiHeadAttention::<Ad>::new(&config, &device);
            // Biases start at zero: random ones, so that their order in the joined bias counts.
            for layer in [&mut attention.query, &mut attention.key, &mut attention.value] {
                if let Some(bias) = &layer.bias {
                    let shape = bias.val().dims();
                    layer.bias = Some(Param::from_tensor(Tensor::random(shape, Distribution::Default, &device)));
                }
            }
            let x = Tensor::<Ad, 3>::random([3, 6, config.d_model], Distribution::Default, &device).into_data();
            let separate = run(&attention, x.clone(), false, causal);
            assert_eq!(separate.len(), if bias { 11 } else { 7 });
            let worst = crate::projections::tests::worst_difference(&separate, &run(&attention, x, true, causal));
            assert!(worst < 1e-5, "packed and separate differ by {worst} (bias {bias}, d_k {d_k}, d_v {d_v})");
        }
    }

    /// Self-attention without a cache takes the packed kernel on the CPU by default and with
    /// `merged`, not with `separate`, and not with a cache (whose keys and values are kept
    /// apart).
    #[test]
    fn self_attention_packs_on_the_cpu_unless_separate_or_cached() {
        let config = ModelConfig { d_model: 8, n_heads: 2, ..ModelConfig::base() };
        let device = Default::default();
        let attention = MultiHeadAttention::<Ad>::new(&config, &device);
        let x = Tensor::<Ad, 3>::random([2, 4, 8], Distribution::Default, &device);
        let calls = |setting, cached: bool| {
            TEST_PROJECTIONS.with(|p| p.set(Some(setting)));
            let before = crate::fused::attention_packed::CPU_CALLS.with(|c| c.get());
            let mut cache = None;
            let cache = cached.then_some(&mut cache);
            let _ = attention.self_attention(x.clone(), None, None, cache);
            TEST_PROJECTIONS.with(|p| p.set(None));
            crate::fused::attention_packed::CPU_CALLS.with(|c| c.get()) - before
        };
        assert_eq!(calls(Projections::Auto, false), 1);
        assert_eq!(calls(Projections::Merged, false), 1);
        assert_eq!(calls(Projections::Separate, false), 0);
        assert_eq!(calls(Projections::Auto, true), 0);
    }

    /// The packed path is not taken for layers with adapters, with dropout on the weights, or
    /// with a bias on some projections and not others (each of which it would get wrong).
    #[test]
    fn packs_only_without_adapters_dropout_on_the_weights_or_mixed_biases() {
        let device = Default::default();
        let base = ModelConfig { d_model: 8, n_heads: 2, ..ModelConfig::base() };
        assert!(MultiHeadAttention::<Ad>::new(&base, &device).packs());
        let lora = ModelConfig { lora_rank: 2, lora_targets: vec!["query".into()], ..base.clone() };
        assert!(!MultiHeadAttention::<Ad>::new(&lora, &device).packs(), "adapters");
        let dropout = ModelConfig { attention_dropout: 0.1, ..base.clone() };
        assert!(!MultiHeadAttention::<Ad>::new(&dropout, &device).packs(), "dropout on the weights");
        let mut mixed = MultiHeadAttention::<Ad>::new(&ModelConfig { bias: true, ..base }, &device);
        assert!(mixed.packs());
        mixed.key.bias = None;
        assert!(!mixed.packs(), "a bias on two projections of three");
    }
}
