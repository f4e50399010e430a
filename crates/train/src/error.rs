//! The crate's errors: [`TrainError`] for every failure of training, evaluation, generation and
//! translation, and [`PromptError`] for a `generate` prompt; each names the file, key, step,
//! sentence or symbol at fault.

use std::path::{Path, PathBuf};

use crate::checkpoint::CheckpointError;
use crate::config::ConfigError;
use crate::data::lm_dataset::DataError;

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Parallel(#[from] crate::parallel::error::ParallelError),
    #[error(transparent)]
    Codec(#[from] crate::data::codec::CodecError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{0} already holds a run: continue it with --resume, or choose another --run")]
    RunExists(PathBuf),
    #[error("step {step}: the loss is {loss}; stopped. The last good checkpoint is {last}")]
    NonFinite { step: u64, loss: f64, last: String },
    #[error("{what}: the stream has {len} tokens, too few for {needs}")]
    TooShort { what: String, len: usize, needs: String },
    #[error("{what}: {len} tokens with its end-of-sentence mark, more than the model's model.block_size = {limit} learned positions")]
    TooLong { what: String, len: usize, limit: usize },
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error("this command needs a causal language model (model.arch = \"lm\" or \"notes\"); \"seq2seq\" is a translation model and \"encoder\" a masked LM, which reads both sides and cannot continue a text")]
    NotLm,
    #[error("train.init_from = {}: {message}", run.display())]
    InitFrom { run: PathBuf, message: String },
    #[error("{0}")]
    Usage(String),
    #[error("{}: the vocabulary the data gives now differs from the one this run was trained with (or the file is missing): the data, --data-dir or the data section changed since the run began; resume with the data it started from", .0.display())]
    VocabularyChanged(PathBuf),
    #[error("train.freeze: {0}")]
    Freeze(String),
    #[error("{0} holds a language model (model.arch = \"lm\" or \"notes\"); translation needs an encoder-decoder run (arch = \"seq2seq\")")]
    NotMt(PathBuf),
}

/// An unusable text given on the command line (`generate --prompt`, `attention --text`): the
/// flag's name, then what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("{0}: {1:?} is not in the run's vocabulary")]
    UnknownSymbol(&'static str, String),
    #[error("{0} is empty: give at least one token of text")]
    Empty(&'static str),
}

/// An error unless `path` (`flag`'s directory, where a command writes its files) is new or
/// empty: files already there are never replaced.
pub(crate) fn fresh_directory(path: &Path, flag: &str) -> Result<(), TrainError> {
    match std::fs::read_dir(path).map(|mut entries| entries.next().is_some()) {
        Ok(true) => Err(TrainError::Usage(format!(
            "{flag} {}: the directory already holds files; give a new or empty one (nothing in it is replaced)",
            path.display()
        ))),
        Ok(false) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(TrainError::Io { path: path.to_path_buf(), source }),
    }
}

/// Maps an I/O error on `path` to [`TrainError::Io`].
pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> TrainError + '_ {
    move |source| TrainError::Io { path: path.to_path_buf(), source }
}

/// A file `file` of checkpoint directory `dir` that could not be parsed.
pub(crate) fn corrupt(dir: &Path, file: &str, e: impl std::fmt::Display) -> CheckpointError {
    CheckpointError::Corrupt { path: dir.join(file), message: e.to_string() }
}
