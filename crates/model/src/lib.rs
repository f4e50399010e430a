//! attend-model: the Transformer of *Attention Is All You Need* (Vaswani et al., 2017) and the
//! one-layer model of the lecture notes, as Burn modules generic over `B: Backend`, with
//! incremental (key/value-cached) decoding: greedy, beam search and sampling.
//!
//! Start from a [`ModelConfig`] (the `[model]` section of an experiment file; defaults are the
//! paper's base model), check it with [`ModelConfig::validate`], count it with
//! [`params::count`], and build a model with its `init` functions. `docs/math.md` maps each
//! equation to the function that implements it.
//!
//! This crate never names a concrete backend (tests use [`burn_ndarray`] through a
//! `TestBackend` alias) and does no file I/O.

pub mod attention;
pub mod cache;
pub mod config;
pub mod decode;
pub mod decoder;
pub mod embedding;
pub mod encoder;
pub mod feed_forward;
pub mod gelu;
pub mod init;
pub mod lm;
pub mod mask;
pub mod notes;
pub mod params;
pub mod positions;
pub mod seq2seq;
pub mod sublayer;

pub use config::{Activation, Arch, ConfigError, Init, ModelConfig, NormPosition, Positions};
pub use lm::{LanguageModel, LmCache};
pub use notes::{NotesCache, NotesModel};
pub use params::{count, ParamReport};
pub use seq2seq::{Memory, Seq2seqCache, TranslationModel};

/// The backends the tests run on: CPU `burn-ndarray`. A `test-wgpu` feature would swap these
/// two aliases for `burn_wgpu::Wgpu` (as `burn-nn/src/lib.rs` does); every test names only them.
#[cfg(test)]
pub(crate) mod test_backend {
    /// The inference backend of the tests.
    pub type TestBackend = burn_ndarray::NdArray<f32>;
    /// The training (gradient) backend of the tests.
    pub type TestAutodiffBackend = burn::backend::Autodiff<TestBackend>;
}
