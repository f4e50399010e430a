//! The language-model training loop: batches, forward, loss, backward, global-norm clipping,
//! the scheduled optimizer step, evaluation, checkpoints, and exact resume.
//!
//! Exactness: every random draw derives from `(train.seed, position)` (batches from the data
//! position, dropout from the step), and checkpoints hold the weights, the optimizer moments and
//! [`TrainState`], so a resumed run logs the losses an uninterrupted one logs (a test).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use attend_model::{DecoderOnly, Positions};
use burn::module::AutodiffModule;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{ElementConversion, Int, Tensor, TensorData};
use serde_json::json;

use crate::average::{average_checkpoints, load_model, write_averaged};
use crate::checkpoint::{self, CheckpointError, TrainState};
use crate::config::{RunConfig, Sampling};
use crate::data::lm_batches::{random_batch, sequential_batch, LmBatch};
use crate::data::lm_dataset::{load_lm, DataError, LmData};
use crate::lm_eval::{score, Scored};
use crate::metrics_log::MetricsLog;
use crate::objective::cross_entropy;
use crate::optimizer::{clip_global_norm, Optim};
use crate::rng::Rng;
use crate::run_start::start_run;
use crate::schedule::learning_rate;

/// Where the run lives and whether it continues.
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
}

/// What a finished (or stopped) run reports.
#[derive(Clone, Debug)]
pub struct LmSummary {
    pub step: u64,
    pub valid: Scored,
    pub entropy_rate: Option<f64>,
    pub wall_s: f64,
    pub tokens: u64,
    pub params: u64,
    /// Training compute: 3 × forward FLOPs per token × tokens (forward + backward).
    pub train_flops: f64,
    pub sample: String,
    pub early_stopped: bool,
    pub interrupted: bool,
    pub already_done: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{0} already holds a run: continue it with --resume, or choose another --run")]
    RunExists(PathBuf),
    #[error("step {step}: the loss is {loss}; stopped. The last good checkpoint is {last}")]
    NonFinite { step: u64, loss: f64, last: String },
    #[error("{what}: the stream has {len} tokens, too few for {needs}")]
    TooShort { what: String, len: usize, needs: String },
    #[error("{what}: {len} tokens with its end-of-sentence mark, more than the model's model.block_size = {limit} learned positions")]
    TooLong { what: String, len: usize, limit: usize },
    #[error(transparent)]
    Prompt(#[from] crate::generate::PromptError),
    #[error("model.arch = \"seq2seq\" is a translation model; this command needs a language model (arch = \"lm\" or \"notes\")")]
    NotLm,
    #[error("{0} holds a language model (model.arch = \"lm\" or \"notes\"); translation needs an encoder-decoder run (arch = \"seq2seq\")")]
    NotMt(PathBuf),
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> TrainError + '_ {
    move |source| TrainError::Io { path: path.to_path_buf(), source }
}

type Recorder = NamedMpkFileRecorder<FullPrecisionSettings>;

/// Trains (or continues) a language model as `config` says, in `opts.run_dir`.
pub fn train_lm<B: AutodiffBackend>(
    config: &RunConfig,
    opts: &RunOptions,
    device: &B::Device,
    observer: &mut dyn Observer,
    stop: &AtomicBool,
) -> Result<LmSummary, TrainError> {
    let data = load_lm(&config.data, &opts.data_dir)?;
    let block = config.model.block_size;
    let dataset = &config.data.dataset;
    for (split, len) in [("training", data.train.len()), ("validation", data.valid.len())] {
        if len <= block + 1 {
            let needs = format!("model.block_size = {block}");
            return Err(TrainError::TooShort { what: format!("{dataset}: {split} split"), len, needs });
        }
    }
    let lanes = config.train.batch_size;
    if config.train.sampling == Sampling::Sequential && (data.train.len() - 1) / lanes < block {
        let needs = format!("train.batch_size = {lanes} sequential lanes of model.block_size = {block}");
        return Err(TrainError::TooShort { what: format!("{dataset}: training split"), len: data.train.len(), needs });
    }
    let vocab_size = data.vocab.len();
    let t = &config.train;
    let run = &opts.run_dir;
    let ckpt_root = run.join("checkpoints");
    let log = MetricsLog::new(run.join("metrics.jsonl"));
    let report = attend_model::count(&config.model, vocab_size);

    // 1. A fresh run, or the state of the last checkpoint.
    B::seed(device, t.seed);
    let model: DecoderOnly<B> = config.model.init_decoder_only(vocab_size, device).ok_or(TrainError::NotLm)?;
    let vocab_json = serde_json::to_string(&data.vocab).expect("vocab serializes");
    let (mut model, mut optim, mut state) = start_run(config, opts, model, Optim::new(t), &log, device, observer, |run| {
        std::fs::write(run.join("vocab.json"), vocab_json)
    })?;
    let summary = |state: &TrainState, valid: Scored, model: &DecoderOnly<B>, flags: (bool, bool, bool)| LmSummary {
        step: state.step,
        valid,
        entropy_rate: data.entropy_rate,
        wall_s: state.wall_s,
        tokens: state.tokens,
        params: report.params,
        train_flops: 3.0 * report.flops_per_token as f64 * state.tokens as f64,
        sample: sample_text(model, &data, config, device),
        early_stopped: flags.0,
        interrupted: flags.1,
        already_done: flags.2,
    };
    let evaluate = |inner: &DecoderOnly<B::InnerBackend>| {
        score(inner, &data.valid, block, config.eval.batch_size, data.min_context, t.eval_batches, device)
    };
    if let Some(reason) = state.finished(t) {
        observer.note(&format!("the run already finished at step {} ({reason}); nothing to do", state.step));
        let valid = evaluate(&optim.eval_weights(&model));
        return Ok(summary(&state, valid, &model, (false, false, true)));
    }

    // 2. The loop.
    observer.started(state.step + 1, t.max_steps);
    let tokens_per_step = (t.batch_size * block * t.grad_accum) as u64;
    let mut last_valid = None;
    let mut early_stopped = false;
    let mut interrupted = false;
    while state.step < t.max_steps {
        let started = Instant::now();
        let step = state.step + 1;
        B::seed(device, Rng::derive(t.seed, "dropout", step).next_u64());
        let mut accumulator = GradientsAccumulator::<DecoderOnly<B>>::new();
        let (mut nll, mut counted) = (0.0, 0.0);
        for _ in 0..t.grad_accum {
            let batch = next_batch(&data, config, state.data_position);
            state.data_position += 1;
            let (x, y) = batch_tensors::<B>(&batch, device);
            let losses = cross_entropy(model.forward(x), y, None, t.label_smoothing);
            nll += losses.nll_sum.clone().into_scalar().elem::<f64>();
            counted += losses.count;
            let grads = losses.objective.div_scalar(t.grad_accum as f64).backward();
            accumulator.accumulate(&model, GradientsParams::from_grads(grads, &model));
        }
        let loss = nll / counted;
        let lr;
        (model, lr) = update(model, &mut optim, accumulator, loss, step, config, &ckpt_root)?;
        state.step = step;
        state.tokens += tokens_per_step;
        state.epoch = state.tokens / data.train.len() as u64;
        let seconds = started.elapsed().as_secs_f64();
        state.wall_s += seconds;
        let tokens_per_s = tokens_per_step as f64 / seconds;
        log.append(&json!({"event": "train", "step": step, "loss": loss, "lr": lr, "tokens_per_s": tokens_per_s}))
            .map_err(io_err(log.path()))?;
        observer.step(step, loss, lr, tokens_per_s);

        let last_step = step == t.max_steps || (t.max_epochs > 0 && state.epoch >= t.max_epochs);
        interrupted = stop.load(Ordering::Relaxed);
        // Ctrl-C saves a checkpoint but evaluates only on schedule: `best/` and the patience
        // count stay those of a run that was never stopped.
        if step % t.eval_every == 0 || last_step {
            let valid = evaluate(&optim.eval_weights(&model));
            log.append(&json!({"event": "eval", "step": step, "split": "valid", "loss": valid.loss(), "ppl": valid.loss().exp()}))
                .map_err(io_err(log.path()))?;
            observer.eval(step, valid.loss());
            plot(run, &log)?;
            if state.best_valid_loss.is_none_or(|b| valid.loss() < b) {
                state.best_valid_loss = Some(valid.loss());
                state.best_step = Some(step);
                state.evals_without_improvement = 0;
                save(&run.join("best"), &model, &optim, &state)?;
            } else {
                state.evals_without_improvement += 1;
                early_stopped = t.patience > 0 && state.evals_without_improvement >= t.patience;
            }
            last_valid = Some(valid);
        }
        if step % t.checkpoint_every == 0 || last_step || early_stopped || interrupted {
            save(&ckpt_root.join(checkpoint::step_dir_name(step)), &model, &optim, &state)?;
            checkpoint::prune(&ckpt_root, t.keep_checkpoints.max(t.average_last).max(1), t.checkpoint_every)?;
        }
        if last_step || early_stopped || interrupted {
            break;
        }
    }

    // 3. Checkpoint averaging, then the summary.
    if t.average_last > 0 && !interrupted {
        let all = checkpoint::list(&ckpt_root);
        let last = &all[all.len().saturating_sub(t.average_last)..];
        let out = run.join("averaged");
        let init = || config.model.init_decoder_only::<B::InnerBackend>(vocab_size, device).expect("checked at the start");
        average_checkpoints(init, last, &out, device)?;
        let averaged = load_model::<B::InnerBackend>(&config.model, vocab_size, &out, device)?;
        let scored = score(&averaged, &data.valid, block, config.eval.batch_size, data.min_context, t.eval_batches, device);
        log.append(&json!({"event": "eval", "step": state.step, "split": "valid-averaged", "loss": scored.loss(),
                           "ppl": scored.loss().exp(), "averaged_steps": last.iter().map(|c| c.0).collect::<Vec<_>>()}))
            .map_err(io_err(log.path()))?;
        observer.note(&format!("averaged {} checkpoints: valid loss {:.4}", last.len(), scored.loss()));
    }
    if let (Some((mean, start)), false) = (optim.iterate_mean(), interrupted) {
        let steps = json!({"asgd_start": start, "last_step": state.step});
        write_averaged(&run.join("averaged"), &state, mean.clone(), steps)?;
        observer.note(&format!("averaged/ holds the ASGD mean of steps {start}..={}", state.step));
    }
    let valid = last_valid.unwrap_or_else(|| evaluate(&optim.eval_weights(&model)));
    let result = summary(&state, valid, &model, (early_stopped, interrupted, false));
    let mut event = json!({"event": "summary", "step": state.step, "valid_loss": valid.loss(),
                           "valid_ppl": valid.loss().exp(), "wall_s": state.wall_s,
                           "tokens": state.tokens, "train_flops": result.train_flops});
    if let Some(h) = data.entropy_rate {
        event["entropy_rate"] = json!(h);
    }
    if !interrupted {
        log.append(&event).map_err(io_err(log.path()))?;
        let path = run.join("samples.txt");
        std::fs::write(&path, format!("{}\n", result.sample)).map_err(io_err(&path))?;
        plot(run, &log)?;
    }
    Ok(result)
}

/// Redraws `loss.svg` from `metrics.jsonl`.
pub(crate) fn plot(run: &Path, log: &MetricsLog) -> Result<(), TrainError> {
    let out = run.join("loss.svg");
    crate::plot::plot_losses(log.path(), &out).map_err(io_err(&out))
}

pub(crate) fn corrupt(dir: &Path, file: &str, e: impl std::fmt::Display) -> CheckpointError {
    CheckpointError::Corrupt { path: dir.join(file), message: e.to_string() }
}

/// Ends a step: refuses a non-finite loss (naming the step and the last good checkpoint),
/// clips the accumulated gradients by global norm and takes the scheduled optimizer step.
/// Returns the updated model and the learning rate used.
pub(crate) fn update<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: M,
    optim: &mut Optim<B, M>,
    mut accumulator: GradientsAccumulator<M>,
    loss: f64,
    step: u64,
    config: &RunConfig,
    ckpt_root: &Path,
) -> Result<(M, f64), TrainError> {
    if !loss.is_finite() {
        let last = checkpoint::latest(ckpt_root).map_or("none".into(), |c| c.1.display().to_string());
        return Err(TrainError::NonFinite { step, loss, last });
    }
    let mut grads = accumulator.grads();
    clip_global_norm(&model, &mut grads, config.train.clip_norm);
    let lr = learning_rate(&config.train, config.model.d_model, step);
    Ok((optim.step(step, lr, model, grads), lr))
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

/// Batch number `position` of the training stream.
fn next_batch(data: &LmData, config: &RunConfig, position: u64) -> LmBatch {
    let (t, block) = (&config.train, config.model.block_size);
    match t.sampling {
        Sampling::Random => random_batch(&data.train, t.batch_size, block, t.seed, position),
        Sampling::Sequential => sequential_batch(&data.train, t.batch_size, block, position as usize),
    }
}

fn batch_tensors<B: AutodiffBackend>(batch: &LmBatch, device: &B::Device) -> (Tensor<B, 2, Int>, Tensor<B, 2, Int>) {
    let shape = [batch.batch, batch.block];
    let to = |v: &[u32]| {
        Tensor::<B, 2, Int>::from_data(TensorData::new(v.iter().map(|&t| t as i64).collect::<Vec<_>>(), shape), device)
    };
    (to(&batch.inputs), to(&batch.targets))
}

/// A short sample for the summary: sampled from the model after the first validation token.
fn sample_text<B: AutodiffBackend>(model: &DecoderOnly<B>, data: &LmData, config: &RunConfig, device: &B::Device) -> String {
    use attend_model::decode::{sample, SampleOptions};
    let inner = model.valid();
    let prompt = vec![data.valid[0] as i64];
    let room = if config.model.positions == Positions::Learned { config.model.block_size - 1 } else { config.decode.max_tokens };
    let options = SampleOptions {
        max_new_tokens: config.decode.max_tokens.min(room),
        temperature: config.decode.temperature,
        top_k: (config.decode.top_k > 0).then_some(config.decode.top_k),
        top_p: (config.decode.top_p < 1.0).then_some(config.decode.top_p),
        seed: config.decode.seed,
        eos: None,
    };
    let x = Tensor::<B::InnerBackend, 2, Int>::from_data(TensorData::new(prompt, [1, 1]), device);
    let out = sample(&inner, inner.empty_cache(), x, &options);
    let mut ids = vec![data.valid[0]];
    ids.extend(&out[0]);
    data.vocab.decode(&ids)
}
