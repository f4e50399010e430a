//! On `--resume`, the vocabulary the data gives now against the one the run was trained with:
//! a run codes its data afresh when it resumes, and a changed corpus (or `--data-dir`) that
//! still gives a vocabulary of the same size would otherwise go on training with its ids
//! remapped, the model none the wiser.

use std::path::{Path, PathBuf};

use crate::error::{io_err, TrainError};

/// Writes the vocabulary as a fresh run would (`write_vocab`, into a directory of its own
/// under the system's temporary directory, removed afterwards) and compares each file with the
/// run's of the same name in `run`: an error naming the run's file where one differs or is
/// missing.
pub(crate) fn check_unchanged(
    run: &Path,
    write_vocab: impl FnOnce(&Path) -> std::io::Result<()>,
) -> Result<(), TrainError> {
    let scratch = scratch_dir();
    std::fs::create_dir_all(&scratch).map_err(io_err(&scratch))?;
    let result = compare(run, &scratch, write_vocab);
    // Best effort: what is left in the temporary directory is the system's to clean.
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn compare(
    run: &Path,
    scratch: &Path,
    write_vocab: impl FnOnce(&Path) -> std::io::Result<()>,
) -> Result<(), TrainError> {
    write_vocab(scratch).map_err(io_err(scratch))?;
    let mut names: Vec<_> = std::fs::read_dir(scratch)
        .map_err(io_err(scratch))?
        .filter_map(|entry| entry.ok().map(|e| e.file_name()))
        .collect();
    names.sort();
    for name in names {
        let fresh = scratch.join(&name);
        let now = std::fs::read(&fresh).map_err(io_err(&fresh))?;
        let saved = run.join(&name);
        let same = match std::fs::read(&saved) {
            Ok(bytes) => bytes == now,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(source) => return Err(TrainError::Io { path: saved, source }),
        };
        if !same {
            return Err(TrainError::VocabularyChanged(saved));
        }
    }
    Ok(())
}

/// A directory name no other process or call uses.
fn scratch_dir() -> PathBuf {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir().join(format!("attend-vocab-{}-{call}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(vocab: &str) -> tempfile::TempDir {
        let run = tempfile::tempdir().unwrap();
        std::fs::write(run.path().join("vocab.json"), vocab).unwrap();
        run
    }

    #[test]
    fn the_vocabulary_the_run_was_trained_with_passes() {
        let run = run_with("[\"a\",\"b\"]");
        check_unchanged(run.path(), |dir| std::fs::write(dir.join("vocab.json"), "[\"a\",\"b\"]")).unwrap();
    }

    #[test]
    fn a_vocabulary_changed_since_the_run_began_is_refused_naming_the_runs_file() {
        let run = run_with("[\"a\",\"b\"]");
        let err = check_unchanged(run.path(), |dir| std::fs::write(dir.join("vocab.json"), "[\"b\",\"a\"]"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(&run.path().join("vocab.json").display().to_string()), "{err}");
        assert!(err.contains("differs"), "{err}");
    }

    #[test]
    fn a_run_without_the_vocabulary_file_the_data_gives_is_refused() {
        let run = run_with("[\"a\",\"b\"]");
        let err = check_unchanged(run.path(), |dir| std::fs::write(dir.join("tokenizer.json"), "{}")).unwrap_err();
        assert!(err.to_string().contains("tokenizer.json"), "{err}");
    }
}
