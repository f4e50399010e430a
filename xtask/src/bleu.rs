//! `cargo xtask bleu --ref FILE [--ref FILE ...]`: corpus BLEU of the hypotheses on stdin,
//! printed as sacreBLEU prints it (`--format text`) or as one JSON line (`--format json`).
//!
//! Lines are read as the sacreBLEU command line reads them: split on `\n`, trailing
//! whitespace stripped. Reference files may be gzip. Also home of what `chrf` shares: the
//! output format and the reading and checking of hypotheses and references.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use attend_metrics::lines::{read_lines, read_lines_from};
use attend_metrics::text::py_rstrip;
use attend_metrics::{corpus_bleu, BleuConfig, Smoothing, Tokenizer};
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
    /// text: sacreBLEU's line (score to 2 decimals, signature); json: one JSON object with
    /// sacreBLEU's keys (score unrounded) plus counts, totals, bp, sys_len, ref_len.
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
        smoothing: Smoothing::from_name(&args.smooth, args.smooth_value)
            .context("--smooth-value")?,
        lowercase: args.lowercase,
        effective_order: false,
    };
    let (hyps, refs) = read_segments(std::io::stdin().lock(), &args.refs)?;
    let score = corpus_bleu(&hyps, &refs, &config)?;
    let signature = config.signature(refs.len());
    match args.format {
        Format::Text => println!("{}", score.format(&signature)),
        Format::Json => println!("{}", serde_json::to_string(&score.to_json(&signature))?),
    }
    Ok(())
}

/// Hypotheses from `hyps` (stdin) and one stream per reference file, each line right-stripped
/// as sacreBLEU's command line does; every file must have one line per hypothesis.
pub fn read_segments(
    hyps: impl Read,
    ref_paths: &[PathBuf],
) -> Result<(Vec<String>, Vec<Vec<String>>)> {
    let stdin = Path::new("<stdin>");
    let hyps = strip(read_lines_from(hyps, stdin)?);
    if hyps.is_empty() {
        bail!("no hypotheses: stdin is empty (give one hypothesis per line)");
    }
    let mut refs = Vec::with_capacity(ref_paths.len());
    for path in ref_paths {
        let lines = strip(read_lines(path)?);
        if lines.len() != hyps.len() {
            bail!(
                "{} has {} lines but stdin has {} hypotheses: each reference file needs one line per hypothesis",
                path.display(),
                lines.len(),
                hyps.len()
            );
        }
        refs.push(lines);
    }
    Ok((hyps, refs))
}

fn strip(lines: Vec<String>) -> Vec<String> {
    lines
        .into_iter()
        .map(|mut line| {
            line.truncate(py_rstrip(&line).len());
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_count_mismatch_names_the_reference_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ref.txt");
        std::fs::write(&path, "a\nb\n").unwrap();
        let err = read_segments("only one\n".as_bytes(), &[path.clone()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ref.txt has 2 lines but stdin has 1 hypotheses"),
            "{err}"
        );
    }

    #[test]
    fn lines_are_right_stripped_like_sacrebleus_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ref.txt");
        std::fs::write(&path, "x y \r\n").unwrap();
        let (hyps, refs) = read_segments(" a b\t\n".as_bytes(), &[path]).unwrap();
        assert_eq!(
            (hyps, refs),
            (vec![" a b".to_string()], vec![vec!["x y".to_string()]])
        );
    }

    #[test]
    fn invalid_utf8_on_stdin_names_the_line() {
        let input: &[u8] = b"ok\nfine\n\xff\n";
        let err = read_segments(input, &[]).unwrap_err().to_string();
        assert_eq!(err, "<stdin>:3: invalid UTF-8");
    }
}
