//! The start of a training run, shared by the language-model and translation loops: a fresh
//! run directory (refusing one that already holds a run), or the model, optimizer and
//! [`TrainState`] of the last checkpoint with `metrics.jsonl` cut back to its step (unless
//! the run had finished: see [`TrainState::finished`]).

use std::path::Path;

use burn::module::AutodiffModule;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::backend::AutodiffBackend;

use crate::checkpoint::{self, CheckpointError, TrainState};
use crate::config::RunConfig;
use crate::lm_loop::{corrupt, io_err, Observer, RunOptions, TrainError};
use crate::metrics_log::MetricsLog;
use crate::optimizer::Optim;

/// The freshly initialized `model` and `optim`, or both restored from the last checkpoint.
/// A fresh run writes `config.toml` and calls `write_vocab` with the run directory.
#[allow(clippy::too_many_arguments)]
pub(crate) fn start_run<B: AutodiffBackend, M: AutodiffModule<B>>(
    config: &RunConfig,
    opts: &RunOptions,
    model: M,
    optim: Optim<B, M>,
    log: &MetricsLog,
    device: &B::Device,
    observer: &mut dyn Observer,
    write_vocab: impl FnOnce(&Path) -> std::io::Result<()>,
) -> Result<(M, Optim<B, M>, TrainState), TrainError> {
    let run = &opts.run_dir;
    let ckpt_root = run.join("checkpoints");
    if opts.resume {
        let (step, dir) = checkpoint::latest(&ckpt_root).ok_or_else(|| CheckpointError::NoCheckpoint(run.clone()))?;
        let state = checkpoint::read_state(&dir)?;
        let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
        let model = model.load_file(dir.join("model"), &recorder, device).map_err(|e| corrupt(&dir, "model.mpk", e))?;
        let optim = optim.load(&dir.join("optimizer"), state.step, &model, device).map_err(|e| corrupt(&dir, "optimizer.mpk", e))?;
        // A finished run keeps its log whole (its summary included): there is nothing to redo.
        if state.finished(&config.train).is_none() {
            log.cut_to_step(step).map_err(io_err(log.path()))?;
            observer.note(&format!("resumed from {} (step {step})", dir.display()));
        }
        return Ok((model, optim, state));
    }
    if log.path().exists() || ckpt_root.exists() {
        return Err(TrainError::RunExists(run.clone()));
    }
    std::fs::create_dir_all(run).map_err(io_err(run))?;
    let path = run.join("config.toml");
    std::fs::write(&path, config.to_toml()).map_err(io_err(&path))?;
    write_vocab(run).map_err(io_err(run))?;
    let state = TrainState {
        step: 0,
        epoch: 0,
        data_position: 0,
        seed: config.train.seed,
        best_valid_loss: None,
        best_step: None,
        evals_without_improvement: 0,
        tokens: 0,
        wall_s: 0.0,
    };
    Ok((model, optim, state))
}
