//! Translation datasets as tokenized sentence pairs: `synthetic-mt` (generated) and
//! `multi30k` (`multi30k/{train,val,test_2016_flickr}.{src,tgt}.gz` under the data
//! directory), with one joint source-target vocabulary: whitespace words, or byte-level BPE
//! trained with `attend-bpe` on the training split (the paper's shared vocabulary).

use std::path::Path;

use attend_bpe::{Trainer, TrainerConfig};
use serde::{Deserialize, Serialize};

use super::lm_dataset::{read_text, DataError};
use super::mt_batches::{Pair, SpecialIds};
use super::synthetic::{synthetic_mt, TextPairs};
use super::vocab::Vocab;
use crate::config::{DataConfig, TokenizerKind};

/// The special tokens, ids 0..4 in every translation vocabulary.
pub const SPECIALS: [&str; 4] = ["<pad>", "<unk>", "<s>", "</s>"];
/// Their ids.
pub const IDS: SpecialIds = SpecialIds { pad: 0, bos: 2, eos: 3 };
const UNK: u32 = 1;

/// The joint vocabulary of a translation run (one per run: the variants' sizes do not matter).
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum MtTokenizer {
    /// Whitespace words: the specials, then the most frequent words of the training text.
    Words(Vocab),
    /// Byte-level BPE with the specials as added tokens (ids 0..4).
    #[serde(skip)]
    Bpe(attend_bpe::Tokenizer),
}

impl MtTokenizer {
    pub fn vocab_size(&self) -> usize {
        match self {
            MtTokenizer::Words(v) => v.len(),
            MtTokenizer::Bpe(t) => t.vocab_size(),
        }
    }

    /// Ids of a sentence (no BOS/EOS); unknown words are `<unk>`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        match self {
            MtTokenizer::Words(v) => text.split_whitespace().map(|w| v.id(w).unwrap_or(UNK)).collect(),
            MtTokenizer::Bpe(t) => t.encode(text),
        }
    }

    /// Text of ids, special tokens left out.
    pub fn decode(&self, ids: &[u32]) -> String {
        let plain: Vec<u32> = ids.iter().copied().filter(|&i| i as usize >= SPECIALS.len()).collect();
        match self {
            MtTokenizer::Words(v) => {
                plain.iter().map(|&i| v.symbols[i as usize].as_str()).collect::<Vec<_>>().join(" ")
            }
            MtTokenizer::Bpe(t) => t.decode(&plain).unwrap_or_default(),
        }
    }

    /// Saves into a run directory: `vocab.json` (words) or `tokenizer.json` (BPE).
    pub fn save(&self, run: &Path) -> std::io::Result<()> {
        match self {
            MtTokenizer::Words(v) => {
                crate::whole_file::write_whole(&run.join("vocab.json"), serde_json::to_string(v).expect("vocab"))
            }
            MtTokenizer::Bpe(t) => t.save(&run.join("tokenizer.json")).map_err(std::io::Error::other),
        }
    }

    /// Loads what [`MtTokenizer::save`] wrote.
    pub fn load(run: &Path) -> Result<Self, String> {
        let bpe = run.join("tokenizer.json");
        if bpe.is_file() {
            return attend_bpe::Tokenizer::load(&bpe).map(MtTokenizer::Bpe).map_err(|e| e.to_string());
        }
        let path = run.join("vocab.json");
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let vocab: Vocab = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(MtTokenizer::Words(vocab.reindexed()))
    }
}

/// Tokenized pairs and the raw text of the held-out splits (BLEU is computed on text).
pub struct MtData {
    pub tokenizer: MtTokenizer,
    pub train: Vec<Pair>,
    pub valid: Vec<Pair>,
    pub valid_text: TextPairs,
    pub test_text: TextPairs,
}

/// The raw text of the train, valid and test splits of the translation dataset `config`
/// names (Multi30k: `train`, `val`, `test_2016_flickr`).
pub fn mt_text_splits(config: &DataConfig, data_dir: &Path) -> Result<[TextPairs; 3], DataError> {
    match config.dataset.as_str() {
        "synthetic-mt" => {
            let s = synthetic_mt(config.synthetic_vocab, config.seed, config.synthetic_size);
            Ok([s.train, s.valid, s.test])
        }
        "multi30k" => {
            let dir = data_dir.join("multi30k");
            let split = |name: &str| {
                let file = |lang: &str| {
                    super::lm_dataset::named_file("multi30k", data_dir, dir.join(format!("{name}.{lang}.gz")))
                };
                read_pairs(&file(&config.source)?, &file(&config.target)?)
            };
            Ok([split("train")?, split("val")?, split("test_2016_flickr")?])
        }
        other => Err(DataError::Unknown(format!("{other} (translation: synthetic-mt or multi30k)"))),
    }
}

/// Loads the translation dataset that `config` names.
/// With `given` (a fine-tuned run's base vocabulary), the text is coded with that instead.
pub fn load_mt(config: &DataConfig, data_dir: &Path, given: Option<MtTokenizer>) -> Result<MtData, DataError> {
    let splits = mt_text_splits(config, data_dir)?;
    let [train_text, valid_text, test_text] = splits;
    let tokenizer = match (given, config.tokenizer) {
        (Some(given), _) => given,
        (None, TokenizerKind::Word) => MtTokenizer::Words(joint_words(&train_text, config.vocab_size)),
        (None, TokenizerKind::Bpe) => {
            let trainer = Trainer::new(TrainerConfig {
                vocab_size: config.vocab_size,
                min_frequency: 2,
                special_tokens: SPECIALS.map(String::from).to_vec(),
                show_progress: false,
            })
            .map_err(|e| DataError::Tokenizer(e.to_string()))?;
            let text = train_text.iter().flat_map(|(s, t)| [s.as_str(), t.as_str()]);
            MtTokenizer::Bpe(trainer.train_texts(text))
        }
        (None, TokenizerKind::Char) => {
            return Err(DataError::Tokenizer(
                "data.tokenizer = \"char\" is for language models; use word or bpe".into(),
            ))
        }
    };
    let pairs = |text: &TextPairs| -> Vec<Pair> {
        text.iter().map(|(s, t)| Pair { source: tokenizer.encode(s), target: tokenizer.encode(t) }).collect()
    };
    Ok(MtData { train: pairs(&train_text), valid: pairs(&valid_text), tokenizer, valid_text, test_text })
}

/// Line-aligned source and target files; unequal line counts and empty files are errors.
pub fn read_pairs(source: &Path, target: &Path) -> Result<TextPairs, DataError> {
    let (s, t) = (read_text(source)?, read_text(target)?);
    let (s, t): (Vec<&str>, Vec<&str>) = (s.lines().collect(), t.lines().collect());
    if s.len() != t.len() {
        return Err(DataError::Unaligned {
            sources: source.to_path_buf(),
            targets: target.to_path_buf(),
            lines: (s.len(), t.len()),
        });
    }
    if s.is_empty() {
        return Err(DataError::Empty { path: source.to_path_buf(), split: "translation" });
    }
    Ok(s.into_iter().zip(t).map(|(a, b)| (a.to_string(), b.to_string())).collect())
}

/// The specials, then source and target training words by falling count (ties by word).
fn joint_words(train: &TextPairs, cap: usize) -> Vocab {
    let mut counts: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for (s, t) in train {
        for w in s.split_whitespace().chain(t.split_whitespace()) {
            *counts.entry(w).or_insert(0) += 1;
        }
    }
    let mut words: Vec<(&str, u64)> = counts.into_iter().filter(|(w, _)| !SPECIALS.contains(w)).collect();
    words.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let room = if cap == 0 { usize::MAX } else { cap.saturating_sub(SPECIALS.len()) };
    let symbols =
        SPECIALS.iter().map(|s| s.to_string()).chain(words.into_iter().take(room).map(|(w, _)| w.to_string()));
    Vocab::from_symbols("word", symbols.collect())
}
