//! The invariances of docs/math.md as property tests (proptest) on `burn-ndarray`, or on
//! `burn-wgpu` with the `test-wgpu` feature (fewer cases: a software Vulkan driver is slow):
//! each test's name carries the invariant's key word (softmax is in `attention.rs`).

use attend_model::attention::MultiHeadAttention;
use attend_model::config::{Activation, Arch, ModelConfig, NormPosition, Positions};
use attend_model::decode::{beam_search, greedy, BeamOptions, GreedyOptions};
use attend_model::encoder::EncoderLayer;
use attend_model::mask::padding_from_lengths;
use attend_model::params::count;
use burn::module::Module;
use burn::prelude::{Backend, ElementConversion};
use burn::tensor::{Int, Tensor, TensorData, Tolerance};
use proptest::prelude::*;

/// The test backend: `burn-ndarray`, or `burn_wgpu::Wgpu` with the `test-wgpu` feature.
#[cfg(not(feature = "test-wgpu"))]
type TestBackend = burn_ndarray::NdArray<f32>;
#[cfg(feature = "test-wgpu")]
type TestBackend = burn_wgpu::Wgpu;
type T3 = Tensor<TestBackend, 3>;

#[cfg(not(feature = "test-wgpu"))]
const CASES: u32 = 16;
#[cfg(feature = "test-wgpu")]
const CASES: u32 = 4;

fn device() -> burn::tensor::ops::Device<TestBackend> {
    Default::default()
}

fn tokens(ids: &[i64], batch: usize) -> Tensor<TestBackend, 2, Int> {
    Tensor::from_data(TensorData::new(ids.to_vec(), [batch, ids.len() / batch]), &device())
}

fn floats(values: Vec<f32>, shape: [usize; 3]) -> T3 {
    Tensor::from_data(TensorData::new(values, shape), &device())
}

fn assert_close<const D: usize>(a: Tensor<TestBackend, D>, b: Tensor<TestBackend, D>) {
    a.into_data().assert_approx_eq::<f32>(&b.into_data(), Tolerance::rel_abs(1e-4, 1e-4));
}

/// Rows of `x` (`[1, len, d]`) in the order `perm`.
fn permute_rows(x: T3, perm: &[usize]) -> T3 {
    let idx = Tensor::<TestBackend, 1, Int>::from_data(
        TensorData::new(perm.iter().map(|&i| i as i64).collect::<Vec<_>>(), [perm.len()]),
        &device(),
    );
    x.select(1, idx)
}

/// A small configuration for the random tests.
fn small(arch: Arch, d_head: usize, n_heads: usize, n_layers: usize) -> ModelConfig {
    ModelConfig {
        arch,
        d_model: d_head * n_heads,
        n_heads,
        n_layers,
        d_ff: 2 * d_head * n_heads,
        dropout: 0.0,
        block_size: 16,
        ..ModelConfig::base()
    }
}

fn norm_of(pre: bool) -> NormPosition {
    if pre {
        NormPosition::Pre
    } else {
        NormPosition::Post
    }
}

fn positions_of(i: usize) -> Positions {
    [Positions::Sinusoidal, Positions::Learned, Positions::None][i % 3]
}

fn permutation(len: usize, seed: u64) -> Vec<usize> {
    let mut perm: Vec<usize> = (0..len).collect();
    let mut state = seed | 1;
    for i in (1..len).rev() {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        perm.swap(i, (state >> 33) as usize % (i + 1));
    }
    perm
}

/// nanoGPT's `generate` with argmax: `n` tokens, each from a full forward pass over the last
/// `block` tokens of the history.
fn nanogpt_generate(
    forward: impl Fn(Tensor<TestBackend, 2, Int>) -> T3,
    prompt: &[i64],
    block: usize,
    n: usize,
) -> Vec<u32> {
    let mut history = prompt.to_vec();
    let mut generated = Vec::new();
    for _ in 0..n {
        let window = &history[history.len().saturating_sub(block)..];
        let logits = forward(tokens(window, 1));
        let last = logits.slice([0..1, window.len() - 1..window.len()]).argmax(2).into_scalar().elem::<i64>();
        generated.push(last as u32);
        history.push(last);
    }
    generated
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// The notes' lemma: with P = 0 and no mask, `x ↦ Πx` gives `h ↦ Πh`, for multi-head
    /// attention and for a whole encoder layer (post- or pre-norm).
    #[test]
    fn permutation_of_inputs_permutes_attention_and_encoder_outputs(
        len in 2usize..7, n_heads in 1usize..3, pre in any::<bool>(), seed in any::<u64>(),
        values in proptest::collection::vec(-2.0f32..2.0, 6 * 8),
    ) {
        TestBackend::seed(&device(), seed);
        let config = ModelConfig { norm: norm_of(pre), ..small(Arch::Seq2seq, 4, n_heads, 1) };
        let d = config.d_model;
        let x = floats(values[..len * d].to_vec(), [1, len, d]);
        let perm = permutation(len, seed);
        // The identity would check nothing.
        prop_assume!(perm.iter().enumerate().any(|(i, &p)| i != p));
        let mha = MultiHeadAttention::<TestBackend>::new(&config, &device());
        let h = mha.forward(x.clone(), x.clone(), None).context;
        let px = permute_rows(x.clone(), &perm);
        assert_close(mha.forward(px.clone(), px.clone(), None).context, permute_rows(h, &perm));
        let layer = EncoderLayer::<TestBackend>::new(&config, &device());
        let y = layer.forward(x, None, None).x;
        assert_close(layer.forward(px, None, None).x, permute_rows(y, &perm));
    }

    /// With P = 0, `M = QKᵀ` depends only on the tokens at its two positions: shifting the
    /// sequence right by `k` shifts `M` by `k` along both axes.
    #[test]
    fn shift_of_sequence_shifts_attention_scores(
        ids in proptest::collection::vec(0i64..9, 2..7), prefix in proptest::collection::vec(0i64..9, 1..4),
        seed in any::<u64>(),
    ) {
        TestBackend::seed(&device(), seed);
        let config = ModelConfig { positions: Positions::None, d_model: 8, d_ff: 8, ..ModelConfig::notes() };
        let model = config.init_notes::<TestBackend>(9, &device());
        let scores = |ids: &[i64]| {
            let x = model.embedding.forward(tokens(ids, 1));
            let x = model.positions.forward(x, 0);
            let q = model.w_q.forward(x.clone());
            let k = model.w_k.forward(x);
            q.matmul(k.swap_dims(1, 2))
        };
        let shifted: Vec<i64> = prefix.iter().chain(&ids).copied().collect();
        let (t, k) = (ids.len(), prefix.len());
        let m = scores(&ids);
        let m_shifted = scores(&shifted).slice([0..1, k..k + t, k..k + t]);
        assert_close(m_shifted, m);
    }

    /// Changing tokens after position t never changes the outputs at positions ≤ t: the
    /// language model, the notes' model and the translation decoder.
    #[test]
    fn causal_outputs_ignore_future_tokens(
        ids in proptest::collection::vec(0i64..11, 2..9), cut in 0usize..8, fresh in 0i64..10,
        pre in any::<bool>(), pos in 0usize..3, gelu in any::<bool>(), seed in any::<u64>(),
    ) {
        TestBackend::seed(&device(), seed);
        let t = cut % (ids.len() - 1);
        let mut changed = ids.clone();
        for id in &mut changed[t + 1..] {
            *id = (*id + 1 + fresh) % 11; // 1 to 10 further: every token after t differs
        }
        let activation = if gelu { Activation::Gelu } else { Activation::Relu };
        let config = ModelConfig { norm: norm_of(pre), positions: positions_of(pos), activation, ..small(Arch::Lm, 4, 2, 2) };
        let len = ids.len();
        let lm = config.init_lm::<TestBackend>(11, &device());
        let (a, b) = (lm.forward(tokens(&ids, 1)), lm.forward(tokens(&changed, 1)));
        prop_assert_eq!(b.dims()[1], len);
        assert_close(a.slice([0..1, 0..t + 1]), b.slice([0..1, 0..t + 1]));

        let notes = ModelConfig { d_model: 8, d_ff: 8, ..ModelConfig::notes() }.init_notes::<TestBackend>(11, &device());
        let (a, b) = (notes.forward(tokens(&ids, 1)), notes.forward(tokens(&changed, 1)));
        assert_close(a.slice([0..1, 0..t + 1]), b.slice([0..1, 0..t + 1]));

        let mt = ModelConfig { arch: Arch::Seq2seq, ..config }.init_seq2seq::<TestBackend>(11, &device());
        let source = tokens(&[3, 1, 4, 1, 5], 1);
        let (a, b) = (mt.forward(source.clone(), None, tokens(&ids, 1)), mt.forward(source, None, tokens(&changed, 1)));
        assert_close(a.slice([0..1, 0..t + 1]), b.slice([0..1, 0..t + 1]));
    }

    /// Appending padding to a source (masked) never changes the encoder's outputs at the real
    /// positions, nor the decoder's outputs.
    #[test]
    fn padding_never_changes_real_outputs(
        source in proptest::collection::vec(1i64..11, 1..6), target in proptest::collection::vec(1i64..11, 1..5),
        pads in 1usize..4, pre in any::<bool>(), seed in any::<u64>(),
    ) {
        TestBackend::seed(&device(), seed);
        let config = ModelConfig { norm: norm_of(pre), ..small(Arch::Seq2seq, 4, 2, 2) };
        let model = config.init_seq2seq::<TestBackend>(11, &device());
        let len = source.len();
        let padded: Vec<i64> = source.iter().copied().chain(std::iter::repeat_n(0, pads)).collect();
        let flags = padding_from_lengths::<TestBackend>(&[len], len + pads, &device());

        let plain = model.encode(tokens(&source, 1), None).x;
        let with_pad = model.encode(tokens(&padded, 1), Some(flags.clone())).x;
        assert_close(with_pad.slice([0..1, 0..len]), plain);

        let a = model.forward(tokens(&source, 1), None, tokens(&target, 1));
        let b = model.forward(tokens(&padded, 1), Some(flags), tokens(&target, 1));
        assert_close(a, b);
    }

    /// Feeding a sequence in chunks through the key/value cache gives the logits of the full
    /// forward pass, position by position: LM, notes' model, translation decoder.
    #[test]
    fn cache_incremental_decoding_equals_full_forward(
        ids in proptest::collection::vec(0i64..11, 1..10), chunk in 1usize..4,
        pre in any::<bool>(), pos in 0usize..3, seed in any::<u64>(),
    ) {
        TestBackend::seed(&device(), seed);
        let config = ModelConfig { norm: norm_of(pre), positions: positions_of(pos), ..small(Arch::Lm, 4, 2, 2) };
        let chunks: Vec<&[i64]> = ids.chunks(chunk).collect();

        let lm = config.init_lm::<TestBackend>(11, &device());
        let mut cache = lm.empty_cache();
        let steps: Vec<_> = chunks.iter().map(|c| lm.forward_cached(tokens(c, 1), &mut cache, None).0).collect();
        assert_close(Tensor::cat(steps, 1), lm.forward(tokens(&ids, 1)));

        let notes = ModelConfig { d_model: 8, d_ff: 8, ..ModelConfig::notes() }.init_notes::<TestBackend>(11, &device());
        let mut cache = notes.empty_cache();
        let steps: Vec<_> = chunks.iter().map(|c| notes.forward_cached(tokens(c, 1), &mut cache).0).collect();
        assert_close(Tensor::cat(steps, 1), notes.forward(tokens(&ids, 1)));

        let mt = ModelConfig { arch: Arch::Seq2seq, ..config }.init_seq2seq::<TestBackend>(11, &device());
        let source = tokens(&[2, 7, 1, 8], 1);
        let mut cache = mt.begin(mt.encode(source.clone(), None));
        let steps: Vec<_> = chunks.iter().map(|c| mt.forward_cached(tokens(c, 1), &mut cache)).collect();
        assert_close(Tensor::cat(steps, 1), mt.forward(source, None, tokens(&ids, 1)));
    }

    /// Beam search of width 1 without length penalty is greedy decoding, for the LM and the
    /// translation model.
    #[test]
    fn beam_width_one_equals_greedy(
        prompt in proptest::collection::vec(0i64..7, 1..4), pos in 0usize..3, seed in any::<u64>(),
    ) {
        TestBackend::seed(&device(), seed);
        let config = ModelConfig { positions: positions_of(pos), init: attend_model::Init::Gpt2, ..small(Arch::Lm, 4, 2, 1) };
        let eos = Some(0);
        let greedy_options = GreedyOptions { max_new_tokens: 8, eos };
        let beam_options = BeamOptions { width: 1, length_penalty: 0.0, max_new_tokens: 8, eos };

        let lm = config.init_lm::<TestBackend>(7, &device());
        let g = greedy(&lm, lm.empty_cache(), tokens(&prompt, 1), &greedy_options);
        let b = beam_search(&lm, lm.empty_cache(), tokens(&prompt, 1), &beam_options);
        prop_assert_eq!(&b[0].tokens, &g[0]);

        let mt = ModelConfig { arch: Arch::Seq2seq, ..config }.init_seq2seq::<TestBackend>(7, &device());
        let cache = mt.begin(mt.encode(tokens(&prompt, 1), None));
        let g = greedy(&mt, cache.clone(), tokens(&[1], 1), &greedy_options);
        let b = beam_search(&mt, cache, tokens(&[1], 1), &beam_options);
        prop_assert_eq!(&b[0].tokens, &g[0]);
    }

    /// Past `block_size` with learned positions, greedy decoding with the cache produces
    /// what nanoGPT's `generate` does: each next token from a full forward pass over the last
    /// `block_size` tokens (the prompt cropped the same way). For both decoder-only models:
    /// the GPT-style LM and the notes' one-layer model.
    #[test]
    fn greedy_slides_its_window_like_nanogpt(
        prompt in proptest::collection::vec(0i64..7, 1..9), seed in any::<u64>(),
    ) {
        TestBackend::seed(&device(), seed);
        let block = 5;
        let config = ModelConfig {
            positions: Positions::Learned, block_size: block, init: attend_model::Init::Gpt2,
            ..small(Arch::Lm, 4, 2, 1)
        };
        let lm = config.init_lm::<TestBackend>(7, &device());
        let options = GreedyOptions { max_new_tokens: 12, eos: None };
        let cached = greedy(&lm, lm.empty_cache(), tokens(&prompt, 1), &options);
        prop_assert_eq!(&cached[0], &nanogpt_generate(|w| lm.forward(w), &prompt, block, 12));

        let config = ModelConfig { positions: Positions::Learned, block_size: block, d_model: 8, d_ff: 16, ..ModelConfig::notes() };
        let notes = config.init_notes::<TestBackend>(7, &device());
        let cached = greedy(&notes, notes.empty_cache(), tokens(&prompt, 1), &options);
        prop_assert_eq!(&cached[0], &nanogpt_generate(|w| notes.forward(w), &prompt, block, 12));
    }

    /// Batched beam search over padded sources returns, for each sentence, what beam search
    /// returns for that sentence alone (padding and cache reordering are per row).
    #[test]
    fn padding_batched_beam_search_equals_one_sentence_at_a_time(
        a in proptest::collection::vec(1i64..9, 1..5), b in proptest::collection::vec(1i64..9, 1..5),
        seed in any::<u64>(),
    ) {
        TestBackend::seed(&device(), seed);
        let config = ModelConfig { init: attend_model::Init::Gpt2, ..small(Arch::Seq2seq, 4, 2, 1) };
        let mt = config.init_seq2seq::<TestBackend>(9, &device());
        let options = BeamOptions { width: 3, length_penalty: 0.6, max_new_tokens: 6, eos: Some(0) };
        let width = a.len().max(b.len());
        let pad = |s: &[i64]| s.iter().copied().chain(std::iter::repeat_n(0, width - s.len())).collect::<Vec<_>>();
        let batch: Vec<i64> = pad(&a).into_iter().chain(pad(&b)).collect();
        let flags = padding_from_lengths::<TestBackend>(&[a.len(), b.len()], width, &device());
        let cache = mt.begin(mt.encode(tokens(&batch, 2), Some(flags)));
        let batched = beam_search(&mt, cache, tokens(&[1, 1], 2), &options);
        for (row, sentence) in [a, b].iter().enumerate() {
            let cache = mt.begin(mt.encode(tokens(sentence, 1), None));
            let alone = beam_search(&mt, cache, tokens(&[1], 1), &options);
            prop_assert_eq!(&batched[row].tokens, &alone[0].tokens);
            prop_assert!((batched[row].score - alone[0].score).abs() < 1e-4);
        }
    }

    /// The parameter count computed from the configuration equals `num_params()` of the
    /// instantiated module, for every architecture and sharing option.
    #[test]
    fn param_count_equals_instantiated_module(
        arch in 0usize..4, bias in any::<bool>(), tie in any::<bool>(), share in any::<bool>(),
        pre in any::<bool>(), pos in 0usize..3, n_layers in 1usize..3, vocab in 2usize..20,
    ) {
        let arch = [Arch::Lm, Arch::Seq2seq, Arch::Notes, Arch::Encoder][arch];
        let mut config = ModelConfig {
            bias, tie_embeddings: tie, share_embeddings: share, norm: norm_of(pre), positions: positions_of(pos),
            ..small(arch, 4, 2, n_layers)
        };
        if arch == Arch::Notes {
            config = ModelConfig { n_heads: 1, n_layers: 1, tie_embeddings: true, ..config };
        }
        prop_assert_eq!(config.validate(), Ok(()));
        let params = match arch {
            Arch::Lm | Arch::Encoder => config.init_lm::<TestBackend>(vocab, &device()).num_params(),
            Arch::Seq2seq => config.init_seq2seq::<TestBackend>(vocab, &device()).num_params(),
            Arch::Notes => config.init_notes::<TestBackend>(vocab, &device()).num_params(),
        };
        prop_assert_eq!(params as u64, count(&config, vocab).params);
    }
}

/// Cached decoding one position at a time gives the full forward pass's logits for batches of
/// 1 to 3 rows, with and without biases, for the LM and the translation decoder (beam search
/// decodes its beams as a batch). On burn-wgpu with fusion, scaling the queries before `QKᵀ`
/// gave a bias-free translation decoder's cached steps wrong scores (docs/burn.md).
#[test]
fn cached_decoding_equals_full_forward_for_every_batch_with_and_without_biases() {
    let len = 5;
    for bias in [true, false] {
        for batch in 1..=3 {
            let config = ModelConfig { bias, ..small(Arch::Lm, 4, 2, 2) };
            let ids: Vec<i64> = (0..batch * len).map(|i| ((i * 7 + 3) % 11) as i64).collect();
            let column = |c: usize| tokens(&(0..batch).map(|r| ids[r * len + c]).collect::<Vec<_>>(), batch);

            TestBackend::seed(&device(), 7);
            let lm = config.init_lm::<TestBackend>(11, &device());
            let mut cache = lm.empty_cache();
            let steps: Vec<_> = (0..len).map(|c| lm.forward_cached(column(c), &mut cache, None).0).collect();
            assert_close(Tensor::cat(steps, 1), lm.forward(tokens(&ids, batch)));

            let mt = ModelConfig { arch: Arch::Seq2seq, ..config }.init_seq2seq::<TestBackend>(11, &device());
            let source: Vec<i64> = (0..batch * 4).map(|i| ((i * 5 + 1) % 11) as i64).collect();
            let source = tokens(&source, batch);
            let mut cache = mt.begin(mt.encode(source.clone(), None));
            let steps: Vec<_> = (0..len).map(|c| mt.forward_cached(column(c), &mut cache)).collect();
            assert_close(Tensor::cat(steps, 1), mt.forward(source, None, tokens(&ids, batch)));
        }
    }
}

/// Causality at the sizes a real run trains with (PTB's model: d_model 256, 4 heads of 64, a
/// block of 64, batches of two rows): the logits of every prefix of a 64-token sequence equal
/// the first rows of the whole sequence's logits, for prefix lengths on both sides of the CPU
/// softmax's groups of 16
/// (its rows are normalized over their leading keys rounded up to 16 where that fits), on the
/// inference backend and through `Autodiff`, as training runs it. The property test above
/// covers lengths below 9 only.
#[test]
fn causal_prefix_logits_equal_full_block_logits_at_ptb_sizes() {
    fn check<B: Backend>(positions: Positions) {
        let device = Default::default();
        let config = ModelConfig { positions, d_ff: 1024, block_size: 64, ..small(Arch::Lm, 64, 4, 3) };
        B::seed(&device, 11);
        let lm = config.init_lm::<B>(37, &device);
        // Two rows, as training batches them.
        let ids: Vec<Vec<i64>> = (0..2).map(|r| (0..64).map(|i| ((i * (13 + r) + 5) % 37) as i64).collect()).collect();
        let tokens = |n: usize| {
            let prefixes: Vec<i64> = ids.iter().flat_map(|row| row[..n].iter().copied()).collect();
            Tensor::<B, 2, Int>::from_data(TensorData::new(prefixes, [2, n]), &device)
        };
        let full = lm.forward(tokens(64));
        for len in [1, 15, 16, 17, 31, 32, 33, 48, 62, 63] {
            let prefix = lm.forward(tokens(len)).into_data();
            let rows = full.clone().slice([0..2, 0..len]).into_data();
            prefix.assert_approx_eq::<f32>(&rows, Tolerance::rel_abs(1e-4, 1e-4));
        }
    }
    for positions in [Positions::Sinusoidal, Positions::Learned] {
        check::<TestBackend>(positions);
        check::<burn::backend::Autodiff<TestBackend>>(positions);
    }
}
