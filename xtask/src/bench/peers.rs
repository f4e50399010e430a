//! What every benchmark shares: running a peer script (or saying it is not installed), the
//! benchmark corpus, minimum and median, peak RSS, and the JSON line of a figure.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::bench::args::BenchArgs;

pub fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Peak resident set size of this process in MB (Linux `VmHWM`), if known.
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

pub fn min_median(mut xs: Vec<f64>) -> (f64, f64) {
    xs.sort_by(f64::total_cmp);
    (xs[0], xs[xs.len() / 2])
}

pub fn emit(v: Value) {
    println!("{v}");
}

/// Runs one peer script with `python`; `None` (with a note on stderr) if that interpreter
/// cannot import `module` (the peer is not installed).
pub fn run_peer_script(
    args: &BenchArgs,
    python: &str,
    module: &str,
    script: &str,
    script_args: &[&std::ffi::OsStr],
) -> Result<Option<Value>> {
    let probe = Command::new(python).args(["-c", &format!("import {module}")]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("peers: {python} cannot import {module}; see ../shared/bench/peers/README.md");
        return Ok(None);
    }
    let path = args.shared.join("bench/peers").join(script);
    eprintln!("peers: running {}", path.display());
    let output = Command::new(python)
        .arg(&path)
        .args(script_args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", path.display()))?;
    if !output.status.success() {
        bail!("{} failed with {}", path.display(), output.status);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().context("peer script printed nothing")?;
    Ok(Some(serde_json::from_str(last).with_context(|| format!("{script}: last line is not JSON"))?))
}

/// The benchmark corpus, built deterministically by `make_corpus.py` when absent.
pub fn ensure_corpus(args: &BenchArgs) -> Result<PathBuf> {
    if args.corpus.exists() {
        return Ok(args.corpus.clone());
    }
    let data = args.shared.join("data");
    if let Some(dir) = args.corpus.parent() {
        std::fs::create_dir_all(dir)?;
    }
    eprintln!("building {} with make_corpus.py", args.corpus.display());
    let status = Command::new("python3")
        .arg(args.shared.join("bench/peers/make_corpus.py"))
        .arg(&args.corpus)
        .arg("100")
        .args([
            data.join("tinyshakespeare/input.txt"),
            data.join("ptb/ptb.train.txt.gz"),
            data.join("multi30k/train.en.gz"),
            data.join("multi30k/train.de.gz"),
        ])
        .status()
        .context("running python3 make_corpus.py")?;
    if !status.success() {
        bail!("make_corpus.py failed ({status}); is --shared {} right?", args.shared.display());
    }
    Ok(args.corpus.clone())
}
