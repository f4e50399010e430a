//! Language-modeling datasets as token streams: generated (`synthetic-lm`), named
//! (`tiny-shakespeare`, `ptb`, read from the data directory with the file names of
//! `../shared/data`, gzip read directly) or any text file by path.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::codec::LmCodec;
use super::markov::MarkovSpec;
use super::synthetic::synthetic_lm;
use super::vocab::Vocab;
use crate::config::{DataConfig, TokenizerKind};
use attend_metrics::TextCounts;

/// Train / valid / test token streams and what is needed to read them back as text.
pub struct LmData {
    pub train: Vec<u32>,
    pub valid: Vec<u32>,
    pub test: Vec<u32>,
    /// Characters, words or BPE (`data.tokenizer`).
    pub codec: LmCodec,
    /// Generated data: the source's entropy rate (nats per token), the floor of the loss.
    pub entropy_rate: Option<f64>,
    /// Generated data: the source's own loss on the validation split (nats per token), what a
    /// perfect model scores on this sample; its distance from `entropy_rate` is sampling noise.
    pub source_valid_loss: Option<f64>,
    /// Generated data: the same on the test split.
    pub source_test_loss: Option<f64>,
    /// Generated data: positions with fewer tokens of context than this are left out of the
    /// validation loss (the source's order), so it compares with the entropy rate.
    pub min_context: usize,
    /// Words and characters of each split's text (train, valid, test), for per-word and
    /// per-character figures. Word-level data counts `<eos>` as a word (Mikolov's PTB
    /// convention: 82,430 test words).
    pub counts: [TextCounts; 3],
    /// Whether `test` is a split of its own; a single file split 90/10 (tiny Shakespeare, a
    /// text file) has only train and valid, and `test` repeats `valid`.
    pub has_test: bool,
}

/// A dataset that cannot be read; names the file.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: invalid UTF-8 at line {line}")]
    Utf8 { path: PathBuf, line: usize },
    #[error("{path}: the {split} split is empty")]
    Empty { path: PathBuf, split: &'static str },
    #[error("data.dataset = {dataset:?}: {} is not there (named datasets are read from the data directory, here {}). Fetch it with `cargo xtask data fetch {dataset}`, or point --data-dir (or ATTEND_DATA_DIR) at a directory that holds it", path.display(), dir.display())]
    MissingDataset { dataset: String, dir: PathBuf, path: PathBuf },
    #[error("data.dataset = {0:?}: not a language-modeling dataset (expected synthetic-lm, tiny-shakespeare, ptb or a text file)")]
    Unknown(String),
    #[error(
        "{0}: no test split: this dataset is one file split 90/10 into train and valid (as nanoGPT); use --split valid"
    )]
    NoTest(String),
    #[error("data.vocab_size = {0}: a BPE vocabulary needs at least 256 symbols (one per byte), e.g. 512")]
    BpeVocab(usize),
    #[error("{} and {} are not line-aligned: {} and {} lines", sources.display(), targets.display(), lines.0, lines.1)]
    Unaligned { sources: PathBuf, targets: PathBuf, lines: (usize, usize) },
    #[error("data.dataset is empty (a run made by `import` has none): give `eval` a --data FILE, or fine-tune it with train.init_from and a dataset of its own")]
    NoDataset,
    #[error("data.tokenizer: {0}")]
    Tokenizer(String),
    #[error("{path}: {symbol:?} of the {split} split is not in the vocabulary")]
    UnknownSymbol { path: PathBuf, split: &'static str, symbol: String },
}

/// Reads a UTF-8 text file, decompressing `.gz`; errors name the file (and line).
pub fn read_text(path: &Path) -> Result<String, DataError> {
    let io = |source| DataError::Io { path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    if path.extension().is_some_and(|e| e == "gz") {
        flate2::read::MultiGzDecoder::new(file).read_to_end(&mut bytes).map_err(io)?;
    } else {
        std::io::BufReader::new(file).read_to_end(&mut bytes).map_err(io)?;
    }
    String::from_utf8(bytes).map_err(|e| {
        let line = e.as_bytes()[..e.utf8_error().valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        DataError::Utf8 { path: path.to_path_buf(), line }
    })
}

/// `dir/name`, or `dir/name.gz` if only that exists.
fn data_file(dir: &Path, name: &str) -> PathBuf {
    let plain = dir.join(name);
    let gz = dir.join(format!("{name}.gz"));
    if !plain.exists() && gz.exists() {
        gz
    } else {
        plain
    }
}

/// `path`, a file of the named dataset `dataset` in data directory `data_dir`, if it exists;
/// else an error that says how to get it.
pub(crate) fn named_file(dataset: &str, data_dir: &Path, path: PathBuf) -> Result<PathBuf, DataError> {
    if path.exists() {
        Ok(path)
    } else {
        Err(DataError::MissingDataset { dataset: dataset.into(), dir: data_dir.to_path_buf(), path })
    }
}

/// Loads the language-modeling dataset that `config` names.
pub fn load_lm(config: &DataConfig, data_dir: &Path) -> Result<LmData, DataError> {
    load_lm_with(config, data_dir, None, &[])
}

/// Loads the dataset that `config` names, coded with `given` (a fine-tuned run's base
/// vocabulary) instead of a vocabulary built from the data; a built vocabulary gets the
/// special tokens `specials` (a masked LM's), after the data's symbols (BPE: before, ids 0…).
pub fn load_lm_with(
    config: &DataConfig,
    data_dir: &Path,
    given: Option<LmCodec>,
    specials: &[&str],
) -> Result<LmData, DataError> {
    let opts = (given, specials);
    match config.dataset.as_str() {
        "synthetic-lm" if config.tokenizer == TokenizerKind::Bpe => generated_as_text(config, opts),
        "synthetic-lm" => {
            let (given, specials) = opts;
            let mut data = generated(config);
            data.codec = data.codec.with_specials(specials);
            if let Some(given) = given {
                // The base run's words, perhaps with special tokens after them.
                if !given.extends(&data.codec) {
                    return Err(DataError::Tokenizer(
                        "the base run's vocabulary is not this generated source's words (data.synthetic_vocab, data.seed)"
                            .into(),
                    ));
                }
                data.codec = given;
            }
            Ok(data)
        }
        "tiny-shakespeare" => {
            let path = data_file(&data_dir.join("tinyshakespeare"), "input.txt");
            split_file(config, &named_file("tiny-shakespeare", data_dir, path)?, opts)
        }
        "ptb" => {
            let dir = data_dir.join("ptb");
            let file = |s: &str| named_file("ptb", data_dir, data_file(&dir, &format!("ptb.{s}.txt")));
            let [train, valid, test] = [file("train")?, file("valid")?, file("test")?];
            let texts = [read_text(&train)?, read_text(&valid)?, read_text(&test)?];
            from_texts_with(config, &texts, &[train, valid, test], None, opts)
        }
        // A path (it names a file or a folder): read it, so that a mistyped one is reported
        // as the missing file it is.
        other if Path::new(other).is_file() || other.contains(['/', '\\', '.']) => {
            split_file(config, Path::new(other), opts)
        }
        "" => Err(DataError::NoDataset),
        other => Err(DataError::Unknown(other.to_string())),
    }
}

/// The seeded Markov source's splits and its word vocabulary.
fn generated_words(config: &DataConfig) -> (super::synthetic::SyntheticLm, Vocab, MarkovSpec) {
    let spec = MarkovSpec {
        vocab: config.synthetic_vocab,
        order: config.synthetic_order,
        branching: config.synthetic_branching,
        epsilon: config.synthetic_epsilon,
    };
    let data = synthetic_lm(spec, config.seed, config.synthetic_size);
    let vocab = Vocab::from_symbols("word", data.source.words().to_vec());
    (data, vocab, spec)
}

fn generated(config: &DataConfig) -> LmData {
    let (data, vocab, spec) = generated_words(config);
    let count = |ids: &[u32]| {
        let chars: u64 = ids.iter().map(|&w| vocab.symbols[w as usize].len() as u64 + 1).sum();
        TextCounts { words: ids.len() as u64, chars, bytes: chars }
    };
    let counts = [count(&data.splits.train), count(&data.splits.valid), count(&data.splits.test)];
    LmData {
        entropy_rate: Some(data.source.entropy_rate()),
        source_valid_loss: data.source.log_loss(&data.splits.valid),
        source_test_loss: data.source.log_loss(&data.splits.test),
        min_context: spec.order,
        train: data.splits.train,
        valid: data.splits.valid,
        test: data.splits.test,
        codec: LmCodec::Symbols(vocab),
        counts,
        has_test: true,
    }
}

/// Generated words rendered as text (words separated by spaces) for a BPE model: the
/// source's entropy rate is per word, so it is not reported beside a per-token loss.
/// A vocabulary to use as it is, and the special tokens a built one gets.
type CodecChoice<'a> = (Option<LmCodec>, &'a [&'a str]);

fn generated_as_text(config: &DataConfig, opts: CodecChoice) -> Result<LmData, DataError> {
    let (data, vocab, _) = generated_words(config);
    let texts = [&data.splits.train, &data.splits.valid, &data.splits.test].map(|ids| vocab.decode(ids));
    let origin = PathBuf::from(format!("synthetic-lm (seed {})", config.seed));
    from_texts_with(config, &texts, &[origin.clone(), origin.clone(), origin], None, opts)
}

/// One file split as nanoGPT does: the first 90% of characters train, the rest validate
/// (and test: there is no third split).
fn split_file(config: &DataConfig, path: &Path, opts: CodecChoice) -> Result<LmData, DataError> {
    let text = read_text(path)?;
    let cut = text.char_indices().nth(text.chars().count() * 9 / 10).map_or(text.len(), |(i, _)| i);
    let (train, valid) = text.split_at(cut);
    let texts = [train.to_string(), valid.to_string(), valid.to_string()];
    let paths = [path.to_path_buf(), path.to_path_buf(), path.to_path_buf()];
    // Characters: the vocabulary is every character of the file (nanoGPT builds it so).
    let vocab_text = (config.tokenizer == TokenizerKind::Char).then_some(text.as_str());
    let data = from_texts_with(config, &texts, &paths, vocab_text, opts)?;
    Ok(LmData { has_test: false, ..data })
}

fn from_texts_with(
    config: &DataConfig,
    texts: &[String; 3],
    paths: &[PathBuf; 3],
    vocab_text: Option<&str>,
    (given, specials): CodecChoice,
) -> Result<LmData, DataError> {
    const SPLITS: [&str; 3] = ["train", "valid", "test"];
    for ((text, path), split) in texts.iter().zip(paths).zip(SPLITS) {
        if text.trim().is_empty() {
            return Err(DataError::Empty { path: path.clone(), split });
        }
    }
    let codec = match (given, config.tokenizer) {
        (Some(codec), _) => codec,
        (None, TokenizerKind::Char) => {
            LmCodec::Symbols(Vocab::chars(vocab_text.unwrap_or(&texts[0]))).with_specials(specials)
        }
        (None, TokenizerKind::Word) => {
            LmCodec::Symbols(Vocab::words(&texts[0], config.vocab_size)).with_specials(specials)
        }
        (None, TokenizerKind::Bpe) if config.vocab_size < 256 => return Err(DataError::BpeVocab(config.vocab_size)),
        (None, TokenizerKind::Bpe) => {
            LmCodec::train_bpe(&texts[0], config.vocab_size, specials).map_err(DataError::Tokenizer)?
        }
    };
    let mut streams = Vec::with_capacity(3);
    for ((text, path), split) in texts.iter().zip(paths).zip(SPLITS) {
        let ids =
            codec.encode(text).map_err(|symbol| DataError::UnknownSymbol { path: path.clone(), split, symbol })?;
        streams.push(ids);
    }
    let test = streams.pop().expect("three splits");
    let valid = streams.pop().expect("three splits");
    let train = streams.pop().expect("three splits");
    Ok(LmData {
        train,
        valid,
        test,
        codec,
        entropy_rate: None,
        source_valid_loss: None,
        source_test_loss: None,
        min_context: 0,
        counts: [0, 1, 2].map(|i| text_counts(&texts[i], config.tokenizer)),
        has_test: true,
    })
}

/// The counts of a split's text; word-level data counts each line's `<eos>` as a word.
pub fn text_counts(text: &str, tokenizer: TokenizerKind) -> TextCounts {
    let mut counts = TextCounts::of_text(text);
    if tokenizer == TokenizerKind::Word {
        counts.words += text.lines().count() as u64;
    }
    counts
}
