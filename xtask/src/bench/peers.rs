//! What every benchmark shares: running a peer script (or saying it is not installed), the
//! benchmark corpus, minimum and median, peak RSS, and the JSON line of a figure.

use std::path::{Path, PathBuf};
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
    build_whole(&args.corpus, |partial| {
        let status = Command::new("python3")
            .arg(args.shared.join("bench/peers/make_corpus.py"))
            .arg(partial)
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
        Ok(())
    })?;
    Ok(args.corpus.clone())
}

/// Runs `build` on `path` + `.partial` and renames that file to `path` once `build` succeeds,
/// so that a build cut short (an error, Ctrl-C, a kill) never leaves at `path` a file that a
/// later run would take as whole; a failed build's partial file is removed.
fn build_whole(path: &Path, build: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let mut name = path.as_os_str().to_owned();
    name.push(".partial");
    let partial = PathBuf::from(name);
    match build(&partial) {
        Ok(()) => std::fs::rename(&partial, path)
            .with_context(|| format!("renaming {} to {}", partial.display(), path.display())),
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corpus_build_that_fails_leaves_no_corpus_and_one_that_succeeds_leaves_only_the_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let corpus = dir.path().join("corpus.txt");
        let failed = build_whole(&corpus, |partial| {
            std::fs::write(partial, "half a corpus")?;
            bail!("cut short")
        });
        assert!(failed.is_err());
        assert!(!corpus.exists(), "a failed build left a corpus that the next run would take as whole");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a failed build left its partial file");
        build_whole(&corpus, |partial| Ok(std::fs::write(partial, "the whole corpus")?)).unwrap();
        assert_eq!(std::fs::read_to_string(&corpus).unwrap(), "the whole corpus");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "the partial file stayed beside the corpus");
    }
}
