//! Helpers shared by the training tests (each test binary uses some of them).
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};

use attend_train::Observer;

/// Burn's ndarray random generator (initialization, dropout) is one global: tests that train
/// take turns, or their draws interleave and no run is reproducible.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Stops the run (as Ctrl-C would) after `at` steps.
pub struct StopAt<'a> {
    pub at: u64,
    pub stop: &'a AtomicBool,
}

impl Observer for StopAt<'_> {
    fn step(&mut self, step: u64, _: f64, _: f64, _: f64) {
        if step == self.at {
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

/// A tiny language model on generated text (8 words, each following from the last): the
/// `--set`s training tests share, before their own.
pub fn tiny_lm_sets(own: &[&str]) -> Vec<String> {
    [
        "data.synthetic_size=4000",
        "data.synthetic_vocab=8",
        "data.synthetic_order=1",
        "model.d_model=16",
        "model.n_heads=2",
        "model.n_layers=1",
        "model.d_ff=32",
        "model.block_size=8",
    ]
    .iter()
    .chain(own)
    .map(|s| s.to_string())
    .collect()
}
