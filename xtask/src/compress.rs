//! `cargo xtask compress --run DIR < in > out` and `decompress --run DIR < out > in`: the
//! language model as a code (`attend_train::compress`). `compress` reports on stderr its bits
//! per byte beside gzip -9, xz -9 and zstd -19 of the same input and beside the model's own
//! cross-entropy bound.

use std::io::{Read, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use attend_train::compress::{compress, decompress};
use clap::Args;

type B = burn_ndarray::NdArray<f32>;

#[derive(Args)]
pub struct CompressArgs {
    /// The run whose language model codes the text (character or BPE vocabulary).
    #[arg(long)]
    run: PathBuf,
}

fn stdin_bytes() -> Result<Vec<u8>> {
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input).context("reading stdin")?;
    Ok(input)
}

fn peers(input: &[u8]) -> Result<[(&'static str, usize); 3]> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(input)?;
    let gzip = gz.finish()?.len();
    let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 9);
    xz.write_all(input)?;
    let xz = xz.finish()?.len();
    let zstd = zstd::bulk::compress(input, 19)?.len();
    Ok([("gzip -9", gzip), ("xz -9", xz), ("zstd -19", zstd)])
}

pub fn run_compress(args: CompressArgs) -> Result<()> {
    crate::backend::check_model_switches()?;
    let input = stdin_bytes()?;
    let (out, stats) = compress::<B>(&args.run, &input, &Default::default())
        .with_context(|| format!("compressing with {}", args.run.display()))?;
    std::io::stdout().write_all(&out).context("writing stdout")?;
    let per_byte = |bytes: usize| 8.0 * bytes as f64 / input.len().max(1) as f64;
    eprintln!("{} bytes, {} tokens -> {} bytes", input.len(), stats.tokens, out.len());
    eprintln!("{:<10} {:.4} bits/byte", "attend", per_byte(out.len()));
    eprintln!(
        "{:<10} {:.4} bits/byte (the model's cross-entropy, the bound the coder approaches)",
        "model",
        stats.model_bits / input.len().max(1) as f64
    );
    for (name, bytes) in peers(&input)? {
        eprintln!("{name:<10} {:.4} bits/byte", per_byte(bytes));
    }
    Ok(())
}

pub fn run_decompress(args: CompressArgs) -> Result<()> {
    crate::backend::check_model_switches()?;
    let input = stdin_bytes()?;
    let out = decompress::<B>(&args.run, &input, &Default::default())
        .with_context(|| format!("decompressing with {}", args.run.display()))?;
    std::io::stdout().write_all(&out).context("writing stdout")?;
    Ok(())
}
