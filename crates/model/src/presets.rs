//! The named configurations: the paper's base and big models (Table 3), the lecture notes'
//! one-layer model, and nanoGPT's CPU configuration for tiny Shakespeare.

use crate::config::{Activation, Arch, Init, ModelConfig, NormPosition, Positions};

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
            d_k: 0,
            d_v: 0,
            attention_scale: true,
            lora_rank: 0,
            lora_alpha: 8.0,
            lora_targets: crate::lora::LORA_TARGETS.map(String::from).to_vec(),
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
}
