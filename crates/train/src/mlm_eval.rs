//! Scoring a masked language model: the stream cut into non-overlapping rows of
//! `block_size − 2` tokens (`[CLS] … [SEP]`), masked as in training but with a fixed seed, so
//! that every evaluation predicts the same positions from the same inputs. Reports the loss
//! and perplexity on the chosen positions, the accuracy of the most likely token there, and the
//! accuracy of always answering the training split's most frequent token on the same positions
//! (the baseline a masked LM must beat), plus `eval`'s own entry point ([`eval_mlm`]).

use std::path::Path;

use attend_model::LanguageModel;
use burn::tensor::backend::Backend;
use burn::tensor::{ElementConversion, Int, Tensor, TensorData};

use crate::average::load_weights;
use crate::config::RunConfig;
use crate::data::codec::LmCodec;
use crate::data::lm_dataset::{load_lm_with, read_text, DataError};
use crate::data::masking::{mask_blocks, MaskSpec, MaskedBatch, MlmSpecials, MLM_SPECIALS};
use crate::error::TrainError;
use crate::evaluate::Split;
use crate::objective::cross_entropy;
use crate::rng::Rng;
use crate::trained::weights_dir;

/// The seed of evaluation masks (fixed: not `train.seed`, so runs compare on one masking).
pub const EVAL_MASK_SEED: u64 = 0x006d_6c6d; // "mlm"

/// Sufficient statistics of a masked evaluation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MaskedScore {
    /// Sum of `−log p(original)` over chosen positions, in nats.
    pub nll: f64,
    /// Chosen positions.
    pub predicted: u64,
    /// Chosen positions whose most likely token is the original.
    pub correct: u64,
    /// Chosen positions whose original is the training split's most frequent token.
    pub baseline_correct: u64,
}

impl MaskedScore {
    pub fn loss(&self) -> f64 {
        self.nll / self.predicted.max(1) as f64
    }
    pub fn accuracy(&self) -> f64 {
        self.correct as f64 / self.predicted.max(1) as f64
    }
    pub fn baseline_accuracy(&self) -> f64 {
        self.baseline_correct as f64 / self.predicted.max(1) as f64
    }
}

/// What masking needs to know about a run.
#[derive(Clone, Copy, Debug)]
pub struct MaskingOf {
    pub spec: MaskSpec,
    pub specials: MlmSpecials,
    pub vocab: usize,
    /// Word tokens per row (`model.block_size − 2`).
    pub words: usize,
}

impl MaskingOf {
    /// The masking of `config` with `codec`'s special ids; a vocabulary without them is the
    /// error (a fine-tuned run's base must be a masked LM too).
    pub fn of(config: &RunConfig, codec: &LmCodec) -> Result<Self, DataError> {
        let id = |name: &str| {
            codec.special_id(name).ok_or_else(|| {
                DataError::Tokenizer(format!("the vocabulary has no {name}: a masked LM needs {MLM_SPECIALS:?}"))
            })
        };
        let t = &config.train;
        Ok(MaskingOf {
            spec: MaskSpec { prob: t.mask_prob, with_mask: t.mask_with_mask, with_random: t.mask_with_random },
            specials: MlmSpecials { pad: id("[PAD]")?, cls: id("[CLS]")?, sep: id("[SEP]")?, mask: id("[MASK]")? },
            vocab: codec.len(),
            words: config.model.block_size.saturating_sub(2).max(1),
        })
    }

    /// `batch` as tensors: inputs, targets and the chosen-position weights.
    pub fn tensors<B: Backend>(
        batch: &MaskedBatch,
        device: &B::Device,
    ) -> (Tensor<B, 2, Int>, Tensor<B, 2, Int>, Tensor<B, 2>) {
        let shape = [batch.rows, batch.len];
        let ids = |v: &[u32]| {
            Tensor::<B, 2, Int>::from_data(
                TensorData::new(v.iter().map(|&t| t as i64).collect::<Vec<_>>(), shape),
                device,
            )
        };
        let weights = Tensor::<B, 2>::from_data(TensorData::new(batch.chosen.clone(), shape), device);
        (ids(&batch.inputs), ids(&batch.targets), weights)
    }
}

/// The most frequent token of `stream` (ties: the smallest id).
pub fn most_frequent(stream: &[u32], vocab: usize) -> u32 {
    let mut counts = vec![0u64; vocab];
    for &t in stream {
        counts[t as usize] += 1;
    }
    (0..vocab).max_by_key(|&i| (counts[i], std::cmp::Reverse(i))).unwrap_or(0) as u32
}

/// Scores `stream` (at most `max_batches` batches of `batch` rows; 0: all).
pub fn masked_score<B: Backend>(
    model: &LanguageModel<B>,
    stream: &[u32],
    masking: &MaskingOf,
    baseline: u32,
    batch: usize,
    max_batches: usize,
    device: &B::Device,
) -> MaskedScore {
    let rows: Vec<&[u32]> = stream.chunks_exact(masking.words).collect();
    let limit = if max_batches > 0 { max_batches } else { usize::MAX };
    let mut total = MaskedScore::default();
    for (index, group) in rows.chunks(batch.max(1)).take(limit).enumerate() {
        let mut rng = Rng::derive(EVAL_MASK_SEED, "mlm-eval", index as u64);
        let masked = mask_blocks(group, masking.spec, masking.specials, masking.vocab, &mut rng);
        let (x, y, w) = MaskingOf::tensors::<B>(&masked, device);
        let logits = model.forward_bidirectional(x).0;
        let best = logits.clone().argmax(2).into_data().iter::<i64>().collect::<Vec<_>>();
        let count: f64 = masked.chosen.iter().map(|&c| c as f64).sum();
        let losses = cross_entropy(logits, y, Some((w, count)), 0.0);
        total.nll += losses.nll_sum.into_scalar().elem::<f64>();
        for ((&c, &target), &guess) in masked.chosen.iter().zip(&masked.targets).zip(&best) {
            if c > 0.0 {
                total.predicted += 1;
                total.correct += u64::from(guess == target as i64);
                total.baseline_correct += u64::from(target == baseline);
            }
        }
    }
    total
}

/// `eval` of a masked-LM run: a split of its dataset, or the text file `data_file`.
pub fn eval_mlm<B: Backend>(
    run: &Path,
    data_dir: &Path,
    split: Split,
    data_file: Option<&Path>,
    device: &B::Device,
) -> Result<(String, MaskedScore), TrainError> {
    let config = RunConfig::from_resolved(&run.join("config.toml"))?;
    let codec = LmCodec::load(run)?;
    let masking = MaskingOf::of(&config, &codec)?;
    let data = load_lm_with(&config.data, data_dir, Some(codec), &[])?;
    let baseline = most_frequent(&data.train, masking.vocab);
    let (name, stream) = match (data_file, split) {
        (Some(path), _) => {
            let text = read_text(path)?;
            let ids = data.codec.encode(&text).map_err(|symbol| DataError::UnknownSymbol {
                path: path.to_path_buf(),
                split: "--data",
                symbol,
            })?;
            (path.display().to_string(), ids)
        }
        (None, Split::Valid) => ("valid".to_string(), data.valid),
        (None, Split::Test) if data.has_test => ("test".to_string(), data.test),
        (None, Split::Test) => return Err(DataError::NoTest(config.data.dataset.clone()).into()),
    };
    if stream.len() < masking.words {
        let needs = format!("one row of model.block_size - 2 = {} tokens", masking.words);
        return Err(TrainError::TooShort { what: name, len: stream.len(), needs });
    }
    let model_config = attend_model::ModelConfig { dropout: 0.0, attention_dropout: 0.0, ..config.model.clone() };
    let model = load_weights(model_config.init_lm::<B>(masking.vocab, device), &weights_dir(run)?, device)?;
    let score = masked_score(&model, &stream, &masking, baseline, config.eval.batch_size, 0, device);
    Ok((name, score))
}
