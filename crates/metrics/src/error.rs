//! The one error type of the crate: every variant names what was wrong and where.

use std::path::PathBuf;

/// Errors of attend-metrics. Messages are one line and name the file, line or option at fault.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// A file could not be opened or read.
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A line of a text file is not valid UTF-8.
    #[error("{}:{line}: invalid UTF-8", path.display())]
    InvalidUtf8 { path: PathBuf, line: usize },
    /// A reference stream does not have one line per hypothesis.
    #[error("reference stream {stream} has {refs} segments but there are {hyps} hypotheses")]
    SegmentCountMismatch { stream: usize, hyps: usize, refs: usize },
    /// Reading hypotheses: the stream was empty.
    #[error("no hypotheses: stdin is empty (give one hypothesis per line)")]
    NoHypotheses,
    /// A reference file does not have one line per hypothesis.
    #[error("{} has {lines} lines but stdin has {hyps} hypotheses: each reference file needs one line per hypothesis", path.display())]
    ReferenceLineCount { path: PathBuf, lines: usize, hyps: usize },
    /// No reference stream was given.
    #[error("at least one reference stream is needed")]
    NoReferences,
    /// An unknown tokenizer name (sacreBLEU's names are accepted).
    #[error("unknown tokenizer {0:?}: expected one of 13a, none, intl, char")]
    UnknownTokenizer(String),
    /// An unknown smoothing method name.
    #[error("unknown smoothing method {0:?}: expected one of exp, floor, add-k, none")]
    UnknownSmoothing(String),
    /// A smoothing value given to a method that takes none, or an invalid one.
    #[error("smoothing method {method} {reason}")]
    InvalidSmoothingValue { method: &'static str, reason: String },
    /// An invalid metric setting, e.g. a zero n-gram order.
    #[error("invalid setting {name} = {value}: {reason}")]
    InvalidSetting { name: &'static str, value: String, reason: &'static str },
    /// A language model was asked to train on text without a single token.
    #[error("the training text has no tokens")]
    EmptyTrainingData,
    /// Perplexity was asked of statistics that hold no token.
    #[error("no tokens were scored, so cross-entropy and perplexity are undefined")]
    NoTokens,
}
