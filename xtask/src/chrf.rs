//! `cargo xtask chrf --ref FILE [--ref FILE ...]`: corpus chrF (or chrF++ with
//! `--word-order 2`) of the hypotheses on stdin, printed as sacreBLEU prints it or as JSON.
//! Input conventions are `bleu`'s.

use std::path::PathBuf;

use anyhow::Result;
use attend_metrics::{corpus_chrf, read_segments, ChrfConfig};
use clap::Args;

use crate::bleu::Format;

#[derive(Args)]
pub struct ChrfArgs {
    /// Reference file, one segment per line (plain or gzip); repeat for more references.
    #[arg(long = "ref", value_name = "FILE", required = true, num_args = 1..)]
    refs: Vec<PathBuf>,
    /// Word n-gram order: 0 for chrF, 2 for chrF++ (Popović 2017).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=2))]
    word_order: u8,
    /// Lowercase hypotheses and references first.
    #[arg(long)]
    lowercase: bool,
    /// text: sacreBLEU's line (score to 2 decimals, signature); json: one JSON object with
    /// sacreBLEU's keys (score unrounded) plus the per-order statistics.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

pub fn run(args: ChrfArgs) -> Result<()> {
    let config =
        ChrfConfig { word_order: usize::from(args.word_order), lowercase: args.lowercase, ..ChrfConfig::chrf() };
    let (hyps, refs) = read_segments(std::io::stdin().lock(), &args.refs)?;
    let score = corpus_chrf(&hyps, &refs, &config)?;
    let signature = config.signature(refs.len());
    match args.format {
        Format::Text => println!("{}", score.format(&signature)),
        Format::Json => println!("{}", serde_json::to_string(&score.to_json(&signature))?),
    }
    Ok(())
}
