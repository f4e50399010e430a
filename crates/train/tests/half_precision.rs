//! `train.precision = "f16"` (mixed precision by hand, `src/precision.rs`) on wgpu: Mesa's
//! software Vulkan driver (lavapipe) in CI, the GPU where there is one. A tiny language model
//! trained 20 steps in f16 logs the same loss curve as in f32 within 2e-3 nats at every step
//! (measured on lavapipe: 7.3e-5); where its gradients overflow, dynamic loss scaling skips
//! the step and halves the scale; and the steps do compute in f16: the weights a step uses are
//! f16, their gradients reach the f32 master weights in f32.
//!
//! Compiled only with `--features test-wgpu`; needs a Vulkan driver with shader-f16 (Debian
//! `mesa-vulkan-drivers` and `libvulkan1`).
#![cfg(feature = "test-wgpu")]

use std::path::Path;
use std::sync::atomic::AtomicBool;

use attend_train::config::RunConfig;
use attend_train::precision::half_weights;
use attend_train::tasks::train_lm;
use attend_train::{Observer, RunOptions};
use burn::module::AutodiffModule;
use burn::nn::LinearConfig;
use burn::optim::GradientsParams;
use burn::tensor::{DType, Distribution, FloatDType, Tensor};
use serde_json::Value;

mod common;
use common::{serial, tiny_lm_sets};

type B = burn::backend::Autodiff<burn_wgpu::Wgpu>;

/// The largest difference allowed between the f16 and the f32 run's loss at any step.
const CURVE_DISTANCE: f64 = 2e-3;

fn config(precision: &str, batch: usize, extra: &[&str]) -> RunConfig {
    let precision = format!("train.precision={precision}");
    let batch = format!("train.batch_size={batch}");
    let mut own = vec![
        "model.dropout=0.0",
        "train.lr=0.02",
        "train.warmup=2",
        "train.max_steps=20",
        "train.eval_every=1000",
        "train.eval_batches=2",
        "train.checkpoint_every=1000",
        "decode.max_tokens=3",
        &precision,
        &batch,
    ];
    own.extend_from_slice(extra);
    RunConfig::load(None, &tiny_lm_sets(&own)).unwrap()
}

struct Quiet;
impl Observer for Quiet {}

/// The run's logged losses, and its checkpoint's `state.json`.
fn train(precision: &str, batch: usize, dir: &Path) -> (Vec<f64>, Value) {
    train_with(precision, batch, &[], dir)
}

/// [`train`] with `extra` settings laid over the test's.
fn train_with(precision: &str, batch: usize, extra: &[&str], dir: &Path) -> (Vec<f64>, Value) {
    let opts = RunOptions { run_dir: dir.to_path_buf(), data_dir: dir.join("no-data"), resume: false };
    train_lm::<B>(&config(precision, batch, extra), &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false))
        .unwrap();
    let losses = std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] == "train")
        .map(|v| v["loss"].as_f64().unwrap())
        .collect();
    let state = std::fs::read_to_string(dir.join("checkpoints/step-0000020/state.json")).unwrap();
    (losses, serde_json::from_str(&state).unwrap())
}

/// Batch 64: the loss is a mean over 512 positions, and no gradient overflows at the
/// initial scale of 2¹⁶, so both runs take the same steps.
#[test]
fn an_f16_run_follows_the_f32_loss_curve_within_its_stated_distance() {
    let _turn = serial(); // the device's random generator is one: runs take turns
    let (full, half) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ((f32_curve, _), (f16_curve, state)) = (train("f32", 64, full.path()), train("f16", 64, half.path()));
    assert_eq!(f32_curve.len(), 20);
    assert_eq!(f16_curve.len(), 20);
    assert_eq!(state["loss_scale"]["skipped"], 0, "no step skipped: {state}");
    assert_eq!(state["loss_scale"]["scale"], 65536.0, "the loss scale is saved with the checkpoint: {state}");
    let distance = f32_curve.iter().zip(&f16_curve).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    eprintln!("f16 against f32 over 20 steps: largest loss difference {distance:.2e} nats");
    assert!(distance <= CURVE_DISTANCE, "distance {distance}\nf16 {f16_curve:?}\nf32 {f32_curve:?}");
    assert!(distance > 0.0, "the f16 run gave the f32 run's losses bit for bit: did it compute in f16?");
}

/// Batch 8 (64 positions) with Burn's initialization (embeddings `N(0, 1)`, tied as the output
/// layer, so the logits and their gradients are large): at 2¹⁶ the f16 backward overflows.
/// Dynamic loss scaling skips those steps, halves the scale, and the run learns all the same.
/// (With GPT-2's initialization this run overflowed only while burn-fusion's operations were
/// Burn's autodiff of each part; their closed-form backwards stay in range.)
#[test]
fn an_overflowing_f16_run_skips_steps_lowers_its_loss_scale_and_still_learns() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let (curve, state) = train_with("f16", 8, &["model.init=burn"], dir.path());
    let skipped = state["loss_scale"]["skipped"].as_u64().unwrap();
    assert!(skipped >= 1, "{state}");
    assert_eq!(state["loss_scale"]["scale"].as_f64().unwrap(), 65536.0 / 2f64.powi(skipped as i32), "{state}");
    assert!(curve.iter().all(|l| l.is_finite()), "{curve:?}");
    assert!(curve[19] < curve[0] - 0.3, "the run learns: {curve:?}");
}

#[test]
fn half_weights_compute_in_f16_and_send_f32_gradients_to_the_f32_weights() {
    let _turn = serial();
    let device = Default::default();
    let layer = LinearConfig::new(3, 2).init::<B>(&device);
    // Initialized before the copy (a lazily initialized parameter's copy would draw its own).
    let _ = layer.weight.val();
    let half = half_weights(&layer, FloatDType::F16);
    assert_eq!(half.weight.val().dtype(), DType::F16);
    let x = Tensor::<B, 2>::random([4, 3], Distribution::Default, &device).cast(FloatDType::F16);
    let y = half.forward(x);
    assert_eq!(y.dtype(), DType::F16);
    let grads = GradientsParams::from_grads(y.cast(FloatDType::F32).sum().backward(), &layer);
    let g = grads.get::<burn_wgpu::Wgpu, 2>(layer.weight.id).expect("a gradient for the f32 weight");
    assert_eq!(g.dtype(), DType::F32);
    assert_eq!(layer.valid().weight.val().dtype(), DType::F32, "the master weights stay f32");
}
