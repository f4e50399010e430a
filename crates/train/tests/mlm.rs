//! Masked-LM pre-training end to end on generated text: the encoder learns to beat the
//! most-frequent-token baseline, `eval` agrees with itself (fixed masking seed), a stopped
//! run resumes exactly, and the loss counts chosen positions only.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use attend_train::config::RunConfig;
use attend_train::data::masking::{mask_blocks, MaskSpec, MlmSpecials};
use attend_train::evaluate::Split;
use attend_train::mlm_eval::eval_mlm;
use attend_train::objective::cross_entropy;
use attend_train::rng::Rng;
use attend_train::tasks::{train_mlm, MlmValid};
use attend_train::{RunOptions, Summary};
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use serde_json::Value;

use crate::common;
use common::{serial, StopAt};

type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;
type I = burn_ndarray::NdArray<f32>;

struct Quiet;
impl attend_train::Observer for Quiet {}

fn config(max_steps: u64) -> RunConfig {
    let sets: Vec<String> = [
        "data.synthetic_size=6000",
        "data.synthetic_vocab=10",
        "data.synthetic_order=1",
        "data.synthetic_branching=1",
        "data.synthetic_epsilon=0.05",
        "model.arch=\"encoder\"",
        "train.objective=\"mlm\"",
        "model.d_model=32",
        "model.n_heads=2",
        "model.n_layers=2",
        "model.d_ff=64",
        "model.block_size=12",
        "train.batch_size=32",
        "train.lr=0.01",
        "train.warmup=5",
        "train.eval_every=20",
        "train.eval_batches=8",
        "train.checkpoint_every=10",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("train.max_steps={max_steps}")])
    .collect();
    RunConfig::load(None, &sets).unwrap()
}

fn train(config: &RunConfig, dir: &Path, resume: bool, stop_at: Option<u64>) -> Summary<MlmValid> {
    let opts = RunOptions { run_dir: dir.to_path_buf(), data_dir: dir.join("no-data"), resume };
    let stop = AtomicBool::new(false);
    match stop_at {
        Some(at) => train_mlm::<B>(config, &opts, &Default::default(), &mut StopAt { at, stop: &stop }, &stop),
        None => train_mlm::<B>(config, &opts, &Default::default(), &mut Quiet, &stop),
    }
    .unwrap()
}

fn losses(dir: &Path) -> Vec<(u64, f64)> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] == "train")
        .map(|v| (v["step"].as_u64().unwrap(), v["loss"].as_f64().unwrap()))
        .collect()
}

#[test]
fn a_masked_lm_beats_the_most_frequent_token_and_eval_agrees_with_itself() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let summary = train(&config(100), dir.path(), false, None);
    let score = summary.valid.unwrap().score;
    // Each word follows from its left neighbour (branching 1, ε = 0.05): both sides give it
    // away, where always answering the most frequent word is right about half the time.
    assert!(score.accuracy() > score.baseline_accuracy() + 0.25, "{score:?}");
    let vocab: Vec<String> = {
        let text = std::fs::read_to_string(dir.path().join("vocab.json")).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        v["symbols"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
    };
    assert_eq!(&vocab[vocab.len() - 4..], ["[PAD]", "[CLS]", "[SEP]", "[MASK]"]);
    let first = eval_mlm::<I>(dir.path(), dir.path(), Split::Valid, None, &Default::default()).unwrap();
    let second = eval_mlm::<I>(dir.path(), dir.path(), Split::Valid, None, &Default::default()).unwrap();
    assert_eq!(first.1, second.1, "the same masked positions every time");
    assert!(first.1.accuracy() > first.1.baseline_accuracy() + 0.25, "{first:?}");
}

#[test]
fn a_stopped_masked_lm_run_resumes_with_exactly_the_losses_of_an_uninterrupted_one() {
    let _turn = serial();
    let config = config(24);
    let straight = tempfile::tempdir().unwrap();
    train(&config, straight.path(), false, None);
    let stopped = tempfile::tempdir().unwrap();
    train(&config, stopped.path(), false, Some(13));
    train(&config, stopped.path(), true, None);
    assert_eq!(losses(stopped.path()), losses(straight.path()));
    assert_eq!(losses(straight.path()).len(), 24);
}

/// Logits and targets at unchosen positions do not enter the loss: changing them changes
/// nothing, bit for bit; changing a chosen one does change it.
#[test]
fn the_masked_loss_ignores_unchosen_positions() {
    // Its random logits come from the generator the training tests seed: it takes its turn.
    let _turn = serial();
    let device = Default::default();
    let specials = MlmSpecials { pad: 0, cls: 1, sep: 2, mask: 3 };
    let spec = MaskSpec { prob: 0.15, with_mask: 0.8, with_random: 0.1 };
    let words: Vec<u32> = (0..120u32).map(|i| 4 + (i * 7) % 13).collect();
    let rows: Vec<&[u32]> = words.chunks(10).collect();
    let batch = mask_blocks(&rows, spec, specials, 17, &mut Rng::derive(3, "test", 0));
    let shape = [batch.rows, batch.len];
    let loss = |logits: Tensor<I, 3>, targets: &[u32]| {
        let y = Tensor::<I, 2, Int>::from_data(
            TensorData::new(targets.iter().map(|&t| t as i64).collect(), shape),
            &device,
        );
        let w = Tensor::<I, 2>::from_data(TensorData::new(batch.chosen.clone(), shape), &device);
        let count = batch.chosen.iter().map(|&c| c as f64).sum();
        cross_entropy(logits, y, Some((w, count)), 0.1).objective.into_scalar()
    };
    let logits = Tensor::<I, 3>::random([batch.rows, batch.len, 17], Distribution::Normal(0.0, 2.0), &device);
    let base = loss(logits.clone(), &batch.targets);
    let keep = Tensor::<I, 2>::from_data(TensorData::new(batch.chosen.clone(), shape), &device).unsqueeze_dim::<3>(2);
    let noise = Tensor::<I, 3>::random([batch.rows, batch.len, 17], Distribution::Normal(0.0, 5.0), &device);
    let elsewhere = logits.clone() + noise.clone() * (keep.clone().neg() + 1.0);
    let mut other_targets = batch.targets.clone();
    for (t, &c) in other_targets.iter_mut().zip(&batch.chosen) {
        if c == 0.0 {
            *t = (*t + 5) % 17;
        }
    }
    assert_eq!(loss(elsewhere, &other_targets), base);
    assert_ne!(loss(logits + noise * keep, &batch.targets), base);
}
