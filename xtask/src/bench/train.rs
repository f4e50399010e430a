//! `cargo xtask bench train`: training throughput of nanoGPT's CPU configuration on tiny
//! Shakespeare (configs/lm-shakespeare.toml), ours beside PyTorch running the same model in
//! the same run (`../shared/bench/peers/nanogpt_cpu_bench.py --mode timing`).
//!
//! Both sides are timed the same way: fresh processes, 20 warm-up steps, then the median
//! time of 200 training steps (forward, backward, clipping, AdamW), no evaluation. Ours reads
//! the per-step times that `metrics.jsonl` records; 768 tokens per step on both sides.
//!
//! The reps alternate, one of ours and one of PyTorch's (which goes first alternates too), so
//! that a shared machine's drift over the minutes of a run falls on both sides alike; besides
//! the ratio of the two medians, each rep's pair gives a ratio, and their median is reported.

use anyhow::Result;
use serde_json::{json, Value};

use crate::bench::args::BenchArgs;
use crate::bench::ours::timed_steps;
use crate::bench::peers::{emit, min_median, run_peer_script};

const WARMUP: usize = 20;
const ITERS: usize = 200;

pub fn bench_train(args: &BenchArgs) -> Result<()> {
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/lm-shakespeare.toml");
    let data = args.shared.join("data/tinyshakespeare/input.txt");
    let (mut ours_ms, mut peer_ms) = (Vec::new(), Vec::new());
    // The peer's last summary (its version and parameter count), `None` once it is missing.
    let mut peer: Option<Value> = None;
    let mut peer_missing = args.no_peers;
    for rep in 0..args.reps {
        for side in [rep % 2, 1 - rep % 2] {
            if side == 0 {
                let (seconds, _) = timed_steps(args, Some(&config), &[], WARMUP, ITERS)?;
                let (_, median) = min_median(seconds);
                eprintln!("ours train rep {rep}: {:.1} ms/step, {:.0} tokens/s", median * 1e3, 768.0 / median);
                ours_ms.push(median * 1e3);
            } else if !peer_missing {
                match peer_rep(args, &data)? {
                    Some(summary) => {
                        let ms = summary["results"]["threads2"]["ms_per_iter_median"].as_f64();
                        peer_ms.push(ms.ok_or_else(|| anyhow::anyhow!("nanogpt_cpu_bench.py: no ms_per_iter_median"))?);
                        peer = Some(summary);
                    }
                    None => peer_missing = true,
                }
            }
        }
    }
    let (best, median) = min_median(ours_ms.clone());
    let ours = json!({"ms_per_iter_min": best, "ms_per_iter_median": median, "ms_per_iter_reps": ours_ms,
                      "tokens_per_s_max": 768e3 / best, "tokens_per_s_median": 768e3 / median});
    let (peer_result, ratio, paired) = match (&peer, peer_ms.is_empty()) {
        (Some(summary), false) => {
            let last = &summary["results"]["threads2"];
            let (peer_best, peer_median) = min_median(peer_ms.clone());
            let result = json!({"ms_per_iter_median": peer_median, "ms_per_iter_min": peer_best,
                                "ms_per_iter_reps": peer_ms, "n": peer_ms.len(), "params": last["params"],
                                "torch": last["torch"], "tokens_per_s_median": 768e3 / peer_median,
                                "tokens_per_s_max": 768e3 / peer_best});
            // Each rep's pair: PyTorch's time over ours.
            let pairs: Vec<f64> = peer_ms.iter().zip(&ours_ms).map(|(p, o)| p / o).collect();
            (result, Some(peer_median / median), Some((min_median(pairs.clone()).1, pairs)))
        }
        _ => (Value::Null, None, None),
    };
    emit(json!({"bench": "train_nanogpt_cpu", "tokens_per_iter": 768, "warmup": WARMUP, "iters": ITERS,
                "threads": std::thread::available_parallelism().map_or(1, |n| n.get()),
                "ours": ours,
                "peer": if peer.is_some() { "pytorch" } else { "not run" }, "peer_result": peer_result,
                "ours_speed_over_peer": ratio,
                "paired_ratio_median": paired.as_ref().map(|p| p.0),
                "paired_ratios": paired.map(|p| p.1)}));
    Ok(())
}

/// One rep of the peer (a fresh PyTorch process), or `None` where PyTorch is not installed.
fn peer_rep(args: &BenchArgs, data: &std::path::Path) -> Result<Option<Value>> {
    let (warmup, iters) = (WARMUP.to_string(), ITERS.to_string());
    run_peer_script(
        args,
        args.torch_python.as_deref().unwrap_or(&args.python),
        "torch",
        "nanogpt_cpu_bench.py",
        &[
            "--data".as_ref(),
            data.as_os_str(),
            "--mode".as_ref(),
            "timing".as_ref(),
            "--threads".as_ref(),
            "2".as_ref(),
            "--reps".as_ref(),
            "1".as_ref(),
            "--iters".as_ref(),
            iters.as_ref(),
            "--warmup".as_ref(),
            warmup.as_ref(),
        ],
    )
}
