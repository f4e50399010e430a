//! The translation training loop (the paper's recipe): token-budget batches of sentence
//! pairs with padding masks, label-smoothed cross-entropy over real target positions, the
//! scheduled optimizer, and evaluation by loss and by BLEU of beam-search translations
//! (`attend-metrics`, sacreBLEU's defaults). Checkpoints and resume as the LM loop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use attend_model::TranslationModel;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::ElementConversion;
use serde_json::json;

use crate::average::{average_checkpoints, load_weights, write_averaged};
use crate::checkpoint;
use crate::config::RunConfig;
use crate::data::mt_batches::{pad_batch, token_budget_batches};
use crate::data::mt_dataset::{load_mt, MtData, IDS};
use crate::mt_eval::{forward_batch, teacher_forced_loss, translate_and_score};
use crate::lm_loop::{io_err, plot, save, update, Observer, RunOptions, TrainError};
use crate::metrics_log::MetricsLog;
use crate::objective::cross_entropy;
use crate::optimizer::Optim;
use crate::rng::Rng;
use crate::run_start::start_run;
use crate::translate::{check_lengths, TranslateOptions};

/// What a translation run reports.
#[derive(Clone, Debug)]
pub struct MtSummary {
    pub step: u64,
    pub wall_s: f64,
    pub tokens: u64,
    pub params: u64,
    pub train_flops: f64,
    /// The validation scores of the last evaluation (none if the run stopped before one).
    pub valid: Option<MtValid>,
    pub interrupted: bool,
    pub early_stopped: bool,
    /// The run had finished before this call (`--resume` of a finished run): nothing was done;
    /// its scores are in `metrics.jsonl`.
    pub already_done: Option<&'static str>,
}

/// Loss and BLEU on the validation split, and one (source, reference, hypothesis) sample.
#[derive(Clone, Debug)]
pub struct MtValid {
    pub loss: f64,
    pub bleu: f64,
    pub signature: String,
    pub sample: (String, String, String),
}

/// Trains (or continues) a translation model as `config` says, in `opts.run_dir`.
pub fn train_mt<B: AutodiffBackend>(
    config: &RunConfig,
    opts: &RunOptions,
    device: &B::Device,
    observer: &mut dyn Observer,
    stop: &AtomicBool,
) -> Result<MtSummary, TrainError> {
    let data = load_mt(&config.data, &opts.data_dir)?;
    let vocab = data.tokenizer.vocab_size();
    let t = &config.train;
    let run = &opts.run_dir;
    let ckpt_root = run.join("checkpoints");
    let log = MetricsLog::new(run.join("metrics.jsonl"));
    let report = attend_model::count(&config.model, vocab);
    let rows = if t.batch_tokens == 0 { t.batch_size } else { usize::MAX };
    let budget = if t.batch_tokens == 0 { usize::MAX } else { t.batch_tokens };
    let epoch_batches = |epoch: u64| token_budget_batches(&data.train, budget, rows, t.seed, epoch);

    // With learned positions every sentence must fit in model.block_size of them.
    let limit = (config.model.positions == attend_model::Positions::Learned).then_some(config.model.block_size);
    let dataset = &config.data.dataset;
    check_lengths(&data.train, limit, &format!("{dataset}: training pair (line)"))?;
    check_lengths(&data.valid, limit, &format!("{dataset}: validation pair (line)"))?;

    B::seed(device, t.seed);
    let model: TranslationModel<B> = config.model.init_seq2seq(vocab, device);
    let (mut model, mut optim, mut state) =
        start_run(config, opts, model, Optim::new(t), &log, device, observer, |run| data.tokenizer.save(run))?;

    let summary = |state: &checkpoint::TrainState, valid, flags: (bool, bool, Option<&'static str>)| MtSummary {
        step: state.step,
        wall_s: state.wall_s,
        tokens: state.tokens,
        params: report.params,
        train_flops: 3.0 * report.flops_per_token as f64 * state.tokens as f64,
        valid,
        interrupted: flags.0,
        early_stopped: flags.1,
        already_done: flags.2,
    };
    if let Some(reason) = state.finished(t) {
        observer.note(&format!("the run already finished at step {} ({reason}); nothing to do", state.step));
        return Ok(summary(&state, None, (false, false, Some(reason))));
    }

    observer.started(state.step + 1, t.max_steps);
    let mut batches = epoch_batches(state.epoch);
    let mut last: Option<MtValid> = None;
    let (mut interrupted, mut early) = (false, false);
    while state.step < t.max_steps {
        let started = Instant::now();
        let step = state.step + 1;
        B::seed(device, Rng::derive(t.seed, "dropout", step).next_u64());
        let mut accumulator = GradientsAccumulator::<TranslationModel<B>>::new();
        let (mut nll, mut counted, mut tokens) = (0.0, 0.0, 0u64);
        for _ in 0..t.grad_accum {
            let index = (state.data_position % batches.len() as u64) as usize;
            let batch = pad_batch(&data.train, &batches[index], IDS);
            state.data_position += 1;
            if state.data_position % batches.len() as u64 == 0 {
                state.epoch += 1;
                batches = epoch_batches(state.epoch);
            }
            let (logits, targets, weights, n) = forward_batch(&model, &batch, device);
            let losses = cross_entropy(logits, targets, Some((weights, n)), t.label_smoothing);
            nll += losses.nll_sum.clone().into_scalar().elem::<f64>();
            counted += n;
            tokens += n as u64;
            let grads = losses.objective.div_scalar(t.grad_accum as f64).backward();
            accumulator.accumulate(&model, GradientsParams::from_grads(grads, &model));
        }
        let loss = nll / counted;
        let lr;
        (model, lr) = update(model, &mut optim, accumulator, loss, step, config, &ckpt_root)?;
        state.step = step;
        state.tokens += tokens;
        let seconds = started.elapsed().as_secs_f64();
        state.wall_s += seconds;
        log.append(&json!({"event": "train", "step": step, "loss": loss, "lr": lr, "tokens_per_s": tokens as f64 / seconds}))
            .map_err(io_err(log.path()))?;
        observer.step(step, loss, lr, tokens as f64 / seconds);

        let last_step = step == t.max_steps || (t.max_epochs > 0 && state.epoch >= t.max_epochs);
        interrupted = stop.load(Ordering::Relaxed);
        // Ctrl-C saves a checkpoint but evaluates only on schedule (see the LM loop).
        if step % t.eval_every == 0 || last_step {
            let inner = optim.eval_weights(&model);
            let v = validate(&inner, &data, config, device)?;
            let (valid_loss, bleu, signature) = (v.loss, v.bleu, v.signature.clone());
            log.append(&json!({"event": "eval", "step": step, "split": "valid", "loss": valid_loss,
                               "ppl": valid_loss.exp(), "bleu": bleu, "signature": signature}))
                .map_err(io_err(log.path()))?;
            observer.eval(step, valid_loss);
            plot(run, &log)?;
            observer.note(&format!("step {step}: valid BLEU {bleu:.2}"));
            if state.best_valid_loss.is_none_or(|b| valid_loss < b) {
                state.best_valid_loss = Some(valid_loss);
                state.best_step = Some(step);
                state.evals_without_improvement = 0;
                save(&run.join("best"), &model, &optim, &state)?;
            } else {
                state.evals_without_improvement += 1;
            }
            last = Some(v);
        }
        early = t.patience > 0 && state.evals_without_improvement >= t.patience;
        if step % t.checkpoint_every == 0 || last_step || early || interrupted {
            save(&ckpt_root.join(checkpoint::step_dir_name(step)), &model, &optim, &state)?;
            checkpoint::prune(&ckpt_root, t.keep_checkpoints.max(t.average_last).max(1), t.checkpoint_every)?;
        }
        if last_step || early || interrupted {
            break;
        }
    }
    if t.average_last > 0 && !interrupted {
        let all = checkpoint::list(&ckpt_root);
        let last = &all[all.len().saturating_sub(t.average_last)..];
        let out = run.join("averaged");
        let init = || config.model.init_seq2seq::<B::InnerBackend>(vocab, device);
        average_checkpoints(init, last, &out, device)?;
        let averaged = load_weights(init(), &out, device)?;
        let v = validate(&averaged, &data, config, device)?;
        log.append(&json!({"event": "eval", "step": state.step, "split": "valid-averaged", "loss": v.loss, "ppl": v.loss.exp(),
                           "bleu": v.bleu, "signature": v.signature, "averaged_steps": last.iter().map(|c| c.0).collect::<Vec<_>>()}))
            .map_err(io_err(log.path()))?;
        observer.note(&format!("averaged {} checkpoints: valid loss {:.4}, BLEU {:.2}", last.len(), v.loss, v.bleu));
    }
    if let (Some((mean, start)), false) = (optim.iterate_mean(), interrupted) {
        let steps = json!({"asgd_start": start, "last_step": state.step});
        write_averaged(&run.join("averaged"), &state, mean.clone(), steps)?;
    }
    let result = summary(&state, last.clone(), (interrupted, early, None));
    if let (false, Some(v)) = (interrupted, &last) {
        log.append(&json!({"event": "summary", "step": state.step, "valid_loss": v.loss, "valid_ppl": v.loss.exp(),
                           "valid_bleu": v.bleu, "wall_s": state.wall_s, "tokens": state.tokens,
                           "train_flops": result.train_flops}))
            .map_err(io_err(log.path()))?;
        let path = run.join("samples.txt");
        let (s, r, h) = &v.sample;
        std::fs::write(&path, format!("source     {s}\nreference  {r}\nhypothesis {h}\n")).map_err(io_err(&path))?;
        plot(run, &log)?;
    }
    Ok(result)
}

/// Loss and BLEU on the validation split, and one (source, reference, hypothesis) sample.
fn validate<B: Backend>(
    model: &TranslationModel<B>,
    data: &MtData,
    config: &RunConfig,
    device: &B::Device,
) -> Result<MtValid, TrainError> {
    let (loss, _) = teacher_forced_loss(model, &data.valid, config.eval.batch_size, device);
    let options = TranslateOptions::from(&config.decode);
    let (hyps, scores) = translate_and_score(model, &data.tokenizer, &data.valid_text, &options, device)?;
    let sample = (data.valid_text[0].0.clone(), data.valid_text[0].1.clone(), hyps[0].clone());
    Ok(MtValid { loss, bleu: scores.bleu, signature: scores.signature, sample })
}
