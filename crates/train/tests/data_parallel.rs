//! Data parallel on ndarray (two CPU peers, as `train --devices 2`): the same losses as one
//! device, replicas that cannot silently drift apart, a dying peer that stops the run with
//! its name and leaves a checkpoint that resumes bit-exactly (with 2 peers) or closely (with 1).
//! burn-collective's local server is one per process: these tests take turns.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use attend_train::config::RunConfig;
use attend_train::parallel::{devices, train_parallel, Fault, FaultKind, Parallel};
use attend_train::{Observer, RunOptions, Trained};
use serde_json::Value;

use crate::common;
use common::serial;

type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;

struct Quiet;
impl Observer for Quiet {}

fn config(sets: &[&str]) -> RunConfig {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    RunConfig::load(None, &sets).unwrap()
}

fn opts(dir: &Path, resume: bool) -> RunOptions {
    RunOptions { run_dir: dir.to_path_buf(), data_dir: dir.join("no-data"), resume }
}

fn one_device(config: &RunConfig, dir: &Path, resume: bool) -> Result<Trained, String> {
    attend_train::train::<B>(config, &opts(dir, resume), &Default::default(), &mut Quiet, &AtomicBool::new(false))
        .map_err(|e| e.to_string())
}

fn two_peers(config: &RunConfig, dir: &Path, resume: bool, fault: Option<Fault>) -> Result<Trained, String> {
    let parallel = Parallel { devices: 2, nodes: None, timeout: Duration::from_secs(120), fault };
    let devices = devices::<B>(2, true, "ndarray").unwrap();
    let trained =
        train_parallel::<B>(config, &opts(dir, resume), devices, &parallel, &mut Quiet, &AtomicBool::new(false))
            .map_err(|e| e.to_string())?;
    Ok(trained.expect("this node holds peer 0"))
}

/// The logged training losses, by step.
fn losses(dir: &Path) -> Vec<(u64, f64)> {
    let text = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "train")
        .map(|e| (e["step"].as_u64().unwrap(), e["loss"].as_f64().unwrap()))
        .collect()
}

fn max_difference(a: &[(u64, f64)], b: &[(u64, f64)]) -> f64 {
    assert_eq!(a.iter().map(|x| x.0).collect::<Vec<_>>(), b.iter().map(|x| x.0).collect::<Vec<_>>());
    a.iter().zip(b).map(|(x, y)| (x.1 - y.1).abs()).fold(0.0, f64::max)
}

/// The figure: 50 steps of the built-in default model, batch 32 on one device against
/// 16 + 16 rows on two peers. Measured: at most 1.2e-6 apart (float summation order only).
/// Every step also compares the replicas' weights exactly; a run whose replicas differed
/// would have stopped with an error.
#[test]
fn two_peers_log_the_losses_of_one_device_within_1e_4_for_50_steps_of_the_default_model() {
    let _turn = serial();
    let tmp = tempfile::tempdir().unwrap();
    let c = config(&["train.max_steps=50", "train.eval_every=50", "train.checkpoint_every=50"]);
    one_device(&c, &tmp.path().join("one"), false).unwrap();
    two_peers(&c, &tmp.path().join("two"), false, None).unwrap();
    let (one, two) = (losses(&tmp.path().join("one")), losses(&tmp.path().join("two")));
    assert_eq!(one.len(), 50);
    let gap = max_difference(&one, &two);
    assert!(gap < 1e-4, "largest difference {gap}");
    // The two runs are different computations (16 rows a peer, their gradients averaged:
    // another order of sums, 1.2e-6 apart when measured), not one run twice.
    assert!(gap > 0.0, "the two peers' losses are the one device's bit for bit: did each train on half the batch?");
}

/// A masked LM's peers predict different numbers of chosen positions: each peer's mean is
/// weighted by its share, so that the peers' mean gradient is the whole batch's (without the
/// weights these runs part by more than 1e-4 within 10 steps; checked).
#[test]
fn two_masked_lm_peers_with_unequal_positions_train_like_one_device() {
    let _turn = serial();
    let tmp = tempfile::tempdir().unwrap();
    let c = config(&[
        "data.synthetic_size=6000",
        "data.synthetic_vocab=10",
        "model.arch=\"encoder\"",
        "train.objective=\"mlm\"",
        "model.d_model=32",
        "model.n_heads=2",
        "model.n_layers=1",
        "model.d_ff=64",
        "model.block_size=12",
        "train.batch_size=8",
        "train.lr=0.01",
        "train.warmup=2",
        "train.max_steps=10",
        "train.eval_every=10",
        "train.eval_batches=2",
        "train.checkpoint_every=10",
    ]);
    one_device(&c, &tmp.path().join("one"), false).unwrap();
    two_peers(&c, &tmp.path().join("two"), false, None).unwrap();
    let gap = max_difference(&losses(&tmp.path().join("one")), &losses(&tmp.path().join("two")));
    eprintln!("masked LM: largest difference {gap}");
    assert!(gap < 1e-4, "largest difference {gap}");
}

/// Translation batches are split by sentences (each peer pads its own share).
#[test]
fn two_peers_train_translation_like_one_device() {
    let _turn = serial();
    let tmp = tempfile::tempdir().unwrap();
    let c = config(&[
        "data.dataset=synthetic-mt",
        "data.synthetic_vocab=20",
        "data.synthetic_size=2000",
        "model.arch=seq2seq",
        "model.d_model=32",
        "model.n_heads=2",
        "model.n_layers=1",
        "model.d_ff=64",
        "model.positions=sinusoidal",
        "model.block_size=64",
        "train.batch_tokens=400",
        "train.max_steps=8",
        "train.eval_every=8",
        "train.checkpoint_every=8",
        "train.label_smoothing=0.1",
        "decode.beam=1",
    ]);
    one_device(&c, &tmp.path().join("one"), false).unwrap();
    two_peers(&c, &tmp.path().join("two"), false, None).unwrap();
    let gap = max_difference(&losses(&tmp.path().join("one")), &losses(&tmp.path().join("two")));
    assert!(gap < 1e-4, "largest difference {gap}");
}

/// A replica whose weights move away from the others' is caught at the next step.
#[test]
fn a_replica_that_drifts_stops_the_run_at_the_next_step_naming_the_peers() {
    let _turn = serial();
    let tmp = tempfile::tempdir().unwrap();
    let c = config(&["train.max_steps=10", "train.eval_every=10", "train.checkpoint_every=10"]);
    let fault = Fault { peer: 1, step: 4, kind: FaultKind::Drift };
    let err = two_peers(&c, tmp.path(), false, Some(fault)).unwrap_err();
    assert!(err.contains("step 5: the replicas' weights differ"), "{err}");
}

/// A peer that dies at step 25 stops the run with an error naming it; the checkpoint of step
/// 20 is whole, and resuming with two peers logs exactly what a run never stopped logs, and
/// with one device the same within 1e-4.
#[test]
fn a_dying_peer_stops_the_run_naming_it_and_its_checkpoint_resumes_on_two_peers_or_one() {
    let _turn = serial();
    let tmp = tempfile::tempdir().unwrap();
    let c = config(&["train.max_steps=30", "train.eval_every=10", "train.checkpoint_every=10"]);
    let whole = tmp.path().join("whole");
    two_peers(&c, &whole, false, None).unwrap();

    let fault = Fault { peer: 1, step: 25, kind: FaultKind::Panic };
    for (name, resume_on_two) in [("two", true), ("one", false)] {
        let dir = tmp.path().join(name);
        let err = two_peers(&c, &dir, false, Some(fault)).unwrap_err();
        assert!(err.contains("peer 1 (node 0, device 1) failed") && err.contains("step 25"), "{err}");
        let resumed = if resume_on_two { two_peers(&c, &dir, true, None) } else { one_device(&c, &dir, true) };
        resumed.unwrap();
        let (expected, got) = (losses(&whole), losses(&dir));
        if resume_on_two {
            assert_eq!(got, expected, "resumed on two peers");
        } else {
            assert_eq!(got[..20], expected[..20]);
            assert!(max_difference(&got, &expected) < 1e-4, "resumed on one device");
        }
    }
}

/// What cannot be split is refused before anything starts, naming the key or flag.
#[test]
fn an_indivisible_batch_and_more_cpu_peers_than_cores_are_refused() {
    let _turn = serial();
    let tmp = tempfile::tempdir().unwrap();
    let c = config(&["train.batch_size=31"]);
    let err = two_peers(&c, tmp.path(), false, None).unwrap_err();
    assert!(err.contains("train.batch_size = 31 is the global batch") && err.contains("multiple of 2"), "{err}");
    assert!(!tmp.path().join("metrics.jsonl").exists());
    let cores = std::thread::available_parallelism().unwrap().get();
    let err = devices::<B>(cores + 1, true, "ndarray").unwrap_err().to_string();
    assert!(err.contains(&format!("--devices {}", cores + 1)) && err.contains("need a CPU core"), "{err}");
}
