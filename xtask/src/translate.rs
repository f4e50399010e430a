//! `cargo xtask translate`: one source sentence per stdin line, one hypothesis per stdout
//! line, in order, and nothing else on stdout (so that it pipes into `cargo xtask bleu`).

use std::io::{BufRead, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use attend_train::translate::{load_mt_run, translate, TranslateOptions};
use burn::tensor::backend::AutodiffBackend;
use clap::Args;

use crate::backend::{run_on, Backend, OnBackend};

#[derive(Args)]
pub struct TranslateArgs {
    /// The run directory of a translation model.
    #[arg(long)]
    run: PathBuf,
    /// Beam width (default: the run's decode.beam).
    #[arg(long)]
    beam: Option<usize>,
    /// GNMT length-penalty exponent α (default: the run's decode.lenpen).
    #[arg(long)]
    lenpen: Option<f64>,
    /// Output length limit a · source_len + b: the a (source_len: the longest source of its
    /// batch, as fairseq's).
    #[arg(long)]
    max_len_a: Option<f64>,
    /// The b of the length limit.
    #[arg(long)]
    max_len_b: Option<usize>,
    /// Compute backend.
    #[arg(long, value_enum, default_value_t = Backend::Ndarray)]
    backend: Backend,
}

pub fn run(args: TranslateArgs) -> Result<()> {
    run_on(args.backend, args)
}

impl OnBackend for TranslateArgs {
    type Output = ();
    fn run<B: AutodiffBackend>(self, device: &B::Device) -> Result<()> {
        translate_on::<B::InnerBackend>(self, device)
    }
}

fn translate_on<B: burn::tensor::backend::Backend>(args: TranslateArgs, device: &B::Device) -> Result<()> {
    let trained = load_mt_run::<B>(&args.run, device).with_context(|| format!("loading {}", args.run.display()))?;
    let mut options = TranslateOptions::from(&trained.config.decode);
    options.beam = args.beam.unwrap_or(options.beam);
    options.lenpen = args.lenpen.unwrap_or(options.lenpen);
    options.max_len_a = args.max_len_a.unwrap_or(options.max_len_a);
    options.max_len_b = args.max_len_b.unwrap_or(options.max_len_b);
    options.check()?;
    let lines: Vec<String> = std::io::stdin()
        .lock()
        .lines()
        .enumerate()
        .map(|(i, l)| l.with_context(|| format!("stdin line {}: expected UTF-8 text", i + 1)))
        .collect::<Result<_>>()?;
    let sources: Vec<&str> = lines.iter().map(String::as_str).collect();
    let hyps = translate(&trained.model, &trained.tokenizer, &sources, &options, device).context("stdin")?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for h in hyps {
        writeln!(out, "{h}")?;
    }
    out.flush()?;
    Ok(())
}
