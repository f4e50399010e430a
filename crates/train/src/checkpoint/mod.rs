//! Checkpoints: `checkpoints/step-NNNNNNN/` holding `model.mpk` (Burn's named MessagePack
//! recorder, full precision), `optimizer.mpk` and `state.json` (step, epoch, data position,
//! seed, best validation loss). Each is written under a temporary name and renamed into place,
//! so a crash never leaves a half-written checkpoint under a final name (docs/architecture.md).
//!
//! Nothing of a checkpoint is trusted before it is checked: `manifest.json` ([`manifest`])
//! holds every file's SHA-256, and the record files are walked and compared with the run's
//! model before Burn parses them ([`records`], [`verify`]).

pub mod manifest;
pub mod records;
pub mod verify;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Why [`TrainState::finished`] says an early-stopped run is finished.
pub const PATIENCE: &str = "train.patience (early stop)";

/// What is needed, besides weights and optimizer moments, to continue exactly.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    /// Optimizer steps taken (counted from 1).
    pub step: u64,
    /// Completed passes over the training data.
    pub epoch: u64,
    /// Batches drawn so far (every random stream derives from `(seed, position)`).
    pub data_position: u64,
    /// The run's seed.
    pub seed: u64,
    /// Best validation loss so far and the step it was reached at.
    pub best_valid_loss: Option<f64>,
    pub best_step: Option<u64>,
    /// Evaluations since the best one (for early stopping).
    pub evals_without_improvement: u64,
    /// Training tokens processed.
    pub tokens: u64,
    /// Wall time spent training, across resumes.
    pub wall_s: f64,
    /// Half-precision runs (`train.precision`): the dynamic loss scale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_scale: Option<crate::precision::LossScale>,
}

impl TrainState {
    /// The state of a run that has not taken a step yet.
    pub fn fresh(seed: u64) -> Self {
        TrainState {
            step: 0,
            epoch: 0,
            data_position: 0,
            seed,
            best_valid_loss: None,
            best_step: None,
            evals_without_improvement: 0,
            tokens: 0,
            wall_s: 0.0,
            loss_scale: None,
        }
    }

    /// Why a run in this state has nothing left to do, if it has not: `max_steps` reached,
    /// `max_epochs` reached, or early stopping (`patience` evaluations without improvement).
    pub fn finished(&self, train: &crate::config::TrainConfig) -> Option<&'static str> {
        if self.step >= train.max_steps {
            Some("train.max_steps")
        } else if train.max_epochs > 0 && self.epoch >= train.max_epochs {
            Some("train.max_epochs")
        } else if train.patience > 0 && self.evals_without_improvement >= train.patience {
            Some(PATIENCE)
        } else {
            None
        }
    }
}

/// A checkpoint that cannot be used; names the path.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: corrupt or truncated checkpoint: {message}")]
    Corrupt { path: PathBuf, message: String },
    #[error("no checkpoint to resume in {0}")]
    NoCheckpoint(PathBuf),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError + '_ {
    move |source| CheckpointError::Io { path: path.to_path_buf(), source }
}

/// The directory name of step `step`.
pub fn step_dir_name(step: u64) -> String {
    format!("step-{step:07}")
}

/// Writes a checkpoint into `final_dir` atomically: `write` fills a temporary sibling
/// directory, which is then renamed over `final_dir`.
pub fn write_atomically(
    final_dir: &Path,
    state: &TrainState,
    write: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<(), CheckpointError> {
    let parent = final_dir.parent().expect("checkpoint dir has a parent");
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let name = final_dir.file_name().expect("named").to_string_lossy();
    let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
    }
    std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
    write(&tmp).map_err(|message| CheckpointError::Corrupt { path: tmp.clone(), message })?;
    let json = serde_json::to_string_pretty(state).expect("state serializes");
    std::fs::write(tmp.join("state.json"), json).map_err(io(&tmp))?;
    manifest::write(&tmp)?;
    // On the disk before it takes the name (and before an old copy is removed): a power loss
    // after the renames finds whole files, not ones the kernel had yet to write.
    sync_tree(&tmp).map_err(io(&tmp))?;
    // Replacing a checkpoint (`best/`, `averaged/`): move the old one aside first, so that at
    // every moment one complete copy exists under a known name.
    let old = parent.join(format!(".{name}.old-{}", std::process::id()));
    if final_dir.exists() {
        if old.exists() {
            std::fs::remove_dir_all(&old).map_err(io(&old))?;
        }
        std::fs::rename(final_dir, &old).map_err(io(final_dir))?;
    }
    std::fs::rename(&tmp, final_dir).map_err(io(final_dir))?;
    sync_dir(parent).map_err(io(parent))?;
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(io(&old))?;
    }
    Ok(())
}

/// Flushes every file under `dir`, then the directories themselves, to the disk.
fn sync_tree(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            sync_tree(&path)?;
        } else {
            // Opened for writing: some systems (Windows) refuse to flush a read-only handle.
            std::fs::OpenOptions::new().write(true).open(&path)?.sync_all()?;
        }
    }
    sync_dir(dir)
}

/// Flushes a directory's entries (the names a rename changed) to the disk, where the system
/// allows opening a directory (Unix); elsewhere the renames are as durable as it makes them.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Tidies what a process killed inside [`write_atomically`] left in `parent`: a half-filled
/// `.NAME.tmp-PID` is removed; a `.NAME.old-PID` (the previous copy, moved aside) is put back
/// if `NAME` is missing (the kill came between the two renames), else removed.
pub fn recover(parent: &Path) -> Result<(), CheckpointError> {
    let Ok(entries) = std::fs::read_dir(parent) else { return Ok(()) };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(hidden) = file_name.to_str().and_then(|n| n.strip_prefix('.')) else { continue };
        let path = entry.path();
        if hidden.rsplit_once(".tmp-").is_some_and(|(_, pid)| pid.parse::<u32>().is_ok()) {
            if path.is_dir() {
                std::fs::remove_dir_all(&path).map_err(io(&path))?;
            } else {
                std::fs::remove_file(&path).map_err(io(&path))?;
            }
        } else if let Some((name, _)) = hidden.rsplit_once(".old-").filter(|(_, pid)| pid.parse::<u32>().is_ok()) {
            let final_dir = parent.join(name);
            if final_dir.exists() {
                std::fs::remove_dir_all(&path).map_err(io(&path))?;
            } else {
                std::fs::rename(&path, &final_dir).map_err(io(&final_dir))?;
            }
        }
    }
    Ok(())
}

/// Checks every file of checkpoint `dir` against its manifest, then reads `dir/state.json`.
pub fn read_state(dir: &Path) -> Result<TrainState, CheckpointError> {
    manifest::verify(dir)?;
    let path = dir.join("state.json");
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    serde_json::from_str(&text).map_err(|e| CheckpointError::Corrupt { path, message: e.to_string() })
}

/// The checkpoints under `root`, oldest first: `(step, dir)`.
pub fn list(root: &Path) -> Vec<(u64, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    let mut found: Vec<(u64, PathBuf)> = entries
        .filter_map(|e| {
            let path = e.ok()?.path();
            let step = path.file_name()?.to_str()?.strip_prefix("step-")?.parse().ok()?;
            path.join("state.json").is_file().then_some((step, path))
        })
        .collect();
    found.sort();
    found
}

/// The newest checkpoint under `root`.
pub fn latest(root: &Path) -> Option<(u64, PathBuf)> {
    list(root).pop()
}

/// Removes every checkpoint off the `every`-step schedule except the newest (the one a
/// Ctrl-C saved, once training has gone past it), then all but the newest `keep`. So the
/// checkpoints left, and the last ones averaged, are those an uninterrupted run leaves.
pub fn prune(root: &Path, keep: usize, every: u64) -> Result<(), CheckpointError> {
    let mut all = list(root);
    let newest = all.last().map(|c| c.0);
    let (off_schedule, kept): (Vec<_>, Vec<_>) =
        all.drain(..).partition(|(step, _)| step % every.max(1) != 0 && Some(*step) != newest);
    for (_, dir) in off_schedule.iter().chain(kept.iter().take(kept.len().saturating_sub(keep))) {
        std::fs::remove_dir_all(dir).map_err(io(dir))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(step: u64) -> TrainState {
        TrainState {
            step,
            epoch: 0,
            data_position: step,
            seed: 1,
            best_valid_loss: None,
            best_step: None,
            evals_without_improvement: 0,
            tokens: 0,
            wall_s: 0.0,
            loss_scale: None,
        }
    }

    /// Each limit ends the run exactly when reached, in the order max_steps, max_epochs,
    /// patience; a limit of 0 (epochs, patience) is no limit.
    #[test]
    fn a_run_is_finished_exactly_when_a_set_limit_is_reached() {
        let defaults = crate::config::RunConfig::load(None, &[]).unwrap().train;
        let train = |max_epochs, patience| crate::config::TrainConfig {
            max_steps: 10,
            max_epochs,
            patience,
            ..defaults.clone()
        };
        let at = |step, epoch, evals| TrainState { epoch, evals_without_improvement: evals, ..state(step) };
        let (none, both) = (train(0, 0), train(3, 2));
        assert_eq!(at(9, 0, 0).finished(&both), None);
        assert_eq!(at(10, 0, 0).finished(&both), Some("train.max_steps"));
        assert_eq!(at(11, 5, 5).finished(&both), Some("train.max_steps"));
        assert_eq!(at(5, 2, 1).finished(&both), None);
        assert_eq!(at(5, 3, 2).finished(&both), Some("train.max_epochs"));
        assert_eq!(at(5, 4, 0).finished(&both), Some("train.max_epochs"));
        assert_eq!(at(5, 2, 2).finished(&both), Some(PATIENCE));
        assert_eq!(at(5, 2, 3).finished(&both), Some(PATIENCE));
        assert_eq!(at(5, 7, 7).finished(&none), None, "0 epochs and 0 patience are no limits");
    }

    #[test]
    fn checkpoints_are_listed_in_order_and_pruned_to_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        for step in [10, 30, 20] {
            let d = dir.path().join(step_dir_name(step));
            write_atomically(&d, &state(step), |_| Ok(())).unwrap();
        }
        // A half-written checkpoint (no state.json) is not a checkpoint.
        std::fs::create_dir_all(dir.path().join(".step-0000040.tmp-1")).unwrap();
        assert_eq!(list(dir.path()).iter().map(|c| c.0).collect::<Vec<_>>(), [10, 20, 30]);
        prune(dir.path(), 2, 10).unwrap();
        assert_eq!(list(dir.path()).iter().map(|c| c.0).collect::<Vec<_>>(), [20, 30]);
        assert_eq!(read_state(&latest(dir.path()).unwrap().1).unwrap(), state(30));
    }

    #[test]
    fn an_off_schedule_checkpoint_is_pruned_once_a_newer_one_exists() {
        let dir = tempfile::tempdir().unwrap();
        let steps = |d: &Path| list(d).iter().map(|c| c.0).collect::<Vec<_>>();
        for step in [10, 20, 23] {
            write_atomically(&dir.path().join(step_dir_name(step)), &state(step), |_| Ok(())).unwrap();
        }
        prune(dir.path(), 5, 10).unwrap();
        assert_eq!(steps(dir.path()), [10, 20, 23], "the newest stays, on schedule or not");
        write_atomically(&dir.path().join(step_dir_name(30)), &state(30), |_| Ok(())).unwrap();
        prune(dir.path(), 5, 10).unwrap();
        assert_eq!(steps(dir.path()), [10, 20, 30]);
    }

    #[test]
    fn replacing_a_checkpoint_leaves_the_new_one_and_no_leftovers() {
        let dir = tempfile::tempdir().unwrap();
        let best = dir.path().join("best");
        write_atomically(&best, &state(1), |_| Ok(())).unwrap();
        write_atomically(&best, &state(2), |_| Ok(())).unwrap();
        assert_eq!(read_state(&best).unwrap(), state(2));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary or old copy left");
    }

    #[test]
    fn recovery_removes_half_written_copies_and_restores_one_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        write_atomically(&dir.path().join("best"), &state(1), |_| Ok(())).unwrap();
        // Killed between the renames: the old copy aside, the new one not yet in place.
        std::fs::rename(dir.path().join("best"), dir.path().join(".best.old-77")).unwrap();
        std::fs::create_dir_all(dir.path().join(".best.tmp-77")).unwrap();
        std::fs::create_dir_all(dir.path().join(".step-0000020.tmp-78")).unwrap();
        recover(dir.path()).unwrap();
        assert_eq!(read_state(&dir.path().join("best")).unwrap(), state(1));
        let names: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        assert_eq!(names, ["best"]);
    }

    #[test]
    fn a_failed_write_leaves_no_checkpoint_under_the_final_name() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join(step_dir_name(5));
        assert!(write_atomically(&d, &state(5), |_| Err("disk full".into())).is_err());
        assert!(!d.exists());
        assert!(list(dir.path()).is_empty());
    }

    #[test]
    fn corrupt_state_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("state.json"), "{\"step\": 3,").unwrap();
        manifest::write(dir.path()).unwrap();
        let err = read_state(dir.path()).unwrap_err();
        assert!(err.to_string().contains("state.json: corrupt or truncated checkpoint"), "{err}");
    }
}
