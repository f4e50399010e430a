//! What a task tells the one training loop ([`crate::fit`]): how to build its model, turn the
//! next batch into a loss, validate, and what to write as a sample. Language modeling
//! ([`crate::tasks::lm`], the GPT-style model and the notes' one-layer model alike) and
//! translation ([`crate::tasks::mt`]) implement it; everything they share (start or resume,
//! the end-of-step update, checkpoints, best/, early stopping, averaging, Ctrl-C,
//! `metrics.jsonl`, `loss.svg`, progress) is written once, in the loop.

use std::path::Path;

use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use serde_json::{Map, Value};

use crate::checkpoint::TrainState;
use crate::error::TrainError;
use crate::objective::Losses;

/// The model a task trains, and its inference-only twin on the inner backend.
pub type Inner<B, T> = <<T as Task<B>>::Model as AutodiffModule<B>>::InnerModule;

/// A validation result: its loss decides `best/` and early stopping.
pub trait Validation: Clone {
    /// Validation loss in nats per token (no label smoothing).
    fn loss(&self) -> f64;
    /// Fields the `eval` event carries beside `loss` and `ppl` (translation: `bleu`, `signature`).
    fn eval_fields(&self) -> Map<String, Value>;
    /// Fields the `summary` event carries beside `valid_loss` and `valid_ppl`.
    fn summary_fields(&self) -> Map<String, Value>;
    /// The figure beyond the loss that a progress note reports (translation: BLEU), if any.
    fn headline(&self) -> Option<String>;
}

/// Which rows of a global training batch one peer of a data-parallel run computes: peer
/// `index` of `count` takes rows `[rows·index/count, rows·(index+1)/count)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// The whole batch (one device).
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// This shard's rows of a batch of `rows`.
    pub fn rows(&self, rows: usize) -> std::ops::Range<usize> {
        rows * self.index / self.count..rows * (self.index + 1) / self.count
    }
}

/// One kind of training run.
pub trait Task<B: AutodiffBackend> {
    type Model: AutodiffModule<B>;
    type Valid: Validation;

    /// Vocabulary size (for the parameter and FLOP report).
    fn vocab_size(&self) -> usize;
    /// A freshly initialized model (the loop has seeded the backend).
    fn init(&self, device: &B::Device) -> Self::Model;
    /// A model of this task's kind built from another run's `[model]` section, to load that
    /// run's weights into (`train.init_from`); `None` if its architecture is another task's.
    fn init_like(&self, model: &attend_model::ModelConfig, device: &B::Device) -> Option<Self::Model>;
    /// An empty inference model of the same architecture, to load checkpoints into.
    fn init_inner(&self, device: &B::Device) -> Inner<B, Self>;
    /// Writes the vocabulary or tokenizer into a fresh run directory.
    fn write_vocab(&self, run: &Path) -> std::io::Result<()>;
    /// The losses of `shard`'s rows of the next training batch (the whole batch for
    /// [`Shard::WHOLE`]). Advances `state.data_position`, and `state.epoch` where the task
    /// counts epochs in batches, as for the whole batch: every peer of a data-parallel run
    /// draws the same batch and keeps its own rows.
    fn train_loss(
        &mut self,
        model: &Self::Model,
        state: &mut TrainState,
        device: &B::Device,
        shard: Shard,
    ) -> Losses<B>;
    /// Completed epochs after a step whose tokens `state.tokens` already counts.
    fn epoch(&self, state: &TrainState) -> u64 {
        state.epoch
    }
    /// Scores `model` on the validation split.
    fn validate(&self, model: &Inner<B, Self>, device: &B::Device) -> Result<Self::Valid, TrainError>;
    /// Whether validating is cheap enough to do for a summary that has no validation yet
    /// (a Ctrl-C before the first evaluation, or `--resume` of a finished run).
    fn cheap_validation(&self) -> bool {
        false
    }
    /// What `samples.txt` holds for a model with this validation.
    fn sample(&self, model: &Self::Model, valid: &Self::Valid, device: &B::Device) -> String;
}
