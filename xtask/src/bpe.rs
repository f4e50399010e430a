//! `cargo xtask bpe train|encode|decode`: the byte-level BPE tokenizer from the command line.

use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use attend_bpe::{Tokenizer, Trainer, TrainerConfig};
use clap::{Args, Subcommand};

#[derive(Args)]
pub struct BpeArgs {
    #[command(subcommand)]
    command: BpeCommand,
}

#[derive(Subcommand)]
enum BpeCommand {
    /// Train a tokenizer on UTF-8 text files (plain or .gz) and save it as tokenizer.json.
    Train {
        /// Training text files, read line by line.
        #[arg(long = "input", required = true, num_args = 1..)]
        inputs: Vec<PathBuf>,
        /// Vocabulary size, special tokens and the 256 byte tokens included (byte-level BPE).
        #[arg(long, required_unless_present = "classic")]
        vocab_size: Option<usize>,
        /// Sennrich's classic BPE instead (subword-nmt): whitespace words, `</w>` at each word's
        /// end, `--merges` merges; writes a codes file beside tokenizer.json.
        #[arg(long, requires = "merges", conflicts_with_all = ["vocab_size", "special"])]
        classic: bool,
        /// Classic BPE: the number of merges to learn.
        #[arg(long)]
        merges: Option<usize>,
        /// Classic BPE: where to write subword-nmt's codes file (default: the output with `.codes`).
        #[arg(long)]
        codes: Option<PathBuf>,
        /// Where to write tokenizer.json (written atomically).
        #[arg(long)]
        output: PathBuf,
        /// Merge a pair only if it occurs at least this often.
        #[arg(long, default_value_t = 2)]
        min_frequency: u64,
        /// Special tokens, given ids 0, 1, ... in this order.
        #[arg(long = "special", num_args = 1..)]
        special: Vec<String>,
    },
    /// Encode: each stdin line, without its newline, becomes one line of space-separated ids.
    Encode {
        #[arg(long)]
        tokenizer: PathBuf,
    },
    /// Decode: each stdin line of space-separated ids becomes one line of text.
    Decode {
        #[arg(long)]
        tokenizer: PathBuf,
    },
}

/// Lines encoded per parallel batch.
const BATCH_LINES: usize = 1 << 14;

pub fn run(args: BpeArgs) -> Result<()> {
    match args.command {
        BpeCommand::Train { inputs, classic: true, merges, codes, output, min_frequency, .. } => {
            train_classic(&inputs, merges.unwrap_or(0), min_frequency, &output, codes)
        }
        BpeCommand::Train { merges: Some(_), .. } | BpeCommand::Train { codes: Some(_), .. } => {
            bail!("--merges and --codes are classic BPE's: add --classic, or train byte-level BPE with --vocab-size alone")
        }
        BpeCommand::Train { inputs, vocab_size, output, min_frequency, special, .. } => {
            let vocab_size = vocab_size.context("--vocab-size is required (or --classic with --merges)")?;
            let started = std::time::Instant::now();
            let trainer =
                Trainer::new(TrainerConfig { vocab_size, min_frequency, special_tokens: special, show_progress: true })
                    .context("--vocab-size / --special")?;
            let tokenizer = trainer.train_files(&inputs)?;
            tokenizer.save(&output)?;
            let seconds = started.elapsed().as_secs_f64();
            let rss = crate::bench::peak_rss_mb();
            eprintln!(
                "trained {} tokens ({} merges) in {seconds:.2} s, peak RSS {}; wrote {}",
                tokenizer.vocab_size(),
                tokenizer.merges().len(),
                rss.map_or("unknown".into(), |mb| format!("{mb:.0} MB")),
                output.display()
            );
            if std::env::var_os("ATTEND_BENCH_JSON").is_some() {
                let report = serde_json::json!({"train_s": seconds, "peak_rss_mb": rss,
                                                "vocab": tokenizer.vocab_size()});
                println!("{report}");
            }
            Ok(())
        }
        BpeCommand::Encode { tokenizer } => encode(&Tokenizer::load(&tokenizer)?),
        BpeCommand::Decode { tokenizer } => decode(&Tokenizer::load(&tokenizer)?),
    }
}

/// Classic BPE (`attend_bpe::classic`): the codes file and the HuggingFace tokenizer.json.
fn train_classic(
    inputs: &[PathBuf],
    merges: usize,
    min_frequency: u64,
    output: &Path,
    codes: Option<PathBuf>,
) -> Result<()> {
    let codes = codes.unwrap_or_else(|| output.with_extension("codes"));
    if codes == output {
        anyhow::bail!(
            "the codes file and --output would both be {}: the one would be written over (give --codes another name)",
            output.display()
        );
    }
    let mut text = String::new();
    // Plain or gzipped, as the byte-level trainer reads them; a line that is not UTF-8 is named.
    for input in inputs {
        for line in attend_metrics::lines::read_lines(input)? {
            text.push_str(&line);
            text.push('\n');
        }
    }
    let bpe = attend_bpe::classic::learn(&text, merges, min_frequency);
    bpe.save(&codes, output)?;
    eprintln!(
        "learned {} merges over {} symbols; wrote {} and {}",
        bpe.merges.len(),
        bpe.alphabet.len(),
        codes.display(),
        output.display()
    );
    Ok(())
}

/// Reads stdin line by line; `line_no` counts from 1. Invalid UTF-8 names the line.
fn stdin_lines() -> impl Iterator<Item = Result<(usize, String)>> {
    std::io::stdin()
        .lock()
        .lines()
        .enumerate()
        .map(|(i, line)| line.with_context(|| format!("stdin line {}: expected UTF-8 text", i + 1)).map(|l| (i + 1, l)))
}

fn encode(tokenizer: &Tokenizer) -> Result<()> {
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut batch = Vec::with_capacity(BATCH_LINES);
    let flush = |batch: &mut Vec<String>, out: &mut BufWriter<_>| -> Result<()> {
        for ids in tokenizer.encode_batch(batch) {
            write_ids(out, &ids)?;
        }
        batch.clear();
        Ok(())
    };
    for line in stdin_lines() {
        batch.push(line?.1);
        if batch.len() == BATCH_LINES {
            flush(&mut batch, &mut out)?;
        }
    }
    flush(&mut batch, &mut out)?;
    out.flush()?;
    Ok(())
}

fn write_ids(out: &mut impl Write, ids: &[u32]) -> std::io::Result<()> {
    let mut line = String::with_capacity(ids.len() * 6);
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        line.push_str(&id.to_string());
    }
    line.push('\n');
    out.write_all(line.as_bytes())
}

fn decode(tokenizer: &Tokenizer) -> Result<()> {
    let mut out = BufWriter::new(std::io::stdout().lock());
    for line in stdin_lines() {
        let (line_no, line) = line?;
        let ids = line
            .split_ascii_whitespace()
            .map(|s| s.parse::<u32>().map_err(|_| s))
            .collect::<std::result::Result<Vec<u32>, &str>>();
        let ids = match ids {
            Ok(ids) => ids,
            Err(bad) => bail!("stdin line {line_no}: {bad:?} is not a token id"),
        };
        let text = tokenizer.decode(&ids).with_context(|| format!("stdin line {line_no}"))?;
        out.write_all(text.as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}
