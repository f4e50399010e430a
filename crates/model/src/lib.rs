//! attend-model: the Transformer of *Attention Is All You Need* (Vaswani et al., 2017) and the
//! one-layer model of the lecture notes, as Burn modules generic over `B: Backend`, with
//! incremental (key/value-cached) decoding: greedy, beam search and sampling.
//!
//! Start from a [`ModelConfig`] (the `[model]` section of an experiment file; defaults are the
//! paper's base model), check it with [`ModelConfig::validate`], count it with
//! [`params::count`], and build a model with its `init` functions. `docs/math.md` maps each
//! equation to the function that implements it.
//!
//! The modules never name a concrete backend (tests use `burn-ndarray` through a
//! `TestBackend` alias), and the crate does no file I/O. The one place that names a backend is
//! [`fused`]: its operations run as single-pass kernels on `burn-ndarray`, as CubeCL kernels
//! (our matrix product among them) on burn-wgpu and burn-cuda with or without burn-fusion
//! (features `wgpu`, `cuda`; `ATTEND_GPU_KERNELS` and `ATTEND_GPU_MATMUL` choose), each found
//! by type at run time, and as compositions of Burn's operations on every other backend.
//!
//! ```
//! use attend_model::decode::{greedy, GreedyOptions};
//! use attend_model::{count, ModelConfig};
//! use burn::tensor::{Int, Tensor};
//!
//! // The paper's base model with a shared 37,000-token vocabulary (Table 3 says 65M).
//! assert_eq!(count(&ModelConfig::base(), 37_000).params, 63_082_496);
//!
//! // nanoGPT's CPU configuration on 65 characters, built on the CPU backend.
//! type B = burn_ndarray::NdArray<f32>;
//! let device = Default::default();
//! let lm = ModelConfig::nanogpt_cpu().init_lm::<B>(65, &device);
//! let prompt = Tensor::<B, 2, Int>::from_ints([[1, 2, 3]], &device);
//! assert_eq!(lm.forward(prompt.clone()).dims(), [1, 3, 65]); // next-token logits
//! let options = GreedyOptions { max_new_tokens: 5, eos: None };
//! let continuation = greedy(&lm, lm.empty_cache(), prompt, &options);
//! assert_eq!(continuation[0].len(), 5);
//! ```

pub mod attention;
pub mod cache;
pub mod config;
pub mod decode;
pub mod decoder;
pub mod decoder_only;
pub mod embedding;
pub mod encoder;
mod env_switch;
pub mod feed_forward;
pub mod fused;
pub mod gelu;
pub mod init;
pub mod lm;
pub mod lora;
pub mod mask;
pub mod norm;
pub mod notes;
pub mod params;
pub mod positions;
pub mod positionwise;
pub mod presets;
pub mod projections;
pub mod self_attention;
pub mod seq2seq;
pub mod sublayer;

pub use config::{Activation, Arch, ConfigError, Init, ModelConfig, NormPosition, Positions};
pub use decoder_only::{DecoderOnly, DecoderOnlyCache};
pub use lm::{LanguageModel, LmCache};
pub use notes::{NotesCache, NotesModel};
pub use params::{count, ParamReport};
pub use seq2seq::{Memory, Seq2seqCache, TranslationModel};

/// The backends the unit tests run on: CPU `burn-ndarray`. The kernels' tests on wgpu
/// (`fused/cube/*tests.rs`, feature `test-wgpu`) name their backend themselves.
#[cfg(test)]
pub(crate) mod test_backend {
    /// The inference backend of the tests.
    pub type TestBackend = burn_ndarray::NdArray<f32>;
    /// The training (gradient) backend of the tests.
    pub type TestAutodiffBackend = burn::backend::Autodiff<TestBackend>;
}
