//! Scoring translation models: teacher-forced cross-entropy of sentence pairs, and BLEU and
//! chrF of beam-search translations against their references (`attend-metrics`, sacreBLEU's
//! definitions). Used by the training loop on the validation split and by `eval` on any split.
//!
//! Two BLEU figures are reported, as MT papers do: sacreBLEU's default (mixed case, `13a`
//! tokenization of the detokenized output) and the lowercased one, which is how results on
//! lowercased, tokenized Multi30k (the 36.5 of docs/benchmarks.md, Targets) are usually stated.

use std::path::Path;

use attend_metrics::{corpus_bleu, corpus_chrf, BleuConfig, ChrfConfig};
use attend_model::TranslationModel;
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, ElementConversion, Int, Tensor, TensorData};

use crate::data::mt_batches::{pad_batch, MtBatch, Pair};
use crate::data::mt_dataset::{mt_text_splits, MtTokenizer, IDS};
use crate::data::synthetic::TextPairs;
use crate::error::TrainError;
use crate::evaluate::Split;
use crate::objective::cross_entropy;
use crate::translate::{check_lengths, load_mt_run, translate, TranslateOptions};

/// Logits, targets, position weights (1 for real target tokens) and their count.
pub(crate) fn forward_batch<B: Backend>(
    model: &TranslationModel<B>,
    batch: &MtBatch,
    device: &B::Device,
) -> (Tensor<B, 3>, Tensor<B, 2, Int>, Tensor<B, 2>, f64) {
    let ints = |v: &[u32], cols: usize| {
        Tensor::<B, 2, Int>::from_data(
            TensorData::new(v.iter().map(|&t| t as i64).collect::<Vec<_>>(), [batch.rows, cols]),
            device,
        )
    };
    let padding: Vec<bool> = batch.source.iter().map(|&t| t == IDS.pad).collect();
    let padding = Tensor::<B, 2, Bool>::from_data(TensorData::new(padding, [batch.rows, batch.src_len]), device);
    let weights: Vec<f32> = batch.target_out.iter().map(|&t| if t == IDS.pad { 0.0 } else { 1.0 }).collect();
    let n = weights.iter().map(|&w| w as f64).sum();
    let weights = Tensor::<B, 2>::from_data(TensorData::new(weights, [batch.rows, batch.tgt_len]), device);
    let logits =
        model.forward(ints(&batch.source, batch.src_len), Some(padding), ints(&batch.target_in, batch.tgt_len));
    (logits, ints(&batch.target_out, batch.tgt_len), weights, n)
}

/// Plain cross-entropy (no label smoothing) of `pairs`, nats per target token (EOS included),
/// and the number of target tokens.
pub fn teacher_forced_loss<B: Backend>(
    model: &TranslationModel<B>,
    pairs: &[Pair],
    batch_size: usize,
    device: &B::Device,
) -> (f64, u64) {
    let indices: Vec<usize> = (0..pairs.len()).collect();
    let (mut nll, mut n) = (0.0, 0.0);
    for chunk in indices.chunks(batch_size.max(1)) {
        let batch = pad_batch(pairs, chunk, IDS);
        let (logits, targets, weights, count) = forward_batch(model, &batch, device);
        nll += cross_entropy(logits, targets, Some((weights, count)), 0.0).nll_sum.into_scalar().elem::<f64>();
        n += count;
    }
    (nll / n.max(1.0), n as u64)
}

/// Corpus scores of translations against one reference each.
#[derive(Clone, Debug)]
pub struct TranslationScores {
    /// sacreBLEU's default BLEU (mixed case, 13a) and its signature.
    pub bleu: f64,
    pub signature: String,
    /// The same, lowercased (`case:lc`).
    pub bleu_lowercase: f64,
    pub signature_lowercase: String,
    /// chrF2 and its signature.
    pub chrf: f64,
    pub chrf_signature: String,
}

/// Scores `hyps` against `refs` (one reference per hypothesis).
pub fn score_translations(hyps: &[String], refs: &[String]) -> TranslationScores {
    let streams = [refs.to_vec()];
    let cased = BleuConfig::corpus();
    let lower = BleuConfig { lowercase: true, ..cased };
    let bleu = |c: &BleuConfig| corpus_bleu(hyps, &streams, c).map(|s| s.score).unwrap_or(0.0);
    let chrf_config = ChrfConfig::chrf();
    TranslationScores {
        bleu: bleu(&cased),
        signature: cased.signature(1).to_string(),
        bleu_lowercase: bleu(&lower),
        signature_lowercase: lower.signature(1).to_string(),
        chrf: corpus_chrf(hyps, &streams, &chrf_config).map(|s| s.score).unwrap_or(0.0),
        chrf_signature: chrf_config.signature(1).to_string(),
    }
}

/// Translates the sources of `text` with the decoding settings `options`, and scores them.
pub fn translate_and_score<B: Backend>(
    model: &TranslationModel<B>,
    tokenizer: &MtTokenizer,
    text: &TextPairs,
    options: &TranslateOptions,
    device: &B::Device,
) -> Result<(Vec<String>, TranslationScores), TrainError> {
    let sources: Vec<&str> = text.iter().map(|p| p.0.as_str()).collect();
    let refs: Vec<String> = text.iter().map(|p| p.1.clone()).collect();
    let hyps = translate(model, tokenizer, &sources, options, device)?;
    let scores = score_translations(&hyps, &refs);
    Ok((hyps, scores))
}

/// What `eval` reports for a translation run.
#[derive(Clone, Debug)]
pub struct MtEvalReport {
    pub split: String,
    /// Teacher-forced cross-entropy, nats per target token, and the token count.
    pub loss: f64,
    pub tokens: u64,
    pub scores: TranslationScores,
    pub sentences: usize,
    /// The run's weights directory (`averaged/`, `best/` or the latest checkpoint).
    pub weights: String,
}

/// Evaluates the translation run in `run` on a split of its dataset: loss, then BLEU and chrF
/// of its beam-search translations (the run's `[decode]` settings, or `options`).
pub fn eval_mt<B: Backend>(
    run: &Path,
    data_dir: &Path,
    split: Split,
    options: Option<TranslateOptions>,
    device: &B::Device,
) -> Result<MtEvalReport, TrainError> {
    let trained = load_mt_run::<B>(run, device)?;
    let [_, valid, test] = mt_text_splits(&trained.config.data, data_dir)?;
    let (name, text) = match split {
        Split::Valid => ("valid", valid),
        Split::Test => ("test", test),
    };
    let pairs: Vec<Pair> = text
        .iter()
        .map(|(s, t)| Pair { source: trained.tokenizer.encode(s), target: trained.tokenizer.encode(t) })
        .collect();
    check_lengths(&pairs, trained.model.positions.max_len(), &format!("{name} pair (line)"))?;
    let (loss, tokens) = teacher_forced_loss(&trained.model, &pairs, trained.config.eval.batch_size, device);
    let options = options.unwrap_or_else(|| TranslateOptions::from(&trained.config.decode));
    let (_, scores) = translate_and_score(&trained.model, &trained.tokenizer, &text, &options, device)?;
    Ok(MtEvalReport {
        split: name.into(),
        loss,
        tokens,
        scores,
        sentences: text.len(),
        weights: trained.weights.display().to_string(),
    })
}
