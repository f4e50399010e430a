//! Learning-rate schedules, as functions of the step (counted from 1).
//!
//! - `noam` (the paper, section 5.3): `lr · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)`,
//!   rising linearly for `warmup` steps, then decaying as the inverse square root.
//! - `cosine` (nanoGPT's `get_lr`, with its step `it = step − 1`): linear warmup
//!   `lr · (it + 1) / (warmup + 1)`, then `min_lr + ½(1 + cos(π·r))(lr − min_lr)` with
//!   `r = (it − warmup) / (decay_steps − warmup)`, then `min_lr` after `decay_steps`.
//! - `constant`: the same linear warmup, then `lr`.

use crate::config::{ScheduleKind, TrainConfig};

/// The learning rate at `step` (≥ 1) under `config`, for a model of width `d_model`.
pub fn learning_rate(config: &TrainConfig, d_model: usize, step: u64) -> f64 {
    let step = step.max(1);
    let warmup = config.warmup;
    match config.schedule {
        ScheduleKind::Noam => {
            let s = step as f64;
            let w = warmup.max(1) as f64;
            config.lr * (d_model as f64).powf(-0.5) * s.powf(-0.5).min(s * w.powf(-1.5))
        }
        ScheduleKind::Cosine => {
            let it = step - 1;
            if it < warmup {
                return config.lr * (it + 1) as f64 / (warmup + 1) as f64;
            }
            let decay_steps = if config.decay_steps == 0 { config.max_steps } else { config.decay_steps };
            if it > decay_steps || decay_steps <= warmup {
                return config.min_lr;
            }
            let ratio = (it - warmup) as f64 / (decay_steps - warmup) as f64;
            let coeff = 0.5 * (1.0 + (std::f64::consts::PI * ratio).cos());
            config.min_lr + coeff * (config.lr - config.min_lr)
        }
        ScheduleKind::Constant => {
            let it = step - 1;
            if it < warmup {
                config.lr * (it + 1) as f64 / (warmup + 1) as f64
            } else {
                config.lr
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunConfig;

    fn config(schedule: ScheduleKind) -> TrainConfig {
        TrainConfig { schedule, ..RunConfig::load(None, &[]).unwrap().train }
    }

    #[test]
    fn noam_peaks_at_warmup_with_the_papers_value() {
        let c = TrainConfig { lr: 1.0, warmup: 4000, ..config(ScheduleKind::Noam) };
        let peak = learning_rate(&c, 512, 4000);
        // d_model^-0.5 · warmup^-0.5 = (512 · 4000)^-0.5 ≈ 6.99e-4 (the paper's base model).
        assert!((peak - (512.0f64 * 4000.0).powf(-0.5)).abs() < 1e-12);
        assert!(learning_rate(&c, 512, 3999) < peak && learning_rate(&c, 512, 4001) < peak);
        assert!((learning_rate(&c, 512, 16000) - peak / 2.0).abs() < 1e-12, "inverse square root");
    }

    #[test]
    fn cosine_matches_nanogpt_at_its_landmarks() {
        let c = TrainConfig {
            lr: 1e-3,
            min_lr: 1e-4,
            warmup: 100,
            max_steps: 2000,
            decay_steps: 2000,
            ..config(ScheduleKind::Cosine)
        };
        assert!((learning_rate(&c, 128, 1) - 1e-3 / 101.0).abs() < 1e-15);
        assert!((learning_rate(&c, 128, 101) - 1e-3).abs() < 1e-15);
        let mid = learning_rate(&c, 128, 1051);
        assert!((mid - 5.5e-4).abs() < 1e-12, "halfway: {mid}");
        assert!((learning_rate(&c, 128, 2001) - 1e-4).abs() < 1e-15);
        assert_eq!(learning_rate(&c, 128, 5000), 1e-4);
    }

    /// `decay_steps = 0` means "decay until `max_steps`" (nanoGPT's `lr_decay_iters = max_iters`).
    #[test]
    fn cosine_without_decay_steps_decays_until_max_steps() {
        let c = TrainConfig {
            lr: 1e-3,
            min_lr: 1e-4,
            warmup: 0,
            max_steps: 1000,
            decay_steps: 0,
            ..config(ScheduleKind::Cosine)
        };
        assert!((learning_rate(&c, 128, 501) - 5.5e-4).abs() < 1e-12, "halfway through max_steps");
        let own = TrainConfig { decay_steps: 500, ..c.clone() };
        assert!((learning_rate(&own, 128, 251) - 5.5e-4).abs() < 1e-12, "halfway through decay_steps");
        assert_eq!(learning_rate(&own, 128, 600), 1e-4);
    }

    /// Decay that would end before warm-up does: min_lr after the warm-up (no division by zero).
    #[test]
    fn cosine_with_decay_steps_not_past_warmup_holds_min_lr_after_warmup() {
        for decay_steps in [5, 10] {
            let c = TrainConfig {
                lr: 1e-3,
                min_lr: 1e-4,
                warmup: 10,
                max_steps: 100,
                decay_steps,
                ..config(ScheduleKind::Cosine)
            };
            assert!((learning_rate(&c, 128, 10) - 1e-3 * 10.0 / 11.0).abs() < 1e-15, "still warming up");
            assert_eq!(learning_rate(&c, 128, 11), 1e-4, "decay_steps {decay_steps}");
            assert_eq!(learning_rate(&c, 128, 50), 1e-4);
        }
    }

    #[test]
    fn constant_warms_up_then_holds() {
        let c = TrainConfig { lr: 0.5, warmup: 4, ..config(ScheduleKind::Constant) };
        assert_eq!(learning_rate(&c, 64, 1), 0.1);
        assert!((learning_rate(&c, 64, 3) - 0.3).abs() < 1e-15, "linear: lr·3/5");
        assert_eq!(learning_rate(&c, 64, 5), 0.5);
        assert_eq!(learning_rate(&c, 64, 500), 0.5);
    }
}
