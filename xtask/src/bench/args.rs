//! The arguments of `cargo xtask bench`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::backend::Backend;

#[derive(Args)]
pub struct BenchArgs {
    /// Which benchmarks to run.
    #[arg(value_enum, default_value_t = Which::All)]
    pub which: Which,
    /// The ~100 MB tokenizer corpus; built with make_corpus.py from ../shared/data if absent.
    #[arg(long, default_value = "target/bench/corpus100mb.txt")]
    pub corpus: PathBuf,
    /// The directory `shared/` (with data/ and bench/peers/).
    #[arg(long, env = "ATTEND_SHARED_DIR", default_value = "../shared")]
    pub shared: PathBuf,
    /// Python interpreter that has the peers installed.
    #[arg(long, env = "ATTEND_PEERS_PYTHON", default_value = "python3")]
    pub python: String,
    /// Python interpreter that has PyTorch (the `train` peer); default: --python.
    #[arg(long, env = "ATTEND_TORCH_PYTHON")]
    pub torch_python: Option<String>,
    /// Repetitions of each timed run (minimum and median are reported).
    #[arg(long, default_value_t = 3, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub reps: usize,
    /// Skip the peers (ours only).
    #[arg(long)]
    pub no_peers: bool,
    /// Compute backend of `bench train` (ndarray: the nanoGPT comparison with PyTorch on the
    /// CPU, then the fixed per-step overhead; others: the overhead), `bench products` and
    /// `bench parallel`.
    #[arg(long, value_enum, default_value_t = Backend::Ndarray)]
    pub backend: Backend,
    /// Positions (`batch·len`) of `bench products`' matrices; nanoGPT's GPU configuration has
    /// 16,384 (64 sequences of 256).
    #[arg(long, default_value_t = 16384, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub rows: usize,
    /// Our kernel's tiles `bench products` times beside CubeCL's, comma-separated, each a value
    /// of `ATTEND_GPU_TILE` (`auto,64x128x8,64x128x8w`); default: `auto` and every tile.
    #[arg(long, value_delimiter = ',')]
    pub tiles: Vec<String>,
    /// The placements of our kernel's lanes `bench products` times each tile in, comma-separated
    /// values of `ATTEND_GPU_LANES` (`pairs,rows`); default: the environment's.
    #[arg(long, value_delimiter = ',')]
    pub lanes: Vec<String>,
    /// The forms of our kernel's multiply-adds `bench products` times each tile in,
    /// comma-separated values of `ATTEND_GPU_FMA` (`on,off`); default: the environment's.
    #[arg(long, value_delimiter = ',')]
    pub fma: Vec<String>,
    /// How our kernel addresses its staged operands in the forms `bench products` times each
    /// tile in, comma-separated values of `ATTEND_GPU_ADDRESSES` (`offsets,sums`); default:
    /// the environment's.
    #[arg(long, value_delimiter = ',')]
    pub addresses: Vec<String>,
    /// Where our kernel stores the next step's slice in the forms `bench products` times each
    /// tile in, comma-separated values of `ATTEND_GPU_STORES` (`inline,apart`); default: the
    /// environment's.
    #[arg(long, value_delimiter = ',')]
    pub stores: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Which {
    Bpe,
    Bleu,
    Train,
    /// `train --devices 2` beside one device, and the all-reduces' cost per step.
    Parallel,
    /// The matrix products of nanoGPT's GPU configuration (its linear maps', and attention's
    /// per head), with CubeCL's kernel and ours (`ATTEND_GPU_MATMUL`) under every tile, on
    /// `--backend` (not part of `all`).
    Products,
    All,
}
