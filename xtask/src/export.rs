//! `cargo xtask export --run DIR --out OUT`: the run's weights as safetensors
//! (`attend_train::export`). A GPT-2-shaped language model becomes a directory that
//! HuggingFace `transformers` loads (`GPT2LMHeadModel.from_pretrained(OUT)`); any other model
//! keeps our parameter names (`name_map.json`), and the command says why.

use std::path::PathBuf;

use anyhow::{Context, Result};
use attend_train::export::export;
use clap::Args;

#[derive(Args)]
pub struct ExportArgs {
    /// The run directory (its config.toml, vocabulary and weights: averaged/, best/ or the last checkpoint).
    #[arg(long)]
    run: PathBuf,
    /// The directory to write.
    #[arg(long)]
    out: PathBuf,
}

pub fn run(args: ExportArgs) -> Result<()> {
    type B = burn_ndarray::NdArray<f32>;
    let exported = export::<B>(&args.run, &args.out, &Default::default())
        .with_context(|| format!("exporting {} to {}", args.run.display(), args.out.display()))?;
    match &exported.not_gpt2 {
        None => {
            println!("GPT-2 layout: GPT2LMHeadModel.from_pretrained({:?}) loads it", args.out.display().to_string())
        }
        Some(why) => println!("not GPT-2-shaped ({why}): our own parameter names, listed in name_map.json"),
    }
    for file in &exported.files {
        println!("wrote {}", file.display());
    }
    if exported.not_gpt2.is_none() && !exported.files.iter().any(|f| f.ends_with("tokenizer.json")) {
        println!("no tokenizer.json: a word vocabulary's <eos> at every line end has no HuggingFace equivalent");
    }
    Ok(())
}
