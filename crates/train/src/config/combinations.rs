//! Keys that are wrong only together: the schedule's warmup and decay against its kind and the
//! run's length, the checkpoints kept, and a word vocabulary's cap against its special tokens.
//! Each would otherwise be replaced (a warmup of 0 taken as 1, none kept taken as 1) or give a
//! run that cannot learn (a vocabulary of special tokens only), without a word.

use super::{ConfigError, RunConfig, ScheduleKind, TokenizerKind};

impl RunConfig {
    pub(super) fn validate_combinations(&self) -> Result<(), ConfigError> {
        let t = &self.train;
        let invalid = |key: &'static str, value: String, expected: &'static str| {
            Err(ConfigError::Invalid { key, value, expected })
        };
        if t.schedule == ScheduleKind::Noam && t.warmup == 0 {
            return invalid(
                "train.warmup",
                "0 (train.schedule = \"noam\")".into(),
                "at least 1 with the noam schedule, whose rate is lr·d_model^-0.5·min(step^-0.5, step·warmup^-1.5)",
            );
        }
        if t.schedule == ScheduleKind::Cosine && t.decay_steps > 0 && t.decay_steps <= t.warmup {
            return invalid(
                "train.decay_steps",
                format!("{} (train.warmup = {})", t.decay_steps, t.warmup),
                "0 (train.max_steps) or more than train.warmup: the cosine decays after the warmup",
            );
        }
        if t.keep_checkpoints == 0 {
            return invalid(
                "train.keep_checkpoints",
                "0".into(),
                "at least 1: --resume continues from the last checkpoint kept",
            );
        }
        let d = &self.data;
        if d.dataset == "multi30k" && (d.source.is_empty() || d.target.is_empty()) {
            return invalid(
                "data.source / data.target",
                format!("{:?} / {:?}", d.source, d.target),
                "two languages of multi30k (de and en here: its files are NAME.LANG.gz)",
            );
        }
        let specials = if self.model.arch == attend_model::Arch::Seq2seq { 4 } else { 2 };
        if d.tokenizer == TokenizerKind::Word
            && d.dataset != "synthetic-lm"
            && d.vocab_size > 0
            && d.vocab_size <= specials
        {
            return invalid(
                "data.vocab_size",
                format!("{} ({specials} of a word vocabulary are its special tokens)", d.vocab_size),
                "0 (every word) or more than the special tokens, so that at least one word is kept",
            );
        }
        Ok(())
    }
}
