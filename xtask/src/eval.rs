//! `cargo xtask eval`: score a trained model on a split. Language models (or a text file with
//! `--data`): cross-entropy and perplexities; with `--dynamic`, the notes' dynamic evaluation
//! beside the static score; with `--context-window N`, the static score gives each token at least
//! `N` tokens of context (overlapping windows, as fairseq's `eval_lm`). Translation models: teacher-forced loss, then BLEU (cased and
//! lowercased) and chrF of beam-search translations of the split. Human lines first; the last
//! stdout line is one JSON object (`loss`, `ppl`, `ppl_word`, `bpc`, `bits_per_byte`; MT: `bleu`, `signature`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use attend_metrics::PerplexityReport;
use attend_model::Arch;
use attend_train::config::RunConfig;
use attend_train::evaluate::{eval_lm, Split};
use attend_train::mlm_eval::eval_mlm;
use attend_train::mt_eval::eval_mt;
use attend_train::translate::TranslateOptions;
use burn::tensor::backend::AutodiffBackend;
use clap::{Args, ValueEnum};
use serde_json::json;

use crate::backend::{run_on, Backend, OnBackend};

#[derive(Args)]
pub struct EvalArgs {
    /// The run directory (its config.toml, vocabulary and weights).
    #[arg(long)]
    run: PathBuf,
    /// Which split of the run's dataset.
    #[arg(long, value_enum, default_value_t = SplitArg::Valid)]
    split: SplitArg,
    /// Score this text file instead of a split.
    #[arg(long, conflicts_with = "split")]
    data: Option<PathBuf>,
    /// Add dynamic evaluation (eval.dynamic_segment, eval.dynamic_lr, eval.dynamic_decay).
    #[arg(long)]
    dynamic: bool,
    /// Language models: score each token after the first block from at least N tokens before
    /// it (overlapping windows; at most model.block_size; default 0: non-overlapping blocks).
    #[arg(long, value_name = "N", default_value_t = 0)]
    context_window: usize,
    /// Translation: beam width (default: the run's decode.beam).
    #[arg(long)]
    beam: Option<usize>,
    /// Translation: length penalty α (default: the run's decode.lenpen).
    #[arg(long)]
    lenpen: Option<f64>,
    /// Directory holding the named datasets (default: $ATTEND_DATA_DIR, else data/).
    #[arg(long, env = "ATTEND_DATA_DIR", default_value = "data")]
    data_dir: PathBuf,
    /// Compute backend.
    #[arg(long, value_enum, default_value_t = Backend::Ndarray)]
    backend: Backend,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SplitArg {
    Valid,
    Test,
}

pub fn run(args: EvalArgs) -> Result<()> {
    run_on(args.backend, args)
}

impl OnBackend for EvalArgs {
    type Output = ();
    fn run<B: AutodiffBackend>(self, device: &B::Device) -> Result<()> {
        eval_on::<B>(&self, device)
    }
}

fn eval_on<B: AutodiffBackend>(args: &EvalArgs, device: &B::Device) -> Result<()> {
    let split = match args.split {
        SplitArg::Valid => Split::Valid,
        SplitArg::Test => Split::Test,
    };
    let config_path = args.run.join("config.toml");
    let config =
        RunConfig::from_resolved(&config_path).with_context(|| format!("evaluating {}", args.run.display()))?;
    if config.model.arch == Arch::Seq2seq {
        return run_mt::<B::InnerBackend>(args, &config, split, device);
    }
    if config.model.arch == Arch::Encoder {
        return run_mlm::<B::InnerBackend>(args, split, device);
    }
    if args.beam.is_some() || args.lenpen.is_some() {
        anyhow::bail!("--beam and --lenpen apply to translation runs; {} is a language model", args.run.display());
    }
    let report =
        eval_lm::<B>(&args.run, &args.data_dir, split, args.data.as_deref(), args.dynamic, args.context_window, device)
            .with_context(|| format!("evaluating {}", args.run.display()))?;
    let how = match report.context_window {
        0 => "static".to_string(),
        n => format!("static, context window {n}"),
    };
    print_lines(&format!("{} ({how})", report.split), &report.report);
    let mut out = json_of(&report.report);
    out["context_window"] = json!(report.context_window);
    if let Some(source) = report.source {
        print_source(Some(source.entropy_rate), source.loss, report.report.nats_per_token, |label| {
            format!("{label}: ")
        });
        out["entropy_rate"] = json!(source.entropy_rate);
        out["source_loss"] = json!(source.loss);
    }
    if let Some((same, dynamic)) = &report.dynamic {
        print_lines("static, same segments", same);
        print_lines("dynamic", dynamic);
        out["static_segment_ppl"] = json!(same.ppl);
        out["dynamic_loss"] = json!(dynamic.nats_per_token);
        out["dynamic_ppl"] = json!(dynamic.ppl);
        out["dynamic_ppl_word"] = json!(dynamic.ppl_word);
    }
    out["split"] = json!(report.split);
    println!("{out}");
    Ok(())
}

fn run_mt<B: burn::tensor::backend::Backend>(
    args: &EvalArgs,
    config: &RunConfig,
    split: Split,
    device: &B::Device,
) -> Result<()> {
    if args.dynamic || args.data.is_some() || args.context_window > 0 {
        anyhow::bail!(
            "{} is a translation run: --dynamic, --data and --context-window are for language models; eval scores its --split (valid or test); for other files pipe `cargo xtask translate` into `cargo xtask bleu`",
            args.run.display()
        );
    }
    let mut options = TranslateOptions::from(&config.decode);
    options.beam = args.beam.unwrap_or(options.beam);
    options.lenpen = args.lenpen.unwrap_or(options.lenpen);
    options.check()?;
    let report = eval_mt::<B>(&args.run, &args.data_dir, split, Some(options), device)
        .with_context(|| format!("evaluating {}", args.run.display()))?;
    let s = &report.scores;
    println!("weights: {}", report.weights);
    println!(
        "{}: {:.4} nats/target token, ppl {:.3} over {} tokens (teacher-forced)",
        report.split,
        report.loss,
        report.loss.exp(),
        report.tokens
    );
    println!("beam {}, length penalty {}: {} sentences", options.beam, options.lenpen, report.sentences);
    println!("BLEU = {:.2} ({})", s.bleu, s.signature);
    println!("BLEU = {:.2} ({})", s.bleu_lowercase, s.signature_lowercase);
    println!("chrF2 = {:.2} ({})", s.chrf, s.chrf_signature);
    let out = json!({"split": report.split, "loss": report.loss, "ppl": report.loss.exp(), "ppl_word": null, "bpc": null, "bits_per_byte": null,
                     "tokens": report.tokens, "bleu": s.bleu, "signature": s.signature,
                     "bleu_lowercase": s.bleu_lowercase, "signature_lowercase": s.signature_lowercase,
                     "chrf": s.chrf, "chrf_signature": s.chrf_signature, "beam": options.beam, "lenpen": options.lenpen});
    println!("{out}");
    Ok(())
}

/// A masked LM: loss, perplexity and accuracy on the masked positions (fixed masking seed),
/// beside the most-frequent-token baseline.
fn run_mlm<B: burn::tensor::backend::Backend>(args: &EvalArgs, split: Split, device: &B::Device) -> Result<()> {
    if args.dynamic || args.beam.is_some() || args.lenpen.is_some() || args.context_window > 0 {
        anyhow::bail!(
            "--dynamic, --context-window, --beam and --lenpen do not apply to a masked LM ({})",
            args.run.display()
        );
    }
    let (name, s) = eval_mlm::<B>(&args.run, &args.data_dir, split, args.data.as_deref(), device)
        .with_context(|| format!("evaluating {}", args.run.display()))?;
    println!(
        "{name}: {:.4} nats per masked token, ppl {:.3}, accuracy {:.2}% over {} masked positions",
        s.loss(),
        s.loss().exp(),
        100.0 * s.accuracy(),
        s.predicted
    );
    println!("baseline (always the most frequent training token): accuracy {:.2}%", 100.0 * s.baseline_accuracy());
    let out = json!({"split": name, "masked_loss": s.loss(), "masked_ppl": s.loss().exp(),
                     "masked_accuracy": s.accuracy(), "baseline_accuracy": s.baseline_accuracy(),
                     "masked_tokens": s.predicted, "loss": s.loss(), "ppl": s.loss().exp(),
                     "ppl_word": null, "bpc": null, "bits_per_byte": null});
    println!("{out}");
    Ok(())
}

fn print_lines(name: &str, r: &PerplexityReport) {
    println!(
        "{name}: {:.4} nats/token ({:.4} bits), ppl {:.3}, ppl/word {}, bits/char {}, bits/byte {} over {} tokens",
        r.nats_per_token,
        r.bits_per_token,
        r.ppl,
        r.ppl_word.map_or("-".into(), |p| format!("{p:.3}")),
        r.bits_per_char.map_or("-".into(), |b| format!("{b:.4}")),
        r.bits_per_byte.map_or("-".into(), |b| format!("{b:.4}")),
        r.tokens
    );
}

/// Generated data: the source's entropy rate and its own loss on the split, each beside the
/// model's `loss`; `label` lays out each line's name (`train`'s column, `eval`'s colon).
pub(crate) fn print_source(
    entropy_rate: Option<f64>,
    source_loss: Option<f64>,
    loss: f64,
    label: impl Fn(&str) -> String,
) {
    let above = |h: f64| 100.0 * (loss - h) / h;
    if let Some(h) = entropy_rate {
        let name = label("entropy rate");
        println!("{name}{h:.4} nats/token (the source's; ppl {:.3}): the model is {:.1}% above it", h.exp(), above(h));
    }
    if let Some(h) = source_loss {
        let name = label("source's loss");
        println!(
            "{name}{h:.4} nats/token on this split (a perfect model's score here): the model is {:.1}% above it",
            above(h)
        );
    }
}

fn json_of(r: &PerplexityReport) -> serde_json::Value {
    json!({"loss": r.nats_per_token, "ppl": r.ppl, "ppl_word": r.ppl_word, "bpc": r.bits_per_char,
           "bits_per_byte": r.bits_per_byte, "tokens": r.tokens})
}
