//! `bench bleu`: corpus BLEU on 100,000 segment pairs, ours beside sacreBLEU.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::bench::args::BenchArgs;
use crate::bench::peers::{emit, ensure_corpus, min_median, rayon_threads, run_peer_script};

/// Corpus BLEU on the 100,000 pairs that `sacrebleu_bench.py` builds from the corpus (written
/// to files by `crates/metrics/benches/write_sacrebleu_bench_pairs.py`, the same construction),
/// ours timed in-process around `corpus_bleu`, as the peer times its `corpus_bleu` call.
pub fn bench_bleu(args: &BenchArgs) -> Result<()> {
    let corpus = ensure_corpus(args)?;
    let dir = tempfile::tempdir()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/metrics/benches/write_sacrebleu_bench_pairs.py");
    let status = Command::new("python3")
        .arg(&script)
        .arg("--text")
        .arg(&corpus)
        .arg("--out")
        .arg(dir.path())
        .args(["--n", "100000"])
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    if !status.success() {
        bail!("{} failed ({status})", script.display());
    }
    let read = |name: &str| -> Result<Vec<String>> {
        Ok(std::fs::read_to_string(dir.path().join(name))?.lines().map(String::from).collect())
    };
    let (hyps, refs) = (read("hyps.txt")?, read("refs.txt")?);
    let streams = [refs];
    let config = attend_metrics::BleuConfig::corpus();
    let mut times = Vec::new();
    let mut score = None;
    for _ in 0..args.reps {
        let t = Instant::now();
        let s = attend_metrics::corpus_bleu(&hyps, &streams, &config)?;
        times.push(t.elapsed().as_secs_f64());
        score = Some(s.score);
    }
    let (best, median) = min_median(times);
    let peer = if args.no_peers {
        Value::Null
    } else {
        run_peer_script(
            args,
            &args.python,
            "sacrebleu",
            "sacrebleu_bench.py",
            &[
                "--text".as_ref(),
                corpus.as_os_str(),
                "--n".as_ref(),
                "100000".as_ref(),
                "--reps".as_ref(),
                args.reps.to_string().as_ref(),
            ],
        )?
        .unwrap_or(Value::Null)
    };
    let peer_min = peer["time_s_min"].as_f64();
    emit(json!({"bench": "bleu_corpus", "pairs": hyps.len(), "threads": rayon_threads(),
                "ours": {"time_s_min": best, "time_s_median": median, "score": score},
                "peer": "sacrebleu", "peer_result": peer,
                "same_score": peer["score"].as_f64().zip(score).map(|(p, o)| (p - o).abs() < 1e-9),
                "peer_time_over_ours": peer_min.map(|p| p / best)}));
    Ok(())
}
