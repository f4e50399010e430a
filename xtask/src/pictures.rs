//! `cargo xtask attention` and `cargo xtask positions`: attention weights on a text, one SVG
//! per layer with the heads side by side, and positional encodings as a picture
//! (`attend_train::pictures`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use attend_train::pictures::{attention, learned_panel, sinusoid_panel, write_positions};
use clap::Args;

type B = burn_ndarray::NdArray<f32>;

#[derive(Args)]
pub struct AttentionArgs {
    /// The run directory.
    #[arg(long)]
    run: PathBuf,
    /// The text (a translation model's target side, read with teacher forcing).
    #[arg(long)]
    text: String,
    /// Translation models: the source sentence.
    #[arg(long)]
    source: Option<String>,
    /// The directory to write the SVG files into.
    #[arg(long)]
    out: PathBuf,
}

pub fn run_attention(args: AttentionArgs) -> Result<()> {
    crate::backend::check_model_switches()?;
    let files = attention::<B>(&args.run, &args.text, args.source.as_deref(), &args.out, &Default::default())
        .with_context(|| format!("drawing the attention of {}", args.run.display()))?;
    for file in files {
        println!("wrote {}", file.display());
    }
    Ok(())
}

#[derive(Args)]
pub struct PositionsArgs {
    /// Width of the sinusoidal encodings (default 128; a run's table has its own).
    #[arg(long, conflicts_with = "run")]
    d_model: Option<usize>,
    /// Positions to draw (default: 100 sinusoids, or the whole of a run's table).
    #[arg(long)]
    len: Option<usize>,
    /// Draw this run's learned position table instead of the sinusoids.
    #[arg(long)]
    run: Option<PathBuf>,
    /// The SVG file to write.
    #[arg(long)]
    out: PathBuf,
}

pub fn run_positions(args: PositionsArgs) -> Result<()> {
    let d_model = args.d_model.unwrap_or(128);
    if d_model == 0 || args.len == Some(0) {
        anyhow::bail!("--d-model and --len must be at least 1");
    }
    // One cell a position and dimension: past this the picture is neither drawable nor readable.
    const MOST: usize = 4096;
    if d_model > MOST || args.len.is_some_and(|len| len > MOST) {
        anyhow::bail!("--d-model {d_model} --len {:?}: at most {MOST} each (one cell of the picture each)", args.len);
    }
    let panel = match &args.run {
        Some(run) => learned_panel::<B>(run, args.len, &Default::default())
            .with_context(|| format!("reading the positions of {}", run.display()))?,
        None => sinusoid_panel(d_model, args.len.unwrap_or(100)),
    };
    write_positions(&panel, &args.out)?;
    println!("wrote {} ({} positions x {} dimensions)", args.out.display(), panel.rows.len(), panel.cols.len());
    Ok(())
}
