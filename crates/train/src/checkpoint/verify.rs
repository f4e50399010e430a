//! The checks a checkpoint's record files pass before Burn reads them: the walk of
//! [`records::scan`], then the tensors found against the model the run's config builds.

use std::collections::HashMap;
use std::path::Path;

use super::records::{self, Tensors};
use super::CheckpointError;
use crate::finetune::ParamInfo;

fn corrupt(path: &Path, message: String) -> CheckpointError {
    CheckpointError::Corrupt { path: path.to_path_buf(), message }
}

fn scan_file(path: &Path) -> Result<Tensors, CheckpointError> {
    let bytes = std::fs::read(path).map_err(|source| CheckpointError::Io { path: path.to_path_buf(), source })?;
    records::scan(&bytes).map_err(|m| corrupt(path, m))
}

/// Checks the weights file `path` (`model.mpk`, an ASGD mean) against `expected`, the
/// parameters of the model the config builds: the same paths with the same shapes, every value
/// finite. Returns the tensors found (their ids name the optimizer's entries).
pub fn model_file(path: &Path, expected: &[ParamInfo]) -> Result<Tensors, CheckpointError> {
    let found = scan_file(path)?;
    let by_path: HashMap<&str, &records::TensorRecord> = found.iter().map(|t| (t.path.as_str(), t)).collect();
    for param in expected {
        match by_path.get(param.path.as_str()) {
            None => {
                return Err(corrupt(
                    path,
                    format!("has no parameter {}, which the run's model (config.toml) has", param.path),
                ))
            }
            Some(t) if t.shape != param.shape => {
                return Err(corrupt(
                    path,
                    format!(
                        "parameter {} is {:?} in the file and {:?} in the run's model (config.toml)",
                        param.path, t.shape, param.shape
                    ),
                ))
            }
            Some(t) if t.dtype != "F32" && t.dtype != "F64" => {
                return Err(corrupt(path, format!("parameter {} holds {} values, not floats", param.path, t.dtype)))
            }
            Some(_) => {}
        }
    }
    if let Some(extra) = found.iter().find(|t| !expected.iter().any(|p| p.path == t.path)) {
        return Err(corrupt(
            path,
            format!("holds a tensor {}, which the run's model (config.toml) does not have", extra.path),
        ));
    }
    if let Some(t) = found.iter().find(|t| t.first_non_finite.is_some()) {
        return Err(corrupt(
            path,
            format!(
                "parameter {} holds a non-finite value (NaN or infinity) at element {}: these weights cannot be used",
                t.path,
                t.first_non_finite.unwrap_or_default()
            ),
        ));
    }
    Ok(found)
}

/// Checks the optimizer state `path` (`optimizer.mpk`): every tensor belongs to a parameter of
/// `model` (by id, its first path segment) and has that parameter's shape.
pub fn optimizer_file(path: &Path, model: &Tensors) -> Result<(), CheckpointError> {
    let shapes: HashMap<&str, (&str, &[usize])> =
        model.iter().filter_map(|t| Some((t.id.as_deref()?, (t.path.as_str(), t.shape.as_slice())))).collect();
    for t in scan_file(path)? {
        let id = t.path.split('.').next().unwrap_or_default();
        let Some((param, shape)) = shapes.get(id) else {
            return Err(corrupt(
                path,
                format!("holds state {} for a parameter id the model file does not have", t.path),
            ));
        };
        if t.shape != *shape {
            return Err(corrupt(
                path,
                format!("state {} is {:?}, but its parameter {param} is {shape:?}", t.path, t.shape),
            ));
        }
    }
    Ok(())
}
