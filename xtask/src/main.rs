//! The attend runner (`cargo xtask ...`): parses arguments, then calls the library crates.
//!
//! One file per subcommand; this file only declares the command line and dispatches.
//! See <https://github.com/matklad/cargo-xtask/> for the pattern, and `../shared/DESIGN.md`
//! section 4 for the command-line contract.

mod bench;
mod bpe;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "attend: raw text to a trained, evaluated Transformer")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train, apply or invert a byte-level BPE tokenizer.
    Bpe(bpe::BpeArgs),
    /// Benchmarks: ours beside the peers', measured in the same run (JSON lines on stdout).
    Bench(bench::BenchArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bpe(args) => bpe::run(args),
        Command::Bench(args) => bench::run(args),
    };
    if let Err(err) = result {
        // One line: the outermost context, then each cause.
        let mut line = format!("error: {err}");
        for cause in err.chain().skip(1) {
            line.push_str(&format!(": {cause}"));
        }
        eprintln!("{line}");
        std::process::exit(1);
    }
}
