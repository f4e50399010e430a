//! Checkpoint averaging (the paper, section 6.1: the base models average the last 5
//! checkpoints): every weight of the averaged model is the mean of that weight over the
//! checkpoints, `θ = (1/K) Σ_k θ_k`. Written to `averaged/` with `steps.json`, the steps
//! averaged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use attend_model::{DecoderOnly, ModelConfig};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorPrimitive};

use crate::checkpoint::{self, CheckpointError};

type Recorder = NamedMpkFileRecorder<FullPrecisionSettings>;

/// Loads the language model saved in checkpoint directory `dir`.
pub fn load_model<B: Backend>(
    config: &ModelConfig,
    vocab: usize,
    dir: &Path,
    device: &B::Device,
) -> Result<DecoderOnly<B>, CheckpointError> {
    let model = config.init_decoder_only::<B>(vocab, device).ok_or_else(|| CheckpointError::Corrupt {
        path: dir.to_path_buf(),
        message: "model.arch = \"seq2seq\" is not a language model".into(),
    })?;
    load_weights(model, dir, device)
}

/// Loads the weights saved in checkpoint directory `dir` into `model` (same architecture),
/// after checking the directory's manifest and the weights' paths, shapes and values against
/// `model` (so Burn never parses a damaged or mismatched file).
pub fn load_weights<B: Backend, M: Module<B>>(model: M, dir: &Path, device: &B::Device) -> Result<M, CheckpointError> {
    checkpoint::manifest::verify(dir)?;
    checkpoint::verify::model_file(&dir.join("model.mpk"), &crate::finetune::parameters(&model))?;
    model
        .load_file(dir.join("model"), &Recorder::new(), device)
        .map_err(|e| CheckpointError::Corrupt { path: dir.join("model.mpk"), message: e.to_string() })
}

/// Averages the models of `dirs` (oldest first) into `out`; `init` builds an empty model of
/// the run's architecture to load each checkpoint into.
pub fn average_checkpoints<B: Backend, M: Module<B>>(
    init: impl Fn() -> M,
    dirs: &[(u64, PathBuf)],
    out: &Path,
    device: &B::Device,
) -> Result<(), CheckpointError> {
    let (_, newest) = dirs.last().ok_or_else(|| CheckpointError::NoCheckpoint(out.to_path_buf()))?;
    let mut sum = Sum::<B>::default();
    let mut first = None;
    for (_, dir) in dirs {
        let model = load_weights::<B, M>(init(), dir, device)?;
        model.visit(&mut sum);
        first.get_or_insert(model);
    }
    let averaged = first.expect("at least one").map(&mut Divide { sum: &sum, count: dirs.len() as f64 });
    let state = checkpoint::read_state(newest)?;
    let steps: Vec<u64> = dirs.iter().map(|d| d.0).collect();
    write_averaged(out, &state, averaged, serde_json::json!({ "steps": steps }))
}

/// Writes an averaged model to `out` (atomically) with `steps.json` saying what it averages.
pub fn write_averaged<B: Backend, M: Module<B>>(
    out: &Path,
    state: &checkpoint::TrainState,
    model: M,
    steps: serde_json::Value,
) -> Result<(), CheckpointError> {
    checkpoint::write_atomically(out, state, |tmp| {
        model.save_file(tmp.join("model"), &Recorder::new()).map_err(|e| e.to_string())?;
        std::fs::write(tmp.join("steps.json"), steps.to_string()).map_err(|e| e.to_string())
    })
}

/// Sums every float parameter over the models visited, by parameter id.
#[derive(Default)]
struct Sum<B: Backend> {
    tensors: HashMap<ParamId, TensorPrimitive<B>>,
}

impl<B: Backend> ModuleVisitor<B> for Sum<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let value = param.val();
        let total = match self.tensors.remove(&param.id) {
            Some(t) => Tensor::<B, D>::from_primitive(t) + value,
            None => value,
        };
        self.tensors.insert(param.id, total.into_primitive());
    }
}

/// Replaces each parameter by its sum divided by the number of models.
struct Divide<'a, B: Backend> {
    sum: &'a Sum<B>,
    count: f64,
}

impl<B: Backend> ModuleMapper<B> for Divide<'_, B> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, tensor, mapper) = param.consume();
        let mean = match self.sum.tensors.get(&id) {
            Some(t) => Tensor::<B, D>::from_primitive(t.clone()).div_scalar(self.count),
            None => tensor,
        };
        Param::from_mapped_value(id, mean, mapper)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::{Linear, LinearConfig};
    use burn_ndarray::NdArray;

    type B = NdArray<f32>;

    fn layer() -> Linear<B> {
        LinearConfig::new(3, 2).init::<B>(&Default::default())
    }

    /// `base` (its parameter ids: those of one run's checkpoints) with every weight and bias
    /// set to `value`.
    fn filled(base: &Linear<B>, value: f32) -> Linear<B> {
        let mut m = base.clone();
        m.weight = m.weight.map(|w| w.zeros_like().add_scalar(value));
        m.bias = m.bias.map(|b| b.map(|b| b.zeros_like().add_scalar(value)));
        m
    }

    fn values(m: &Linear<B>) -> Vec<f32> {
        let mut all: Vec<f32> = m.weight.val().into_data().to_vec().unwrap();
        all.extend(m.bias.as_ref().unwrap().val().into_data().to_vec::<f32>().unwrap());
        all
    }

    /// Checkpoints holding 1, 2 and 6 everywhere average to 3 everywhere (a sum and a
    /// division: a product, a difference or no sum gives 4, −7/3 or 1), written with the
    /// steps averaged and the newest checkpoint's state.
    #[test]
    fn averaging_checkpoints_gives_every_parameters_mean_and_records_the_steps() {
        let root = tempfile::tempdir().unwrap();
        let (base, mut dirs) = (layer(), Vec::new());
        for (step, value) in [(1, 1.0), (2, 2.0), (3, 6.0)] {
            let dir = root.path().join(checkpoint::step_dir_name(step));
            let state = checkpoint::TrainState { step, ..checkpoint::TrainState::fresh(7) };
            write_averaged(&dir, &state, filled(&base, value), serde_json::json!({})).unwrap();
            dirs.push((step, dir));
        }
        let out = root.path().join("averaged");
        average_checkpoints(layer, &dirs, &out, &Default::default()).unwrap();
        let averaged = load_weights(layer(), &out, &Default::default()).unwrap();
        assert!(values(&averaged).iter().all(|v| (v - 3.0).abs() < 1e-6), "{:?}", values(&averaged));
        let steps = std::fs::read_to_string(out.join("steps.json")).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&steps).unwrap(),
            serde_json::json!({ "steps": [1, 2, 3] })
        );
        assert_eq!(checkpoint::read_state(&out).unwrap().step, 3);
    }
}
