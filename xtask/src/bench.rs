//! `cargo xtask bench [bpe|bleu|train|all]`: end-to-end figures of ours beside the peers', measured in
//! the same run on the same input (DESIGN.md section 8). One JSON line per figure on
//! stdout; progress on stderr.
//!
//! Peers are the Python scripts in `../shared/bench/peers/`, run with `--python` (default:
//! `$ATTEND_PEERS_PYTHON`, else `python3`); a peer that is not installed is reported as
//! such, never guessed. Micro-benchmarks are criterion benches (`cargo bench -p attend-bpe`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use attend_bpe::{Encoder, Tokenizer, Trainer, TrainerConfig};
use clap::{Args, ValueEnum};
use serde_json::{json, Value};

#[derive(Args)]
pub struct BenchArgs {
    /// Which benchmarks to run.
    #[arg(value_enum, default_value_t = Which::All)]
    which: Which,
    /// The ~100 MB tokenizer corpus; built with make_corpus.py from ../shared/data if absent.
    #[arg(long, default_value = "target/bench/corpus100mb.txt")]
    corpus: PathBuf,
    /// The directory `shared/` (with data/ and bench/peers/).
    #[arg(long, env = "ATTEND_SHARED_DIR", default_value = "../shared")]
    pub shared: PathBuf,
    /// Python interpreter that has the peers installed.
    #[arg(long, env = "ATTEND_PEERS_PYTHON", default_value = "python3")]
    pub python: String,
    /// Python interpreter that has PyTorch (the `train` peer); default: --python.
    #[arg(long, env = "ATTEND_TORCH_PYTHON")]
    pub torch_python: Option<String>,
    /// Repetitions of each timed run (minimum and median are reported).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Skip the peers (ours only).
    #[arg(long)]
    pub no_peers: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Which {
    Bpe,
    Bleu,
    Train,
    All,
}

pub fn run(args: BenchArgs) -> Result<()> {
    if matches!(args.which, Which::Bpe | Which::All) {
        bench_bpe(&args)?;
    }
    if matches!(args.which, Which::Bleu | Which::All) {
        bench_bleu(&args)?;
    }
    if matches!(args.which, Which::Train | Which::All) {
        let torch = args.torch_python.clone().unwrap_or_else(|| args.python.clone());
        crate::bench_train::bench_train(&BenchArgs { torch_python: Some(torch), ..args })?;
    }
    Ok(())
}

/// Corpus BLEU on the 100,000 pairs that `sacrebleu_bench.py` builds from the corpus (written
/// to files by `crates/metrics/benches/write_sacrebleu_bench_pairs.py`, the same construction),
/// ours timed in-process around `corpus_bleu`, as the peer times its `corpus_bleu` call.
fn bench_bleu(args: &BenchArgs) -> Result<()> {
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
    for _ in 0..args.reps.max(1) {
        let t = Instant::now();
        let s = attend_metrics::corpus_bleu(&hyps, &streams, &config)?;
        times.push(t.elapsed().as_secs_f64());
        score = Some(s.score);
    }
    let (best, median) = min_median(times);
    let peer = if args.no_peers {
        Value::Null
    } else {
        run_peer_script(args, &args.python, "sacrebleu", "sacrebleu_bench.py", &[
            "--text".as_ref(), corpus.as_os_str(), "--n".as_ref(), "100000".as_ref(),
            "--reps".as_ref(), args.reps.to_string().as_ref(),
        ])?
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

fn rayon_threads() -> usize {
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

fn bench_bpe(args: &BenchArgs) -> Result<()> {
    let corpus = ensure_corpus(args)?;
    let vocab = 32_000;
    let size_mb = std::fs::metadata(&corpus)?.len() as f64 / 1e6;

    // Training: ours, each run a fresh process (as the peers'), peak RSS from VmHWM.
    let exe = std::env::current_exe()?;
    let out = tempfile::tempdir()?;
    let mut times = Vec::new();
    let mut rss = Vec::new();
    for rep in 0..args.reps {
        let output = Command::new(&exe)
            .args(["bpe", "train", "--vocab-size", "32000", "--special", "<|endoftext|>"])
            .arg("--input")
            .arg(&corpus)
            .arg("--output")
            .arg(out.path().join("tokenizer.json"))
            .env("ATTEND_BENCH_JSON", "1")
            .output()?;
        if !output.status.success() {
            bail!("bpe train failed: {}", String::from_utf8_lossy(&output.stderr));
        }
        let report: Value = serde_json::from_slice(&output.stdout).context("bench report")?;
        eprintln!("ours bpe_train rep {rep}: {report}");
        times.push(report["train_s"].as_f64().unwrap_or(f64::NAN));
        rss.push(report["peak_rss_mb"].as_f64().unwrap_or(f64::NAN));
    }
    let (ours_min, ours_median) = min_median(times);
    let (rss_min, _) = min_median(rss);
    let ours = json!({"train_s_min": ours_min, "train_s_median": ours_median, "peak_rss_mb": rss_min});
    let peers = if args.no_peers { None } else { peer_train(args, &corpus)? };
    let base = json!({"bench": "bpe_train", "corpus": corpus, "corpus_mb": size_mb, "vocab": vocab});
    match peers {
        None => emit(json!({"base": base, "ours": ours, "peer": "not run"})),
        Some(results) => {
            for (tool, name) in [("yttm", "youtokentome"), ("spm", "sentencepiece"), ("hf", "hf_tokenizers")] {
                let key = format!("{tool}|{}|v{vocab}", corpus.file_name().unwrap().to_string_lossy());
                let peer = results.get(&key).cloned().unwrap_or(Value::Null);
                let ratio = peer["train_s_min"].as_f64().map(|p| p / ours_min);
                emit(json!({"bench": "bpe_train", "corpus_mb": size_mb, "vocab": vocab,
                            "ours": ours, "peer": name, "peer_result": peer,
                            "peer_time_over_ours": ratio}));
            }
        }
    }
    bench_encode(args, &corpus)
}

/// Encoding throughput, matched to `tokenizer_encode_bench.py`: the vocabulary trained on
/// tiny Shakespeare (32k requested, minimum frequency 2, no special token: the same
/// vocabulary HuggingFace trains), the first 10 MB of the corpus as lines with their `\n`.
fn bench_encode(args: &BenchArgs, corpus: &Path) -> Result<()> {
    let train_text = args.shared.join("data/tinyshakespeare/input.txt");
    let trainer = Trainer::new(TrainerConfig {
        vocab_size: 32_000,
        min_frequency: 2,
        special_tokens: vec![],
        show_progress: false,
    })?;
    let tok = trainer.train_files(&[train_text.clone()])?;
    let mb = 10.0;
    let mut bytes = std::fs::read(corpus)?;
    bytes.truncate((mb * 1e6) as usize);
    let text = match std::str::from_utf8(&bytes) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).expect("valid prefix"),
    };
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let nbytes = text.len() as f64;
    let time = |f: &dyn Fn() -> usize| -> (Vec<f64>, usize) {
        let tokens = f(); // warm-up
        let ts = (0..args.reps)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .collect();
        (ts, tokens)
    };
    let one_thread = |tok: &Tokenizer| {
        let mut enc = Encoder::new(tok);
        lines.iter().map(|l| enc.encode(l).len()).sum::<usize>()
    };
    let (ts_1t, tokens) = time(&|| one_thread(&tok));
    let (ts_batch, _) = time(&|| tok.encode_batch(&lines).iter().map(Vec::len).sum());
    let mbs = |ts: Vec<f64>| {
        let (best, median) = min_median(ts);
        json!({"mb_s_max": nbytes / 1e6 / best, "mb_s_median": nbytes / 1e6 / median})
    };
    let ours = json!({"one_thread": mbs(ts_1t), "batch_all_threads": mbs(ts_batch),
                      "tokens": tokens, "vocab": tok.vocab_size()});
    let peer = if args.no_peers {
        Value::Null
    } else {
        run_peer_script(args, &args.python, "tokenizers", "tokenizer_encode_bench.py", &[
            "--text".as_ref(), corpus.as_os_str(), "--train_text".as_ref(), train_text.as_os_str(),
            "--mb".as_ref(), "10".as_ref(), "--reps".as_ref(), args.reps.to_string().as_ref(),
        ])?
        .unwrap_or(Value::Null)
    };
    let tiktoken = peer["results"]["tiktoken_own_1t"]["mb_s_max"].as_f64();
    let ours_1t = ours["one_thread"]["mb_s_max"].as_f64().unwrap_or(f64::NAN);
    emit(json!({"bench": "bpe_encode", "input_mb": nbytes / 1e6, "ours": ours,
                "peer_results": peer["results"], "ours_over_tiktoken_1t": tiktoken.map(|t| ours_1t / t)}));
    Ok(())
}

fn peer_train(args: &BenchArgs, corpus: &Path) -> Result<Option<serde_json::Map<String, Value>>> {
    let reps = args.reps.to_string();
    let summary = run_peer_script(args, &args.python, "tokenizers", "tokenizer_train_bench.py", &[
        "--inputs".as_ref(), corpus.as_os_str(), "--vocabs".as_ref(), "32000".as_ref(),
        "--tools".as_ref(), "yttm,spm,hf".as_ref(), "--reps".as_ref(), reps.as_ref(),
    ])?;
    Ok(summary.and_then(|s| s["results"].as_object().cloned()))
}

/// Runs one peer script with `python`; `None` (with a note on stderr) if that interpreter
/// cannot import `module` (the peer is not installed).
pub fn run_peer_script(args: &BenchArgs, python: &str, module: &str, script: &str, script_args: &[&std::ffi::OsStr]) -> Result<Option<Value>> {
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
fn ensure_corpus(args: &BenchArgs) -> Result<PathBuf> {
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
