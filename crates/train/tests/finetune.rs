//! Fine-tuning (`train.init_from`, `train.freeze`) and LoRA (`model.lora_rank`): frozen
//! parameters stay bit for bit, LoRA trains only its adapters, pre-training helps, and a base
//! run whose shapes differ is refused with an error naming the parameter and both shapes.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use attend_train::average::load_model;
use attend_train::checkpoint;
use attend_train::config::RunConfig;
use attend_train::finetune::named_values;
use attend_train::tasks::{train_lm, LmValid};
use attend_train::{RunOptions, Summary};
use burn::tensor::TensorData;

use crate::common;
use common::{serial, StopAt};

type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;
type I = burn_ndarray::NdArray<f32>;

struct Quiet;
impl attend_train::Observer for Quiet {}

fn config(max_steps: u64, extra: &[String]) -> RunConfig {
    let sets: Vec<String> = [
        "data.synthetic_size=6000",
        "data.synthetic_vocab=12",
        "data.synthetic_order=1",
        "data.synthetic_epsilon=0.1",
        "model.d_model=16",
        "model.n_heads=2",
        "model.n_layers=2",
        "model.d_ff=32",
        "model.block_size=8",
        "train.batch_size=8",
        "train.lr=0.01",
        "train.warmup=2",
        "train.eval_every=10",
        "train.eval_batches=8",
        "train.checkpoint_every=10",
        "train.weight_decay=0.1",
        "decode.max_tokens=4",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("train.max_steps={max_steps}")])
    .chain(extra.iter().cloned())
    .collect();
    RunConfig::load(None, &sets).unwrap()
}

fn train(config: &RunConfig, dir: &Path) -> Result<Summary<LmValid>, String> {
    let opts = RunOptions { run_dir: dir.to_path_buf(), data_dir: dir.join("no-data"), resume: false };
    train_lm::<B>(config, &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false)).map_err(|e| e.to_string())
}

/// Every parameter (path, values) of the weights in `dir`.
fn weights(config: &RunConfig, dir: &Path) -> Vec<(String, TensorData)> {
    let model = load_model::<I>(&config.model, config.data.synthetic_vocab, dir, &Default::default()).unwrap();
    named_values(&model)
}

fn last_checkpoint(run: &Path) -> PathBuf {
    checkpoint::latest(&run.join("checkpoints")).unwrap().1
}

fn init_from(base: &Path) -> String {
    format!("train.init_from={:?}", base.display().to_string())
}

#[test]
fn fine_tuning_changes_no_frozen_parameter_and_trains_the_others() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    train(&config(20, &[]), &base).unwrap();
    let frozen = "train.freeze=[\"embedding\", \"layers.0\"]".to_string();
    let tuned_config = config(10, &[init_from(&base), frozen, "model.dropout=0.2".into()]);
    let tuned = dir.path().join("tuned");
    let summary = train(&tuned_config, &tuned).unwrap();
    assert!(summary.trainable_params < summary.total_params);

    let before = weights(&config(20, &[]), &base.join("best"));
    let after = weights(&tuned_config, &last_checkpoint(&tuned));
    assert_eq!(before.len(), after.len());
    let (mut kept, mut moved) = (0, 0);
    for ((path, old), (path_after, new)) in before.iter().zip(&after) {
        assert_eq!(path, path_after);
        if path.starts_with("embedding.") || path.starts_with("layers.0.") {
            assert_eq!(old, new, "{path} is frozen");
            kept += 1;
        } else {
            assert_ne!(old, new, "{path} trains");
            moved += 1;
        }
    }
    assert!(kept >= 2 && moved >= 2, "{kept} kept, {moved} moved");
}

#[test]
fn with_lora_only_the_adapters_change() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    let base_summary = train(&config(20, &[]), &base).unwrap();
    let lora_config = config(10, &[init_from(&base), "model.lora_rank=2".into(), "train.lr=0.05".into()]);
    let lora = dir.path().join("lora");
    let summary = train(&lora_config, &lora).unwrap();
    // Two layers, four projections of 16 → 16, rank 2: 2·4·2·(16 + 16) adapter parameters.
    assert_eq!(summary.trainable_params, 2 * 4 * 2 * 32);
    assert_eq!(summary.total_params, base_summary.total_params + 512);
    assert_eq!(summary.total_params, summary.params);

    let before: std::collections::HashMap<_, _> = weights(&config(20, &[]), &base.join("best")).into_iter().collect();
    let after = weights(&lora_config, &last_checkpoint(&lora));
    let mut adapters = 0;
    for (path, value) in &after {
        match before.get(path) {
            Some(old) => assert_eq!(old, value, "{path} belongs to the frozen base"),
            None => {
                assert!(path.contains(".adapters."), "{path}");
                adapters += 1;
            }
        }
    }
    assert_eq!(adapters, 2 * 4 * 2);
    // The adapters' B matrices left zero: the model changed.
    let b_moved = after.iter().filter(|(p, _)| p.ends_with(".b")).any(|(_, v)| v.iter::<f32>().any(|x| x != 0.0));
    assert!(b_moved);
}

#[test]
fn starting_from_a_pretrained_run_reaches_a_lower_validation_loss_than_from_scratch() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    train(&config(150, &[]), &base).unwrap();
    // A related corpus: the same sparse source, mixed with more uniform noise.
    let related = "data.synthetic_epsilon=0.3".to_string();
    let scratch = train(&config(10, std::slice::from_ref(&related)), &dir.path().join("scratch")).unwrap();
    let tuned = train(&config(10, &[related, init_from(&base)]), &dir.path().join("tuned")).unwrap();
    let (scratch, tuned) = (scratch.valid.unwrap().loss(), tuned.valid.unwrap().loss());
    assert!(tuned < scratch - 0.1, "fine-tuned {tuned} vs from scratch {scratch}");
}

#[test]
fn a_base_run_of_another_shape_is_refused_naming_the_parameter_and_both_shapes() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    train(&config(10, &[]), &base).unwrap();
    let wider = config(5, &[init_from(&base), "model.d_ff=48".into()]);
    let err = train(&wider, &dir.path().join("wider")).unwrap_err();
    assert!(err.contains("train.init_from") && err.contains("feed_forward"), "{err}");
    assert!(err.contains("[16, 32] there and [16, 48] here") && err.contains("model.d_ff = 32 vs 48"), "{err}");
    let bad_group = config(5, &[init_from(&base), "train.freeze=[\"layers.7\"]".into()]);
    let err = train(&bad_group, &dir.path().join("bad")).unwrap_err();
    assert!(err.contains("train.freeze") && err.contains("\"layers.7\"") && err.contains("layers.0"), "{err}");
    let missing = config(5, &["train.init_from=\"/nonexistent/run\"".into()]);
    let err = train(&missing, &dir.path().join("none")).unwrap_err();
    assert!(err.contains("/nonexistent/run") && err.contains("not a run directory"), "{err}");
}

fn train_losses(dir: &Path) -> Vec<(u64, f64)> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == "train")
        .map(|v| (v["step"].as_u64().unwrap(), v["loss"].as_f64().unwrap()))
        .collect()
}

/// On resume the base run is not read again (its weights are in the checkpoint, its
/// vocabulary in the run directory), the freezing is made again, and the losses go on exactly.
#[test]
fn a_stopped_lora_fine_tune_resumes_with_exactly_the_losses_of_an_uninterrupted_one() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    train(&config(20, &[]), &base).unwrap();
    let lora = config(12, &[init_from(&base), "model.lora_rank=2".into(), "model.dropout=0.1".into()]);
    let straight = dir.path().join("straight");
    train(&lora, &straight).unwrap();

    let stopped = dir.path().join("stopped");
    let stop = AtomicBool::new(false);
    let opts = RunOptions { run_dir: stopped.clone(), data_dir: dir.path().join("no-data"), resume: false };
    train_lm::<B>(&lora, &opts, &Default::default(), &mut StopAt { at: 5, stop: &stop }, &stop).unwrap();
    std::fs::rename(&base, dir.path().join("base-moved-away")).unwrap();
    let opts = RunOptions { resume: true, ..opts };
    let resumed = train_lm::<B>(&lora, &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false)).unwrap();
    assert_eq!(resumed.trainable_params, 2 * 4 * 2 * 32);
    assert_eq!(train_losses(&stopped), train_losses(&straight));
}
