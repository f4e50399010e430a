//! The training loop, one for every [`Task`]: start or resume, then per step the task's
//! losses over `train.grad_accum` batches, backward, the end-of-step update (non-finite check,
//! global-norm clipping, the scheduled optimizer step), `metrics.jsonl`, evaluation on
//! schedule with `best/` and early stopping, checkpoints and their pruning, Ctrl-C; at the
//! end checkpoint averaging (or the ASGD mean) and the summary.
//!
//! Data parallel ([`crate::parallel`]): every peer runs this loop with its [`Peer`]; each
//! computes its rows of the batch, the gradients are averaged before clipping, and only
//! peer 0 logs, evaluates and saves. Stop decisions (Ctrl-C, early stopping) are agreed on.
//!
//! Exactness: every random draw derives from `(train.seed, position)` (batches from the data
//! position, dropout from the step), and checkpoints hold the weights, the optimizer moments and
//! [`TrainState`], so a resumed run logs the losses an uninterrupted one logs (a test).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use burn::module::AutodiffModule;
use burn::optim::GradientsAccumulator;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{ElementConversion, Tensor};
use serde_json::{json, Map, Value};

use crate::accumulate::accumulate;
use crate::average::{average_checkpoints, load_weights, write_averaged};
use crate::awake::Awake;
use crate::base_run::{start_from, BaseRun};
use crate::checkpoint::{self, TrainState};
use crate::clip::{gradient_factor, squared_global_norm};
use crate::config::RunConfig;
use crate::error::{io_err, TrainError};
use crate::finetune::{freeze, param_counts};
use crate::metrics_log::MetricsLog;
use crate::optimizer::Optim;
use crate::parallel::peer::Peer;
use crate::precision::{half_weights, LossScale};
use crate::rng::Rng;
use crate::run::{self, Observer, RunOptions, Summary};
use crate::schedule::learning_rate;
use crate::task::{Task, Validation};

/// Trains (or continues) `task` as `config` says, in `opts.run_dir`.
pub fn fit<B: AutodiffBackend, T: Task<B>>(
    task: T,
    config: &RunConfig,
    opts: &RunOptions,
    device: &B::Device,
    observer: &mut dyn Observer,
    stop: &AtomicBool,
) -> Result<Summary<T::Valid>, TrainError> {
    fit_as(task, config, opts, device, observer, stop, &Peer::sole())
}

/// [`fit`] as `peer` of a data-parallel run.
pub(crate) fn fit_as<B: AutodiffBackend, T: Task<B>>(
    mut task: T,
    config: &RunConfig,
    opts: &RunOptions,
    device: &B::Device,
    observer: &mut dyn Observer,
    stop: &AtomicBool,
    peer: &Peer,
) -> Result<Summary<T::Valid>, TrainError> {
    let t = &config.train;
    let run = &opts.run_dir;
    let ckpt_root = run.join("checkpoints");
    let log = MetricsLog::new(run.join("metrics.jsonl"));
    let report = attend_model::count(&config.model, task.vocab_size());
    let append = |event: Value| log.append(&event).map_err(io_err(log.path()));

    if !crate::precision::supported::<B>(t.precision, device) {
        return Err(TrainError::Usage(format!(
            "train.precision = \"{0}\": the {1} backend has no {0} on this device; use \"f32\" (f16: wgpu on a \
             device with shader-f16, or cuda; bf16: cuda)",
            t.precision.name(),
            B::name(device)
        )));
    }

    let awake = Awake::for_loop::<B>(peer.is_parallel()).map_err(TrainError::Usage)?;

    // 1. A fresh run, or the state of the last checkpoint.
    let mut model = {
        let _random = peer.random_lock();
        B::seed(device, t.seed);
        task.init(device)
    };
    if !opts.resume {
        if let Some(base) = BaseRun::of(config)? {
            model = start_from(&task, &base, config, model, device)?;
            observer.note(&format!("initialized from {}", base.weights.display()));
        }
    }
    // Frozen parameters (and, with LoRA adapters, all but the adapters) get no gradients.
    // Loading a checkpoint keeps this setting, so it is made before `start` either way.
    let model = freeze(model, &t.freeze, config.model.lora_rank > 0).map_err(TrainError::Freeze)?;
    let (trainable_params, total_params) = param_counts(&model);
    let (mut model, mut optim, mut state) = if peer.writes() {
        run::start(config, opts, model, Optim::new(t), &log, device, observer, |dir| task.write_vocab(dir))?
    } else {
        (model, Optim::new(t), TrainState::fresh(t.seed))
    };
    // The others read the run only once peer 0 has recovered it (or written a fresh one).
    peer.barrier::<B::InnerBackend>(device, "waiting for peer 0 to start the run")?;
    if !peer.writes() {
        (model, optim, state) = run::join(config, opts, model, optim, device)?;
    }
    let summary =
        |state: &TrainState, valid: Option<T::Valid>, sample, flags: (bool, bool, Option<&'static str>)| Summary {
            step: state.step,
            wall_s: state.wall_s,
            tokens: state.tokens,
            params: report.params,
            trainable_params,
            total_params,
            train_flops: 3.0 * report.flops_per_token as f64 * state.tokens as f64,
            valid,
            sample,
            early_stopped: flags.0,
            interrupted: flags.1,
            already_done: flags.2,
        };
    let finished = state.finished(t);
    if let (Some(reason), false) = (finished, peer.writes()) {
        return Ok(summary(&state, None, None, (false, false, Some(reason))));
    }
    if let (Some(reason), true) = (finished, log.has_summary()) {
        observer.note(&format!("the run already finished at step {} ({reason}); nothing to do", state.step));
        let valid = summary_validation(&task, &optim, &model, device)?;
        let sample = valid.as_ref().map(|v| task.sample(&model, v, device));
        return Ok(summary(&state, valid, sample, (false, false, Some(reason))));
    }

    // 2. The loop (unless a crash came after the last step, in averaging or the summary: then
    // the run ends as it would have, from its last evaluation's weights).
    let mut last_valid = None;
    let (mut early_stopped, mut interrupted) = (finished == Some(crate::checkpoint::PATIENCE), false);
    if let Some(reason) = finished {
        observer.note(&format!("the run stopped after its last step ({reason}): finishing it"));
        last_valid = Some(task.validate(&optim.eval_weights(&model), device)?);
    } else {
        observer.started(state.step + 1, t.max_steps);
    }
    // Tokens and step time since the last logged step (steps in between are not read back;
    // evaluation and checkpointing are not step time).
    let (mut tokens_since, mut seconds_since, mut steps_since) = (0.0, 0.0, 0);
    // The first step this call runs is always read back and logged: its end (the device done
    // with it) ends the start-up the runner reports (kernel compilation and tuning on a GPU).
    let first_step = state.step + 1;
    let half = t.precision.half();
    if half.is_some() && state.loss_scale.is_none() {
        state.loss_scale = Some(LossScale::default());
    }
    while finished.is_none() && state.step < t.max_steps {
        awake.arm();
        let started = Instant::now();
        let step = state.step + 1;
        let (shard, mut micro) = (peer.shard(), 0);
        if !peer.is_parallel() {
            B::seed(device, Rng::derive(t.seed, "dropout", step).next_u64());
        }
        let scale = state.loss_scale.as_ref().map_or(1.0, |s| s.scale);
        let (accumulator, nll, counted, processed) = accumulate(&model, t.grad_accum, scale, peer, || {
            // Peers sharing the process seed and draw their dropout masks one at a time.
            let _random = peer.random_lock();
            if peer.is_parallel() {
                micro += 1;
                let stream = format!("dropout/peer{}/micro{micro}", peer.index);
                B::seed(device, Rng::derive(t.seed, &stream, step).next_u64());
            }
            match half {
                Some(dtype) => task.train_loss(&half_weights(&model, dtype), &mut state, device, shard),
                None => task.train_loss(&model, &mut state, device, shard),
            }
        })?;
        state.tokens += processed as u64;
        state.epoch = task.epoch(&state);
        let last_step = step == t.max_steps || (t.max_epochs > 0 && state.epoch >= t.max_epochs);
        // The step's one device-to-host read: the loss, on logged, evaluated, saved and last steps.
        let read = |nll: Tensor<B::InnerBackend, 1>| nll.into_scalar().elem::<f64>() / counted;
        let nll = nll.expect("train.grad_accum >= 1");
        let scheduled = [t.log_every, t.eval_every, t.checkpoint_every].iter().any(|&n| step % n == 0)
            || last_step
            || step == first_step;
        // Data parallel: the logged loss is the whole batch's, and a Ctrl-C on any peer (or
        // node) stops all of them after the same step.
        let (nll, stopping) = if peer.is_parallel() {
            let (nll, stopping) = peer.exchange(&model, nll, stop.load(Ordering::Relaxed), step)?;
            (nll, Some(stopping))
        } else {
            (nll, None)
        };
        let mut loss = scheduled.then(|| read(nll.clone()));
        let (lr, applied);
        let scaling = state.loss_scale.as_mut();
        (model, lr, applied) = update(model, &mut optim, accumulator, loss, step, config, &ckpt_root, peer, scaling)?;
        if !applied {
            let scale = state.loss_scale.as_ref().map_or(1.0, |s| s.scale);
            observer.note(&format!(
                "step {step}: a gradient overflowed in {}; the step is skipped and the loss scale halved to {scale}",
                t.precision.name()
            ));
        }
        state.step = step;
        tokens_since += processed;
        steps_since += 1;
        interrupted = stopping.unwrap_or_else(|| stop.load(Ordering::Relaxed));
        if interrupted && loss.is_none() {
            // Ctrl-C between logged steps: check this step's loss before its checkpoint.
            let value = read(nll);
            refuse_non_finite(value, step, &ckpt_root)?;
            loss = Some(value);
        }
        let seconds = started.elapsed().as_secs_f64();
        state.wall_s += seconds;
        seconds_since += seconds;
        if let (Some(loss), true) = (loss, peer.writes()) {
            let tokens_per_s = tokens_since / seconds_since;
            let mut event =
                json!({"event": "train", "step": step, "loss": loss, "lr": lr, "tokens_per_s": tokens_per_s});
            if peer.is_parallel() {
                // Per step: all-reduces, transfers and waiting for the other peers.
                event["collective_ms"] = json!(peer.take_collective_seconds() * 1e3 / steps_since as f64);
            }
            (tokens_since, seconds_since, steps_since) = (0.0, 0.0, 0);
            append(event)?;
            observer.step(step, loss, lr, tokens_per_s);
            interrupted = interrupted || (!peer.is_parallel() && stop.load(Ordering::Relaxed));
        }

        // Ctrl-C saves a checkpoint but evaluates only on schedule: `best/` and the patience
        // count stay those of a run that was never stopped.
        let evaluating = step % t.eval_every == 0 || last_step;
        if evaluating && peer.writes() {
            peer.alone(true);
            let valid = busy(observer, &format!("evaluation at step {step}"), || {
                task.validate(&optim.eval_weights(&model), device)
            })?;
            append(eval_event(step, "valid", &valid, Map::new()))?;
            observer.eval(step, valid.loss());
            if let Some(headline) = valid.headline() {
                observer.note(&format!("step {step}: {headline}"));
            }
            run::plot(run, &log)?;
            if state.best_valid_loss.is_none_or(|b| valid.loss() < b) {
                state.best_valid_loss = Some(valid.loss());
                state.best_step = Some(step);
                state.evals_without_improvement = 0;
                run::save(&run.join("best"), &model, &optim, &state)?;
            } else {
                state.evals_without_improvement += 1;
            }
            last_valid = Some(valid);
        }
        early_stopped = t.patience > 0 && state.evals_without_improvement >= t.patience;
        if evaluating && t.patience > 0 {
            // Only peer 0 evaluated: the others learn its decision.
            early_stopped = peer.any::<B::InnerBackend>(early_stopped, device, "the early-stopping decision")?;
        }
        let saving = step % t.checkpoint_every == 0 || last_step || early_stopped || interrupted;
        if saving && peer.writes() {
            peer.alone(true);
            run::save(&ckpt_root.join(checkpoint::step_dir_name(step)), &model, &optim, &state)?;
            checkpoint::prune(&ckpt_root, t.keep_checkpoints.max(t.average_last), t.checkpoint_every)?;
        }
        peer.alone(false);
        if last_step || early_stopped || interrupted {
            break;
        }
    }

    // 3. Checkpoint averaging (or the ASGD mean), then the summary: peer 0's (after a last
    // check that the replicas agree on the final weights).
    if peer.is_parallel() && finished.is_none() {
        let zero = Tensor::zeros([1], device);
        peer.exchange(&model, zero, false, state.step)?;
    }
    if !peer.writes() {
        return Ok(summary(&state, None, None, (early_stopped, interrupted, None)));
    }
    if t.average_last > 0 && !interrupted {
        let all = checkpoint::list(&ckpt_root);
        let last = &all[all.len().saturating_sub(t.average_last)..];
        let out = run.join("averaged");
        average_checkpoints(|| task.init_inner(device), last, &out, device)?;
        let weights = load_weights(task.init_inner(device), &out, device)?;
        let valid = busy(observer, "validation of the averaged weights", || task.validate(&weights, device))?;
        let steps: Vec<u64> = last.iter().map(|c| c.0).collect();
        let averaged = Map::from_iter([("averaged_steps".to_string(), json!(steps))]);
        append(eval_event(state.step, "valid-averaged", &valid, averaged))?;
        let headline = valid.headline().map_or(String::new(), |h| format!(", {h}"));
        observer.note(&format!("averaged {} checkpoints: valid loss {:.4}{headline}", last.len(), valid.loss()));
    }
    if let (Some((mean, start)), false) = (optim.iterate_mean(), interrupted) {
        let steps = json!({"asgd_start": start, "last_step": state.step});
        write_averaged(&run.join("averaged"), &state, mean.clone(), steps)?;
        observer.note(&format!("averaged/ holds the ASGD mean of steps {start}..={}", state.step));
    }
    let (last_valid, sample) = busy(observer, "the final validation and sample", || {
        let valid = match last_valid {
            None => summary_validation(&task, &optim, &model, device)?,
            valid => valid,
        };
        let sample = valid.as_ref().map(|v| task.sample(&model, v, device));
        Ok::<_, TrainError>((valid, sample))
    })?;
    let result = summary(&state, last_valid, sample, (early_stopped, interrupted, None));
    if let (false, Some(valid), Some(sample)) = (interrupted, &result.valid, &result.sample) {
        let mut event = json!({"event": "summary", "step": state.step, "valid_loss": valid.loss(),
                               "valid_ppl": valid.loss().exp(), "wall_s": state.wall_s,
                               "tokens": state.tokens, "train_flops": result.train_flops,
                               "trainable_params": trainable_params, "total_params": total_params});
        event.as_object_mut().expect("an object").extend(valid.summary_fields());
        append(event)?;
        let path = run.join("samples.txt");
        crate::whole_file::write_whole(&path, format!("{sample}\n")).map_err(io_err(&path))?;
        run::plot(run, &log)?;
    }
    Ok(result)
}

/// Ends a step: refuses a non-finite loss where it was read (naming the step and the last good
/// checkpoint), averages the gradients over the peers of a data-parallel run, skips the step
/// if half precision's gradients overflowed, and takes the scheduled optimizer step with the
/// gradients multiplied by one factor (clipping by global norm, the loss scale undone).
/// Returns the updated model, the learning rate used and whether the step was taken.
#[allow(clippy::too_many_arguments)]
fn update<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: M,
    optim: &mut Optim<B, M>,
    mut accumulator: GradientsAccumulator<M>,
    loss: Option<f64>,
    step: u64,
    config: &RunConfig,
    ckpt_root: &Path,
    peer: &Peer,
    loss_scale: Option<&mut LossScale>,
) -> Result<(M, f64, bool), TrainError> {
    if let Some(loss) = loss {
        refuse_non_finite(loss, step, ckpt_root)?;
    }
    let mut grads = accumulator.grads();
    peer.mean_gradients(&model, &mut grads, step)?;
    let lr = learning_rate(&config.train, config.model.d_model, step);
    // One factor for the gradients: clipping's, and in half precision the loss scale undone,
    // both from the squared global norm (one operation); half precision reads it back to skip
    // a step whose gradients overflowed.
    let clip = config.train.clip_norm;
    let scale = loss_scale.as_ref().map_or(1.0, |s| s.scale);
    let squared = if clip > 0.0 || loss_scale.is_some() { squared_global_norm(&model, &grads) } else { None };
    if let Some(scaling) = loss_scale {
        if !scaling.check(squared.as_ref()) {
            return Ok((model, lr, false));
        }
    }
    let factor = squared.map(|squared| gradient_factor(squared, clip, scale));
    Ok((optim.step(step, lr, model, grads, factor), lr, true))
}

/// Runs `work` with `observer` told that the loop is busy with `what` meanwhile.
fn busy<R>(observer: &mut dyn Observer, what: &str, work: impl FnOnce() -> R) -> R {
    observer.busy(Some(what));
    let result = work();
    observer.busy(None);
    result
}

/// A non-finite training loss stops the run, naming the step and the last good checkpoint.
fn refuse_non_finite(loss: f64, step: u64, ckpt_root: &Path) -> Result<(), TrainError> {
    if loss.is_finite() {
        return Ok(());
    }
    let last = checkpoint::latest(ckpt_root).map_or("none".into(), |c| c.1.display().to_string());
    Err(TrainError::NonFinite { step, loss, last })
}

/// The `eval` event of `valid` on `split`, with the task's fields and `extra`.
fn eval_event<V: Validation>(step: u64, split: &str, valid: &V, extra: Map<String, Value>) -> Value {
    let mut event =
        json!({"event": "eval", "step": step, "split": split, "loss": valid.loss(), "ppl": valid.loss().exp()});
    let fields = event.as_object_mut().expect("an object");
    fields.extend(valid.eval_fields());
    fields.extend(extra);
    event
}

/// The validation a summary without one gets: the final weights', where the task finds
/// validating cheap enough ([`Task::cheap_validation`]).
fn summary_validation<B: AutodiffBackend, T: Task<B>>(
    task: &T,
    optim: &Optim<B, T::Model>,
    model: &T::Model,
    device: &B::Device,
) -> Result<Option<T::Valid>, TrainError> {
    task.cheap_validation().then(|| task.validate(&optim.eval_weights(model), device)).transpose()
}
