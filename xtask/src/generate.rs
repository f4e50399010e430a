//! `cargo xtask generate`: continue a prompt with a trained language model.

use std::path::PathBuf;

use anyhow::{Context, Result};
use attend_train::generate::{generate, GenerateOptions};
use burn::tensor::backend::AutodiffBackend;
use clap::Args;

use crate::backend::{run_on, Backend, OnBackend};

#[derive(Args)]
pub struct GenerateArgs {
    /// The run directory.
    #[arg(long)]
    run: PathBuf,
    /// Text to continue (in the run's vocabulary).
    #[arg(long)]
    prompt: String,
    /// Tokens to generate.
    #[arg(long, default_value_t = 200)]
    max_tokens: usize,
    /// Softmax temperature; 0 is greedy.
    #[arg(long, default_value_t = 1.0)]
    temperature: f64,
    /// Sample among the k most likely tokens only.
    #[arg(long)]
    top_k: Option<usize>,
    /// Nucleus sampling: the smallest set of tokens with this much probability.
    #[arg(long)]
    top_p: Option<f64>,
    /// Seed of the sampling stream.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Compute backend.
    #[arg(long, value_enum, default_value_t = Backend::Ndarray)]
    backend: Backend,
}

pub fn run(args: GenerateArgs) -> Result<()> {
    if !args.temperature.is_finite() || args.temperature < 0.0 {
        anyhow::bail!("--temperature {}: expected a finite non-negative number (0 is greedy)", args.temperature);
    }
    if args.top_k == Some(0) {
        anyhow::bail!("--top-k 0: expected at least 1 (leave it out to sample from every token)");
    }
    if let Some(p) = args.top_p {
        if !(p > 0.0 && p <= 1.0) {
            anyhow::bail!("--top-p {p}: expected a number in (0, 1]");
        }
    }
    if args.temperature == 0.0 && (args.top_k.is_some() || args.top_p.is_some()) {
        anyhow::bail!("--temperature 0 is greedy, which --top-k and --top-p do not change: drop them, or sample at a temperature above 0");
    }
    run_on(args.backend, args)
}

impl OnBackend for GenerateArgs {
    type Output = ();
    fn run<B: AutodiffBackend>(self, device: &B::Device) -> Result<()> {
        generate_on::<B::InnerBackend>(self, device)
    }
}

fn generate_on<B: burn::tensor::backend::Backend>(args: GenerateArgs, device: &B::Device) -> Result<()> {
    let options = GenerateOptions {
        max_tokens: args.max_tokens,
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        seed: args.seed,
    };
    let text = generate::<B>(&args.run, &args.prompt, &options, device)
        .with_context(|| format!("generating from {}", args.run.display()))?;
    println!("{text}");
    Ok(())
}
