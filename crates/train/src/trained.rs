//! A trained language-model run, loaded back from its directory for `eval` and `generate`:
//! `config.toml`, `vocab.json` or `tokenizer.json`, and the weights of `averaged/`, else `best/`, else the latest
//! checkpoint.

use std::path::{Path, PathBuf};

use attend_model::DecoderOnly;
use burn::tensor::backend::Backend;

use crate::checkpoint::{self, CheckpointError};
use crate::config::RunConfig;
use crate::data::codec::LmCodec;
use crate::error::TrainError;

/// A run's model with what is needed to read and write its text.
pub struct TrainedLm<B: Backend> {
    pub config: RunConfig,
    /// How its text becomes ids.
    pub codec: LmCodec,
    pub model: DecoderOnly<B>,
    /// The directory the weights came from.
    pub weights: PathBuf,
}

/// The weights directory a run is evaluated with: `averaged/`, `best/`, else the latest.
pub fn weights_dir(run: &Path) -> Result<PathBuf, CheckpointError> {
    for name in ["averaged", "best"] {
        let dir = run.join(name);
        if dir.join("state.json").is_file() {
            return Ok(dir);
        }
    }
    checkpoint::latest(&run.join("checkpoints"))
        .map(|(_, dir)| dir)
        .ok_or_else(|| CheckpointError::NoCheckpoint(run.to_path_buf()))
}

/// Loads the language model of run directory `run`.
pub fn load_lm<B: Backend>(run: &Path, device: &B::Device) -> Result<TrainedLm<B>, TrainError> {
    let config = RunConfig::from_resolved(&run.join("config.toml"))?;
    if matches!(config.model.arch, attend_model::Arch::Seq2seq | attend_model::Arch::Encoder) {
        return Err(TrainError::NotLm);
    }
    let codec = LmCodec::load(run)?;
    let weights = weights_dir(run)?;
    // Evaluation and generation never drop out (dropout is a module setting, not a weight).
    let model_config = attend_model::ModelConfig { dropout: 0.0, attention_dropout: 0.0, ..config.model.clone() };
    let model = crate::average::load_model(&model_config, codec.len(), &weights, device)?;
    Ok(TrainedLm { config, codec, model, weights })
}
