//! `bench bpe`: tokenizer training (ours beside YouTokenToMe, sentencepiece and HuggingFace
//! `tokenizers`, time and peak memory) and encoding throughput (beside `tokenizers` and tiktoken).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use attend_bpe::{Encoder, Tokenizer, Trainer, TrainerConfig};
use serde_json::{json, Value};

use crate::bench::args::BenchArgs;
use crate::bench::peers::{emit, ensure_corpus, min_median, run_peer_script};

pub fn bench_bpe(args: &BenchArgs) -> Result<()> {
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
    let tok = trainer.train_files(std::slice::from_ref(&train_text))?;
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
        run_peer_script(
            args,
            &args.python,
            "tokenizers",
            "tokenizer_encode_bench.py",
            &[
                "--text".as_ref(),
                corpus.as_os_str(),
                "--train_text".as_ref(),
                train_text.as_os_str(),
                "--mb".as_ref(),
                "10".as_ref(),
                "--reps".as_ref(),
                args.reps.to_string().as_ref(),
            ],
        )?
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
    let summary = run_peer_script(
        args,
        &args.python,
        "tokenizers",
        "tokenizer_train_bench.py",
        &[
            "--inputs".as_ref(),
            corpus.as_os_str(),
            "--vocabs".as_ref(),
            "32000".as_ref(),
            "--tools".as_ref(),
            "yttm,spm,hf".as_ref(),
            "--reps".as_ref(),
            reps.as_ref(),
        ],
    )?;
    Ok(summary.and_then(|s| s["results"].as_object().cloned()))
}
