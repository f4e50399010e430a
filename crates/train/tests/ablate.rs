//! `ablate` (Table 3 as one command): every row trains into its own sub-run with its keys
//! changed, a stopped ablation continues where it stopped (finished rows are read back, the
//! stopped row resumes), and a bad row is refused before anything trains.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use attend_train::ablate::{ablate, markdown, Ablation, RowResult};
use attend_train::config::RunConfig;
use attend_train::Observer;

use crate::common;
use common::serial;

type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;

const BASE: &str = "[data]\nsynthetic_size = 2000\nsynthetic_vocab = 8\nsynthetic_order = 1\n\
                    [model]\nd_model = 16\nn_heads = 2\nn_layers = 1\nd_ff = 32\nblock_size = 8\n\
                    [train]\nbatch_size = 4\nmax_steps = 8\neval_every = 8\neval_batches = 2\ncheckpoint_every = 4\n";

const TABLE: &str = "base = \"base.toml\"\nset = [\"train.lr=0.01\"]\n\
                     [[row]]\nname = \"A1\"\nset = [\"model.n_heads=1\", \"model.d_k=16\", \"model.d_v=16\"]\n\
                     [[row]]\nname = \"B1\"\nset = [\"model.d_k=4\"]\n";

/// Raises `stop` at step `at` of the `nth` run started (counting from 1).
struct StopInRun<'a> {
    nth: usize,
    at: u64,
    runs: usize,
    stop: &'a AtomicBool,
}

impl Observer for StopInRun<'_> {
    fn started(&mut self, _first: u64, _max: u64) {
        self.runs += 1;
    }
    fn step(&mut self, step: u64, _: f64, _: f64, _: f64) {
        if self.runs == self.nth && step == self.at {
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

fn write(dir: &Path, table: &str) -> std::path::PathBuf {
    std::fs::write(dir.join("base.toml"), BASE).unwrap();
    let path = dir.join("table.toml");
    std::fs::write(&path, table).unwrap();
    path
}

fn run(ablation: &Ablation, dir: &Path, observer: &mut dyn Observer, stop: &AtomicBool) -> Vec<RowResult> {
    let mut seen = Vec::new();
    let results = ablate::<B>(ablation, &dir.join("runs"), dir, &Default::default(), observer, stop, &mut |r| {
        seen.push(r.clone())
    })
    .unwrap();
    assert_eq!(seen, results);
    results
}

#[test]
fn each_row_trains_with_its_keys_changed_and_a_stopped_ablation_continues_where_it_stopped() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let ablation = Ablation::load(&write(dir.path(), TABLE), &["train.seed=3".into()]).unwrap();
    let names: Vec<&str> = ablation.rows.iter().map(|(r, _)| r.name.as_str()).collect();
    assert_eq!(names, ["base", "A1", "B1"]);
    let (_, a1) = &ablation.rows[1];
    assert_eq!((a1.model.n_heads, a1.model.d_k, a1.train.lr, a1.train.seed), (1, 16, 0.01, 3));

    // Stopped in the middle of A1: only the base row is done.
    let stop = AtomicBool::new(false);
    let first = run(&ablation, dir.path(), &mut StopInRun { nth: 2, at: 5, runs: 0, stop: &stop }, &stop);
    assert_eq!(first.len(), 1);
    let base_log = std::fs::read_to_string(dir.path().join("runs/base/metrics.jsonl")).unwrap();

    // The same command again: base read back untouched, A1 resumed at step 6, B1 trained.
    let stop = AtomicBool::new(false);
    let mut resumed_at = StopInRun { nth: usize::MAX, at: 0, runs: 0, stop: &stop };
    let all = run(&ablation, dir.path(), &mut resumed_at, &stop);
    assert_eq!(resumed_at.runs, 2, "only A1 and B1 train");
    assert_eq!(std::fs::read_to_string(dir.path().join("runs/base/metrics.jsonl")).unwrap(), base_log);
    assert_eq!(all[0], first[0]);
    assert_eq!(all.iter().map(|r| r.steps).collect::<Vec<_>>(), [8, 8, 8]);
    assert_eq!(all[2].changed["model.d_k"], 4);
    // d_k = 4 instead of 8: W^Q and W^K are 16 x 8 instead of 16 x 16, less 2 x 16 x 8 weights
    // and 2 x 8 biases.
    assert_eq!(all[0].params - all[2].params, 2 * 16 * 8 + 2 * 8);
    assert!(all.iter().all(|r| r.valid_loss.is_finite() && r.bleu.is_none()));
    let stored = RunConfig::from_resolved(&dir.path().join("runs/B1/config.toml")).unwrap();
    assert_eq!((stored.model.d_k, stored.train.seed), (4, 3));
    let table = markdown(&all);
    assert_eq!(table.lines().count(), 2 + 3);
    assert!(table.contains("| B1 | model.d_k = 4 |"), "{table}");
}

#[test]
fn a_row_with_an_invalid_key_is_refused_naming_the_file_and_the_row() {
    let dir = tempfile::tempdir().unwrap();
    let table = TABLE.replace("model.d_k=4", "model.n_heads=3");
    let err = Ablation::load(&write(dir.path(), &table), &[]).unwrap_err().to_string();
    assert!(err.contains("table.toml") && err.contains("row B1") && err.contains("model.n_heads = 3"), "{err}");
    let twice = TABLE.replace("\"B1\"", "\"A1\"");
    let err = Ablation::load(&write(dir.path(), &twice), &[]).unwrap_err().to_string();
    assert!(err.contains("\"A1\"") && err.contains("distinct"), "{err}");
}
