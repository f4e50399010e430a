//! `manifest.json`: the size and SHA-256 of every other file of a checkpoint directory,
//! written last (before the directory is renamed into place) and checked before anything in
//! the directory is parsed. A byte flipped by a bad disk, a file cut short, swapped in from
//! another checkpoint, added or removed: each is refused with an error naming the file.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::CheckpointError;

/// The manifest's name inside a checkpoint directory.
pub const FILE: &str = "manifest.json";

#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    /// File name → what it held when written.
    files: BTreeMap<String, Entry>,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    bytes: u64,
    sha256: String,
}

fn corrupt(path: &Path, message: String) -> CheckpointError {
    CheckpointError::Corrupt { path: path.to_path_buf(), message }
}

fn io(path: &Path, source: std::io::Error) -> CheckpointError {
    CheckpointError::Io { path: path.to_path_buf(), source }
}

fn hash_file(path: &Path) -> Result<(u64, String), CheckpointError> {
    let mut file = std::fs::File::open(path).map_err(|e| io(path, e))?;
    let mut hasher = Sha256::new();
    let bytes = std::io::copy(&mut file, &mut hasher).map_err(|e| io(path, e))?;
    let hex = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((bytes, hex))
}

/// The plain files of `dir` but the manifest, by name (a subdirectory is an error).
fn files(dir: &Path) -> Result<Vec<String>, CheckpointError> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let entry = entry.map_err(|e| io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == FILE {
            continue;
        }
        if !entry.file_type().map_err(|e| io(&entry.path(), e))?.is_file() {
            return Err(corrupt(&entry.path(), "a checkpoint holds only plain files".into()));
        }
        names.push(name);
    }
    names.sort();
    Ok(names)
}

/// Records every file of `dir` in its manifest.
pub fn write(dir: &Path) -> Result<(), CheckpointError> {
    let mut manifest = Manifest { files: BTreeMap::new() };
    for name in files(dir)? {
        let (bytes, sha256) = hash_file(&dir.join(&name))?;
        manifest.files.insert(name, Entry { bytes, sha256 });
    }
    let path = dir.join(FILE);
    let json = serde_json::to_string_pretty(&manifest).expect("a manifest serializes");
    std::fs::write(&path, json).map_err(|e| io(&path, e))
}

/// Checks every file of `dir` against its manifest.
pub fn verify(dir: &Path) -> Result<(), CheckpointError> {
    let path = dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(corrupt(
                &path,
                "missing: every checkpoint records its files' hashes there, so this one is incomplete (or was written before attend kept manifests); it cannot be trusted".into(),
            ))
        }
        Err(e) => return Err(io(&path, e)),
    };
    let manifest: Manifest = serde_json::from_str(&text).map_err(|e| corrupt(&path, format!("unreadable: {e}")))?;
    let present = files(dir)?;
    for name in &present {
        if !manifest.files.contains_key(name) {
            return Err(corrupt(&dir.join(name), format!("not in {FILE}: it was not written with this checkpoint")));
        }
    }
    for (name, want) in &manifest.files {
        let file = dir.join(name);
        if name.contains(['/', '\\']) || name == ".." || !present.contains(name) {
            return Err(corrupt(&file, format!("missing, though {FILE} lists it")));
        }
        let (bytes, sha256) = hash_file(&file)?;
        if bytes != want.bytes {
            return Err(corrupt(&file, format!("{bytes} bytes, but {} when written: the file is damaged", want.bytes)));
        }
        if sha256 != want.sha256 {
            return Err(corrupt(
                &file,
                format!("its SHA-256 differs from the one recorded in {FILE} when it was written: the file is damaged"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory with two files and its manifest.
    fn written() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("model.mpk"), b"weights").unwrap();
        std::fs::write(dir.path().join("state.json"), b"{}").unwrap();
        write(dir.path()).unwrap();
        dir
    }

    fn error(dir: &Path) -> String {
        verify(dir).unwrap_err().to_string()
    }

    #[test]
    fn each_kind_of_damage_is_refused_naming_the_file_and_what_differs() {
        let dir = written();
        verify(dir.path()).unwrap();
        std::fs::write(dir.path().join("model.mpk"), b"weighTs").unwrap();
        assert!(error(dir.path()).contains("model.mpk: corrupt or truncated checkpoint: its SHA-256 differs"));
        std::fs::write(dir.path().join("model.mpk"), b"weight").unwrap();
        assert!(error(dir.path()).contains("model.mpk: corrupt or truncated checkpoint: 6 bytes, but 7 when written"));
        let dir = written();
        std::fs::write(dir.path().join("extra.bin"), b"").unwrap();
        assert!(error(dir.path()).contains("extra.bin: corrupt or truncated checkpoint: not in manifest.json"));
        let dir = written();
        std::fs::remove_file(dir.path().join("state.json")).unwrap();
        assert!(error(dir.path())
            .contains("state.json: corrupt or truncated checkpoint: missing, though manifest.json lists it"));
        let dir = written();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert!(error(dir.path()).contains("a checkpoint holds only plain files"));
    }

    #[test]
    fn a_missing_manifest_is_refused_and_an_unreadable_one_is_an_io_error() {
        let dir = written();
        std::fs::remove_file(dir.path().join(FILE)).unwrap();
        assert!(error(dir.path()).contains("manifest.json: corrupt or truncated checkpoint: missing"));
        std::fs::create_dir(dir.path().join(FILE)).unwrap();
        assert!(matches!(verify(dir.path()), Err(CheckpointError::Io { .. })), "a directory, not a missing file");
    }
}
