//! `cargo xtask bench [bpe|bleu|train|parallel|products|all]`: end-to-end figures of ours beside the peers', measured in
//! the same run on the same input (docs/benchmarks.md, Targets). One JSON line per figure on
//! stdout; progress on stderr.
//!
//! Peers are the Python scripts in `../shared/bench/peers/`, run with `--python` (default:
//! `$ATTEND_PEERS_PYTHON`, else `python3`); a peer that is not installed is reported as
//! such, never guessed. Micro-benchmarks are criterion benches (`cargo bench -p attend-bpe`).

mod args;
mod bleu;
mod bpe;
mod ours;
mod overhead;
mod parallel;
mod peers;
mod products;
mod train;

use anyhow::Result;
use clap::ValueEnum;

pub use args::BenchArgs;
use args::Which;
pub use peers::peak_rss_mb;

pub fn run(args: BenchArgs) -> Result<()> {
    let chosen = [
        ("--tiles", &args.tiles),
        ("--lanes", &args.lanes),
        ("--fma", &args.fma),
        ("--addresses", &args.addresses),
        ("--stores", &args.stores),
    ];
    if let Some((flag, _)) = chosen.iter().find(|(_, values)| !values.is_empty()) {
        if args.which != Which::Products {
            let name = args.which.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default();
            anyhow::bail!("{flag} chooses what `bench products` times, not `bench {name}`");
        }
    }
    if matches!(args.which, Which::Bpe | Which::All) {
        bpe::bench_bpe(&args)?;
    }
    if matches!(args.which, Which::Bleu | Which::All) {
        bleu::bench_bleu(&args)?;
    }
    if matches!(args.which, Which::Parallel | Which::All) {
        parallel::bench_parallel(&args)?;
    }
    if args.which == Which::Products {
        products::bench_products(&args)?;
    }
    if matches!(args.which, Which::Train | Which::All) {
        let torch = args.torch_python.clone().unwrap_or_else(|| args.python.clone());
        let args = BenchArgs { torch_python: Some(torch), ..args };
        if args.backend == crate::backend::Backend::Ndarray {
            train::bench_train(&args)?;
        } else {
            eprintln!("bench train: the nanoGPT CPU comparison runs on --backend ndarray only");
        }
        overhead::bench_overhead(&args)?;
    }
    Ok(())
}
