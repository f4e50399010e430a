//! `cargo xtask baseline --data FILE --eval FILE [--order N]`: uniform, add-one unigram and
//! interpolated modified Kneser-Ney perplexities on whitespace tokens, one `<eos>` per line.
//!
//! Human-readable lines first; the last stdout line is one JSON object: `uniform_ppl`,
//! `unigram_ppl`, `kn_ppl`, `order`, `tokens` (scored tokens, `<eos>` included).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use attend_metrics::lines::read_lines;
use attend_metrics::ngram_lm::baselines;
use attend_metrics::PerplexityReport;
use clap::Args;
use serde::Serialize;

#[derive(Args)]
pub struct BaselineArgs {
    /// Training text (plain or gzip): whitespace-separated tokens, one sentence per line.
    #[arg(long, value_name = "FILE")]
    data: PathBuf,
    /// Text to score, in the same form.
    #[arg(long, value_name = "FILE")]
    eval: PathBuf,
    /// Kneser-Ney order N (3 = trigram).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..=10))]
    order: u8,
}

pub fn run(args: BaselineArgs) -> Result<()> {
    let started = Instant::now();
    let train = read_lines(&args.data)?;
    let eval = read_lines(&args.eval)?;
    for (flag, path, lines) in [("--data", &args.data, &train), ("--eval", &args.eval, &eval)] {
        if lines.is_empty() {
            anyhow::bail!("{flag} {}: the file has no lines (expected text, one sentence a line)", path.display());
        }
    }
    let order = usize::from(args.order);
    let report = baselines(&train, &eval, order)
        .with_context(|| format!("--data {} scored on --eval {}", args.data.display(), args.eval.display()))?;

    println!(
        "train: {} ({} lines, {} tokens with <eos>), vocabulary {} (with <eos> and <unk>)",
        args.data.display(),
        train.len(),
        report.train_tokens,
        report.vocab_size
    );
    println!(
        "eval:  {} ({} lines, {} tokens with <eos>, {} out of vocabulary, scored as <unk>)",
        args.eval.display(),
        eval.len(),
        report.kneser_ney.tokens,
        report.oov_tokens
    );
    println!("{:<12} {:>10} {:>9} {:>9} {:>10} {:>9}", "model", "ppl", "nats/tok", "bits/tok", "ppl/word", "bits/char");
    let kn_name = format!("kn{order}");
    for (name, r) in
        [("uniform", &report.uniform), ("unigram+1", &report.unigram), (kn_name.as_str(), &report.kneser_ney)]
    {
        println!("{}", row(name, r));
    }
    let discounts: Vec<String> = report
        .discounts
        .iter()
        .enumerate()
        .map(|(k, d)| format!("{}: {:.3} {:.3} {:.3}", k + 1, d[0], d[1], d[2]))
        .collect();
    println!("Kneser-Ney discounts D1 D2 D3+ by order: {}", discounts.join(", "));
    println!("done in {:.1} s", started.elapsed().as_secs_f64());
    let summary = Summary {
        uniform_ppl: report.uniform.ppl,
        unigram_ppl: report.unigram.ppl,
        kn_ppl: report.kneser_ney.ppl,
        order,
        tokens: report.kneser_ney.tokens,
    };
    println!("{}", serde_json::to_string(&summary)?);
    Ok(())
}

/// The last stdout line, keys in this order.
#[derive(Serialize)]
struct Summary {
    uniform_ppl: f64,
    unigram_ppl: f64,
    kn_ppl: f64,
    order: usize,
    tokens: u64,
}

fn row(name: &str, r: &PerplexityReport) -> String {
    let opt = |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    format!(
        "{:<12} {:>10.2} {:>9.4} {:>9.4} {:>10} {:>9}",
        name,
        r.ppl,
        r.nats_per_token,
        r.bits_per_token,
        opt(r.ppl_word, 2),
        opt(r.bits_per_char, 4)
    )
}
