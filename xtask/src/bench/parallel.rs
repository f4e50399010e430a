//! `bench parallel`: the data-parallel path on this machine: the default model's median step
//! time on one device (the plain loop) and on `--devices 2` (two CPU peers on ndarray, or two
//! GPUs), and the collective operations' share of a step (`collective_ms` of `metrics.jsonl`:
//! the all-reduces, their transfers and the wait for the slower peer). On a 2-core machine two
//! peers cannot scale; what this measures there is the data-parallel path's cost.

use anyhow::Result;
use serde_json::json;

use crate::bench::args::BenchArgs;
use crate::bench::ours::timed_events;
use crate::bench::peers::{emit, min_median};

const WARMUP: usize = 10;
const ITERS: usize = 60;

pub fn bench_parallel(args: &BenchArgs) -> Result<()> {
    let sets = ["decode.max_tokens=1".to_string()];
    let (mut one, mut two, mut collective) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..args.reps {
        for (devices, times) in [("1", &mut one), ("2", &mut two)] {
            let (events, tokens) = timed_events(args, None, &sets, &["--devices", devices], WARMUP, ITERS)?;
            let steps: Vec<f64> =
                events.iter().filter_map(|v| v["tokens_per_s"].as_f64()).map(|t| tokens / t).collect();
            times.push(min_median(steps).1);
            if devices == "2" {
                collective.push(min_median(events.iter().filter_map(|v| v["collective_ms"].as_f64()).collect()).1);
            }
        }
        eprintln!(
            "parallel rep {rep}: 1 device {:.2} ms/step, 2 devices {:.2} ms/step ({:.2} ms in collectives)",
            one[rep] * 1e3,
            two[rep] * 1e3,
            collective[rep]
        );
    }
    let (one, two, collective) = (min_median(one).1, min_median(two).1, min_median(collective).1);
    emit(json!({"bench": "data_parallel", "backend": args.backend.name(), "model": "configs/default.toml",
                "warmup": WARMUP, "iters": ITERS, "one_device_ms": one * 1e3, "two_devices_ms": two * 1e3,
                "two_over_one": two / one, "collective_ms": collective,
                "collective_share": collective / (two * 1e3)}));
    Ok(())
}
