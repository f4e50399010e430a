//! `cargo xtask eval`: score a trained language model on a split (or a file); with
//! `--dynamic`, the notes' dynamic evaluation beside the static score. Human lines first; the
//! last stdout line is one JSON object (`loss`, `ppl`, `ppl_word`, `bpc`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use attend_metrics::PerplexityReport;
use attend_train::evaluate::{eval_lm, Split};
use clap::{Args, ValueEnum};
use serde_json::json;

#[derive(Args)]
pub struct EvalArgs {
    /// The run directory (its config.toml, vocab.json and weights).
    #[arg(long)]
    run: PathBuf,
    /// Which split of the run's dataset.
    #[arg(long, value_enum, default_value_t = SplitArg::Valid)]
    split: SplitArg,
    /// Score this text file instead of a split.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Add dynamic evaluation (eval.dynamic_segment, eval.dynamic_lr, eval.dynamic_decay).
    #[arg(long)]
    dynamic: bool,
    /// Directory holding the named datasets (default: $ATTEND_DATA_DIR, else data/).
    #[arg(long, env = "ATTEND_DATA_DIR", default_value = "data")]
    data_dir: PathBuf,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SplitArg {
    Valid,
    Test,
}

pub fn run(args: EvalArgs) -> Result<()> {
    type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;
    let split = match args.split {
        SplitArg::Valid => Split::Valid,
        SplitArg::Test => Split::Test,
    };
    let report = eval_lm::<B>(&args.run, &args.data_dir, split, args.data.as_deref(), args.dynamic, &Default::default())
        .with_context(|| format!("evaluating {}", args.run.display()))?;
    print_lines(&format!("{} (static)", report.split), &report.report);
    let mut out = json_of(&report.report);
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

fn print_lines(name: &str, r: &PerplexityReport) {
    println!(
        "{name}: {:.4} nats/token ({:.4} bits), ppl {:.3}, ppl/word {}, bits/char {} over {} tokens",
        r.nats_per_token,
        r.bits_per_token,
        r.ppl,
        r.ppl_word.map_or("-".into(), |p| format!("{p:.3}")),
        r.bits_per_char.map_or("-".into(), |b| format!("{b:.4}")),
        r.tokens
    );
}

fn json_of(r: &PerplexityReport) -> serde_json::Value {
    json!({"loss": r.nats_per_token, "ppl": r.ppl, "ppl_word": r.ppl_word, "bpc": r.bits_per_char, "tokens": r.tokens})
}
