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

#[cfg(test)]
mod tests {
    use super::*;
    use burn::module::{Module, Param};
    use burn::nn::{Linear, LinearConfig};
    use burn::optim::{GradientsParams, Optimizer};
    use burn::record::{FullPrecisionSettings, HalfPrecisionSettings, NamedMpkFileRecorder, PrecisionSettings};
    use burn::tensor::Tensor;
    use burn_ndarray::NdArray;

    type B = burn::backend::Autodiff<NdArray<f32>>;

    fn layer() -> Linear<B> {
        LinearConfig::new(3, 2).init::<B>(&Default::default())
    }

    /// `model` saved as `dir/name.mpk` at precision `S`; the file's path.
    fn saved<S: PrecisionSettings>(model: &Linear<B>, dir: &Path, name: &str) -> std::path::PathBuf {
        model.clone().save_file(dir.join(name), &NamedMpkFileRecorder::<S>::new()).unwrap();
        dir.join(format!("{name}.mpk"))
    }

    fn error(result: Result<impl std::fmt::Debug, CheckpointError>) -> String {
        result.unwrap_err().to_string()
    }

    #[test]
    fn weights_pass_only_with_the_models_paths_shapes_float_types_and_finite_values() {
        let (dir, model) = (tempfile::tempdir().unwrap(), layer());
        let expected = crate::finetune::parameters(&model);
        let file = saved::<FullPrecisionSettings>(&model, dir.path(), "model");
        assert_eq!(model_file(&file, &expected).unwrap().len(), 2);
        let mut other = expected.clone();
        other[0].shape = vec![2, 3];
        assert!(error(model_file(&file, &other)).contains("parameter weight is [3, 2] in the file and [2, 3]"));
        let mut more = expected.clone();
        more.push(ParamInfo { path: "gain".into(), shape: vec![2], trainable: true });
        assert!(error(model_file(&file, &more)).contains("has no parameter gain"));
        assert!(error(model_file(&file, &expected[..1])).contains("holds a tensor bias"));
        let half = saved::<HalfPrecisionSettings>(&model, dir.path(), "half");
        assert!(error(model_file(&half, &expected)).contains("parameter weight holds F16 values, not floats"));
        let mut broken = model.clone();
        broken.bias = Some(Param::from_tensor(Tensor::from_data([1.0f32, f32::INFINITY], &Default::default())));
        let broken = saved::<FullPrecisionSettings>(&broken, dir.path(), "broken");
        assert!(error(model_file(&broken, &expected))
            .contains("parameter bias holds a non-finite value (NaN or infinity) at element 1"));
    }

    #[test]
    fn optimizer_state_passes_only_for_the_models_ids_and_shapes() {
        let (dir, model) = (tempfile::tempdir().unwrap(), layer());
        let x = Tensor::<B, 2>::ones([4, 3], &Default::default());
        let grads = GradientsParams::from_grads(model.forward(x).sum().backward(), &model);
        let mut optim = burn::optim::AdamConfig::new().init::<B, Linear<B>>();
        let model = optim.step(1e-3, model, grads);
        let tensors = model_file(
            &saved::<FullPrecisionSettings>(&model, dir.path(), "model"),
            &crate::finetune::parameters(&model),
        )
        .unwrap();
        let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
        burn::record::Recorder::<B>::record(&recorder, optim.to_record(), dir.path().join("optimizer")).unwrap();
        let state = dir.path().join("optimizer.mpk");
        optimizer_file(&state, &tensors).unwrap();
        let mut reshaped = tensors.clone();
        reshaped[0].shape = vec![6];
        assert!(error(optimizer_file(&state, &reshaped)).contains("but its parameter weight is [6]"));
        assert!(error(optimizer_file(&state, &tensors[1..].to_vec()))
            .contains("for a parameter id the model file does not have"));
    }
}
