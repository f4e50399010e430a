//! Files that are either wholly written or not written at all: the bytes go to a temporary
//! sibling (`.NAME.tmp-PID`), are synced to the disk, and the temporary file is renamed over
//! the target. A failure on the way (a full disk, a killed process) leaves whatever was at
//! the target before, never a truncated file in its place. An error removes the temporary
//! file; a kill leaves it, and in a run directory the next `--resume` removes it
//! (`crate::checkpoint::recover` takes every `.NAME.tmp-PID`).
//!
//! For the small files a command writes whole (pictures, tables, a run's `config.toml`, an
//! export's JSON). Checkpoints, a directory of files, have their own
//! ([`crate::checkpoint::write_atomically`]).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` whole or not at all.
pub fn write_whole(path: &Path, bytes: impl AsRef<[u8]>) -> std::io::Result<()> {
    write_whole_with(path, |tmp| File::create(tmp)?.write_all(bytes.as_ref()))
}

/// Writes to `path` whole or not at all what `fill` writes to the temporary file whose path
/// it is given (for writers that take a path, as safetensors' does); an error of `fill` is
/// returned as it came, with the target untouched.
pub fn write_whole_with(path: &Path, fill: impl FnOnce(&Path) -> std::io::Result<()>) -> std::io::Result<()> {
    let tmp = temporary(path);
    let written = (|| {
        fill(&tmp)?;
        // A handle open for writing: some systems refuse to sync a read-only one.
        std::fs::OpenOptions::new().write(true).open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// The temporary sibling of `path` this process writes into.
fn temporary(path: &Path) -> PathBuf {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    dir.join(format!(".{name}.tmp-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn write_whole_replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("table3.md");
        std::fs::write(&path, "an older and longer table\n").unwrap();
        write_whole(&path, "new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        assert_eq!(names(dir.path()), ["table3.md"]);
    }

    #[test]
    fn a_write_that_fails_halfway_keeps_the_file_that_was_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("layer-0.svg");
        std::fs::write(&path, "<svg>the earlier picture</svg>").unwrap();
        let failed = write_whole_with(&path, |tmp| {
            File::create(tmp)?.write_all(b"<svg>half of")?;
            Err(std::io::Error::other("the disk is full"))
        });
        assert_eq!(failed.unwrap_err().to_string(), "the disk is full");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "<svg>the earlier picture</svg>");
        assert_eq!(names(dir.path()), ["layer-0.svg"]);
    }

    #[test]
    fn a_target_in_a_missing_directory_is_an_error_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent").join("out.svg");
        assert!(write_whole(&path, "x").is_err());
        assert!(names(dir.path()).is_empty());
    }
}
