//! Our side of the training benchmarks: `xtask train` in a fresh process on `--backend`, with
//! evaluation and checkpoints pushed past the end, and the per-step times it logs.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::bench::args::BenchArgs;

/// Seconds of each of `iters` training steps after `warmup`, as `metrics.jsonl` logs them, and
/// the step's tokens (`train.batch_size × model.block_size` of the resolved configuration).
/// `config` is the experiment file (none: the embedded default); `sets` are more overrides.
pub fn timed_steps(
    args: &BenchArgs,
    config: Option<&Path>,
    sets: &[String],
    warmup: usize,
    iters: usize,
) -> Result<(Vec<f64>, f64)> {
    let (events, tokens) = timed_events(args, config, sets, &[], warmup, iters)?;
    Ok((events.iter().filter_map(|v| v["tokens_per_s"].as_f64()).map(|per_s| tokens / per_s).collect(), tokens))
}

/// The `train` events of `iters` steps after `warmup` (with `extra` arguments to `train`, e.g.
/// `--devices 2`), and the step's tokens.
pub fn timed_events(
    args: &BenchArgs,
    config: Option<&Path>,
    sets: &[String],
    extra: &[&str],
    warmup: usize,
    iters: usize,
) -> Result<(Vec<Value>, f64)> {
    let run = tempfile::tempdir()?;
    let mut command = Command::new(std::env::current_exe()?);
    command.arg("train").arg("--run").arg(run.path().join("run")).args(["--backend", args.backend.name()]);
    command.args(extra);
    if let Some(config) = config {
        command.arg("--config").arg(config);
    }
    command.arg("--data-dir").arg(args.shared.join("data"));
    let fixed = [
        format!("train.max_steps={}", warmup + iters),
        "train.eval_every=1000000".into(),
        "train.checkpoint_every=1000000".into(),
        "train.eval_batches=1".into(),
    ];
    for set in fixed.iter().chain(sets) {
        command.args(["--set", set]);
    }
    let output = command.output().context("running xtask train")?;
    if !output.status.success() {
        bail!("xtask train failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let resolved: toml::Table = std::fs::read_to_string(run.path().join("run/config.toml"))?.parse()?;
    let int =
        |section: &str, key: &str| resolved[section][key].as_integer().with_context(|| format!("{section}.{key}"));
    let tokens = (int("train", "batch_size")? * int("model", "block_size")?) as f64;
    let log = std::fs::read_to_string(run.path().join("run/metrics.jsonl"))?;
    let events: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "train" && v["tokens_per_s"].is_f64())
        .skip(warmup)
        .collect();
    if events.len() != iters {
        bail!("expected {iters} timed steps in metrics.jsonl, found {}", events.len());
    }
    Ok((events, tokens))
}
