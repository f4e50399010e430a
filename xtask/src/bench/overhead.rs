//! `bench train`'s fixed per-step cost: with `t(b)` the median step time of the default model
//! (`configs/default.toml`) at batch `b`, the fixed overhead is `t(1) − (t(8) − t(1)) / 7`,
//! the part of a step that does not grow with the batch (host work, launches, synchronizations).
//! Measured on `--backend` (on a GPU this is what keeps small steps slow).

use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::bench::args::BenchArgs;
use crate::bench::peers::{emit, min_median};

const WARMUP: usize = 10;
const ITERS: usize = 40;

/// Median seconds per step of the default model at `batch` sequences.
fn step_time(args: &BenchArgs, batch: usize) -> Result<f64> {
    let run = tempfile::tempdir()?;
    let output = Command::new(std::env::current_exe()?)
        .arg("train")
        .arg("--run")
        .arg(run.path().join("run"))
        .args(["--backend", args.backend.name()])
        .args(["--set", &format!("train.batch_size={batch}"), "--set", &format!("train.max_steps={}", WARMUP + ITERS)])
        .args(["--set", "train.eval_every=1000000", "--set", "train.checkpoint_every=1000000"])
        .args(["--set", "train.eval_batches=1", "--set", "decode.max_tokens=1"])
        .output()
        .context("running xtask train")?;
    if !output.status.success() {
        bail!("xtask train failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let config: toml::Table = std::fs::read_to_string(run.path().join("run/config.toml"))?.parse()?;
    let block = config["model"]["block_size"].as_integer().context("model.block_size")? as f64;
    let log = std::fs::read_to_string(run.path().join("run/metrics.jsonl"))?;
    let seconds: Vec<f64> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "train")
        .filter_map(|v| v["tokens_per_s"].as_f64())
        .skip(WARMUP)
        .map(|tokens_per_s| batch as f64 * block / tokens_per_s)
        .collect();
    if seconds.len() != ITERS {
        bail!("expected {ITERS} timed steps in metrics.jsonl, found {}", seconds.len());
    }
    Ok(min_median(seconds).1)
}

pub fn bench_overhead(args: &BenchArgs) -> Result<()> {
    let (mut t1, mut t8) = (Vec::new(), Vec::new());
    for rep in 0..args.reps.max(1) {
        t1.push(step_time(args, 1)?);
        t8.push(step_time(args, 8)?);
        eprintln!("ours overhead rep {rep}: t(1) {:.2} ms, t(8) {:.2} ms", t1[rep] * 1e3, t8[rep] * 1e3);
    }
    let (t1, t8) = (min_median(t1).1, min_median(t8).1);
    let overhead = t1 - (t8 - t1) / 7.0;
    emit(json!({"bench": "train_fixed_overhead", "backend": args.backend.name(), "model": "configs/default.toml",
                "warmup": WARMUP, "iters": ITERS, "t1_ms": t1 * 1e3, "t8_ms": t8 * 1e3, "overhead_ms": overhead * 1e3}));
    Ok(())
}
