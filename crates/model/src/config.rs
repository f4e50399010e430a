//! The model configuration: the `[model]` section of an experiment's TOML file, as a plain
//! serde struct whose defaults are the paper's base model (Vaswani et al. 2017, Table 3).
//!
//! The vocabulary size is not part of it: it belongs to `[data] vocab_size`, so every function
//! that needs it takes it as an argument. This crate reads no files; the runner parses the TOML
//! and hands the `[model]` table to serde.

use serde::{Deserialize, Serialize};

/// Which model to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// Decoder-only language model (GPT-style): causal self-attention blocks.
    Lm,
    /// Encoder-decoder translation model (the paper's Figure 1).
    Seq2seq,
    /// The one-layer model of the lecture notes, implemented literally (see [`crate::notes`]).
    /// It reads `d_model`, `d_ff`, `positions`, `activation`, `bias`, `scale_embeddings`,
    /// `init` and `block_size`; it has no residual, LayerNorm or dropout, so `norm`,
    /// `norm_eps` and the dropouts do not apply, and it requires `n_heads = n_layers = 1` and
    /// `tie_embeddings = true`.
    Notes,
}

/// Where each sub-layer's LayerNorm sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NormPosition {
    /// `LayerNorm(x + Sublayer(x))`, the paper (section 3.1).
    Post,
    /// `x + Sublayer(LayerNorm(x))`, plus a final LayerNorm after the stack (GPT-2, nanoGPT).
    Pre,
}

/// How token positions enter the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Positions {
    /// Fixed `sin`/`cos` table added to the embeddings (paper section 3.5).
    Sinusoidal,
    /// A learned `[block_size, d_model]` table (paper Table 3 row E; GPT-2, nanoGPT).
    Learned,
    /// No positional information (used by the invariance tests).
    None,
}

/// The non-linearity between the two linear maps of the feed-forward network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    /// `max(0, x)`, the paper (section 3.3).
    Relu,
    /// Exact GELU `x·Φ(x)` with the erf form (GPT-2, nanoGPT); see [`crate::gelu`].
    Gelu,
}

/// How parameters are initialized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Init {
    /// Burn's defaults: `Linear` Kaiming-uniform (bias too), `Embedding` `N(0, 1)`.
    Burn,
    /// Xavier/Glorot uniform matrices, zero biases, embeddings `N(0, d_model^-1/2)` (the
    /// annotated Transformer's and fairseq's choice; with √d_model scaling the scaled
    /// embeddings are `N(0, 1)`).
    Xavier,
    /// GPT-2: every matrix and embedding `N(0, 0.02)`, zero biases, and the residual output
    /// projections (attention `Wᴼ`, FFN `W₂`) `N(0, 0.02/√(2·n_layers))`.
    Gpt2,
}

/// The `[model]` section. Every field is optional in a file; a missing field takes the
/// paper's base-model value (Table 3, "base") unless its doc says otherwise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelConfig {
    /// Which model to build. Default `seq2seq` (the paper's encoder-decoder).
    pub arch: Arch,
    /// Width of the residual stream, `d_model`. Default 512 (paper Table 3, base).
    pub d_model: usize,
    /// Number of attention heads `h`; `d_k = d_v = d_model / h`. Default 8 (Table 3, base).
    pub n_heads: usize,
    /// Number of layers `N` in each stack (encoder and decoder alike). Default 6 (Table 3).
    pub n_layers: usize,
    /// Inner width of the feed-forward network, `d_ff`. Default 2048 (Table 3, base).
    pub d_ff: usize,
    /// Dropout `P_drop` on each sub-layer output and on embeddings + positions. Default 0.1
    /// (paper section 5.4).
    pub dropout: f64,
    /// Dropout on the attention weights (after the softmax). Default 0.0: the paper does not
    /// use it; tensor2tensor and nanoGPT offer it.
    pub attention_dropout: f64,
    /// LayerNorm placement. Default `post` (paper section 3.1).
    pub norm: NormPosition,
    /// Epsilon of every LayerNorm. Default 1e-5 (PyTorch's and nanoGPT's; the paper is silent).
    pub norm_eps: f64,
    /// Positional encoding. Default `sinusoidal` (paper section 3.5).
    pub positions: Positions,
    /// FFN non-linearity. Default `relu` (paper section 3.3).
    pub activation: Activation,
    /// Bias terms in the linear maps and the LayerNorms. Default true (paper eq. 2 has
    /// `b₁`, `b₂`); nanoGPT's `bias = False` turns both off.
    pub bias: bool,
    /// One matrix for the target embedding and the pre-softmax projection. Default true
    /// (paper section 3.4).
    pub tie_embeddings: bool,
    /// One matrix for the source and target embeddings (a shared vocabulary; seq2seq only).
    /// Default true (paper section 3.4, shared BPE vocabulary of ~37,000 tokens).
    pub share_embeddings: bool,
    /// Multiply embeddings by √d_model. Default true (paper section 3.4); nanoGPT and the
    /// notes' model do not.
    pub scale_embeddings: bool,
    /// Parameter initialization. Default `xavier` (the paper is silent; the annotated
    /// Transformer uses Xavier-uniform).
    pub init: Init,
    /// Longest sequence the model is built for: the learned position table's length, and the
    /// context length used for FLOPs per token. Default 512 (our choice; the paper is silent).
    pub block_size: usize,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self::base()
    }
}

impl ModelConfig {
    /// The paper's base model (Table 3): N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1,
    /// post-norm, sinusoidal positions, ReLU, shared and tied embeddings scaled by √d_model.
    pub fn base() -> Self {
        Self {
            arch: Arch::Seq2seq,
            d_model: 512,
            n_heads: 8,
            n_layers: 6,
            d_ff: 2048,
            dropout: 0.1,
            attention_dropout: 0.0,
            norm: NormPosition::Post,
            norm_eps: 1e-5,
            positions: Positions::Sinusoidal,
            activation: Activation::Relu,
            bias: true,
            tie_embeddings: true,
            share_embeddings: true,
            scale_embeddings: true,
            init: Init::Xavier,
            block_size: 512,
        }
    }

    /// The paper's big model (Table 3): d_model=1024, d_ff=4096, h=16, P_drop=0.3 (EN-DE).
    pub fn big() -> Self {
        Self { d_model: 1024, n_heads: 16, d_ff: 4096, dropout: 0.3, ..Self::base() }
    }

    /// The one-layer model of the lecture notes: a single head, no residual, no LayerNorm,
    /// `O = ReLU(ReLU(hW₁)W₂)`, `Õ = OEᵀ`; no biases, no embedding scaling, no dropout.
    pub fn notes() -> Self {
        Self {
            arch: Arch::Notes,
            d_model: 64,
            n_heads: 1,
            n_layers: 1,
            d_ff: 256,
            dropout: 0.0,
            bias: false,
            scale_embeddings: false,
            init: Init::Gpt2,
            block_size: 128,
            ..Self::base()
        }
    }

    /// nanoGPT's CPU configuration for tiny Shakespeare (`n_layer=4, n_head=4, n_embd=128,
    /// block_size=64, bias=False, dropout=0.0`): pre-norm, learned positions, final LayerNorm,
    /// tied weights, GELU, GPT-2 initialization.
    pub fn nanogpt_cpu() -> Self {
        Self {
            arch: Arch::Lm,
            d_model: 128,
            n_heads: 4,
            n_layers: 4,
            d_ff: 4 * 128,
            dropout: 0.0,
            norm: NormPosition::Pre,
            positions: Positions::Learned,
            activation: Activation::Gelu,
            bias: false,
            tie_embeddings: true,
            scale_embeddings: false,
            init: Init::Gpt2,
            block_size: 64,
            ..Self::base()
        }
    }

    /// `d_k = d_v = d_model / n_heads`.
    pub fn d_head(&self) -> usize {
        self.d_model / self.n_heads
    }

    /// Checks every field and the combinations, naming the offending key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        positive("model.d_model", self.d_model)?;
        positive("model.n_heads", self.n_heads)?;
        positive("model.n_layers", self.n_layers)?;
        positive("model.d_ff", self.d_ff)?;
        positive("model.block_size", self.block_size)?;
        probability("model.dropout", self.dropout)?;
        probability("model.attention_dropout", self.attention_dropout)?;
        if !self.d_model.is_multiple_of(self.n_heads) {
            return Err(ConfigError::HeadsDoNotDivide { n_heads: self.n_heads, d_model: self.d_model });
        }
        if !(self.norm_eps > 0.0 && self.norm_eps.is_finite()) {
            return Err(ConfigError::Invalid {
                key: "model.norm_eps",
                value: self.norm_eps.to_string(),
                expected: "a positive finite number",
            });
        }
        if self.arch == Arch::Notes {
            for (key, value) in [("model.n_heads", self.n_heads), ("model.n_layers", self.n_layers)] {
                if value != 1 {
                    return Err(ConfigError::Invalid {
                        key,
                        value: value.to_string(),
                        expected: "1 for arch = \"notes\" (the notes' model has one head, one layer)",
                    });
                }
            }
            if !self.tie_embeddings {
                return Err(ConfigError::Invalid {
                    key: "model.tie_embeddings",
                    value: "false".into(),
                    expected: "true for arch = \"notes\" (its output is Õ = OEᵀ)",
                });
            }
        }
        Ok(())
    }

    /// Checks the vocabulary size that comes with this configuration from `[data]`.
    pub fn validate_vocab(vocab_size: usize) -> Result<(), ConfigError> {
        positive("data.vocab_size", vocab_size)
    }
}

fn positive(key: &'static str, value: usize) -> Result<(), ConfigError> {
    if value == 0 {
        Err(ConfigError::Zero { key })
    } else {
        Ok(())
    }
}

fn probability(key: &'static str, value: f64) -> Result<(), ConfigError> {
    if (0.0..1.0).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::Probability { key, value })
    }
}

/// An invalid model configuration; each variant names the key at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A size that must be at least 1 is 0.
    #[error("{key} = 0 must be at least 1")]
    Zero {
        /// The key, e.g. `model.n_layers`.
        key: &'static str,
    },
    /// A dropout rate outside `[0, 1)`.
    #[error("{key} = {value} must be in [0, 1)")]
    Probability {
        /// The key, e.g. `model.dropout`.
        key: &'static str,
        /// The rejected value.
        value: f64,
    },
    /// `d_model` is not a multiple of `n_heads`.
    #[error("model.n_heads = {n_heads} must divide model.d_model = {d_model}")]
    HeadsDoNotDivide {
        /// The number of heads.
        n_heads: usize,
        /// The model width.
        d_model: usize,
    },
    /// Any other invalid value.
    #[error("{key} = {value}: expected {expected}")]
    Invalid {
        /// The key at fault.
        key: &'static str,
        /// The rejected value, as written.
        value: String,
        /// What would have been accepted.
        expected: &'static str,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid() {
        for config in [ModelConfig::base(), ModelConfig::big(), ModelConfig::notes(), ModelConfig::nanogpt_cpu()] {
            assert_eq!(config.validate(), Ok(()), "{config:?}");
        }
    }

    #[test]
    fn heads_must_divide_width_and_the_error_names_both_keys() {
        let config = ModelConfig { d_model: 100, n_heads: 3, ..ModelConfig::base() };
        let err = config.validate().unwrap_err();
        assert_eq!(err.to_string(), "model.n_heads = 3 must divide model.d_model = 100");
    }

    #[test]
    fn zero_layers_is_an_error_naming_the_key() {
        let config = ModelConfig { n_layers: 0, ..ModelConfig::base() };
        assert_eq!(config.validate(), Err(ConfigError::Zero { key: "model.n_layers" }));
        assert_eq!(ModelConfig::validate_vocab(0).unwrap_err().to_string(), "data.vocab_size = 0 must be at least 1");
    }

    #[test]
    fn dropout_outside_unit_interval_is_an_error() {
        for bad in [1.0, 1.5, -0.1, f64::NAN] {
            let config = ModelConfig { dropout: bad, ..ModelConfig::base() };
            let err = config.validate().unwrap_err();
            assert!(err.to_string().starts_with("model.dropout = "), "{err}");
        }
        let config = ModelConfig { attention_dropout: 1.0, ..ModelConfig::base() };
        assert!(config.validate().unwrap_err().to_string().contains("model.attention_dropout"));
    }

    #[test]
    fn notes_arch_requires_one_head_and_one_layer() {
        let config = ModelConfig { n_heads: 2, d_model: 64, ..ModelConfig::notes() };
        assert!(config.validate().unwrap_err().to_string().starts_with("model.n_heads = 2"));
    }

    #[test]
    fn toml_section_defaults_to_base_and_rejects_unknown_keys() {
        let config: ModelConfig = toml::from_str("arch = \"lm\"\nd_model = 256\nnorm = \"pre\"").unwrap();
        assert_eq!(
            config,
            ModelConfig { arch: Arch::Lm, d_model: 256, norm: NormPosition::Pre, ..ModelConfig::base() }
        );
        let err = toml::from_str::<ModelConfig>("flux_capacitor = 1").unwrap_err();
        assert!(err.to_string().contains("flux_capacitor"), "{err}");
        let err = toml::from_str::<ModelConfig>("positions = \"rotary\"").unwrap_err();
        assert!(err.to_string().contains("rotary"), "{err}");
    }
}
