//! Language modeling as a [`Task`]: the GPT-style model and the notes' one-layer model (both
//! behind [`DecoderOnly`]) trained on next-token cross-entropy over windows of
//! `model.block_size` tokens, validated by the cross-entropy of the validation stream.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use attend_model::{DecoderOnly, Positions};
use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Int, Tensor, TensorData};
use serde_json::{json, Map, Value};

use crate::base_run::vocabulary_dir;
use crate::checkpoint::TrainState;
use crate::config::{RunConfig, Sampling};
use crate::data::codec::LmCodec;
use crate::data::lm_batches::{random_batch, sequential_batch, LmBatch};
use crate::data::lm_dataset::{load_lm_with, LmData};
use crate::error::TrainError;
use crate::fit::fit;
use crate::lm_eval::{score, windows, Scored};
use crate::objective::{cross_entropy, Losses};
use crate::run::{Observer, RunOptions, Summary};
use crate::task::{Inner, Shard, Task, Validation};

/// The validation of a language model: its scored stream, beside the source's entropy rate
/// and the source's own loss on the same split where the data is generated.
#[derive(Clone, Debug)]
pub struct LmValid {
    pub scored: Scored,
    pub entropy_rate: Option<f64>,
    /// The source's loss on the whole validation split (absent when `train.eval_batches`
    /// scores only part of it): the floor for this sample, free of its sampling noise.
    pub source_loss: Option<f64>,
}

impl LmValid {
    /// Cross-entropy in nats per scored token.
    pub fn loss(&self) -> f64 {
        self.scored.loss()
    }
}

impl Validation for LmValid {
    fn loss(&self) -> f64 {
        self.scored.loss()
    }
    fn eval_fields(&self) -> Map<String, Value> {
        Map::new()
    }
    fn summary_fields(&self) -> Map<String, Value> {
        let rate = self.entropy_rate.map(|h| ("entropy_rate".to_string(), json!(h)));
        let source = self.source_loss.map(|h| ("source_valid_loss".to_string(), json!(h)));
        rate.into_iter().chain(source).collect()
    }
    fn headline(&self) -> Option<String> {
        None
    }
}

/// Trains (or continues) a language model as `config` says, in `opts.run_dir`.
pub fn train_lm<B: AutodiffBackend>(
    config: &RunConfig,
    opts: &RunOptions,
    device: &B::Device,
    observer: &mut dyn Observer,
    stop: &AtomicBool,
) -> Result<Summary<LmValid>, TrainError> {
    fit::<B, _>(LmTask::new(config, opts)?, config, opts, device, observer, stop)
}

/// A language-model run: its configuration and token streams.
pub struct LmTask<'a> {
    config: &'a RunConfig,
    data: LmData,
}

impl<'a> LmTask<'a> {
    /// Loads the dataset (coded with the base run's vocabulary when fine-tuning) and checks
    /// that it fits the model and batches.
    pub fn new(config: &'a RunConfig, opts: &RunOptions) -> Result<Self, TrainError> {
        if matches!(config.model.arch, attend_model::Arch::Seq2seq | attend_model::Arch::Encoder) {
            return Err(TrainError::NotLm);
        }
        let given = vocabulary_dir(config, opts)?.map(|dir| LmCodec::load(&dir)).transpose()?;
        let data = load_lm_with(&config.data, &opts.data_dir, given, &[])?;
        let (block, dataset) = (config.model.block_size, &config.data.dataset);
        for (split, len) in [("training", data.train.len()), ("validation", data.valid.len())] {
            if len <= block + 1 {
                let needs = format!("model.block_size = {block}");
                return Err(TrainError::TooShort { what: format!("{dataset}: {split} split"), len, needs });
            }
        }
        let lanes = config.train.batch_size;
        if config.train.sampling == Sampling::Sequential && (data.train.len() - 1) / lanes < block {
            let needs = format!("train.batch_size = {lanes} sequential lanes of model.block_size = {block}");
            return Err(TrainError::TooShort {
                what: format!("{dataset}: training split"),
                len: data.train.len(),
                needs,
            });
        }
        Ok(LmTask { config, data })
    }

    /// Batch number `position` of the training stream.
    fn batch(&self, position: u64) -> LmBatch {
        let (t, block) = (&self.config.train, self.config.model.block_size);
        match t.sampling {
            Sampling::Random => random_batch(&self.data.train, t.batch_size, block, t.seed, position),
            Sampling::Sequential => sequential_batch(&self.data.train, t.batch_size, block, position as usize),
        }
    }
}

impl<B: AutodiffBackend> Task<B> for LmTask<'_> {
    type Model = DecoderOnly<B>;
    type Valid = LmValid;

    fn vocab_size(&self) -> usize {
        self.data.codec.len()
    }

    fn init(&self, device: &B::Device) -> DecoderOnly<B> {
        self.config
            .model
            .init_decoder_only(self.data.codec.len(), device)
            .expect("a language model: checked in LmTask::new")
    }

    fn init_like(&self, model: &attend_model::ModelConfig, device: &B::Device) -> Option<DecoderOnly<B>> {
        model.init_decoder_only(self.data.codec.len(), device)
    }

    fn init_inner(&self, device: &B::Device) -> DecoderOnly<B::InnerBackend> {
        self.config
            .model
            .init_decoder_only(self.data.codec.len(), device)
            .expect("a language model: checked in LmTask::new")
    }

    fn write_vocab(&self, run: &Path) -> std::io::Result<()> {
        self.data.codec.save(run)
    }

    fn train_loss(
        &mut self,
        model: &DecoderOnly<B>,
        state: &mut TrainState,
        device: &B::Device,
        shard: Shard,
    ) -> Losses<B> {
        let batch = self.batch(state.data_position);
        state.data_position += 1;
        let rows = shard.rows(batch.batch);
        let shape = [rows.len(), batch.block];
        let ids = |v: &[u32]| {
            let v = &v[rows.start * batch.block..rows.end * batch.block];
            Tensor::<B, 2, Int>::from_data(
                TensorData::new(v.iter().map(|&t| t as i64).collect::<Vec<_>>(), shape),
                device,
            )
        };
        cross_entropy(model.forward(ids(&batch.inputs)), ids(&batch.targets), None, self.config.train.label_smoothing)
    }

    fn epoch(&self, state: &TrainState) -> u64 {
        state.tokens / self.data.train.len() as u64
    }

    fn validate(&self, model: &Inner<B, Self>, device: &B::Device) -> Result<LmValid, TrainError> {
        let (c, d) = (self.config, &self.data);
        let windows = windows(d.valid.len(), c.model.block_size, 0);
        let scored = score(model, &d.valid, &windows, c.eval.batch_size, d.min_context, c.train.eval_batches, device);
        let source_loss = d.source_valid_loss.filter(|_| c.train.eval_batches == 0);
        Ok(LmValid { scored, entropy_rate: d.entropy_rate, source_loss })
    }

    fn cheap_validation(&self) -> bool {
        // `train.eval_batches` windows: as cheap as a training step or two.
        true
    }

    /// A short sample from the model after the first validation token.
    fn sample(&self, model: &DecoderOnly<B>, _valid: &LmValid, device: &B::Device) -> String {
        use attend_model::decode::{sample, SampleOptions};
        let (c, first) = (self.config, self.data.valid[0]);
        let inner = model.valid();
        let room = if c.model.positions == Positions::Learned { c.model.block_size - 1 } else { c.decode.max_tokens };
        let options = SampleOptions {
            max_new_tokens: c.decode.max_tokens.min(room),
            temperature: c.decode.temperature,
            top_k: (c.decode.top_k > 0).then_some(c.decode.top_k),
            top_p: (c.decode.top_p < 1.0).then_some(c.decode.top_p),
            seed: c.decode.seed,
            eos: None,
        };
        let x = Tensor::<B::InnerBackend, 2, Int>::from_data(TensorData::new(vec![first as i64], [1, 1]), device);
        let out = sample(&inner, inner.empty_cache(), x, &options);
        let mut ids = vec![first];
        ids.extend(&out[0]);
        self.data.codec.decode(&ids)
    }
}
