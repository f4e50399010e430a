//! The language model as a code (`compress` / `decompress`): the text's tokens are
//! arithmetic-coded ([`crate::arith`]) with the model's next-token distribution, so the file
//! takes about the model's cross-entropy in bits. The first token has no context and is coded
//! uniformly. Compression and decompression make exactly the same sequence of model steps
//! (one token at a time with the key/value cache; when the context is full, the last half
//! window is fed again into an empty cache), so both see bit-identical probabilities.
//!
//! File: `ATTZ2`, the SHA-256 of the weights file (`model.mpk` of the weights `eval` uses),
//! the number of tokens (u64, little-endian), the first 8 bytes of the SHA-256 of the text,
//! then the code. `decompress` refuses a file made with other weights, naming both hashes,
//! and a decoded text whose hash is not the file's (a damaged or cut code). It still reads
//! the first format, `ATTZ1` (the same without the text's hash), unchecked.

use std::path::Path;

use attend_model::decode::IncrementalDecoder;
use attend_model::DecoderOnly;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use sha2::{Digest, Sha256};

use crate::arith::{frequencies, symbol_at, Decoder, Encoder};
use crate::data::codec::LmCodec;
use crate::error::{io_err, TrainError};
use crate::trained::{load_lm, TrainedLm};

const MAGIC: &[u8; 5] = b"ATTZ2";
/// The first format: no hash of the text.
const MAGIC_1: &[u8; 5] = b"ATTZ1";
/// The magic, the weights' hash, the token count.
const HEADER_1: usize = 5 + 32 + 8;
/// And the text's hash.
const HEADER: usize = HEADER_1 + 8;

/// The first 8 bytes of the SHA-256 of `text`: what `decompress` checks its output against.
fn text_hash(text: &[u8]) -> [u8; 8] {
    Sha256::digest(text)[..8].try_into().expect("8 of 32 bytes")
}

/// What compressing cost.
#[derive(Clone, Copy, Debug)]
pub struct Stats {
    pub tokens: usize,
    pub input_bytes: usize,
    pub output_bytes: usize,
    /// `Σ −log₂ p(token)` under the model (the first token uniform): the code length the
    /// coder approaches.
    pub model_bits: f64,
}

/// The weights' identity: SHA-256 of `model.mpk`, in hex.
fn weights_hash(trained: &TrainedLm<impl Backend>) -> Result<[u8; 32], TrainError> {
    let path = trained.weights.join("model.mpk");
    let bytes = std::fs::read(&path).map_err(io_err(&path))?;
    Ok(Sha256::digest(&bytes).into())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Feeds the model one token at a time and gives the distribution of the next.
struct Stepper<'a, B: Backend> {
    model: &'a DecoderOnly<B>,
    cache: <DecoderOnly<B> as IncrementalDecoder<B>>::Cache,
    history: Vec<u32>,
    device: B::Device,
}

impl<'a, B: Backend> Stepper<'a, B> {
    fn new(model: &'a DecoderOnly<B>, device: &B::Device) -> Self {
        Stepper { model, cache: model.empty_cache(), history: Vec::new(), device: device.clone() }
    }

    /// Appends `token` and returns `p(next | history)` in f64.
    fn feed(&mut self, token: u32) -> Vec<f64> {
        self.history.push(token);
        let full = self.model.max_len().is_some_and(|limit| self.model.cached_len(&self.cache) >= limit);
        let fed: Vec<u32> = if full {
            self.cache = self.model.empty_cache();
            // Re-feed the last half window: the next half window of tokens are single steps.
            let keep = (self.model.max_len().unwrap_or(2) / 2).max(1);
            self.history[self.history.len().saturating_sub(keep)..].to_vec()
        } else {
            vec![token]
        };
        let x = TensorData::new(fed.iter().map(|&t| t as i64).collect::<Vec<_>>(), [1, fed.len()]);
        let logits = self.model.step(Tensor::<B, 2, Int>::from_data(x, &self.device), &mut self.cache);
        let row = logits.into_data().convert::<f32>().to_vec::<f32>().unwrap_or_default();
        let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
        let exp: Vec<f64> = row.iter().map(|&v| (v as f64 - max).exp()).collect();
        let sum: f64 = exp.iter().sum();
        exp.into_iter().map(|e| e / sum).collect()
    }
}

/// Checks that the run codes text losslessly, and returns it loaded.
fn lossless<B: Backend>(run: &Path, device: &B::Device) -> Result<TrainedLm<B>, TrainError> {
    let trained = load_lm::<B>(run, device)?;
    if trained.codec.kind() == "word" {
        return Err(TrainError::Usage(format!(
            "{}: a word vocabulary loses spacing and unknown words; compression needs a character or BPE run",
            run.display()
        )));
    }
    Ok(trained)
}

/// Compresses `input` (UTF-8 text) with the language model of `run`.
pub fn compress<B: Backend>(run: &Path, input: &[u8], device: &B::Device) -> Result<(Vec<u8>, Stats), TrainError> {
    let trained = lossless::<B>(run, device)?;
    let text = std::str::from_utf8(input).map_err(|e| {
        TrainError::Usage(format!("the input is not UTF-8 text (byte {}): the model codes text", e.valid_up_to()))
    })?;
    let ids = trained.codec.encode(text).map_err(|symbol| {
        TrainError::Usage(format!("{symbol:?} is not in {}'s vocabulary: it cannot be coded", run.display()))
    })?;
    let vocab = trained.codec.len();
    let mut out = Vec::with_capacity(HEADER + input.len() / 2);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&weights_hash(&trained)?);
    out.extend_from_slice(&(ids.len() as u64).to_le_bytes());
    out.extend_from_slice(&text_hash(input));
    let mut encoder = Encoder::new();
    let mut model_bits = 0.0;
    if let Some(&first) = ids.first() {
        encoder.encode(first as u64, first as u64 + 1, vocab as u64);
        model_bits += (vocab as f64).log2();
        let mut stepper = Stepper::new(&trained.model, device);
        for pair in ids.windows(2) {
            let probs = stepper.feed(pair[0]);
            let cumulative = frequencies(&probs);
            let t = pair[1] as usize;
            encoder.encode(cumulative[t], cumulative[t + 1], cumulative[vocab]);
            model_bits -= probs[t].log2();
        }
    }
    out.extend(encoder.finish());
    let stats = Stats { tokens: ids.len(), input_bytes: input.len(), output_bytes: out.len(), model_bits };
    Ok((out, stats))
}

/// Decompresses what [`compress`] wrote with the same run's weights.
pub fn decompress<B: Backend>(run: &Path, data: &[u8], device: &B::Device) -> Result<Vec<u8>, TrainError> {
    let header = match data.get(..5) {
        Some(m) if m == MAGIC && data.len() >= HEADER => HEADER,
        Some(m) if m == MAGIC_1 && data.len() >= HEADER_1 => HEADER_1,
        _ => {
            return Err(TrainError::Usage(
                "the input is not a file made by `compress` (no whole ATTZ2 or ATTZ1 header)".into(),
            ))
        }
    };
    let trained = lossless::<B>(run, device)?;
    let ours = weights_hash(&trained)?;
    if data[5..37] != ours {
        return Err(TrainError::Usage(format!(
            "the file was made with the model of weights hash {}, but {} has {}: decompress with the run that compressed it",
            hex(&data[5..37]),
            trained.weights.display(),
            hex(&ours)
        )));
    }
    let n = u64::from_le_bytes(data[37..45].try_into().expect("8 bytes")) as usize;
    let vocab = trained.codec.len();
    let mut decoder = Decoder::new(&data[header..]);
    // `n` is read from the file: grow as tokens are decoded rather than trusting it ahead.
    let mut ids = Vec::with_capacity(n.min(data.len()));
    // `read`: the tokens decoded, the last of them from bits past the code's end.
    let damaged = |read: usize| {
        TrainError::Usage(format!(
            "the file is truncated or damaged: its code ran out after {} of the {n} tokens its header counts",
            read.saturating_sub(1)
        ))
    };
    if n > 0 {
        let first = decoder.target(vocab as u64);
        decoder.consume(first, first + 1, vocab as u64);
        ids.push(first as u32);
        let mut stepper = Stepper::new(&trained.model, device);
        while ids.len() < n {
            let cumulative = frequencies(&stepper.feed(*ids.last().expect("one token")));
            let total = cumulative[vocab];
            let t = symbol_at(&cumulative, decoder.target(total));
            decoder.consume(cumulative[t], cumulative[t + 1], total);
            ids.push(t as u32);
            if decoder.past_end() {
                return Err(damaged(ids.len()));
            }
        }
    }
    if decoder.past_end() {
        return Err(damaged(ids.len()));
    }
    let text = decode_exactly(&trained.codec, &ids);
    // What the end-of-code check cannot see (a flipped bit, a cut inside the last byte's
    // slack, a few extra tokens the model is sure of), the text's hash does.
    let hash = text_hash(&text);
    if header == HEADER && hash[..] != data[HEADER_1..HEADER] {
        return Err(TrainError::Usage(format!(
            "the file is damaged: the decoded text's hash {} is not the {} its header holds",
            hex(&hash),
            hex(&data[HEADER_1..HEADER])
        )));
    }
    Ok(text)
}

/// The bytes of `ids` (BPE: the token bytes; characters: their UTF-8).
fn decode_exactly(codec: &LmCodec, ids: &[u32]) -> Vec<u8> {
    match codec {
        LmCodec::Bpe(t) => t.decode_bytes(ids).unwrap_or_default(),
        LmCodec::Symbols(_) => codec.decode(ids).into_bytes(),
    }
}
