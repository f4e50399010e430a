//! `cargo xtask bleu --ref FILE [--ref FILE ...]`: corpus BLEU of the hypotheses on stdin,
//! printed as sacreBLEU prints it (`--format text`) or as one JSON line (`--format json`).
//!
//! Lines are read as the sacreBLEU command line reads them: split on `\n`, trailing
//! whitespace stripped (`attend_metrics::read_segments`). Reference files may be gzip. Also home
//! of the output format that `chrf` shares.

use std::path::PathBuf;

use anyhow::{Context, Result};
use attend_metrics::{corpus_bleu, read_segments, BleuConfig, Smoothing, Tokenizer};
use clap::{Args, ValueEnum};

#[derive(Args)]
pub struct BleuArgs {
    /// Reference file, one segment per line (plain or gzip); repeat for more references.
    #[arg(long = "ref", value_name = "FILE", required = true, num_args = 1..)]
    refs: Vec<PathBuf>,
    /// Tokenizer, as sacreBLEU names them.
    #[arg(long, default_value = "13a", value_parser = ["13a", "none", "intl", "char"])]
    tokenize: String,
    /// Smoothing of zero n-gram precisions (Chen & Cherry 2014).
    #[arg(long, default_value = "exp", value_parser = ["exp", "floor", "add-k", "none"])]
    smooth: String,
    /// The value of floor (default 0.1) or add-k (default 1, applied to n >= 2).
    #[arg(long, value_name = "V", allow_negative_numbers = true)]
    smooth_value: Option<f64>,
    /// Lowercase hypotheses and references first (case-insensitive BLEU).
    #[arg(long)]
    lowercase: bool,
    /// text: sacreBLEU's line (score to 2 decimals, signature), and on stderr a line saying
    /// how to read it; json: one JSON object with sacreBLEU's keys (score unrounded) plus
    /// counts, totals, bp, sys_len, ref_len.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// How a score is printed.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

pub fn run(args: BleuArgs) -> Result<()> {
    let config = BleuConfig {
        tokenizer: args.tokenize.parse::<Tokenizer>()?,
        smoothing: Smoothing::from_name(&args.smooth, args.smooth_value).context("--smooth-value")?,
        lowercase: args.lowercase,
        effective_order: false,
    };
    let (hyps, refs) = read_segments(std::io::stdin().lock(), &args.refs)?;
    let score = corpus_bleu(&hyps, &refs, &config)?;
    let signature = config.signature(refs.len());
    match args.format {
        Format::Text => {
            // stdout stays exactly sacreBLEU's line (scripts parse it); the reading goes to stderr.
            println!("{}", score.format(&signature));
            eprintln!("interpretation: {}", attend_metrics::bleu::interpretation(score.score));
        }
        Format::Json => println!("{}", serde_json::to_string(&score.to_json(&signature))?),
    }
    Ok(())
}
