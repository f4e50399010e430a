//! Upper bounds on every size-like configuration value. Each bound is far above anything a
//! 2-core machine or one GPU trains, and keeps a typo (`grad_accum = 2147483648`,
//! `synthetic_size = 4294967296`) from hanging a run or asking for memory without limit: the
//! error names the key, the value and the bound. Raise a bound here if a real use needs it.
//! Every number is finite, too ([`RunConfig::validate_finite`]).

use super::{ConfigError, RunConfig};

/// `decode.beam`'s bound (`TranslateOptions::check` holds the command line's flags to the same).
pub(crate) const MAX_BEAM: usize = 1 << 10;
/// `decode.max_len_b`'s bound.
pub(crate) const MAX_LEN_B: usize = 1 << 16;
/// `decode.max_len_a`'s and `decode.lenpen`'s bound.
pub(crate) const MAX_DECODE_FACTOR: usize = 1 << 10;

/// The largest model a config may describe (parameters, before the vocabulary's embedding):
/// 4·10⁹ f32 parameters are 16 GB before the optimizer's moments.
pub const MAX_PARAMS: u128 = 4_000_000_000;

impl RunConfig {
    /// Checks every size-like value against its bound.
    pub(super) fn validate_bounds(&self) -> Result<(), ConfigError> {
        let (d, m, t, e, c) = (&self.data, &self.model, &self.train, &self.eval, &self.decode);
        const K: u128 = 1 << 10;
        const M: u128 = 1 << 20;
        const STEPS: u128 = 1_000_000_000;
        let bounds: [(&'static str, u128, u128); 39] = [
            ("data.vocab_size", d.vocab_size as u128, M),
            ("data.synthetic_vocab", d.synthetic_vocab as u128, 64 * K),
            ("data.synthetic_branching", d.synthetic_branching as u128, 64 * K),
            ("data.synthetic_order", d.synthetic_order as u128, 64),
            ("data.synthetic_size", d.synthetic_size as u128, 100_000_000),
            ("model.d_model", m.d_model as u128, 64 * K),
            ("model.n_heads", m.n_heads as u128, K),
            ("model.n_layers", m.n_layers as u128, K),
            ("model.d_ff", m.d_ff as u128, 256 * K),
            ("model.block_size", m.block_size as u128, M),
            ("model.d_k", m.d_k as u128, 64 * K),
            ("model.d_v", m.d_v as u128, 64 * K),
            ("model.lora_rank", m.lora_rank as u128, 64 * K),
            ("train.batch_size", t.batch_size as u128, 64 * K),
            ("train.batch_tokens", t.batch_tokens as u128, 16 * M),
            ("train.grad_accum", t.grad_accum as u128, 4 * K),
            ("train.max_steps", t.max_steps as u128, STEPS),
            ("train.max_epochs", t.max_epochs as u128, M),
            ("train.warmup", t.warmup as u128, STEPS),
            ("train.decay_steps", t.decay_steps as u128, STEPS),
            ("train.asgd_start", t.asgd_start as u128, STEPS),
            ("train.log_every", t.log_every as u128, STEPS),
            ("train.eval_every", t.eval_every as u128, STEPS),
            ("train.checkpoint_every", t.checkpoint_every as u128, STEPS),
            ("train.eval_batches", t.eval_batches as u128, M),
            ("train.keep_checkpoints", t.keep_checkpoints as u128, 10 * K),
            ("train.average_last", t.average_last as u128, K),
            ("train.patience", t.patience as u128, M),
            ("eval.batch_size", e.batch_size as u128, 64 * K),
            ("eval.dynamic_segment", e.dynamic_segment as u128, M),
            ("decode.beam", c.beam as u128, MAX_BEAM as u128),
            ("decode.max_len_b", c.max_len_b as u128, MAX_LEN_B as u128),
            ("decode.top_k", c.top_k as u128, M),
            ("decode.max_tokens", c.max_tokens as u128, M),
            ("decode.max_len_a", c.max_len_a.ceil().max(0.0) as u128, MAX_DECODE_FACTOR as u128),
            ("decode.lenpen", c.lenpen.ceil().max(0.0) as u128, MAX_DECODE_FACTOR as u128),
            ("train.lr", t.lr.ceil().max(0.0) as u128, K),
            ("eval.dynamic_lr", e.dynamic_lr.ceil().max(0.0) as u128, K),
            ("decode.temperature", c.temperature.ceil().max(0.0) as u128, K),
        ];
        for (key, value, max) in bounds {
            if value > max {
                return Err(ConfigError::TooLarge { key, value: value.to_string(), max: max.to_string() });
            }
        }
        // Each size may be within bounds and their product still not fit: count the layers'
        // parameters (attention, feed-forward, positions) before anything is allocated.
        let (dm, ff) = (m.d_model as u128, m.d_ff as u128);
        let heads = m.n_heads as u128;
        let (dk, dv) =
            (if m.d_k > 0 { m.d_k as u128 } else { dm / heads }, if m.d_v > 0 { m.d_v as u128 } else { dm / heads });
        let per_layer = dm * heads * (2 * dk + 2 * dv) + 2 * dm * ff;
        let params = m.n_layers as u128 * per_layer * 2 + m.block_size as u128 * dm;
        if params > MAX_PARAMS {
            return Err(ConfigError::TooLarge {
                key: "model (d_model, d_ff, n_heads, d_k, d_v, n_layers, block_size)",
                value: format!("about {params} parameters"),
                max: MAX_PARAMS.to_string(),
            });
        }
        Ok(())
    }

    /// Every number of the configuration finite, used or not: a `nan` or `inf` in a key that
    /// this run does not read (`model.lora_alpha` without LoRA) would pass the checks of the
    /// keys in use, and then never equal itself when `--resume` compares configurations.
    pub(super) fn validate_finite(&self) -> Result<(), ConfigError> {
        let table: toml::Table = self.to_toml().parse().expect("serialized TOML parses");
        for (section, entries) in &table {
            let Some(entries) = entries.as_table() else { continue };
            for (key, value) in entries {
                if let Some(x) = value.as_float().filter(|x| !x.is_finite()) {
                    return Err(ConfigError::NotFinite { key: format!("{section}.{key}"), value: x.to_string() });
                }
            }
        }
        Ok(())
    }
}
