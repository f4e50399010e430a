//! The configuration a `train` command runs with: for a new run the defaults, the file and
//! each `--set`; for `--resume` the run's own `config.toml` (a repeated `--config`, the
//! command that started the run, only names the run directory and must describe that run).

use std::path::{Path, PathBuf};

use super::{ConfigError, RunConfig};

impl RunConfig {
    /// What `train [--config FILE] [--set ...] [--resume]` runs with, in run directory `run`.
    pub fn for_train(file: Option<&Path>, sets: &[String], run: &Path, resume: bool) -> Result<Self, ConfigError> {
        if !resume {
            return Self::load(file, sets);
        }
        let stored_path = run.join("config.toml");
        if !sets.is_empty() {
            return Err(ConfigError::SetOnResume { stored: stored_path });
        }
        if !stored_path.is_file() {
            return Err(ConfigError::NothingToResume(run.to_path_buf()));
        }
        let stored = Self::from_resolved(&stored_path)?;
        if let Some(file) = file {
            if let Some(difference) = Self::load(Some(file), &[])?.first_difference(&stored) {
                return Err(ConfigError::ResumeMismatch { file: file.to_path_buf(), stored: stored_path, difference });
            }
        }
        Ok(stored)
    }
}

/// Checks that the file at `path` (already read into `config`) names every key that `config`
/// serializes (so none came from the defaults).
pub(super) fn require_every_key(config: &RunConfig, path: &Path) -> Result<(), ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io { path: path.to_path_buf(), source })?;
    let file: toml::Table = text.parse().map_err(|e: toml::de::Error| ConfigError::Syntax {
        origin: path.display().to_string(),
        message: e.to_string().trim().replace('\n', " "),
    })?;
    let full: toml::Table = config.to_toml().parse().expect("serialized TOML parses");
    for (section, keys) in &full {
        let theirs = file.get(section).and_then(toml::Value::as_table);
        for key in keys.as_table().map(|t| t.keys().collect::<Vec<_>>()).unwrap_or_default() {
            if theirs.is_none_or(|t| !t.contains_key(key)) {
                return Err(ConfigError::Incomplete { path: path.to_path_buf(), key: format!("{section}.{key}") });
            }
        }
    }
    Ok(())
}

/// The run directory a `train` command uses without `--run`: `runs/<config file stem>`, or
/// `runs/default` for the embedded default.
pub fn default_run_dir(file: Option<&Path>) -> PathBuf {
    let stem = file.and_then(Path::file_stem).map_or("default".into(), |s| s.to_string_lossy().into_owned());
    PathBuf::from("runs").join(stem)
}
