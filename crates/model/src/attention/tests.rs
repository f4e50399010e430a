use super::*;
use crate::mask::{causal_mask, combine, padding_from_lengths, padding_mask};
use crate::test_backend::TestBackend;
use burn::tensor::{Distribution, TensorData};
use proptest::prelude::*;

type T4 = Tensor<TestBackend, 4>;

fn random(shape: [usize; 4], seed: u64) -> T4 {
    let device = Default::default();
    let n: usize = shape.iter().product();
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let values: Vec<f32> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
        })
        .collect();
    Tensor::from_data(TensorData::new(values, shape), &device)
}

fn no_dropout() -> Dropout {
    DropoutConfig::new(0.0).init()
}

fn check_softmax_rows(batch: usize, heads: usize, queries: usize, keys: usize, lengths: Vec<usize>, seed: u64) {
    let device = Default::default();
    let q = random([batch, heads, queries, 4], seed);
    let k = random([batch, heads, keys, 4], seed + 1);
    let v = random([batch, heads, keys, 4], seed + 2);
    let pad = padding_mask(padding_from_lengths::<TestBackend>(&lengths, keys, &device));
    let mask = combine(Some(causal_mask::<TestBackend>(queries, keys, keys - queries, &device)), Some(pad));
    let (_, weights) = scaled_dot_product_attention(q, k, v, mask.clone(), &no_dropout());
    let mask = mask.unwrap().expand([batch, heads, queries, keys]).into_data().to_vec::<bool>().unwrap();
    let weights = weights.into_data().to_vec::<f32>().unwrap();
    for (row, (w, m)) in weights.chunks(keys).zip(mask.chunks(keys)).enumerate() {
        let sum: f32 = w.iter().sum();
        assert!((sum - 1.0).abs() < 1e-5, "row {row} sums to {sum}");
        if m.iter().any(|&masked| !masked) {
            for (wi, &mi) in w.iter().zip(m) {
                assert!(!mi || *wi == 0.0, "masked key got weight {wi}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Every row of the attention weights sums to 1, masked keys get weight exactly 0,
    /// and a fully masked row (a zero-length sequence) is finite.
    #[test]
    fn softmax_rows_sum_to_one_and_masked_weights_are_zero(
        batch in 1usize..3, heads in 1usize..3, queries in 1usize..5, extra in 0usize..4,
        seed in 0u64..1000, len_seed in 0usize..100,
    ) {
        let keys = queries + extra;
        let lengths: Vec<usize> = (0..batch).map(|b| (len_seed + b * 7) % (keys + 1)).collect();
        check_softmax_rows(batch, heads, queries, keys, lengths, seed);
    }
}

#[test]
fn softmax_of_fully_masked_row_is_not_nan() {
    let device = Default::default();
    let q = random([1, 1, 2, 4], 1);
    let k = random([1, 1, 3, 4], 2);
    let v = random([1, 1, 3, 4], 3);
    let mask = padding_mask(padding_from_lengths::<TestBackend>(&[0], 3, &device));
    let (context, weights) = scaled_dot_product_attention(q, k, v, Some(mask), &no_dropout());
    assert!(!context.contains_nan().into_scalar());
    assert!(!weights.contains_nan().into_scalar());
}

/// Golden case: one query, two keys; scores (1·1, 1·0)/√1 = (1, 0); softmax = (e/(1+e),
/// 1/(1+e)) = (0.731059, 0.268941); output = weights · V.
#[test]
fn attention_golden_two_keys() {
    let device = Default::default();
    let q = Tensor::<TestBackend, 4>::from_floats([[[[1.0]]]], &device);
    let k = Tensor::<TestBackend, 4>::from_floats([[[[1.0], [0.0]]]], &device);
    let v = Tensor::<TestBackend, 4>::from_floats([[[[10.0], [20.0]]]], &device);
    let (context, weights) = scaled_dot_product_attention(q, k, v, None, &no_dropout());
    let w = weights.into_data().to_vec::<f32>().unwrap();
    assert!((w[0] - 0.731_059).abs() < 1e-5 && (w[1] - 0.268_941).abs() < 1e-5);
    let c = context.into_scalar();
    assert!((c - (10.0 * 0.731_059 + 20.0 * 0.268_941)).abs() < 1e-4);
}

#[test]
fn multi_head_attention_shapes() {
    let device = Default::default();
    let config = ModelConfig { d_model: 16, n_heads: 4, ..ModelConfig::base() };
    let mha = MultiHeadAttention::<TestBackend>::new(&config, &device);
    let x = Tensor::<TestBackend, 3>::random([2, 5, 16], Distribution::Default, &device);
    let m = Tensor::<TestBackend, 3>::random([2, 7, 16], Distribution::Default, &device);
    let out = mha.forward(x, m, None);
    assert_eq!(out.context.dims(), [2, 5, 16]);
    assert_eq!(out.weights.dims(), [2, 4, 5, 7]);
}

/// Golden case with `d_k = 4`, where dividing by `√d_k` and multiplying by it differ: the
/// scores `(q·k₁, q·k₂) = (2, 0)` become `(1, 0)` after `/√4`, so the weights are those of
/// [`attention_golden_two_keys`], `(0.731059, 0.268941)` (`×√4` would give `(4, 0)`).
#[test]
fn scores_are_divided_by_the_square_root_of_d_k() {
    let device = Default::default();
    let q = Tensor::<TestBackend, 4>::from_floats([[[[1.0, 1.0, 0.0, 0.0]]]], &device);
    let k = Tensor::<TestBackend, 4>::from_floats([[[[1.0, 1.0, 0.0, 0.0], [0.0; 4]]]], &device);
    let v = Tensor::<TestBackend, 4>::from_floats([[[[10.0, 0.0, 0.0, 0.0], [20.0, 0.0, 0.0, 0.0]]]], &device);
    let (context, weights) = scaled_dot_product_attention(q, k, v, None, &no_dropout());
    let w = weights.into_data().to_vec::<f32>().unwrap();
    assert!((w[0] - 0.731_059).abs() < 1e-5 && (w[1] - 0.268_941).abs() < 1e-5, "weights {w:?}");
    let c = context.into_data().to_vec::<f32>().unwrap();
    assert!((c[0] - (10.0 * 0.731_059 + 20.0 * 0.268_941)).abs() < 1e-4, "context {c:?}");
}

/// A layer with an adapter beside each of its four projections, every `b` random (a fresh
/// adapter's `b` is zero and adds nothing, which would hide how it is added).
fn adapted_layer(bias: bool) -> MultiHeadAttention<TestBackend> {
    let config = ModelConfig {
        d_model: 8,
        n_heads: 2,
        bias,
        lora_rank: 2,
        lora_alpha: 4.0,
        lora_targets: crate::lora::LORA_TARGETS.iter().map(|t| t.to_string()).collect(),
        // The weights' dropout draws a new mask each call: off, so that two calls compare.
        attention_dropout: 0.0,
        ..ModelConfig::base()
    };
    let device = Default::default();
    let mut layer = MultiHeadAttention::<TestBackend>::new(&config, &device);
    let adapters = layer.adapters.as_mut().expect("lora_rank > 0 builds adapters");
    for lora in [&mut adapters.query, &mut adapters.key, &mut adapters.value, &mut adapters.output] {
        let lora = lora.as_mut().expect("every projection is a target");
        let dims = lora.b.dims();
        lora.b = burn::module::Param::from_tensor(Tensor::random(dims, Distribution::Uniform(-1.0, 1.0), &device));
    }
    // Burn initializes a parameter lazily, on its first read: read each now, or every clone
    // of the layer would draw its own weights.
    for projection in [&layer.query, &layer.key, &layer.value, &layer.output] {
        let _ = projection.weight.val();
        let _ = projection.bias.as_ref().map(|b| b.val());
    }
    layer
}

fn values<const D: usize>(t: Tensor<TestBackend, D>) -> Vec<f32> {
    t.into_data().to_vec::<f32>().unwrap()
}

fn assert_close(a: Vec<f32>, b: Vec<f32>, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    let worst = a.iter().zip(&b).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(worst < 1e-5, "{what} differ by {worst}");
}

/// Each projection with its adapter is `x W + (α/r)·x a b`: the layer's output equals that of
/// the same layer without adapters and with every weight `W + (α/r)·a b` ([`Lora::merged`]).
#[test]
fn adapters_add_their_scaled_low_rank_product_to_each_projection() {
    let adapted = adapted_layer(true);
    let mut merged = adapted.clone();
    let adapters = merged.adapters.take().unwrap();
    for (layer, lora) in [
        (&mut merged.query, &adapters.query),
        (&mut merged.key, &adapters.key),
        (&mut merged.value, &adapters.value),
        (&mut merged.output, &adapters.output),
    ] {
        layer.weight = burn::module::Param::from_tensor(lora.as_ref().unwrap().merged(layer.weight.val()));
    }
    let device = Default::default();
    let x = Tensor::<TestBackend, 3>::random([2, 5, 8], Distribution::Default, &device);
    let m = Tensor::<TestBackend, 3>::random([2, 3, 8], Distribution::Default, &device);
    let (a, b) = (adapted.forward(x.clone(), m.clone(), None), merged.forward(x, m, None));
    assert_close(values(a.context), values(b.context), "adapted and merged contexts");
}

/// `self_projections` under `ATTEND_QKV=merged`, for the layers one product cannot serve
/// (with adapters; with a bias on some of the three projections but not all): the three
/// products, adapters and biases included.
#[test]
fn merged_setting_keeps_three_products_for_adapters_and_mixed_biases() {
    let mut mixed = MultiHeadAttention::<TestBackend>::new(
        &ModelConfig { d_model: 8, n_heads: 2, bias: true, ..ModelConfig::base() },
        &Default::default(),
    );
    mixed.key.bias = None;
    let x = Tensor::<TestBackend, 3>::random([2, 5, 8], Distribution::Default, &Default::default());
    for (layer, what) in [(adapted_layer(false), "with adapters"), (mixed, "with mixed biases")] {
        let (q, kv) = layer.separate_projections(x.clone());
        let (mq, mkv) = crate::env_switch::with_override(
            &crate::projections::TEST_PROJECTIONS,
            crate::projections::Projections::Merged,
            || layer.self_projections(x.clone()),
        );
        assert_close(values(q), values(mq), &format!("queries {what}"));
        assert_close(values(kv.keys), values(mkv.keys), &format!("keys {what}"));
        assert_close(values(kv.values), values(mkv.values), &format!("values {what}"));
    }
}
