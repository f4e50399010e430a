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

/// The run directory a `train` command uses without `--run`: `runs/<config file stem>`, or
/// `runs/default` for the embedded default.
pub fn default_run_dir(file: Option<&Path>) -> PathBuf {
    let stem = file.and_then(Path::file_stem).map_or("default".into(), |s| s.to_string_lossy().into_owned());
    PathBuf::from("runs").join(stem)
}
