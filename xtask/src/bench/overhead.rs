//! `bench train`'s fixed per-step cost: with `t(b)` the median step time of the default model
//! (`configs/default.toml`) at batch `b`, the fixed overhead is `t(1) − (t(8) − t(1)) / 7`,
//! the part of a step that does not grow with the batch (host work, launches, synchronizations).
//! Measured on `--backend` (on a GPU this is what keeps small steps slow).

use anyhow::Result;
use serde_json::json;

use crate::bench::args::BenchArgs;
use crate::bench::ours::timed_steps;
use crate::bench::peers::{emit, min_median};

const WARMUP: usize = 10;
const ITERS: usize = 40;

/// Median seconds per step of the default model at `batch` sequences.
fn step_time(args: &BenchArgs, batch: usize) -> Result<f64> {
    let sets = [format!("train.batch_size={batch}"), "decode.max_tokens=1".to_string()];
    Ok(min_median(timed_steps(args, None, &sets, WARMUP, ITERS)?.0).1)
}

pub fn bench_overhead(args: &BenchArgs) -> Result<()> {
    let (mut t1, mut t8) = (Vec::new(), Vec::new());
    for rep in 0..args.reps {
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
