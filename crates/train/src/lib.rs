//! # attend-train: from text files to a trained, evaluated Transformer
//!
//! Wires the other crates together: datasets and their tokenization (characters, words, or
//! `attend-bpe`), batching, the TOML run configuration, learning-rate schedules, the training loops,
//! checkpoints, and evaluation with `attend-metrics`. Models come from
//! `attend-model`. See docs/commands.md (configuration, datasets), docs/architecture.md (the
//! run directory) and docs/math.md (generated data).

pub mod ablate;
mod accumulate;
pub mod arith;
pub mod asgd;
pub mod average;
pub mod awake;
pub mod base_run;
pub mod batched_adamw;
pub mod checkpoint;
pub mod clip;
pub mod compress;
pub mod config;
pub mod data;
pub mod error;
pub mod evaluate;
pub mod export;
pub mod finetune;
pub mod fit;
pub mod generate;
pub mod grouped_adamw;
pub mod heatmap;
pub mod import;
pub mod lm_eval;
pub mod metrics_log;
pub mod mlm_eval;
pub mod mt_eval;
pub mod objective;
pub mod one_pass_adam;
pub mod optimizer;
pub mod parallel;
pub mod pictures;
pub mod plot;
pub mod precision;
pub mod product_bench;
pub mod rng;
pub mod run;
pub mod schedule;
pub mod soak;
pub mod task;
pub mod tasks;
pub mod tfevents;
pub mod trained;
pub mod translate;
mod vocab_check;
pub mod whole_file;

pub use error::TrainError;
pub use run::{Observer, RunOptions, Summary};
pub use tasks::{train, Trained};
