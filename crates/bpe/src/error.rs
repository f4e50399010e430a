//! The errors of this crate: each names the file, line, field or token at fault.

use std::path::PathBuf;

/// Everything that can go wrong while training, loading, saving or decoding.
#[derive(Debug, thiserror::Error)]
pub enum BpeError {
    /// A file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An input file holds no text at all.
    #[error("{path}: input file is empty")]
    EmptyInput { path: PathBuf },
    /// An input file is not UTF-8 text.
    #[error("{path}:{line}: invalid UTF-8 (the trainer reads UTF-8 text)")]
    InvalidUtf8 { path: PathBuf, line: u64 },
    /// Training was given no input file.
    #[error("no input files given")]
    NoInputs,
    /// The requested vocabulary cannot hold the byte alphabet and the special tokens.
    #[error(
        "vocab size {requested} is too small: it must be at least {minimum} \
         (256 byte tokens + {specials} special tokens)"
    )]
    VocabTooSmall { requested: usize, minimum: usize, specials: usize },
    /// A special token is empty or given twice.
    #[error("special token {token:?}: {reason}")]
    BadSpecialToken { token: String, reason: &'static str },
    /// A `tokenizer.json` is not valid JSON (e.g. truncated).
    #[error("{path}: not a valid tokenizer.json: {message}")]
    Json { path: PathBuf, message: String },
    /// A `tokenizer.json` is valid JSON but not a byte-level BPE tokenizer we can read.
    #[error("{path}: {field}: {message}")]
    Foreign { path: PathBuf, field: String, message: String },
    /// An id to decode is not in the vocabulary.
    #[error("token id {id} is not in the vocabulary (size {vocab_size})")]
    UnknownId { id: u32, vocab_size: usize },
}

/// Result with [`BpeError`].
pub type Result<T> = std::result::Result<T, BpeError>;

impl BpeError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BpeError::Io { path: path.into(), source }
    }
}
