//! The run directory and what happens to it, for every task: where a run lives
//! ([`RunOptions`]), who watches it ([`Observer`]), how it starts (fresh, or resumed from the
//! last checkpoint with `metrics.jsonl` cut back to its step), how a checkpoint is saved, and
//! what a finished or stopped run reports ([`Summary`]).

use std::path::{Path, PathBuf};

use burn::module::AutodiffModule;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::backend::AutodiffBackend;

use crate::checkpoint::{self, CheckpointError, TrainState};
use crate::config::RunConfig;
use crate::error::{corrupt, io_err, TrainError};
use crate::metrics_log::MetricsLog;
use crate::optimizer::Optim;

type Recorder = NamedMpkFileRecorder<FullPrecisionSettings>;

/// Where the run lives and whether it continues.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub run_dir: PathBuf,
    pub data_dir: PathBuf,
    pub resume: bool,
}

/// Receives progress (the runner draws a progress bar with it).
pub trait Observer {
    fn started(&mut self, _first_step: u64, _max_steps: u64) {}
    fn step(&mut self, _step: u64, _loss: f64, _lr: f64, _tokens_per_s: f64) {}
    fn eval(&mut self, _step: u64, _loss: f64) {}
    fn note(&mut self, _message: &str) {}
    /// The loop begins (`Some(what)`, e.g. "evaluation at step 500") or ends (`None`) work
    /// outside the training steps that can take long the first time on a GPU, where new shapes
    /// mean kernels to compile and tune: evaluations, the final validation and the sample.
    fn busy(&mut self, _what: Option<&str>) {}
}

/// What a finished (or stopped) run reports; `V` is the task's validation.
#[derive(Clone, Debug)]
pub struct Summary<V> {
    pub step: u64,
    pub wall_s: f64,
    /// Training tokens processed (target tokens for translation).
    pub tokens: u64,
    pub params: u64,
    /// Parameters the optimizer updates (all but frozen ones; with LoRA, the adapters').
    pub trainable_params: u64,
    /// Every parameter of the model, adapters included.
    pub total_params: u64,
    /// Training compute: 3 × forward FLOPs per token × tokens (forward + backward).
    pub train_flops: f64,
    /// The last validation (none if the run stopped before its first evaluation and the
    /// task's validation is too costly to run for the summary alone).
    pub valid: Option<V>,
    /// What `samples.txt` holds (a generated text, or source, reference and hypothesis).
    pub sample: Option<String>,
    pub early_stopped: bool,
    pub interrupted: bool,
    /// The run had finished before this call (`--resume` of a finished run), and why:
    /// nothing was trained and nothing written.
    pub already_done: Option<&'static str>,
}

/// The freshly initialized `model` and `optim`, or both restored from the last checkpoint.
/// A fresh run writes `config.toml` and calls `write_vocab` with the run directory; a resumed
/// one checks that `write_vocab` writes what the run holds (`vocab_check`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn start<B: AutodiffBackend, M: AutodiffModule<B>>(
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
        checkpoint::recover(run)?;
        checkpoint::recover(&ckpt_root)?;
        let (step, dir) = checkpoint::latest(&ckpt_root).ok_or_else(|| CheckpointError::NoCheckpoint(run.clone()))?;
        crate::vocab_check::check_unchanged(run, write_vocab)?;
        let (model, optim, state) = load_checkpoint(&dir, step, model, optim, device)?;
        // A finished run keeps its log whole (its summary included): there is nothing to redo.
        if !(state.finished(&config.train).is_some() && log.has_summary()) {
            log.cut_to_step(step).map_err(io_err(log.path()))?;
            observer.note(&format!("resumed from {} (step {step})", dir.display()));
        }
        return Ok((model, optim, state));
    }
    // A run's log, its checkpoints, or weights without either (an imported run's `best/`):
    // a fresh start would write over them.
    let held = [run.join("best"), run.join("averaged")];
    if log.path().exists() || ckpt_root.exists() || held.iter().any(|p| p.exists()) {
        return Err(TrainError::RunExists(run.clone()));
    }
    std::fs::create_dir_all(run).map_err(io_err(run))?;
    let path = run.join("config.toml");
    crate::whole_file::write_whole(&path, config.to_toml()).map_err(io_err(&path))?;
    // A start that failed before its first log line may have left the other kind of
    // vocabulary file; loaders take `tokenizer.json` first, so only this run's may stay.
    for name in [crate::data::codec::VOCAB_FILE, crate::data::codec::TOKENIZER_FILE] {
        let path = run.join(name);
        if path.exists() {
            std::fs::remove_file(&path).map_err(io_err(&path))?;
        }
    }
    write_vocab(run).map_err(io_err(run))?;
    let state = TrainState::fresh(config.train.seed);
    Ok((model, optim, state))
}

/// What a peer that does not write (a data-parallel run's peers other than 0) starts from,
/// once peer 0 has started the run: the fresh `model` and `optim`, or the last checkpoint's.
/// Reads the run directory and changes nothing in it.
pub(crate) fn join<B: AutodiffBackend, M: AutodiffModule<B>>(
    config: &RunConfig,
    opts: &RunOptions,
    model: M,
    optim: Optim<B, M>,
    device: &B::Device,
) -> Result<(M, Optim<B, M>, TrainState), TrainError> {
    if !opts.resume {
        return Ok((model, optim, TrainState::fresh(config.train.seed)));
    }
    let run = &opts.run_dir;
    let (step, dir) =
        checkpoint::latest(&run.join("checkpoints")).ok_or_else(|| CheckpointError::NoCheckpoint(run.clone()))?;
    load_checkpoint(&dir, step, model, optim, device)
}

/// Restores `model` and `optim` from checkpoint directory `dir` (of step `step`), after
/// checking every file against the manifest, the state's step against the directory's, and
/// every record against `model` (so Burn parses nothing unchecked).
pub fn load_checkpoint<B: AutodiffBackend, M: AutodiffModule<B>>(
    dir: &Path,
    step: u64,
    model: M,
    optim: Optim<B, M>,
    device: &B::Device,
) -> Result<(M, Optim<B, M>, TrainState), TrainError> {
    let state = checkpoint::read_state(dir)?;
    if state.step != step {
        let path = dir.join("state.json");
        let message = format!("says step {}, but it is the checkpoint of step {step}", state.step);
        return Err(CheckpointError::Corrupt { path, message }.into());
    }
    let expected = crate::finetune::parameters(&model);
    let tensors = checkpoint::verify::model_file(&dir.join("model.mpk"), &expected)?;
    checkpoint::verify::optimizer_file(&dir.join("optimizer.mpk"), &tensors)?;
    let mean = dir.join("optimizer-mean.mpk");
    if mean.exists() {
        checkpoint::verify::model_file(&mean, &expected)?;
    }
    let model =
        model.load_file(dir.join("model"), &Recorder::new(), device).map_err(|e| corrupt(dir, "model.mpk", e))?;
    let optim =
        optim.load(&dir.join("optimizer"), state.step, &model, device).map_err(|e| corrupt(dir, "optimizer.mpk", e))?;
    Ok((model, optim, state))
}

/// Writes model, optimizer and state into checkpoint directory `dir`, atomically.
pub(crate) fn save<B: AutodiffBackend, M: AutodiffModule<B>>(
    dir: &Path,
    model: &M,
    optim: &Optim<B, M>,
    state: &TrainState,
) -> Result<(), CheckpointError> {
    checkpoint::write_atomically(dir, state, |tmp| {
        model.clone().save_file(tmp.join("model"), &Recorder::new()).map_err(|e| e.to_string())?;
        optim.save(&tmp.join("optimizer")).map_err(|e| e.to_string())
    })
}

/// Redraws `loss.svg` from `metrics.jsonl`.
pub(crate) fn plot(run: &Path, log: &MetricsLog) -> Result<(), TrainError> {
    let out = run.join("loss.svg");
    crate::plot::plot_losses(log.path(), &out).map_err(io_err(&out))
}
