//! The CPU backend's spinning workers (`attend_train::awake`) change which of rayon's threads
//! runs a job, never what is computed: a run on one of rayon's workers, where the loop sets
//! the others spinning, logs the losses and evaluations of a run off the pool bit for bit.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use attend_train::config::RunConfig;
use attend_train::tasks::train_lm;
use attend_train::{awake, Observer, RunOptions};
use serde_json::Value;

mod common;
use common::{serial, tiny_lm_sets};

type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;

struct Quiet;
impl Observer for Quiet {}

fn run(config: &RunConfig, dir: &Path) {
    let opts = RunOptions { run_dir: dir.to_path_buf(), data_dir: dir.join("no-data"), resume: false };
    train_lm::<B>(config, &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false)).unwrap();
}

fn events(dir: &Path) -> Vec<(String, u64, f64)> {
    let log = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    log.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] == "train" || v["event"] == "eval")
        .map(|v| (v["event"].to_string(), v["step"].as_u64().unwrap(), v["loss"].as_f64().unwrap()))
        .collect()
}

#[test]
fn a_run_with_spinning_workers_logs_the_losses_of_a_run_without_them_bit_for_bit() {
    let _turn = serial();
    let sets = tiny_lm_sets(&[
        "model.dropout=0.1",
        "train.batch_size=8",
        "train.lr=0.02",
        "train.warmup=2",
        "train.eval_every=4",
        "train.eval_batches=2",
        "train.max_steps=8",
    ]);
    let config = RunConfig::load(None, &sets).unwrap();
    let (sleeping, spinning) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Both runs on one pool of a thread per core, so that only the switch differs (the kernels
    // size their work by the pool's threads); spinning needs a second core.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = rayon::ThreadPoolBuilder::new().num_threads(cores).build().unwrap();
    let before = awake::starts();
    std::env::set_var("ATTEND_CPU_WORKERS", "sleep");
    pool.install(|| run(&config, sleeping.path()));
    std::env::remove_var("ATTEND_CPU_WORKERS");
    assert_eq!(awake::starts(), before, "ATTEND_CPU_WORKERS=sleep, yet a worker was set spinning");
    pool.install(|| run(&config, spinning.path()));
    if cores >= 2 {
        assert!(awake::starts() > before, "the loop on the pool set no worker spinning");
    }
    let (slept, spun) = (events(sleeping.path()), events(spinning.path()));
    assert_eq!(slept.len(), 10, "{slept:?}");
    assert_eq!(spun, slept);
}
