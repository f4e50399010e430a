//! How a language model's text becomes token ids and back: a character or word [`Vocab`]
//! (`vocab.json` in the run directory), or byte-level BPE trained on the training split
//! (`tokenizer.json`, HuggingFace's format, loadable by `tokenizers.Tokenizer.from_file`).
//!
//! Byte-level BPE represents any text: every byte is a symbol of the base alphabet, so
//! whitespace, newlines and characters unseen in training encode and decode exactly.

use std::path::{Path, PathBuf};

use attend_bpe::{Tokenizer, Trainer, TrainerConfig};

use super::vocab::Vocab;

/// The file a run keeps its BPE tokenizer in.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// The file a run keeps its character or word vocabulary in.
pub const VOCAB_FILE: &str = "vocab.json";

/// A language model's coding of text.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum LmCodec {
    /// Characters or whitespace words.
    Symbols(Vocab),
    /// Byte-level BPE.
    Bpe(Tokenizer),
}

/// A run's coding that cannot be read; names the file.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: {message}", path.display())]
    Corrupt { path: PathBuf, message: String },
    #[error(transparent)]
    Bpe(#[from] attend_bpe::BpeError),
    #[error("{}: neither {TOKENIZER_FILE} nor {VOCAB_FILE} (a language-model run directory holds one)", .0.display())]
    Missing(PathBuf),
}

impl LmCodec {
    /// Trains byte-level BPE of `vocab_size` symbols (pairs seen at least twice) on `text`,
    /// with `specials` as added tokens (ids 0, 1, …).
    pub fn train_bpe(text: &str, vocab_size: usize, specials: &[&str]) -> Result<Self, String> {
        let trainer = Trainer::new(TrainerConfig {
            vocab_size,
            min_frequency: 2,
            special_tokens: specials.iter().map(|s| s.to_string()).collect(),
            show_progress: false,
        })
        .map_err(|e| e.to_string())?;
        Ok(LmCodec::Bpe(trainer.train_texts([text])))
    }

    /// A character or word vocabulary with `specials` appended (those it lacks); BPE gets
    /// its specials when it is trained ([`LmCodec::train_bpe`]).
    pub fn with_specials(self, specials: &[&str]) -> Self {
        match self {
            LmCodec::Symbols(v) if !specials.is_empty() => {
                let kind = v.kind.clone();
                let mut symbols = v.symbols;
                symbols.extend(
                    specials
                        .iter()
                        .filter(|s| !symbols.contains(&s.to_string()))
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>(),
                );
                LmCodec::Symbols(Vocab::from_symbols(&kind, symbols))
            }
            other => other,
        }
    }

    /// The id of special token `name`, if the coding has it.
    pub fn special_id(&self, name: &str) -> Option<u32> {
        match self {
            LmCodec::Symbols(v) => v.id(name),
            LmCodec::Bpe(t) => t.added_token_id(name),
        }
    }

    /// Number of token ids.
    pub fn len(&self) -> usize {
        match self {
            LmCodec::Symbols(v) => v.len(),
            LmCodec::Bpe(t) => t.vocab_size(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `char`, `word` or `bpe`.
    pub fn kind(&self) -> &str {
        match self {
            LmCodec::Symbols(v) => &v.kind,
            LmCodec::Bpe(_) => "bpe",
        }
    }

    /// Ids of `text`; the error is a symbol the coding cannot represent (never for BPE).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        match self {
            LmCodec::Symbols(v) => v.encode(text),
            LmCodec::Bpe(t) => Ok(t.encode(text)),
        }
    }

    /// Ids of a prompt (words: no `<eos>` added at its end).
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>, String> {
        match self {
            LmCodec::Symbols(v) => v.encode_prompt(text),
            LmCodec::Bpe(t) => Ok(t.encode(text)),
        }
    }

    /// Text of `ids`. BPE ids can end inside a multi-byte character (a sample cut short):
    /// such bytes become U+FFFD rather than an error.
    pub fn decode(&self, ids: &[u32]) -> String {
        match self {
            LmCodec::Symbols(v) => v.decode(ids),
            LmCodec::Bpe(t) => {
                let known: Vec<u32> = ids.iter().copied().filter(|&i| (i as usize) < t.vocab_size()).collect();
                String::from_utf8_lossy(&t.decode_bytes(&known).unwrap_or_default()).into_owned()
            }
        }
    }

    /// Whether both code text identically (the same symbols, or the same merges and vocabulary).
    pub fn same_as(&self, other: &LmCodec) -> bool {
        match (self, other) {
            (LmCodec::Symbols(a), LmCodec::Symbols(b)) => a.kind == b.kind && a.symbols == b.symbols,
            (LmCodec::Bpe(a), LmCodec::Bpe(b)) => a.to_json_string() == b.to_json_string(),
            _ => false,
        }
    }

    /// Whether this coding is `base`, or `base`'s symbols with more appended (special tokens):
    /// ids of `base` mean the same here.
    pub fn extends(&self, base: &LmCodec) -> bool {
        match (self, base) {
            (LmCodec::Symbols(a), LmCodec::Symbols(b)) => a.kind == b.kind && a.symbols.starts_with(&b.symbols),
            _ => self.same_as(base),
        }
    }

    /// Writes `vocab.json` or `tokenizer.json` into `run`.
    pub fn save(&self, run: &Path) -> std::io::Result<()> {
        match self {
            LmCodec::Symbols(v) => crate::whole_file::write_whole(
                &run.join(VOCAB_FILE),
                serde_json::to_string(v).expect("vocab serializes"),
            ),
            LmCodec::Bpe(t) => t.save(&run.join(TOKENIZER_FILE)).map_err(std::io::Error::other),
        }
    }

    /// Reads what [`LmCodec::save`] wrote into `run`.
    pub fn load(run: &Path) -> Result<Self, CodecError> {
        let bpe = run.join(TOKENIZER_FILE);
        if bpe.is_file() {
            return Ok(LmCodec::Bpe(Tokenizer::load(&bpe)?));
        }
        let path = run.join(VOCAB_FILE);
        if !path.is_file() {
            return Err(CodecError::Missing(run.to_path_buf()));
        }
        let text = std::fs::read_to_string(&path).map_err(|source| CodecError::Io { path: path.clone(), source })?;
        let vocab: Vocab = serde_json::from_str(&text)
            .map_err(|e| CodecError::Corrupt { path: path.clone(), message: e.to_string() })?;
        Ok(LmCodec::Symbols(vocab.reindexed()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n";

    #[test]
    fn bpe_codec_round_trips_any_text_whitespace_and_unseen_characters_included() {
        let codec = LmCodec::train_bpe(&TEXT.repeat(20), 300, &[]).unwrap();
        assert_eq!(codec.kind(), "bpe");
        let probe = "  Speak,\n\n\tno — ünseen «text» 42\n";
        let ids = codec.encode(probe).unwrap();
        assert_eq!(codec.decode(&ids), probe);
        // Merges were learned: the training text takes fewer tokens than bytes.
        assert!(codec.encode(TEXT).unwrap().len() < TEXT.len() / 2);
    }

    #[test]
    fn saved_codecs_load_back_with_the_same_ids() {
        let dir = tempfile::tempdir().unwrap();
        for codec in
            [LmCodec::train_bpe(&TEXT.repeat(5), 280, &["[MASK]"]).unwrap(), LmCodec::Symbols(Vocab::chars(TEXT))]
        {
            let run = dir.path().join(codec.kind());
            std::fs::create_dir_all(&run).unwrap();
            codec.save(&run).unwrap();
            let back = LmCodec::load(&run).unwrap();
            assert_eq!(back.encode(TEXT).unwrap(), codec.encode(TEXT).unwrap());
        }
        let empty = dir.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        assert!(matches!(LmCodec::load(&empty), Err(CodecError::Missing(_))));
    }
}
