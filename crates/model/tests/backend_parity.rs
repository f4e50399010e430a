//! Backend parity (issue 4; docs/architecture.md, Backends): the same tiny models, with identical
//! weights, give the same outputs on `burn-ndarray` (CPU) and `burn-wgpu` (here Mesa's software
//! Vulkan driver, lavapipe; on a machine with a GPU, the GPU) within 1e-4 absolute/relative.
//!
//! Weights are built (seeded) on ndarray and carried to wgpu through the checkpoint format
//! (`NamedMpk`, full precision), so a checkpoint trained on one backend is seen to load and run
//! on the other. Shapes are tiny: lavapipe compiles every kernel on first use.
//!
//! Compiled only with `--features test-wgpu`; needs a Vulkan driver (Debian
//! `mesa-vulkan-drivers` and `libvulkan1`).
#![cfg(feature = "test-wgpu")]

use attend_model::config::{Arch, ModelConfig};
use attend_model::mask::padding_from_lengths;
use burn::prelude::Backend;
use burn::tensor::activation::log_softmax;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Bool, Int, Tensor, TensorData, Tolerance};

mod common;
use common::{carry, gradients};

type Cpu = burn_ndarray::NdArray<f32>;
type Gpu = burn_wgpu::Wgpu;

const VOCAB: usize = 11;
const SEED: u64 = 7;

/// The tolerance of every comparison: 1e-4 relative and absolute.
fn tolerance() -> Tolerance<f32> {
    Tolerance::rel_abs(1e-4, 1e-4)
}

fn cpu() -> burn::tensor::ops::Device<Cpu> {
    Default::default()
}

fn gpu() -> burn::tensor::ops::Device<Gpu> {
    burn_wgpu::WgpuDevice::default()
}

/// nanoGPT-style language model, tiny: pre-norm, GELU, learned positions, no biases, tied
/// embeddings, final LayerNorm (d_model 16, 2 heads, 2 layers).
fn lm_config() -> ModelConfig {
    ModelConfig { d_model: 16, n_heads: 2, n_layers: 2, d_ff: 32, block_size: 8, ..ModelConfig::nanogpt_cpu() }
}

/// The paper's encoder-decoder, tiny: post-norm, ReLU, sinusoidal positions, biases, shared and
/// tied embeddings scaled by √d_model.
fn seq2seq_config() -> ModelConfig {
    ModelConfig {
        arch: Arch::Seq2seq,
        d_model: 16,
        n_heads: 2,
        n_layers: 2,
        d_ff: 32,
        dropout: 0.0,
        block_size: 8,
        ..ModelConfig::base()
    }
}

fn ints<B: Backend>(ids: &[i64], shape: [usize; 2], device: &B::Device) -> Tensor<B, 2, Int> {
    Tensor::from_data(TensorData::new(ids.to_vec(), shape), device)
}

/// Two rows of five tokens.
const TOKENS: [i64; 10] = [1, 4, 9, 2, 7, 3, 3, 10, 0, 5];

fn assert_agree<const D: usize>(what: &str, cpu: Tensor<Cpu, D>, gpu: Tensor<Gpu, D>) {
    let (cpu, gpu) = (cpu.into_data(), gpu.into_data());
    assert_eq!(cpu.shape, gpu.shape, "{what}: shapes differ");
    let values = gpu.to_vec::<f32>().expect("f32 data");
    assert!(values.iter().all(|v| v.is_finite()), "{what}: wgpu gave a non-finite value");
    cpu.assert_approx_eq::<f32>(&gpu, tolerance());
}

#[test]
fn ndarray_and_wgpu_agree_on_lm_logits() {
    let config = lm_config();
    config.validate().unwrap();
    Cpu::seed(&cpu(), SEED);
    let on_cpu = config.init_lm::<Cpu>(VOCAB, &cpu());
    let on_gpu = carry::<Cpu, Gpu, _, _>(on_cpu.clone(), config.init_lm::<Gpu>(VOCAB, &gpu()), &gpu());

    let logits_cpu = on_cpu.forward(ints(&TOKENS, [2, 5], &cpu()));
    let logits_gpu = on_gpu.forward(ints(&TOKENS, [2, 5], &gpu()));
    assert_eq!(logits_cpu.dims(), [2, 5, VOCAB]);
    assert_agree("lm logits", logits_cpu, logits_gpu);
}

#[test]
fn ndarray_and_wgpu_agree_on_attention_weights() {
    // The language model's causal self-attention, with the first key of row 0 masked as
    // padding (left padding, as batched generation uses).
    let config = lm_config();
    Cpu::seed(&cpu(), SEED);
    let lm_cpu = config.init_lm::<Cpu>(VOCAB, &cpu());
    let lm_gpu = carry::<Cpu, Gpu, _, _>(lm_cpu.clone(), config.init_lm::<Gpu>(VOCAB, &gpu()), &gpu());
    let pad = [true, false, false, false, false, false, false, false, false, false];
    let pad_cpu = Tensor::<Cpu, 2, Bool>::from_data(TensorData::new(pad.to_vec(), [2, 5]), &cpu());
    let pad_gpu = Tensor::<Gpu, 2, Bool>::from_data(TensorData::new(pad.to_vec(), [2, 5]), &gpu());
    let (_, weights_cpu) =
        lm_cpu.forward_cached(ints(&TOKENS, [2, 5], &cpu()), &mut lm_cpu.empty_cache(), Some(pad_cpu));
    let (_, weights_gpu) =
        lm_gpu.forward_cached(ints(&TOKENS, [2, 5], &gpu()), &mut lm_gpu.empty_cache(), Some(pad_gpu));
    assert_eq!(weights_cpu.len(), 2);
    for (layer, (w_cpu, w_gpu)) in weights_cpu.into_iter().zip(weights_gpu).enumerate() {
        assert_eq!(w_cpu.dims(), [2, 2, 5, 5]);
        assert_agree(&format!("lm layer {layer} self-attention"), w_cpu, w_gpu);
    }

    // The encoder-decoder's three attentions, with a padded source (lengths 5 and 3).
    let config = seq2seq_config();
    Cpu::seed(&cpu(), SEED);
    let mt_cpu = config.init_seq2seq::<Cpu>(VOCAB, &cpu());
    let mt_gpu = carry::<Cpu, Gpu, _, _>(mt_cpu.clone(), config.init_seq2seq::<Gpu>(VOCAB, &gpu()), &gpu());
    let target = [1, 6, 2, 8, 1, 5];
    let out_cpu = mt_cpu.forward_with_attention(
        ints(&TOKENS, [2, 5], &cpu()),
        Some(padding_from_lengths::<Cpu>(&[5, 3], 5, &cpu())),
        ints(&target, [2, 3], &cpu()),
    );
    let out_gpu = mt_gpu.forward_with_attention(
        ints(&TOKENS, [2, 5], &gpu()),
        Some(padding_from_lengths::<Gpu>(&[5, 3], 5, &gpu())),
        ints(&target, [2, 3], &gpu()),
    );
    let kinds = [
        ("encoder self-attention", out_cpu.encoder_weights, out_gpu.encoder_weights),
        ("decoder self-attention", out_cpu.decoder_self_weights, out_gpu.decoder_self_weights),
        ("decoder cross-attention", out_cpu.decoder_cross_weights, out_gpu.decoder_cross_weights),
    ];
    for (kind, all_cpu, all_gpu) in kinds {
        assert_eq!(all_cpu.len(), 2, "{kind}: one tensor per layer");
        for (layer, (w_cpu, w_gpu)) in all_cpu.into_iter().zip(all_gpu).enumerate() {
            assert_agree(&format!("seq2seq layer {layer} {kind}"), w_cpu, w_gpu);
        }
    }
}

#[test]
fn ndarray_and_wgpu_agree_on_seq2seq_logits() {
    let config = seq2seq_config();
    config.validate().unwrap();
    Cpu::seed(&cpu(), SEED);
    let on_cpu = config.init_seq2seq::<Cpu>(VOCAB, &cpu());
    let on_gpu = carry::<Cpu, Gpu, _, _>(on_cpu.clone(), config.init_seq2seq::<Gpu>(VOCAB, &gpu()), &gpu());
    let target = [1, 6, 2, 8, 1, 5, 9, 4];
    let logits_cpu = on_cpu.forward(
        ints(&TOKENS, [2, 5], &cpu()),
        Some(padding_from_lengths::<Cpu>(&[5, 3], 5, &cpu())),
        ints(&target, [2, 4], &cpu()),
    );
    let logits_gpu = on_gpu.forward(
        ints(&TOKENS, [2, 5], &gpu()),
        Some(padding_from_lengths::<Gpu>(&[5, 3], 5, &gpu())),
        ints(&target, [2, 4], &gpu()),
    );
    assert_eq!(logits_cpu.dims(), [2, 4, VOCAB]);
    assert_agree("seq2seq logits", logits_cpu, logits_gpu);
}

#[test]
fn ndarray_and_wgpu_agree_on_cached_decoding_logits() {
    // A three-token prompt, then two single-token steps through the key/value cache.
    let config = lm_config();
    Cpu::seed(&cpu(), SEED);
    let on_cpu = config.init_lm::<Cpu>(VOCAB, &cpu());
    let on_gpu = carry::<Cpu, Gpu, _, _>(on_cpu.clone(), config.init_lm::<Gpu>(VOCAB, &gpu()), &gpu());
    let (mut cache_cpu, mut cache_gpu) = (on_cpu.empty_cache(), on_gpu.empty_cache());
    let steps: [(&[i64], usize); 3] = [(&[1, 4, 9, 3, 3, 10], 3), (&[2, 0], 1), (&[7, 5], 1)];
    for (step, (ids, new)) in steps.into_iter().enumerate() {
        let (logits_cpu, _) = on_cpu.forward_cached(ints(ids, [2, new], &cpu()), &mut cache_cpu, None);
        let (logits_gpu, _) = on_gpu.forward_cached(ints(ids, [2, new], &gpu()), &mut cache_gpu, None);
        assert_agree(&format!("cached step {step} logits"), logits_cpu, logits_gpu);
    }
}

/// The mean next-token cross-entropy of `lm` on `tokens` (targets: the tokens shifted by one).
fn lm_gradients<B: AutodiffBackend>(
    lm: &attend_model::LanguageModel<B>,
    device: &B::Device,
) -> Vec<Option<TensorData>> {
    let inputs = ints::<B>(&[1, 4, 9, 2, 3, 3, 10, 0], [2, 4], device);
    let targets = ints::<B>(&[4, 9, 2, 7, 3, 10, 0, 5], [2, 4], device);
    let log_probs = log_softmax(lm.forward(inputs), 2);
    let loss = log_probs.gather(2, targets.unsqueeze_dim(2)).mean().neg();
    gradients(lm, &loss.backward())
}

#[test]
fn ndarray_and_wgpu_agree_on_lm_gradients() {
    // What `--backend wgpu` trains with: Autodiff<Wgpu>, through our own GELU backward,
    // LayerNorm, softmax and the tied embedding.
    type CpuAd = burn::backend::Autodiff<Cpu>;
    type GpuAd = burn::backend::Autodiff<Gpu>;
    let config = lm_config();
    Cpu::seed(&cpu(), SEED);
    let on_cpu = config.init_lm::<CpuAd>(VOCAB, &cpu());
    let on_gpu = carry::<CpuAd, GpuAd, _, _>(on_cpu.clone(), config.init_lm::<GpuAd>(VOCAB, &gpu()), &gpu());
    let grads_cpu = lm_gradients(&on_cpu, &cpu());
    let grads_gpu = lm_gradients(&on_gpu, &gpu());
    assert_eq!(grads_cpu.len(), grads_gpu.len());
    assert!(grads_cpu.iter().all(Option::is_some), "every parameter gets a gradient");
    for (i, (g_cpu, g_gpu)) in grads_cpu.into_iter().zip(grads_gpu).enumerate() {
        let (g_cpu, g_gpu) = (g_cpu.unwrap(), g_gpu.expect("wgpu gives the gradient too"));
        assert!(
            g_cpu.iter::<f32>().any(|g| g != 0.0),
            "parameter {i}: a zero gradient would make the comparison vacuous"
        );
        g_cpu.assert_approx_eq::<f32>(&g_gpu, tolerance());
    }
}
