//! Masked language modeling (BERT's pre-training objective) as a [`Task`]: the bidirectional
//! encoder (`model.arch = "encoder"`, [`LanguageModel::forward_bidirectional`]) reads rows
//! `[CLS] w₁ … w_n [SEP]` cut at random offsets of the training stream (`n = block_size − 2`),
//! masked as [`crate::data::masking`] says, and is trained on cross-entropy at the chosen
//! positions only. Validation: [`crate::mlm_eval`] with its fixed masking seed.

use std::sync::atomic::AtomicBool;

use attend_model::LanguageModel;
use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use serde_json::{json, Map, Value};

use crate::base_run::vocabulary_dir;
use crate::checkpoint::TrainState;
use crate::config::RunConfig;
use crate::data::codec::LmCodec;
use crate::data::lm_dataset::{load_lm_with, LmData};
use crate::data::masking::{mask_blocks, MLM_SPECIALS};
use crate::error::TrainError;
use crate::fit::fit;
use crate::mlm_eval::{masked_score, most_frequent, MaskedScore, MaskingOf, EVAL_MASK_SEED};
use crate::objective::{cross_entropy, Losses};
use crate::rng::Rng;
use crate::run::{Observer, RunOptions, Summary};
use crate::task::{Inner, Shard, Task, Validation};

/// A masked-LM validation.
#[derive(Clone, Debug)]
pub struct MlmValid {
    pub score: MaskedScore,
}

impl Validation for MlmValid {
    fn loss(&self) -> f64 {
        self.score.loss()
    }
    fn eval_fields(&self) -> Map<String, Value> {
        Map::from_iter([
            ("masked_accuracy".to_string(), json!(self.score.accuracy())),
            ("baseline_accuracy".to_string(), json!(self.score.baseline_accuracy())),
        ])
    }
    fn summary_fields(&self) -> Map<String, Value> {
        self.eval_fields()
    }
    fn headline(&self) -> Option<String> {
        Some(format!(
            "masked accuracy {:.1}% (most frequent token: {:.1}%)",
            100.0 * self.score.accuracy(),
            100.0 * self.score.baseline_accuracy()
        ))
    }
}

/// Trains (or continues) a masked language model as `config` says, in `opts.run_dir`.
pub fn train_mlm<B: AutodiffBackend>(
    config: &RunConfig,
    opts: &RunOptions,
    device: &B::Device,
    observer: &mut dyn Observer,
    stop: &AtomicBool,
) -> Result<Summary<MlmValid>, TrainError> {
    fit::<B, _>(MlmTask::new(config, opts)?, config, opts, device, observer, stop)
}

/// A masked-LM run: its configuration, token streams and masking.
pub struct MlmTask<'a> {
    config: &'a RunConfig,
    data: LmData,
    masking: MaskingOf,
    /// The training split's most frequent token (the baseline's answer).
    baseline: u32,
}

impl<'a> MlmTask<'a> {
    /// Loads the dataset with the special tokens in its vocabulary.
    pub fn new(config: &'a RunConfig, opts: &RunOptions) -> Result<Self, TrainError> {
        let given = vocabulary_dir(config, opts)?.map(|dir| LmCodec::load(&dir)).transpose()?;
        let data = load_lm_with(&config.data, &opts.data_dir, given, &MLM_SPECIALS)?;
        let masking = MaskingOf::of(config, &data.codec)?;
        let block = config.model.block_size;
        for (split, len) in [("training", data.train.len()), ("validation", data.valid.len())] {
            if block < 3 || len <= masking.words {
                let needs = format!("rows of model.block_size = {block} (at least 3: [CLS], a token, [SEP])");
                let what = format!("{}: {split} split", config.data.dataset);
                return Err(TrainError::TooShort { what, len, needs });
            }
        }
        let baseline = most_frequent(&data.train, masking.vocab);
        Ok(MlmTask { config, data, masking, baseline })
    }
}

impl<B: AutodiffBackend> Task<B> for MlmTask<'_> {
    type Model = LanguageModel<B>;
    type Valid = MlmValid;

    fn vocab_size(&self) -> usize {
        self.masking.vocab
    }

    fn init(&self, device: &B::Device) -> LanguageModel<B> {
        self.config.model.init_lm(self.masking.vocab, device)
    }

    fn init_like(&self, model: &attend_model::ModelConfig, device: &B::Device) -> Option<LanguageModel<B>> {
        use attend_model::Arch;
        matches!(model.arch, Arch::Encoder | Arch::Lm).then(|| model.init_lm(self.masking.vocab, device))
    }

    fn init_inner(&self, device: &B::Device) -> LanguageModel<B::InnerBackend> {
        self.config.model.init_lm(self.masking.vocab, device)
    }

    fn write_vocab(&self, run: &std::path::Path) -> std::io::Result<()> {
        self.data.codec.save(run)
    }

    fn train_loss(
        &mut self,
        model: &LanguageModel<B>,
        state: &mut TrainState,
        device: &B::Device,
        shard: Shard,
    ) -> Losses<B> {
        let (t, words) = (&self.config.train, self.masking.words);
        let position = state.data_position;
        state.data_position += 1;
        let mut offsets = Rng::derive(t.seed, "mlm-batch", position);
        let stream = &self.data.train;
        let rows: Vec<&[u32]> = (0..t.batch_size)
            .map(|_| offsets.below((stream.len() - words) as u64) as usize)
            .map(|o| &stream[o..o + words])
            .collect();
        let m = &self.masking;
        let whole = mask_blocks(&rows, m.spec, m.specials, m.vocab, &mut Rng::derive(t.seed, "mlm-mask", position));
        let batch = if shard == Shard::WHOLE { whole } else { whole.rows(shard.rows(whole.rows)) };
        let count = batch.chosen.iter().map(|&c| c as f64).sum();
        let (x, y, w) = MaskingOf::tensors::<B>(&batch, device);
        let mut losses = cross_entropy(model.forward_bidirectional(x).0, y, Some((w, count)), t.label_smoothing);
        losses.tokens = (batch.rows * batch.len) as f64;
        losses
    }

    fn epoch(&self, state: &TrainState) -> u64 {
        state.tokens / self.data.train.len() as u64
    }

    fn validate(&self, model: &Inner<B, Self>, device: &B::Device) -> Result<MlmValid, TrainError> {
        let c = self.config;
        let score = masked_score(
            model,
            &self.data.valid,
            &self.masking,
            self.baseline,
            c.eval.batch_size,
            c.train.eval_batches,
            device,
        );
        Ok(MlmValid { score })
    }

    fn cheap_validation(&self) -> bool {
        true
    }

    /// The first validation row as the model read it, and with its predictions filled in.
    fn sample(&self, model: &LanguageModel<B>, _valid: &MlmValid, device: &B::Device) -> String {
        let m = &self.masking;
        let row = [&self.data.valid[..m.words]];
        let mut rng = Rng::derive(EVAL_MASK_SEED, "mlm-eval", 0);
        let batch = mask_blocks(&row, m.spec, m.specials, m.vocab, &mut rng);
        let (x, _, _) = MaskingOf::tensors::<B::InnerBackend>(&batch, device);
        let guesses = model.valid().forward_bidirectional(x).0.argmax(2).into_data().iter::<i64>().collect::<Vec<_>>();
        let filled: Vec<u32> = batch
            .inputs
            .iter()
            .zip(&batch.chosen)
            .zip(&guesses)
            .map(|((&i, &c), &g)| if c > 0.0 { g as u32 } else { i })
            .collect();
        // One line each: the text's own newlines shown as " / ".
        let text = |ids: &[u32]| self.data.codec.decode(&ids[1..ids.len() - 1]).replace('\n', " / ");
        format!("input:  {}\nfilled: {}\nactual: {}", text(&batch.inputs), text(&filled), text(&batch.targets))
    }
}
