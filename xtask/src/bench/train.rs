//! `cargo xtask bench train`: training throughput of nanoGPT's CPU configuration on tiny
//! Shakespeare (configs/lm-shakespeare.toml), ours beside PyTorch running the same model in
//! the same run (`../shared/bench/peers/nanogpt_cpu_bench.py --mode timing`).
//!
//! Both sides are timed the same way: fresh processes, 20 warm-up steps, then the median
//! time of 200 training steps (forward, backward, clipping, AdamW), no evaluation. Ours reads
//! the per-step times that `metrics.jsonl` records; 768 tokens per step on both sides.

use anyhow::Result;
use serde_json::{json, Value};

use crate::bench::args::BenchArgs;
use crate::bench::ours::timed_steps;
use crate::bench::peers::{emit, min_median, run_peer_script};

const WARMUP: usize = 20;
const ITERS: usize = 200;

pub fn bench_train(args: &BenchArgs) -> Result<()> {
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/lm-shakespeare.toml");
    let data_dir = args.shared.join("data");
    let mut medians = Vec::new();
    for rep in 0..args.reps.max(1) {
        let (seconds, _) = timed_steps(args, Some(&config), &[], WARMUP, ITERS)?;
        let (_, median) = min_median(seconds);
        eprintln!("ours train rep {rep}: {:.1} ms/step, {:.0} tokens/s", median * 1e3, 768.0 / median);
        medians.push(median);
    }
    let (best, median) = min_median(medians);
    let ours = json!({"ms_per_iter_min": best * 1e3, "ms_per_iter_median": median * 1e3,
                      "tokens_per_s_max": 768.0 / best, "tokens_per_s_median": 768.0 / median});
    let peer = if args.no_peers {
        None
    } else {
        let reps = args.reps.max(1).to_string();
        let (warmup, iters) = (WARMUP.to_string(), ITERS.to_string());
        let data = data_dir.join("tinyshakespeare/input.txt");
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
                reps.as_ref(),
                "--iters".as_ref(),
                iters.as_ref(),
                "--warmup".as_ref(),
                warmup.as_ref(),
            ],
        )?
    };
    let peer_result = peer.as_ref().map(|p| p["results"]["threads2"].clone()).unwrap_or(Value::Null);
    let ratio = peer_result["ms_per_iter_median"].as_f64().map(|p| p / (median * 1e3));
    emit(json!({"bench": "train_nanogpt_cpu", "tokens_per_iter": 768, "warmup": WARMUP, "iters": ITERS,
                "threads": std::thread::available_parallelism().map_or(1, |n| n.get()),
                "ours": ours, "peer": if peer.is_some() { "pytorch" } else { "not run" }, "peer_result": peer_result,
                "ours_speed_over_peer": ratio}));
    Ok(())
}
