//! Translating sentences with a trained encoder-decoder: batched beam search with the GNMT
//! length penalty (`attend_model::decode::beam_search`, key/value-cached), output length at
//! most `max_len_a · source_len + max_len_b` tokens (fairseq's rule).

use std::path::Path;

use attend_model::decode::{beam_search, BeamOptions};
use attend_model::TranslationModel;
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Int, Tensor, TensorData};

use crate::awake::Awake;
use crate::checkpoint::CheckpointError;
use crate::config::{DecodeConfig, RunConfig};
use crate::data::mt_batches::{pad_batch, Pair};
use crate::data::mt_dataset::{MtTokenizer, IDS};
use crate::error::TrainError;
use crate::trained::weights_dir;

/// Beam search settings.
#[derive(Clone, Debug)]
pub struct TranslateOptions {
    pub beam: usize,
    pub lenpen: f64,
    pub max_len_a: f64,
    pub max_len_b: usize,
}

impl From<&DecodeConfig> for TranslateOptions {
    fn from(d: &DecodeConfig) -> Self {
        TranslateOptions { beam: d.beam, lenpen: d.lenpen, max_len_a: d.max_len_a, max_len_b: d.max_len_b }
    }
}

/// Sentences translated per batch.
const BATCH: usize = 32;

/// The translation of each source sentence, in order.
///
/// With learned positions the model has `block_size` of them: a longer source (end mark
/// included) is an error naming its sentence number, and hypotheses stop at the last position.
pub fn translate<B: Backend>(
    model: &TranslationModel<B>,
    tokenizer: &MtTokenizer,
    sources: &[&str],
    options: &TranslateOptions,
    device: &B::Device,
) -> Result<Vec<String>, TrainError> {
    let pairs: Vec<Pair> = sources.iter().map(|s| Pair { source: tokenizer.encode(s), target: Vec::new() }).collect();
    let limit = model.positions.max_len();
    check_lengths(&pairs, limit, "source sentence")?;
    // Similar lengths together, so little padding; results go back in input order.
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.sort_by_key(|&i| pairs[i].source.len());
    let mut out = vec![String::new(); pairs.len()];
    let awake = Awake::for_loop::<B>(false).map_err(TrainError::Usage)?;
    for chunk in order.chunks(BATCH) {
        awake.arm();
        let batch = pad_batch(&pairs, chunk, IDS);
        let src = Tensor::<B, 2, Int>::from_data(
            TensorData::new(batch.source.iter().map(|&t| t as i64).collect::<Vec<_>>(), [batch.rows, batch.src_len]),
            device,
        );
        let padding: Vec<bool> = batch.source.iter().map(|&t| t == IDS.pad).collect();
        let padding = Tensor::<B, 2, Bool>::from_data(TensorData::new(padding, [batch.rows, batch.src_len]), device);
        let cache = model.begin(model.encode(src, Some(padding)));
        let prompt =
            Tensor::<B, 2, Int>::from_data(TensorData::new(vec![IDS.bos as i64; batch.rows], [batch.rows, 1]), device);
        let max_new = (options.max_len_a * batch.src_len as f64) as usize + options.max_len_b;
        let max_new = limit.map_or(max_new, |l| max_new.min(l.saturating_sub(1)));
        let beam = BeamOptions {
            width: options.beam,
            length_penalty: options.lenpen,
            max_new_tokens: max_new.max(1),
            eos: Some(IDS.eos),
        };
        for (&i, hyp) in chunk.iter().zip(beam_search(model, cache, prompt, &beam)) {
            out[i] = tokenizer.decode(&hyp.tokens);
        }
    }
    Ok(out)
}

/// Refuses a sentence (source, or target with its start mark) longer than `limit` positions,
/// naming it as `what` and its 1-based number.
pub(crate) fn check_lengths(pairs: &[Pair], limit: Option<usize>, what: &str) -> Result<(), TrainError> {
    let Some(limit) = limit else { return Ok(()) };
    for (i, p) in pairs.iter().enumerate() {
        let len = p.source.len().max(p.target.len()) + 1;
        if len > limit {
            return Err(TrainError::TooLong { what: format!("{what} {}", i + 1), len, limit });
        }
    }
    Ok(())
}

/// A finished translation run: configuration, tokenizer and model.
pub struct TrainedMt<B: Backend> {
    pub config: RunConfig,
    pub tokenizer: MtTokenizer,
    pub model: TranslationModel<B>,
    /// The directory the weights came from.
    pub weights: std::path::PathBuf,
}

/// Loads the translation run in `run` (weights of `averaged/`, `best/` or the latest).
pub fn load_mt_run<B: Backend>(run: &Path, device: &B::Device) -> Result<TrainedMt<B>, TrainError> {
    let config = RunConfig::from_resolved(&run.join("config.toml"))?;
    if config.model.arch != attend_model::Arch::Seq2seq {
        return Err(TrainError::NotMt(run.to_path_buf()));
    }
    let tokenizer =
        MtTokenizer::load(run).map_err(|message| CheckpointError::Corrupt { path: run.to_path_buf(), message })?;
    let weights = weights_dir(run)?;
    let model_config = attend_model::ModelConfig { dropout: 0.0, attention_dropout: 0.0, ..config.model.clone() };
    let model =
        crate::average::load_weights(model_config.init_seq2seq::<B>(tokenizer.vocab_size(), device), &weights, device)?;
    Ok(TrainedMt { config, tokenizer, model, weights })
}
