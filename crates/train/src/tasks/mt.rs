//! Translation as a [`Task`] (the paper's recipe): token-budget batches of sentence pairs with
//! padding masks, label-smoothed cross-entropy over real target positions, and validation by
//! loss and by BLEU of beam-search translations (`attend-metrics`, sacreBLEU's defaults).

use std::path::Path;
use std::sync::atomic::AtomicBool;

use attend_model::TranslationModel;
use burn::tensor::backend::AutodiffBackend;
use serde_json::{json, Map, Value};

use crate::base_run::vocabulary_dir;
use crate::checkpoint::TrainState;
use crate::config::RunConfig;
use crate::data::mt_batches::{pad_batch, token_budget_batches};
use crate::data::mt_dataset::{load_mt, MtData, MtTokenizer, IDS};
use crate::error::TrainError;
use crate::fit::fit;
use crate::mt_eval::{forward_batch, teacher_forced_loss, translate_and_score};
use crate::objective::{cross_entropy, Losses};
use crate::run::{Observer, RunOptions, Summary};
use crate::task::{Inner, Shard, Task, Validation};
use crate::translate::{check_lengths, TranslateOptions};

/// Loss and BLEU on the validation split, and one (source, reference, hypothesis) sample.
#[derive(Clone, Debug)]
pub struct MtValid {
    pub loss: f64,
    pub bleu: f64,
    pub signature: String,
    pub sample: (String, String, String),
}

impl Validation for MtValid {
    fn loss(&self) -> f64 {
        self.loss
    }
    fn eval_fields(&self) -> Map<String, Value> {
        Map::from_iter([("bleu".to_string(), json!(self.bleu)), ("signature".to_string(), json!(self.signature))])
    }
    fn summary_fields(&self) -> Map<String, Value> {
        Map::from_iter([("valid_bleu".to_string(), json!(self.bleu))])
    }
    fn headline(&self) -> Option<String> {
        Some(format!("valid BLEU {:.2}", self.bleu))
    }
}

/// Trains (or continues) a translation model as `config` says, in `opts.run_dir`.
pub fn train_mt<B: AutodiffBackend>(
    config: &RunConfig,
    opts: &RunOptions,
    device: &B::Device,
    observer: &mut dyn Observer,
    stop: &AtomicBool,
) -> Result<Summary<MtValid>, TrainError> {
    fit::<B, _>(MtTask::new(config, opts)?, config, opts, device, observer, stop)
}

/// A translation run: its configuration, sentence pairs, and the current epoch's batches.
pub struct MtTask<'a> {
    config: &'a RunConfig,
    data: MtData,
    /// The epoch whose batches (lists of pair indices) are held, and those batches.
    batches: Option<(u64, Vec<Vec<usize>>)>,
}

impl<'a> MtTask<'a> {
    /// Loads the sentence pairs; with learned positions every sentence must fit in
    /// `model.block_size` of them.
    pub fn new(config: &'a RunConfig, opts: &RunOptions) -> Result<Self, TrainError> {
        let given = match vocabulary_dir(config, opts)? {
            Some(dir) => {
                Some(MtTokenizer::load(&dir).map_err(|message| TrainError::InitFrom { run: dir.clone(), message })?)
            }
            None => None,
        };
        let data = load_mt(&config.data, &opts.data_dir, given)?;
        let limit = (config.model.positions == attend_model::Positions::Learned).then_some(config.model.block_size);
        let dataset = &config.data.dataset;
        check_lengths(&data.train, limit, &format!("{dataset}: training pair (line)"))?;
        check_lengths(&data.valid, limit, &format!("{dataset}: validation pair (line)"))?;
        Ok(MtTask { config, data, batches: None })
    }

    /// The batches of `epoch`: shuffled by `(train.seed, epoch)`, each within the token
    /// budget (`train.batch_tokens`) or of `train.batch_size` pairs.
    /// Every batch of the first epoch holds at least one sentence per data-parallel peer.
    pub(crate) fn check_shards(&mut self, peers: usize) -> Result<(), TrainError> {
        let fewest = self.epoch_batches(0).iter().map(Vec::len).min().unwrap_or(0);
        if peers > 1 && fewest < peers {
            let t = &self.config.train;
            let key = if t.batch_tokens > 0 { "train.batch_tokens" } else { "train.batch_size" };
            return Err(TrainError::Usage(format!(
                "{key}: a batch of the first epoch holds {fewest} sentence pair(s), fewer than the {peers} peers that share it; make batches larger"
            )));
        }
        Ok(())
    }

    fn epoch_batches(&mut self, epoch: u64) -> &[Vec<usize>] {
        if self.batches.as_ref().is_none_or(|b| b.0 != epoch) {
            let t = &self.config.train;
            let (rows, budget) =
                if t.batch_tokens == 0 { (t.batch_size, usize::MAX) } else { (usize::MAX, t.batch_tokens) };
            self.batches = Some((epoch, token_budget_batches(&self.data.train, budget, rows, t.seed, epoch)));
        }
        &self.batches.as_ref().expect("just made").1
    }
}

impl<B: AutodiffBackend> Task<B> for MtTask<'_> {
    type Model = TranslationModel<B>;
    type Valid = MtValid;

    fn vocab_size(&self) -> usize {
        self.data.tokenizer.vocab_size()
    }

    fn init(&self, device: &B::Device) -> TranslationModel<B> {
        self.config.model.init_seq2seq(self.data.tokenizer.vocab_size(), device)
    }

    fn init_like(&self, model: &attend_model::ModelConfig, device: &B::Device) -> Option<TranslationModel<B>> {
        (model.arch == attend_model::Arch::Seq2seq)
            .then(|| model.init_seq2seq(self.data.tokenizer.vocab_size(), device))
    }

    fn init_inner(&self, device: &B::Device) -> TranslationModel<B::InnerBackend> {
        self.config.model.init_seq2seq(self.data.tokenizer.vocab_size(), device)
    }

    fn write_vocab(&self, run: &Path) -> std::io::Result<()> {
        self.data.tokenizer.save(run)
    }

    fn train_loss(
        &mut self,
        model: &TranslationModel<B>,
        state: &mut TrainState,
        device: &B::Device,
        shard: Shard,
    ) -> Losses<B> {
        let batches = self.epoch_batches(state.epoch);
        let count = batches.len() as u64;
        let indices = batches[(state.data_position % count) as usize].clone();
        state.data_position += 1;
        if state.data_position.is_multiple_of(count) {
            state.epoch += 1;
        }
        // A data-parallel peer pads and computes its own share of the batch's sentences.
        let batch = pad_batch(&self.data.train, &indices[shard.rows(indices.len())], IDS);
        let (logits, targets, weights, n) = forward_batch(model, &batch, device);
        cross_entropy(logits, targets, Some((weights, n)), self.config.train.label_smoothing)
    }

    fn validate(&self, model: &Inner<B, Self>, device: &B::Device) -> Result<MtValid, TrainError> {
        let (c, d) = (self.config, &self.data);
        let (loss, _) = teacher_forced_loss(model, &d.valid, c.eval.batch_size, device);
        let options = TranslateOptions::from(&c.decode);
        let (hyps, scores) = translate_and_score(model, &d.tokenizer, &d.valid_text, &options, device)?;
        let sample = (d.valid_text[0].0.clone(), d.valid_text[0].1.clone(), hyps[0].clone());
        Ok(MtValid { loss, bleu: scores.bleu, signature: scores.signature, sample })
    }

    fn sample(&self, _model: &TranslationModel<B>, valid: &MtValid, _device: &B::Device) -> String {
        let (s, r, h) = &valid.sample;
        format!("source     {s}\nreference  {r}\nhypothesis {h}")
    }
}
