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
#[derive(Clone, Copy, Debug)]
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

impl TranslateOptions {
    /// The options within the bounds the `[decode]` keys have (`config/bounds.rs`): a beam of 1
    /// to 1024, a finite non-negative length penalty and `a` of at most 1024, a `b` of at most
    /// 65536. The error names the flag and the key, for options from either.
    pub fn check(&self) -> Result<(), TrainError> {
        let bad = |what: &str, value: String, expected: &str| {
            Err(TrainError::Usage(format!("{what} = {value}: expected {expected}")))
        };
        use crate::config::{MAX_BEAM, MAX_DECODE_FACTOR, MAX_LEN_B};
        if !(1..=MAX_BEAM).contains(&self.beam) {
            return bad("--beam (decode.beam)", self.beam.to_string(), &format!("1 to {MAX_BEAM}"));
        }
        for (what, value) in
            [("--lenpen (decode.lenpen)", self.lenpen), ("--max-len-a (decode.max_len_a)", self.max_len_a)]
        {
            if !(value.is_finite() && (0.0..=MAX_DECODE_FACTOR as f64).contains(&value)) {
                return bad(what, value.to_string(), &format!("a number from 0 to {MAX_DECODE_FACTOR}"));
            }
        }
        if self.max_len_b > MAX_LEN_B {
            return bad("--max-len-b (decode.max_len_b)", self.max_len_b.to_string(), &format!("at most {MAX_LEN_B}"));
        }
        Ok(())
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
    options.check()?;
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

#[cfg(test)]
mod tests {
    use super::TranslateOptions;

    #[test]
    fn decoding_options_outside_the_decode_keys_bounds_are_refused_naming_flag_and_key() {
        let ok = TranslateOptions { beam: 4, lenpen: 0.6, max_len_a: 1.2, max_len_b: 10 };
        assert!(ok.check().is_ok());
        for (options, named) in [
            (TranslateOptions { beam: 0, ..ok }, "--beam (decode.beam) = 0"),
            (TranslateOptions { lenpen: -1.0, ..ok }, "--lenpen (decode.lenpen) = -1"),
            (TranslateOptions { lenpen: f64::NAN, ..ok }, "--lenpen (decode.lenpen) = NaN"),
            (TranslateOptions { max_len_a: -1.0, ..ok }, "--max-len-a (decode.max_len_a) = -1"),
            (
                TranslateOptions { max_len_a: 1e30, ..ok },
                "--max-len-a (decode.max_len_a) = 1000000000000000000000000000000",
            ),
            (TranslateOptions { max_len_b: 1 << 20, ..ok }, "--max-len-b (decode.max_len_b) = 1048576"),
        ] {
            let err = options.check().unwrap_err().to_string();
            assert!(err.contains(named), "{err}");
        }
    }
}
