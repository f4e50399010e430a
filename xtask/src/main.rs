//! The attend runner (`cargo xtask ...`): parses arguments, then calls the library crates.
//!
//! One file per subcommand; this file only declares the command line and dispatches.
//! See <https://github.com/matklad/cargo-xtask/> for the pattern, and `docs/commands.md` for
//! the command-line contract.

mod ablate;
mod backend;
mod baseline;
mod bench;
mod bleu;
mod bpe;
mod chrf;
mod compress;
#[cfg(feature = "cuda")]
mod cuda_device;
mod data;
mod eval;
mod export;
mod generate;
#[cfg(feature = "wgpu")]
mod gpu_adapter;
mod import;
mod kernel_cache;
mod params;
mod pictures;
mod progress;
mod soak;
mod train;
mod translate;

use clap::{Parser, Subcommand};

mod allocator;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "attend: raw text to a trained, evaluated Transformer")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train a model: the embedded default without --config (a small LM on generated text).
    Train(train::TrainArgs),
    /// Score a trained model: LM cross-entropy and perplexities (--dynamic: dynamic evaluation); MT loss, BLEU, chrF.
    Eval(eval::EvalArgs),
    /// Continue a prompt with a trained language model (temperature, top-k, top-p, seed).
    Generate(generate::GenerateArgs),
    /// Translate stdin lines with a trained encoder-decoder (beam search); hypotheses on stdout.
    Translate(translate::TranslateArgs),
    /// Train, apply or invert a byte-level BPE tokenizer.
    Bpe(bpe::BpeArgs),
    /// Benchmarks: ours beside the peers', measured in the same run (JSON lines on stdout).
    Bench(bench::BenchArgs),
    /// Corpus BLEU of the hypotheses on stdin against reference files, as sacreBLEU computes it.
    Bleu(bleu::BleuArgs),
    /// Corpus chrF / chrF++ of the hypotheses on stdin, as sacreBLEU computes it.
    Chrf(chrf::ChrfArgs),
    /// Uniform, unigram and Kneser-Ney n-gram perplexities: the baselines a trained LM must beat.
    Baseline(baseline::BaselineArgs),
    /// Parameter count and forward FLOPs per token of a configured model, without training.
    Params(params::ParamsArgs),
    /// The paper's Table 3: train a base configuration and its variations, one sub-run each; a Markdown table and JSON lines.
    Ablate(ablate::AblateArgs),
    /// Write a run's weights as safetensors: a HuggingFace GPT-2 directory when the model is GPT-2-shaped.
    Export(export::ExportArgs),
    /// Turn a HuggingFace GPT-2 directory into a run (eval, generate, fine-tuning use it).
    Import(import::ImportArgs),
    /// A trained model's attention on a text: one SVG per layer, heads side by side.
    Attention(pictures::AttentionArgs),
    /// Positional encodings as a picture: the sinusoids, or a run's learned table (--run).
    Positions(pictures::PositionsArgs),
    /// Compress stdin to stdout with a language model (arithmetic coding); bits per byte beside gzip, xz, zstd on stderr.
    Compress(compress::CompressArgs),
    /// Invert `compress` with the same run.
    Decompress(compress::CompressArgs),
    /// Download a named public dataset into the data directory, checking every sha256.
    Data(data::DataArgs),
    /// SIGKILL small training runs at chosen moments, resume them, and check that every logged
    /// loss equals an uninterrupted run's.
    Soak(soak::SoakArgs),
}

fn main() {
    progress::mark_launch();
    allocator::keep_freed_memory();
    // The model runs every position-wise map as one `[batch·len, d]` product
    // (attend_model::positionwise), which only matrixmultiply's own threads can split: one
    // matmul thread per core. Measured (docs/benchmarks.md): Multi30k model 1,324 -> 1,741
    // tokens/s against one thread; nanoGPT's CPU model 95-109 -> 90 ms/step.
    // `MATMUL_NUM_THREADS` still overrides.
    if std::env::var_os("MATMUL_NUM_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        std::env::set_var("MATMUL_NUM_THREADS", cores.to_string());
    }
    let cli = Cli::parse();
    let result = on_worker(move || match cli.command {
        Command::Train(args) => train::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Generate(args) => generate::run(args),
        Command::Translate(args) => translate::run(args),
        Command::Bpe(args) => bpe::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Bleu(args) => bleu::run(args),
        Command::Chrf(args) => chrf::run(args),
        Command::Baseline(args) => baseline::run(args),
        Command::Params(args) => params::run(args),
        Command::Data(args) => data::run(args),
        Command::Ablate(args) => ablate::run(args),
        Command::Export(args) => export::run(args),
        Command::Import(args) => import::run(args),
        Command::Attention(args) => pictures::run_attention(args),
        Command::Positions(args) => pictures::run_positions(args),
        Command::Compress(args) => compress::run_compress(args),
        Command::Decompress(args) => compress::run_decompress(args),
        Command::Soak(args) => soak::run(args),
    });
    if let Err(err) = result {
        // One line: the outermost context, then each cause.
        let mut line = format!("error: {err}");
        // (A message that already ends with its cause, as `{path}: {source}` does, does not
        // repeat it.)
        for cause in err.chain().skip(1) {
            let cause = cause.to_string();
            if !line.ends_with(&cause) {
                line.push_str(&format!(": {cause}"));
            }
        }
        eprintln!("{line}");
        std::process::exit(1);
    }
}

/// Runs `job` on one of rayon's worker threads (the pool has a thread per core). The CPU
/// kernels split every operation over the pool: called from the main thread, each split hands
/// the work to the workers and puts the main thread to sleep until they finish (a wake-up per
/// operation, hundreds per training step); called from a worker, that worker takes its share
/// itself. Measured on nanoGPT's CPU model: 6% less wall time, a third less system time
/// (docs/benchmarks.md).
fn on_worker<R: Send>(job: impl FnOnce() -> R + Send) -> R {
    rayon::scope(|_| job())
}
