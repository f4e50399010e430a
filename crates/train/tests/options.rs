//! Training options pinned by tests that fail when the option is removed or broken
//! (issue 14): early stopping, the logged training FLOPs, dynamic evaluation's update.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use attend_train::config::RunConfig;
use attend_train::evaluate::{eval_lm, Split};
use attend_train::tasks::{train_lm, LmValid};
use attend_train::{Observer, RunOptions, Summary};

use crate::common;
use common::serial;

type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;

fn config(extra: &[&str]) -> RunConfig {
    let sets = [
        "data.synthetic_size=3000",
        "data.synthetic_vocab=8",
        "model.d_model=16",
        "model.n_heads=2",
        "model.n_layers=1",
        "model.d_ff=32",
        "model.block_size=8",
        "train.batch_size=4",
        "train.max_steps=20",
        "train.eval_every=2",
        "train.eval_batches=2",
        "train.checkpoint_every=10",
        "decode.max_tokens=3",
    ];
    RunConfig::load(None, &sets.iter().chain(extra).map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
}

struct Quiet;
impl Observer for Quiet {}

fn run(config: &RunConfig, dir: &Path) -> Summary<LmValid> {
    let opts = RunOptions { run_dir: dir.to_path_buf(), data_dir: dir.join("none"), resume: false };
    train_lm::<B>(config, &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false)).unwrap()
}

fn summary_event(dir: &Path) -> serde_json::Value {
    let log = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    serde_json::from_str(log.lines().last().unwrap()).unwrap()
}

/// With a learning rate too small to move any f32 weight, every evaluation after the first
/// ties the best (no improvement): with patience 3 the run stops at the third evaluation after
/// the first, step 8 of 20; without patience it runs all 20 steps.
#[test]
fn early_stopping_stops_at_the_first_evaluation_after_patience_without_improvement() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let stopped = run(&config(&["train.lr=1e-12", "train.patience=3"]), dir.path());
    assert!(stopped.early_stopped && stopped.step == 8, "stopped at {}", stopped.step);
    let dir = tempfile::tempdir().unwrap();
    let full = run(&config(&["train.lr=1e-12", "train.patience=0"]), dir.path());
    assert!(!full.early_stopped && full.step == 20);
}

/// The summary's `train_flops` is 3 × forward FLOPs × tokens, the forward FLOPs per token of a
/// decoder-only model being (by hand, Kaplan et al. with QKᵀ and AV counted apart and the
/// output layer added) n·(8d² + 4df + 4·ctx·d) + 2dV: here d 16, f 32, ctx 8, n 1.
#[test]
fn the_logged_training_flops_are_three_forward_passes_of_the_hand_counted_flops() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    run(&config(&[]), dir.path());
    let vocab = attend_train::data::codec::LmCodec::load(dir.path()).unwrap().len() as f64;
    let (d, f, ctx, n) = (16.0, 32.0, 8.0, 1.0);
    let per_token = n * (8.0 * d * d + 4.0 * d * f + 4.0 * ctx * d) + 2.0 * d * vocab;
    let summary = summary_event(dir.path());
    let tokens = summary["tokens"].as_f64().unwrap();
    assert_eq!(tokens, 20.0 * 4.0 * 8.0, "20 steps of 4 rows of 8 tokens");
    assert_eq!(summary["train_flops"].as_f64().unwrap(), 3.0 * per_token * tokens);
}

/// A text the model never saw, repeated: dynamic evaluation adapts the weights to each
/// segment it has scored, so it scores the repeats far better than the static model.
#[test]
fn dynamic_evaluation_beats_static_on_a_text_that_repeats() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("train.txt");
    let words = ["ab", "cd", "ef", "gh", "ij", "kl", "mn", "op"];
    let mut rng = 7u64;
    let mut next = || {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        words[(rng >> 33) as usize % words.len()]
    };
    let text: Vec<&str> = (0..3000).map(|_| next()).collect();
    std::fs::write(&corpus, text.join(" ")).unwrap();
    let run_dir = dir.path().join("run");
    let sets = [
        format!("data.dataset={}", corpus.display()),
        "data.tokenizer=\"char\"".into(),
        "eval.dynamic_lr=0.01".into(),
        "eval.dynamic_segment=8".into(),
    ];
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    run(&config(&sets), &run_dir);
    let phrase: Vec<&str> = (0..12).map(|_| next()).collect();
    let repeated = dir.path().join("repeats.txt");
    std::fs::write(&repeated, vec![phrase.join(" "); 30].join(" ")).unwrap();
    let report =
        eval_lm::<B>(&run_dir, dir.path(), Split::Valid, Some(&repeated), true, 0, &Default::default()).unwrap();
    let (fixed, adapted) = report.dynamic.unwrap();
    assert!(
        adapted.nats_per_token < fixed.nats_per_token - 0.1,
        "static {} dynamic {}",
        fixed.nats_per_token,
        adapted.nats_per_token
    );
}
