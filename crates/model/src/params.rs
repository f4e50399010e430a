//! Parameter count and forward FLOPs per token, computed from a [`ModelConfig`] alone, without
//! allocating the model.
//!
//! The count follows the modules of this crate term by term (a test checks it against the
//! instantiated module's `num_params()`). FLOPs count only matrix products, two per
//! multiply-add, as Kaplan et al. 2020 (Table 1) do: `2·d_in·d_out` per linear map and token,
//! and `2·n_ctx·d_model` each for `QKᵀ` and `AV`, with the context `n_ctx = block_size`
//! (causality is not discounted). LayerNorm, softmax, activations and embedding lookups are
//! left out: they are linear in `d_model` and small beside the matrix products.

use crate::config::{Arch, ModelConfig, NormPosition, Positions};

/// What [`count`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamReport {
    /// Trainable parameters; a tied matrix counts once.
    pub params: u64,
    /// Forward-pass FLOPs per token. For `seq2seq`: per target token, with a source as long
    /// as the target (`block_size` each), so the encoder's work is shared out one source token
    /// per target token.
    pub flops_per_token: u64,
}

/// Counts parameters and forward FLOPs per token of `config` with a vocabulary of
/// `vocab_size` tokens (shared by source and target for `seq2seq`).
pub fn count(config: &ModelConfig, vocab_size: usize) -> ParamReport {
    let d = config.d_model as u64;
    let f = config.d_ff as u64;
    let n = config.n_layers as u64;
    let v = vocab_size as u64;
    let ctx = config.block_size as u64;
    let bias = config.bias;

    let linear = |i: u64, o: u64| i * o + if bias { o } else { 0 };
    let layer_norm = d + if bias { d } else { 0 };
    // Query and key width h·d_k, value width h·d_v (d_model each by default).
    let (qk, hv) = ((config.n_heads * config.d_k()) as u64, (config.n_heads * config.d_v()) as u64);
    let r = config.lora_rank as u64;
    let adapter = |name: &str, i: u64, o: u64| {
        if r > 0 && config.lora_targets.iter().any(|t| t == name) {
            r * (i + o)
        } else {
            0
        }
    };
    let adapters = adapter("query", d, qk) + adapter("key", d, qk) + adapter("value", d, hv) + adapter("output", hv, d);
    let attention = 2 * linear(d, qk) + linear(d, hv) + linear(hv, d) + adapters;
    let ffn = linear(d, f) + linear(f, d);
    let encoder_layer = attention + ffn + 2 * layer_norm;
    let decoder_layer = 2 * attention + ffn + 3 * layer_norm;
    let embedding = v * d;
    let positions = if config.positions == Positions::Learned { ctx * d } else { 0 };
    let final_norm = if config.norm == NormPosition::Pre { layer_norm } else { 0 };
    let output = if config.tie_embeddings { 0 } else { v * d };

    // Matrix-product FLOPs per token.
    let attention_scores = 2 * ctx * (qk + hv); // QKᵀ and AV
    let projections = 2 * (2 * d * qk + 2 * d * hv);
    let self_attention_flops = projections + attention_scores;
    let ffn_flops = 2 * 2 * d * f;
    let output_flops = 2 * d * v;

    let (params, flops_per_token) = match config.arch {
        Arch::Lm | Arch::Encoder => (
            embedding + positions + n * encoder_layer + final_norm + output,
            n * (self_attention_flops + ffn_flops) + output_flops,
        ),
        Arch::Seq2seq => {
            let source_embedding = if config.share_embeddings { 0 } else { v * d };
            let params = embedding
                + source_embedding
                + positions
                + n * (encoder_layer + decoder_layer)
                + 2 * final_norm
                + output;
            // Cross-attention: Q and Wᴼ per target token, K and V per source token.
            let cross_attention_flops = projections + attention_scores;
            let encoder = n * (self_attention_flops + ffn_flops);
            let decoder = n * (self_attention_flops + cross_attention_flops + ffn_flops);
            (params, encoder + decoder + output_flops)
        }
        Arch::Notes => {
            let attention = 3 * linear(d, d);
            let params = embedding + positions + attention + linear(d, f) + linear(f, d);
            let flops = 2 * 3 * d * d + 2 * 2 * ctx * d + ffn_flops + output_flops;
            (params, flops)
        }
    };
    ParamReport { params, flops_per_token }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's Table 3 lists 65M (base) and 213M (big) with a shared ~37,000-token BPE
    /// vocabulary (section 5.1). Hand count for base: per encoder layer 4·(512²+512) +
    /// (512·2048+2048) + (2048·512+512) + 2·1024 = 3,152,384; per decoder layer 4,204,032;
    /// embedding 37,000·512 = 18,944,000; total 6·(3,152,384+4,204,032) + 18,944,000.
    #[test]
    fn base_with_shared_37k_vocab_has_63m_params() {
        let report = count(&ModelConfig::base(), 37_000);
        assert_eq!(report.params, 63_082_496);
    }

    #[test]
    fn big_with_shared_37k_vocab_has_214m_params() {
        let report = count(&ModelConfig::big(), 37_000);
        assert_eq!(report.params, 214_245_376);
    }

    /// nanoGPT (`model.py`) on tiny Shakespeare characters (vocab 65) prints "number of
    /// parameters: 0.80M", which leaves out the 64·128 = 8,192 position weights: per block
    /// 128 + 128·384 + 128·128 + 128 + 128·512 + 512·128 = 196,864; ×4, plus wte 65·128,
    /// wpe 64·128 and ln_f 128 gives 804,096.
    #[test]
    fn nanogpt_cpu_config_matches_nanogpt_count() {
        let report = count(&ModelConfig::nanogpt_cpu(), 65);
        assert_eq!(report.params, 804_096);
        assert_eq!(report.params - 64 * 128, 795_904);
    }

    /// Kaplan et al. 2020: forward FLOPs per token ≈ 2·N_non-embedding + 2·n_layer·n_ctx·d
    /// for a decoder-only model; ours adds the output projection 2·d·V and counts QKᵀ and AV
    /// separately (4·n_ctx·d per layer).
    #[test]
    fn lm_flops_per_token_follow_kaplan() {
        let config = ModelConfig { bias: false, ..ModelConfig::nanogpt_cpu() };
        let report = count(&config, 65);
        let (d, ctx, n, v) = (128u64, 64u64, 4u64, 65u64);
        let non_embedding = n * (4 * d * d + 2 * d * 4 * d);
        assert_eq!(report.flops_per_token, 2 * non_embedding + n * 4 * ctx * d + 2 * d * v);
    }
}
