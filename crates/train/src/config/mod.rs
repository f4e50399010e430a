//! Run configuration: TOML files laid over the built-in defaults (`configs/default.toml`),
//! then `--set section.key=value` overrides, then checked key by key (docs/commands.md).
//!
//! Rules: a file names only what it changes; an unknown section or key is an error naming it
//! (`unknown key model.flux_capacitor`); a value of the wrong type names the key and what was
//! expected; invalid combinations name the keys (`model.n_heads = 3 must divide
//! model.d_model = 100`).

mod bounds;
mod combinations;
mod generated;
pub(crate) use bounds::{MAX_BEAM, MAX_DECODE_FACTOR, MAX_LEN_B};
mod resume;
mod sections;

use std::path::{Path, PathBuf};

use attend_model::ModelConfig;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use toml::{Table, Value};

pub use resume::default_run_dir;
pub use sections::{
    DataConfig, DecodeConfig, EvalConfig, Objective, OptimizerKind, Precision, Sampling, ScheduleKind, TokenizerKind,
    TrainConfig,
};

/// The built-in defaults, also the runner's embedded default experiment.
pub const DEFAULT_TOML: &str = include_str!("../../../../configs/default.toml");

/// A whole experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    pub data: DataConfig,
    pub model: ModelConfig,
    pub train: TrainConfig,
    pub eval: EvalConfig,
    pub decode: DecodeConfig,
}

/// A configuration that cannot be used; each names the file and key at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{origin}: {message}")]
    Syntax { origin: String, message: String },
    #[error("{origin}: unknown section [{section}]")]
    UnknownSection { origin: String, section: String },
    #[error("{origin}: unknown key {key}")]
    UnknownKey { origin: String, key: String },
    #[error("{origin}: {key}: {message}")]
    BadValue { origin: String, key: String, message: String },
    #[error("--set {arg:?}: expected section.key=value")]
    BadSet { arg: String },
    #[error("{0}")]
    Model(#[from] attend_model::ConfigError),
    #[error("{key} = {value}: expected {expected}")]
    Invalid { key: &'static str, value: String, expected: &'static str },
    #[error("{}: {source}", path.display())]
    Stored { path: PathBuf, source: Box<ConfigError> },
    #[error("{key} = {value}: expected a finite number (every number of a configuration is, even where this run does not read it)")]
    NotFinite { key: String, value: String },
    #[error("{key} = {value}: at most {max} (a bound that keeps time and memory finite; crates/train/src/config/bounds.rs sets it)")]
    TooLarge { key: &'static str, value: String, max: String },
    #[error("--resume takes the configuration from {}; drop --set", stored.display())]
    SetOnResume { stored: PathBuf },
    #[error("{}: a run's config.toml names every key, but this one has no {key}: it is damaged or was cut; restore it (checkpoints cannot be used without the configuration that made them)", path.display())]
    Incomplete { path: PathBuf, key: String },
    #[error("{} is not a run directory (it has no config.toml): give the --run of a trained run, or train one with `cargo xtask train --run {}`", .0.display(), .0.display())]
    NotARun(PathBuf),
    #[error("no checkpoint to resume in {}", .0.display())]
    NothingToResume(PathBuf),
    #[error("--config {} differs from {} ({difference}): --resume continues with the run's own configuration; drop --config, or start a new --run", file.display(), stored.display())]
    ResumeMismatch { file: PathBuf, stored: PathBuf, difference: String },
}

impl RunConfig {
    /// The defaults, with `file` (if any) laid over them and then each `--set` override.
    pub fn load(file: Option<&Path>, sets: &[String]) -> Result<Self, ConfigError> {
        let mut table = parse(DEFAULT_TOML, "configs/default.toml")?;
        let mut origin = "configs/default.toml".to_string();
        if let Some(path) = file {
            let text =
                std::fs::read_to_string(path).map_err(|source| ConfigError::Io { path: path.to_path_buf(), source })?;
            origin = path.display().to_string();
            lay_over(&mut table, parse(&text, &origin)?, &origin)?;
        }
        let mut set_keys = Vec::new();
        for arg in sets {
            let (key, value) = parse_set(arg)?;
            let (section, name) = key.split_once('.').ok_or(ConfigError::BadSet { arg: arg.clone() })?;
            let mut layer = Table::new();
            layer.insert(section.into(), Value::Table(Table::from_iter([(name.to_string(), value)])));
            lay_over(&mut table, layer, "--set")?;
            set_keys.push(key.to_string());
        }
        // A value of the wrong type is blamed on where it was last set: `--set`, or the file.
        Self::from_table(table, &origin).map_err(|e| match e {
            ConfigError::BadValue { key, message, .. } if set_keys.contains(&key) => {
                ConfigError::BadValue { origin: "--set".into(), key, message }
            }
            e => e,
        })
    }

    /// Reads a fully resolved `config.toml` (a run directory's), with the same checks; it
    /// must name every key itself (a run never falls back to the defaults: an emptied or cut
    /// file is an error naming the first key it lacks).
    pub fn from_resolved(path: &Path) -> Result<Self, ConfigError> {
        if !path.exists() {
            return Err(ConfigError::NotARun(path.parent().unwrap_or(path).to_path_buf()));
        }
        // A value out of range there names the file too: the run wrote it, not the user.
        let config = Self::load(Some(path), &[]).map_err(|e| match e {
            e @ (ConfigError::Invalid { .. }
            | ConfigError::TooLarge { .. }
            | ConfigError::NotFinite { .. }
            | ConfigError::Model(_)) => ConfigError::Stored { path: path.to_path_buf(), source: Box::new(e) },
            e => e,
        })?;
        resume::require_every_key(&config, path)?;
        Ok(config)
    }

    fn from_table(table: Table, origin: &str) -> Result<Self, ConfigError> {
        let config = RunConfig {
            data: section(&table, "data", origin)?,
            model: section(&table, "model", origin)?,
            train: section(&table, "train", origin)?,
            eval: section(&table, "eval", origin)?,
            decode: section(&table, "decode", origin)?,
        };
        config.validate()?;
        Ok(config)
    }

    /// The fully resolved configuration as TOML (a run directory's `config.toml`).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("configs serialize")
    }

    /// The first key (`section.key = ours vs theirs`) whose value differs between two
    /// configurations, or `None` if they are the same.
    pub fn first_difference(&self, other: &RunConfig) -> Option<String> {
        let tables = [self, other].map(|c| c.to_toml().parse::<Table>().expect("serialized TOML parses"));
        for (section, ours) in &tables[0] {
            let (Some(ours), Some(theirs)) = (ours.as_table(), tables[1].get(section).and_then(Value::as_table)) else {
                continue;
            };
            for (key, value) in ours {
                if theirs.get(key) != Some(value) {
                    let other = theirs.get(key).map_or("nothing".to_string(), Value::to_string);
                    return Some(format!("{section}.{key} = {value} vs {other}"));
                }
            }
        }
        None
    }

    /// Checks the combinations that serde cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_finite()?;
        self.model.validate()?;
        self.validate_bounds()?;
        let t = &self.train;
        let positive = |key: &'static str, ok: bool, value: String| {
            if ok {
                Ok(())
            } else {
                Err(ConfigError::Invalid { key, value, expected: "a positive number" })
            }
        };
        positive("train.lr", t.lr > 0.0 && t.lr.is_finite(), t.lr.to_string())?;
        positive("train.batch_size", t.batch_size > 0, t.batch_size.to_string())?;
        positive("train.max_steps", t.max_steps > 0, t.max_steps.to_string())?;
        positive("train.grad_accum", t.grad_accum > 0, t.grad_accum.to_string())?;
        positive("train.log_every", t.log_every > 0, t.log_every.to_string())?;
        positive("train.eval_every", t.eval_every > 0, t.eval_every.to_string())?;
        positive("train.checkpoint_every", t.checkpoint_every > 0, t.checkpoint_every.to_string())?;
        positive("eval.batch_size", self.eval.batch_size > 0, self.eval.batch_size.to_string())?;
        positive("eval.dynamic_segment", self.eval.dynamic_segment > 0, self.eval.dynamic_segment.to_string())?;
        let unit = |key: &'static str, v: f64| {
            if (0.0..1.0).contains(&v) {
                Ok(())
            } else {
                Err(ConfigError::Invalid { key, value: v.to_string(), expected: "a number in [0, 1)" })
            }
        };
        unit("train.beta1", t.beta1)?;
        unit("train.beta2", t.beta2)?;
        unit("train.label_smoothing", t.label_smoothing)?;
        unit("train.momentum", t.momentum)?;
        if !t.eps.is_finite() || t.eps <= 0.0 {
            return Err(ConfigError::Invalid {
                key: "train.eps",
                value: t.eps.to_string(),
                expected: "a positive number",
            });
        }
        if [t.clip_norm, t.weight_decay, t.min_lr].iter().any(|v| !v.is_finite() || *v < 0.0) {
            return Err(ConfigError::Invalid {
                key: "train.clip_norm / train.weight_decay / train.min_lr",
                value: format!("{} / {} / {}", t.clip_norm, t.weight_decay, t.min_lr),
                expected: "finite non-negative numbers",
            });
        }
        positive("train.asgd_start", t.asgd_start > 0, t.asgd_start.to_string())?;
        if t.optimizer == OptimizerKind::Asgd && t.average_last > 0 {
            return Err(ConfigError::Invalid {
                key: "train.average_last",
                value: t.average_last.to_string(),
                expected: "0 with train.optimizer = \"asgd\" (both write averaged/: the ASGD mean is the average)",
            });
        }
        self.validate_generated_data()?;
        self.validate_combinations()?;
        self.validate_objective()?;
        let nonneg = |key: &'static str, v: f64| {
            if v >= 0.0 && v.is_finite() {
                Ok(())
            } else {
                Err(ConfigError::Invalid { key, value: v.to_string(), expected: "a finite non-negative number" })
            }
        };
        nonneg("eval.dynamic_lr", self.eval.dynamic_lr)?;
        nonneg("eval.dynamic_decay", self.eval.dynamic_decay)?;
        nonneg("decode.lenpen", self.decode.lenpen)?;
        nonneg("decode.max_len_a", self.decode.max_len_a)?;
        let d = &self.decode;
        positive("decode.beam", d.beam > 0, d.beam.to_string())?;
        if !(d.top_p > 0.0 && d.top_p <= 1.0) {
            return Err(ConfigError::Invalid {
                key: "decode.top_p",
                value: d.top_p.to_string(),
                expected: "a number in (0, 1]",
            });
        }
        if d.temperature.is_nan() || d.temperature < 0.0 {
            return Err(ConfigError::Invalid {
                key: "decode.temperature",
                value: d.temperature.to_string(),
                expected: "a non-negative number",
            });
        }
        Ok(())
    }
}

impl RunConfig {
    /// `train.objective` against `model.arch`, and the masking probabilities.
    fn validate_objective(&self) -> Result<(), ConfigError> {
        let t = &self.train;
        let encoder = self.model.arch == attend_model::Arch::Encoder;
        if encoder != (t.objective == Objective::Mlm) {
            return Err(ConfigError::Invalid {
                key: "train.objective",
                value: format!("{:?} with model.arch = {:?}", t.objective, self.model.arch).to_lowercase(),
                expected: "\"mlm\" exactly when model.arch = \"encoder\" (a bidirectional encoder cannot predict the next token)",
            });
        }
        if !(t.mask_prob > 0.0 && t.mask_prob < 1.0) {
            return Err(ConfigError::Invalid {
                key: "train.mask_prob",
                value: t.mask_prob.to_string(),
                expected: "a number in (0, 1)",
            });
        }
        let ok = |p: f64| (0.0..=1.0).contains(&p);
        if !ok(t.mask_with_mask) || !ok(t.mask_with_random) || t.mask_with_mask + t.mask_with_random > 1.0 {
            return Err(ConfigError::Invalid {
                key: "train.mask_with_mask / train.mask_with_random",
                value: format!("{} / {}", t.mask_with_mask, t.mask_with_random),
                expected: "probabilities in [0, 1] whose sum is at most 1",
            });
        }
        Ok(())
    }
}

fn parse(text: &str, origin: &str) -> Result<Table, ConfigError> {
    text.parse::<Table>()
        .map_err(|e| ConfigError::Syntax { origin: origin.into(), message: e.to_string().trim().replace('\n', " ") })
}

/// `section.key=value`; the value is TOML (`3`, `0.1`, `true`, `"x"`), or a bare string.
pub fn parse_set(arg: &str) -> Result<(String, Value), ConfigError> {
    let (key, raw) = arg.split_once('=').ok_or(ConfigError::BadSet { arg: arg.into() })?;
    let key = key.trim();
    if key.is_empty() {
        return Err(ConfigError::BadSet { arg: arg.into() });
    }
    let value = format!("v = {raw}")
        .parse::<Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(raw.trim().to_string()));
    Ok((key.to_string(), value))
}

/// Lays `layer` over `base`, refusing sections and keys that `base` does not have.
fn lay_over(base: &mut Table, layer: Table, origin: &str) -> Result<(), ConfigError> {
    for (section, value) in layer {
        let Some(Value::Table(target)) = base.get_mut(&section) else {
            return Err(ConfigError::UnknownSection { origin: origin.into(), section });
        };
        let Value::Table(entries) = value else {
            return Err(ConfigError::BadValue {
                origin: origin.into(),
                key: section,
                message: "expected a [section] of keys".into(),
            });
        };
        for (key, value) in entries {
            if !target.contains_key(&key) {
                return Err(ConfigError::UnknownKey { origin: origin.into(), key: format!("{section}.{key}") });
            }
            target.insert(key, value);
        }
    }
    Ok(())
}

/// Deserializes one section; a bad value is reported with its key, found by trying each key
/// over the defaults alone.
fn section<T: DeserializeOwned>(table: &Table, name: &str, origin: &str) -> Result<T, ConfigError> {
    let entries = match table.get(name) {
        Some(Value::Table(t)) => t.clone(),
        _ => return Err(ConfigError::UnknownSection { origin: origin.into(), section: name.into() }),
    };
    T::deserialize(Value::Table(entries.clone())).map_err(|whole| {
        let defaults = parse(DEFAULT_TOML, "configs/default.toml").expect("defaults parse");
        let base = defaults[name].as_table().expect("section").clone();
        for (key, value) in &entries {
            let mut probe = base.clone();
            probe.insert(key.clone(), value.clone());
            if let Err(e) = T::deserialize(Value::Table(probe)) {
                return ConfigError::BadValue {
                    origin: origin.into(),
                    key: format!("{name}.{key}"),
                    message: format!("{} (found {value})", e.message().trim()),
                };
            }
        }
        ConfigError::BadValue { origin: origin.into(), key: name.into(), message: whole.message().into() }
    })
}

#[cfg(test)]
mod tests;
