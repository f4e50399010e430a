//! `eval` for language models: the static score of a split, and the notes' dynamic evaluation.
//!
//! Dynamic evaluation (Krause et al. 2018, as the seed notes describe it): the stream is
//! scored in segments of `eval.dynamic_segment` tokens; after scoring a segment, the model
//! takes one step on it, `θ_l ← θ_l − η∇ℓ(θ_l) + λ(θ_g − θ_l)`, where `θ_g` are the trained
//! weights (`η` = `eval.dynamic_lr`, `λ` = `eval.dynamic_decay`). The static score with the
//! same segments is reported beside it, so the gain is measured like with like.
//!
//! The static score can give each token more context than non-overlapping blocks do: a
//! context window of `c` tokens ([`crate::lm_eval::windows`]) scores every token after the
//! first block from at least `c` tokens before it, at the cost of `block / (block − c + 1)`
//! times the forward passes.

use std::collections::HashMap;
use std::path::Path;

use attend_metrics::{CrossEntropyStats, PerplexityReport, TextCounts};
use attend_model::DecoderOnly;
use burn::module::{AutodiffModule, Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{ElementConversion, Int, Tensor, TensorData, TensorPrimitive};

use crate::data::lm_dataset::{load_lm as load_dataset, read_text, text_counts, DataError};
use crate::error::TrainError;
use crate::lm_eval::{score, windows, Scored};
use crate::objective::cross_entropy;
use crate::trained::load_lm;

/// Which split to score.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    Valid,
    Test,
}

/// Scores of one evaluation.
#[derive(Clone, Debug)]
pub struct EvalReport {
    pub split: String,
    pub report: PerplexityReport,
    /// The static score's context window (0: non-overlapping blocks).
    pub context_window: usize,
    /// Dynamic evaluation: the static score over the same segments, then the dynamic one.
    pub dynamic: Option<(PerplexityReport, PerplexityReport)>,
    /// Generated data (a split, not `--data`): the source's entropy rate and its own loss on
    /// the split, in nats per token; the floor of the score and a perfect model's score here.
    pub source: Option<SourceScores>,
}

/// What the generating source itself scores, beside a model's evaluation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SourceScores {
    pub entropy_rate: f64,
    pub loss: Option<f64>,
}

/// Evaluates the run in `run` on a split of its dataset, or on `data_file`; the static score
/// with a context window of `context_window` tokens (0: non-overlapping blocks; at most the
/// model's `block_size`).
pub fn eval_lm<B: AutodiffBackend>(
    run: &Path,
    data_dir: &Path,
    split: Split,
    data_file: Option<&Path>,
    dynamic: bool,
    context_window: usize,
    device: &B::Device,
) -> Result<EvalReport, TrainError> {
    let trained = load_lm::<B>(run, device)?;
    let config = &trained.config;
    let block = config.model.block_size;
    if context_window > block {
        return Err(TrainError::Usage(format!(
            "--context-window {context_window}: at most the run's model.block_size, {block} (the tokens a window holds)"
        )));
    }
    let (stream, counts, min_context, name, source) = match data_file {
        Some(path) => {
            let text = read_text(path)?;
            let ids = trained.codec.encode(&text).map_err(|symbol| DataError::UnknownSymbol {
                path: path.to_path_buf(),
                split: "--data",
                symbol,
            })?;
            if ids.len() < 2 {
                let what = format!("{} (--data)", path.display());
                return Err(TrainError::TooShort {
                    what,
                    len: ids.len(),
                    needs: "scoring: at least 2 are needed".into(),
                });
            }
            (ids, text_counts(&text, config.data.tokenizer), 0, path.display().to_string(), None)
        }
        None => {
            let data = load_dataset(&config.data, data_dir)?;
            if split == Split::Test && !data.has_test {
                return Err(DataError::NoTest(config.data.dataset.clone()).into());
            }
            let (ids, counts, name, loss) = match split {
                Split::Valid => (data.valid, data.counts[1], "valid", data.source_valid_loss),
                Split::Test => (data.test, data.counts[2], "test", data.source_test_loss),
            };
            let source = data.entropy_rate.map(|entropy_rate| SourceScores { entropy_rate, loss });
            (ids, counts, data.min_context, name.to_string(), source)
        }
    };
    let inner = trained.model.valid();
    let scored = score(
        &inner,
        &stream,
        &windows(stream.len(), block, context_window),
        config.eval.batch_size,
        min_context,
        0,
        device,
    );
    let report = |s: Scored| perplexities(s, counts, stream.len());
    let dynamic = dynamic.then(|| {
        let segment = config.eval.dynamic_segment.min(block);
        let segments = windows(stream.len(), segment, 0);
        let same_segments = score(&inner, &stream, &segments, config.eval.batch_size, min_context, 0, device);
        let adapted = dynamic_score(
            trained.model.clone(),
            &stream,
            segment,
            min_context,
            config.eval.dynamic_lr,
            config.eval.dynamic_decay,
            device,
        );
        (report(same_segments), report(adapted))
    });
    Ok(EvalReport { split: name, report: report(scored), context_window, dynamic, source })
}

/// Perplexities from scored statistics; word and character counts are those of the text,
/// scaled to the share of its tokens that was scored.
fn perplexities(s: Scored, counts: TextCounts, stream_len: usize) -> PerplexityReport {
    let share = s.tokens as f64 / stream_len.max(1) as f64;
    let scale = |n: u64| ((n as f64 * share).round() as u64).max(1);
    let text = TextCounts { words: scale(counts.words), chars: scale(counts.chars), bytes: scale(counts.bytes) };
    CrossEntropyStats::new(s.nll, s.tokens).report(Some(text)).expect("scored at least one token")
}

/// Scores `stream` segment by segment, adapting the weights after each segment.
fn dynamic_score<B: AutodiffBackend>(
    mut model: DecoderOnly<B>,
    stream: &[u32],
    segment: usize,
    min_context: usize,
    lr: f64,
    decay: f64,
    device: &B::Device,
) -> Scored {
    let mut global = Snapshot::<B::InnerBackend>::default();
    model.visit(&mut global);
    let mut total = Scored::default();
    let mut start = 0;
    while start + 1 < stream.len() {
        let len = segment.min(stream.len() - 1 - start);
        let to = |v: &[u32]| {
            Tensor::<B, 2, Int>::from_data(
                TensorData::new(v.iter().map(|&t| t as i64).collect::<Vec<_>>(), [1, len]),
                device,
            )
        };
        let (x, y) = (to(&stream[start..start + len]), to(&stream[start + 1..start + len + 1]));
        let weights: Vec<f32> = (0..len).map(|t| if t + 1 >= min_context { 1.0 } else { 0.0 }).collect();
        let counted: f64 = weights.iter().map(|&w| w as f64).sum();
        start += len;
        if counted == 0.0 {
            continue;
        }
        let w = Tensor::<B, 2>::from_data(TensorData::new(weights, [1, len]), device);
        // Score with the current weights; the step below uses the same forward pass.
        let losses = cross_entropy(model.forward(x), y, Some((w, counted)), 0.0);
        total.nll += losses.nll_sum.into_scalar().elem::<f64>();
        total.tokens += counted as u64;
        // The CPU's weight gradients beside the rest of the pass, as in training.
        let grads = GradientsParams::from_grads(attend_model::fused::backward(losses.objective), &model);
        model = model.map(&mut DynamicStep { grads, global: &global, lr, decay });
    }
    total
}

/// The trained weights θ_g, by parameter.
#[derive(Default)]
struct Snapshot<B: Backend> {
    tensors: HashMap<ParamId, TensorPrimitive<B>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Snapshot<B::InnerBackend> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        self.tensors.insert(param.id, param.val().inner().into_primitive());
    }
}

/// `θ_l ← θ_l − η∇ℓ(θ_l) + λ(θ_g − θ_l)`.
struct DynamicStep<'a, B: Backend> {
    grads: GradientsParams,
    global: &'a Snapshot<B>,
    lr: f64,
    decay: f64,
}

impl<B: AutodiffBackend> ModuleMapper<B> for DynamicStep<'_, B::InnerBackend> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, tensor, mapper) = param.consume();
        let local = tensor.inner();
        let mut next = local.clone();
        if let Some(g) = self.grads.remove::<B::InnerBackend, D>(id) {
            next = next - g.mul_scalar(self.lr);
        }
        if let Some(global) = self.global.tensors.get(&id) {
            let global = Tensor::<B::InnerBackend, D>::from_primitive(global.clone());
            next = next + (global - local).mul_scalar(self.decay);
        }
        Param::from_mapped_value(id, Tensor::from_inner(next).require_grad(), mapper)
    }
}
