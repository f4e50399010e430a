//! attend-train's integration tests as one test binary. Each module is one file of `tests/`;
//! compiled apart, each file linked the whole training stack again (about 3 minutes of release
//! build a file on 2 cores, most of CI's time). `cpu_workers` (it sets environment variables,
//! which no other test may read meanwhile) and `half_precision` (wgpu) stay binaries of their
//! own (`Cargo.toml`'s `[[test]]` list).

mod common;

mod ablate;
mod bpe_lm;
mod checkpoint_integrity;
mod compress;
mod data_parallel;
mod end_to_end;
mod export;
mod fetch;
mod finetune;
mod import;
mod mlm;
mod numerics;
mod options;
mod pictures;
mod translation;
