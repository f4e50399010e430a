//! The `data.synthetic_*` keys of the generated datasets (`synthetic-lm`, `synthetic-mt`):
//! their ranges, and the sizes of the sources' probability tables.

use super::{ConfigError, RunConfig};

impl RunConfig {
    /// The `data.synthetic_*` keys of the generated datasets (checked only when one is used).
    pub(super) fn validate_generated_data(&self) -> Result<(), ConfigError> {
        let d = &self.data;
        if !d.dataset.starts_with("synthetic-") {
            return Ok(());
        }
        let invalid = |key: &'static str, value: String, expected: &'static str| {
            Err(ConfigError::Invalid { key, value, expected })
        };
        if d.synthetic_vocab < 2 {
            return invalid("data.synthetic_vocab", d.synthetic_vocab.to_string(), "at least 2 words");
        }
        if d.synthetic_size < 20 {
            return invalid(
                "data.synthetic_size",
                d.synthetic_size.to_string(),
                "at least 20 (valid and test get a tenth each)",
            );
        }
        if !(0.0..=1.0).contains(&d.synthetic_epsilon) {
            return invalid("data.synthetic_epsilon", d.synthetic_epsilon.to_string(), "a number in [0, 1]");
        }
        if d.synthetic_branching == 0 && d.synthetic_epsilon < 1.0 {
            return invalid("data.synthetic_branching", "0".into(), "at least 1 unless data.synthetic_epsilon = 1");
        }
        // The source's table has vocab^(order+1) probabilities: keep it under 2^26 (512 MB).
        let table = (d.synthetic_vocab as u128).checked_pow(d.synthetic_order as u32 + 1);
        if d.dataset == "synthetic-lm" && table.is_none_or(|n| n > 1 << 26) {
            return invalid(
                "data.synthetic_order",
                d.synthetic_order.to_string(),
                "an order small enough that synthetic_vocab^(order+1) <= 2^26 (the source's probability table)",
            );
        }
        // `synthetic-mt`'s source sentences come from an order-1 source: vocab^2 probabilities.
        if d.dataset == "synthetic-mt" && (d.synthetic_vocab as u128).pow(2) > 1 << 26 {
            return invalid(
                "data.synthetic_vocab",
                d.synthetic_vocab.to_string(),
                "at most 8192 with synthetic-mt (its order-1 source keeps synthetic_vocab^2 <= 2^26 probabilities)",
            );
        }
        if d.dataset == "synthetic-lm" && d.synthetic_branching > d.synthetic_vocab && d.synthetic_epsilon < 1.0 {
            return invalid(
                "data.synthetic_branching",
                format!("{} (data.synthetic_vocab = {})", d.synthetic_branching, d.synthetic_vocab),
                "at most data.synthetic_vocab: a context cannot have more likely next words than there are words",
            );
        }
        // Positions with fewer than `order` tokens of context in their window are not scored
        // (`lm_eval`): a window shorter than the order would score nothing.
        let order = d.synthetic_order;
        if d.dataset == "synthetic-lm" && self.model.block_size < order {
            return invalid(
                "model.block_size",
                format!("{} (data.synthetic_order = {order})", self.model.block_size),
                "at least data.synthetic_order: a shorter window has no token with its whole context, so none would be scored",
            );
        }
        if d.dataset == "synthetic-lm" && self.eval.dynamic_segment < order {
            return invalid(
                "eval.dynamic_segment",
                format!("{} (data.synthetic_order = {order})", self.eval.dynamic_segment),
                "at least data.synthetic_order: a shorter segment has no token with its whole context, so none would be scored",
            );
        }
        Ok(())
    }
}
