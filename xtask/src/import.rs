//! `cargo xtask import --hf DIR --run NEW`: a HuggingFace GPT-2 directory (config.json,
//! model.safetensors, tokenizer.json) as a run that `eval`, `generate` and fine-tuning
//! (`train.init_from`) use (`attend_train::import`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use attend_train::import::import_gpt2;
use clap::Args;

#[derive(Args)]
pub struct ImportArgs {
    /// The GPT-2 directory (as `save_pretrained` writes it).
    #[arg(long)]
    hf: PathBuf,
    /// The run directory to create.
    #[arg(long)]
    run: PathBuf,
}

pub fn run(args: ImportArgs) -> Result<()> {
    type B = burn_ndarray::NdArray<f32>;
    let config = import_gpt2::<B>(&args.hf, &args.run, &Default::default())
        .with_context(|| format!("importing {} as {}", args.hf.display(), args.run.display()))?;
    let m = &config.model;
    println!(
        "imported GPT-2: {} layers, d_model {}, {} heads, context {}, vocabulary {} ({})",
        m.n_layers,
        m.d_model,
        m.n_heads,
        m.block_size,
        config.data.vocab_size,
        toml::Value::try_from(config.data.tokenizer).map_or(String::new(), |v| v.to_string())
    );
    println!("run {}: `cargo xtask generate --run {} --prompt ...`", args.run.display(), args.run.display());
    Ok(())
}
