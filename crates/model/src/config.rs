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
    /// Encoder-only masked language model (BERT-style): the same stack as `lm` with
    /// bidirectional self-attention (no causal mask) and the output tied to the embedding;
    /// trained with `train.objective = "mlm"`.
    Encoder,
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
    /// Exact GELU `x·Φ(x)` with the erf form (nanoGPT, PyTorch's `nn.GELU()`); see [`crate::gelu`].
    Gelu,
    /// GELU's tanh approximation `½x(1 + tanh(√(2/π)(x + 0.044715x³)))`, the one OpenAI's
    /// GPT-2 was trained with (`activation_function = "gelu_new"` in HuggingFace), for
    /// imported GPT-2 weights; composed from Burn operations.
    #[serde(rename = "gelu_tanh")]
    GeluTanh,
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
    /// Width of each head's queries and keys, `d_k`. Default 0: `d_model / n_heads` (the
    /// paper). Set apart for Table 3 rows A and B; with `d_k` and `d_v` both set, `n_heads`
    /// need not divide `d_model`.
    pub d_k: usize,
    /// Width of each head's values, `d_v`. Default 0: `d_model / n_heads`.
    pub d_v: usize,
    /// Divide the scores by `√d_k` (eq. 1). Default true; false shows why the paper scales
    /// (section 3.2.1: large dot products push the softmax into regions of tiny gradients).
    pub attention_scale: bool,
    /// Rank `r` of the LoRA adapters beside the `lora_targets` projections of every attention
    /// layer ([`crate::lora`]); 0 (default) adds none. With adapters, only they train.
    pub lora_rank: usize,
    /// LoRA `α`: an adapter adds `(α/r)·BAx`. Default 8 (PEFT's default).
    pub lora_alpha: f64,
    /// The attention projections that get adapters: any of `query`, `key`, `value`,
    /// `output`. Default all four.
    pub lora_targets: Vec<String>,
}

impl ModelConfig {
    /// `d_model / n_heads`, the paper's `d_k = d_v`.
    pub fn d_head(&self) -> usize {
        self.d_model / self.n_heads
    }

    /// Each head's query and key width: `model.d_k`, else `d_model / n_heads`.
    pub fn d_k(&self) -> usize {
        if self.d_k > 0 {
            self.d_k
        } else {
            self.d_head()
        }
    }

    /// Each head's value width: `model.d_v`, else `d_model / n_heads`.
    pub fn d_v(&self) -> usize {
        if self.d_v > 0 {
            self.d_v
        } else {
            self.d_head()
        }
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
        if (self.d_k == 0 || self.d_v == 0) && !self.d_model.is_multiple_of(self.n_heads) {
            return Err(ConfigError::HeadsDoNotDivide { n_heads: self.n_heads, d_model: self.d_model });
        }
        if !(self.norm_eps > 0.0 && self.norm_eps.is_finite()) {
            return Err(ConfigError::Invalid {
                key: "model.norm_eps",
                value: self.norm_eps.to_string(),
                expected: "a positive finite number",
            });
        }
        self.validate_lora()?;
        if self.arch == Arch::Notes {
            let own =
                [("model.d_k", self.d_k > 0), ("model.d_v", self.d_v > 0), ("model.lora_rank", self.lora_rank > 0)];
            for (key, set) in own.into_iter().chain([("model.attention_scale", !self.attention_scale)]) {
                if set {
                    return Err(ConfigError::Invalid {
                        key,
                        value: "set".into(),
                        expected: "its default for arch = \"notes\" (the notes' model has one head of width d_model, scaled, no adapters)",
                    });
                }
            }
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

    /// The LoRA keys: `lora_alpha` positive, `lora_targets` known, distinct and not empty.
    fn validate_lora(&self) -> Result<(), ConfigError> {
        if self.lora_rank == 0 {
            return Ok(());
        }
        if !(self.lora_alpha > 0.0 && self.lora_alpha.is_finite()) {
            return Err(ConfigError::Invalid {
                key: "model.lora_alpha",
                value: self.lora_alpha.to_string(),
                expected: "a positive number",
            });
        }
        let targets = &self.lora_targets;
        let known = targets.iter().all(|t| crate::lora::LORA_TARGETS.contains(&t.as_str()));
        let distinct = (1..targets.len()).all(|i| !targets[..i].contains(&targets[i]));
        if targets.is_empty() || !known || !distinct {
            return Err(ConfigError::Invalid {
                key: "model.lora_targets",
                value: format!("{targets:?}"),
                expected: "a non-empty list of distinct projections among \"query\", \"key\", \"value\", \"output\"",
            });
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
    /// `d_model` is not a multiple of `n_heads` (and `d_k`, `d_v` are not both set).
    #[error("model.n_heads = {n_heads} must divide model.d_model = {d_model} (or set model.d_k and model.d_v)")]
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
mod tests;
