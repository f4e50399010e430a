//! Hostile checkpoints: every damaged, swapped or mismatched file is refused with an error
//! naming it before Burn parses anything (issue 14's probe found panics, segfaults and silent
//! resumes here).

use std::path::Path;
use std::sync::atomic::AtomicBool;

use attend_train::checkpoint::manifest;
use attend_train::config::RunConfig;
use attend_train::tasks::{train_lm, LmValid};
use attend_train::{Observer, RunOptions, Summary};

use crate::common;
use common::serial;

type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;

fn tiny_config() -> RunConfig {
    let sets = [
        "data.synthetic_size=3000",
        "data.synthetic_vocab=8",
        "model.d_model=16",
        "model.n_heads=2",
        "model.n_layers=1",
        "model.d_ff=32",
        "model.block_size=8",
        "train.batch_size=4",
        "train.max_steps=10",
        "train.eval_every=5",
        "train.eval_batches=2",
        "train.checkpoint_every=5",
        "decode.max_tokens=3",
    ];
    RunConfig::load(None, &sets.map(String::from)).unwrap()
}

struct Quiet;
impl Observer for Quiet {}

fn run(config: &RunConfig, dir: &Path, resume: bool) -> Result<Summary<LmValid>, String> {
    let opts = RunOptions { run_dir: dir.to_path_buf(), data_dir: dir.join("no-data"), resume };
    train_lm::<B>(config, &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false)).map_err(|e| e.to_string())
}

/// A run stopped at step 5 (as a crash leaves it: `max_steps` 10, checkpoint of step 5).
fn half_run(dir: &Path) -> std::path::PathBuf {
    let mut config = tiny_config();
    config.train.max_steps = 5;
    run(&config, dir, false).unwrap();
    // Make the stored config say 10 steps, so that resuming has work to do.
    let stored = dir.join("config.toml");
    let text = std::fs::read_to_string(&stored).unwrap().replace("max_steps = 5", "max_steps = 10");
    std::fs::write(&stored, text).unwrap();
    dir.join("checkpoints/step-0000005")
}

fn resume(dir: &Path) -> Result<Summary<LmValid>, String> {
    run(&RunConfig::from_resolved(&dir.join("config.toml")).unwrap(), dir, true)
}

fn replace_first(path: &Path, from: &[u8], to: &[u8]) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = bytes.windows(from.len()).position(|w| w == from).expect("pattern present");
    bytes[at..at + from.len()].copy_from_slice(to);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_flipped_byte_in_any_checkpoint_file_is_refused_naming_that_file() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let ckpt = half_run(dir.path());
    for file in ["model.mpk", "optimizer.mpk", "state.json"] {
        let path = ckpt.join(file);
        let original = std::fs::read(&path).unwrap();
        let mut flipped = original.clone();
        flipped[original.len() / 2] ^= 0x04;
        std::fs::write(&path, &flipped).unwrap();
        let err = resume(dir.path()).unwrap_err();
        assert!(err.contains(&format!("{file}: corrupt or truncated checkpoint")) && err.contains("SHA-256"), "{err}");
        std::fs::write(&path, original).unwrap();
    }
    assert_eq!(resume(dir.path()).unwrap().step, 10, "the undamaged checkpoint resumes");
}

#[test]
fn a_missing_manifest_or_an_unlisted_file_is_refused() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let ckpt = half_run(dir.path());
    std::fs::write(ckpt.join("extra.bin"), b"x").unwrap();
    let err = resume(dir.path()).unwrap_err();
    assert!(err.contains("extra.bin: corrupt or truncated checkpoint: not in manifest.json"), "{err}");
    std::fs::remove_file(ckpt.join("extra.bin")).unwrap();
    std::fs::remove_file(ckpt.join(manifest::FILE)).unwrap();
    let err = resume(dir.path()).unwrap_err();
    assert!(err.contains("manifest.json: corrupt or truncated checkpoint: missing"), "{err}");
}

#[test]
fn a_state_whose_step_is_not_its_directorys_is_refused() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let ckpt = half_run(dir.path());
    replace_first(&ckpt.join("state.json"), b"\"step\": 5,", b"\"step\": 9,");
    manifest::write(&ckpt).unwrap(); // consistent hashes: the step itself is the lie
    let err = resume(dir.path()).unwrap_err();
    assert!(
        err.contains("state.json: corrupt or truncated checkpoint: says step 9, but it is the checkpoint of step 5"),
        "{err}"
    );
}

#[test]
fn weights_of_another_shape_than_the_config_builds_are_refused_naming_the_parameter() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    half_run(dir.path());
    replace_first(&dir.path().join("config.toml"), b"d_ff = 32", b"d_ff = 48");
    let err = resume(dir.path()).unwrap_err();
    assert!(
        err.contains("model.mpk: corrupt or truncated checkpoint: parameter layers.0.feed_forward.w_1.weight is [16, 32] in the file and [16, 48] in the run's model"),
        "{err}"
    );
}

#[test]
fn optimizer_state_of_another_shape_than_its_parameter_is_refused() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let ckpt = half_run(dir.path());
    // A [16, 32] moment relabelled [32, 16]: the same bytes, the wrong shape.
    replace_first(&ckpt.join("optimizer.mpk"), b"\xa5shape\x92\x10\x20", b"\xa5shape\x92\x20\x10");
    manifest::write(&ckpt).unwrap();
    let err = resume(dir.path()).unwrap_err();
    assert!(
        err.contains("optimizer.mpk: corrupt or truncated checkpoint: state ")
            && err.contains("is [32, 16], but its parameter"),
        "{err}"
    );
}

#[test]
fn non_finite_weights_are_refused_by_eval_naming_the_first_such_parameter() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    run(&tiny_config(), dir.path(), false).unwrap();
    let best = dir.path().join("best");
    let model = best.join("model.mpk");
    let mut bytes = std::fs::read(&model).unwrap();
    // The embedding's first float: right after "bytes" and its bin8/bin16 header.
    let at = bytes.windows(6).position(|w| w == b"\xa5bytes").unwrap() + 6;
    let header = if bytes[at] == 0xc4 { 2 } else { 3 };
    bytes[at + header..at + header + 4].copy_from_slice(&f32::INFINITY.to_le_bytes());
    std::fs::write(&model, bytes).unwrap();
    manifest::write(&best).unwrap();
    let err = attend_train::trained::load_lm::<burn_ndarray::NdArray<f32>>(dir.path(), &Default::default())
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("parameter embedding.weight holds a non-finite value (NaN or infinity) at element 0"),
        "{err}"
    );
}

/// The events of a run's log that a crash must not change: every loss and evaluation.
fn losses(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| format!("{} {} {} {} {}", v["event"], v["step"], v["split"], v["loss"], v["valid_loss"]))
        .collect()
}

#[test]
fn a_crash_after_the_last_step_during_averaging_is_finished_exactly_on_resume() {
    let _turn = serial();
    let mut config = tiny_config();
    config.train.average_last = 2;
    let straight = tempfile::tempdir().unwrap();
    run(&config, straight.path(), false).unwrap();
    let crashed = tempfile::tempdir().unwrap();
    run(&config, crashed.path(), false).unwrap();
    // As if killed while averaging: no averaged/, no valid-averaged line, no summary, a torn line.
    std::fs::remove_dir_all(crashed.path().join("averaged")).unwrap();
    let log = crashed.path().join("metrics.jsonl");
    let kept: String = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| !l.contains("valid-averaged") && !l.contains("\"summary\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&log, kept + "{\"event\":\"ev").unwrap();
    let finished = run(&config, crashed.path(), true).unwrap();
    assert!(finished.already_done.is_none() && !finished.interrupted);
    assert!(crashed.path().join("averaged/model.mpk").is_file());
    assert_eq!(losses(crashed.path()), losses(straight.path()));
    assert!(
        losses(straight.path()).iter().any(|l| l.contains("valid-averaged"))
            && losses(straight.path()).last().unwrap().starts_with("\"summary\"")
    );
}

/// A checkpoint write that fails (here the writer's temporary directory cannot be made: a
/// file stands at its path, as a full or read-only disk would fail it) stops the run with an
/// error naming the path; the previous checkpoint still loads and the run resumes from it.
#[test]
fn a_failed_checkpoint_write_stops_the_run_naming_the_path_and_the_previous_checkpoint_loads() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    half_run(dir.path());
    let blocker = dir.path().join(format!("checkpoints/.step-0000010.tmp-{}", std::process::id()));
    // Put in the way during training (resume tidies leftovers at its start).
    struct Block(std::path::PathBuf);
    impl Observer for Block {
        fn step(&mut self, step: u64, _: f64, _: f64, _: f64) {
            if step == 8 {
                std::fs::write(&self.0, b"in the way").unwrap();
            }
        }
    }
    let config = RunConfig::from_resolved(&dir.path().join("config.toml")).unwrap();
    let opts = RunOptions { run_dir: dir.path().to_path_buf(), data_dir: dir.path().join("no-data"), resume: true };
    let err = train_lm::<B>(&config, &opts, &Default::default(), &mut Block(blocker.clone()), &AtomicBool::new(false))
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains(&blocker.display().to_string()), "{err}");
    assert!(!dir.path().join("checkpoints/step-0000010").exists());
    std::fs::remove_file(&blocker).unwrap();
    assert_eq!(resume(dir.path()).unwrap().step, 10, "resumed from step 5's checkpoint");
}
