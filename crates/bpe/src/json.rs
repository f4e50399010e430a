//! `tokenizer.json` in HuggingFace's format for a byte-level BPE model: model type `BPE`
//! with `vocab` and `merges`, a `ByteLevel` pre-tokenizer (no prefix space) and decoder, and
//! the special tokens as `added_tokens`. Python's `tokenizers.Tokenizer.from_file` loads what
//! we write and encodes to the same ids; we load what HuggingFace writes (merges as
//! `["a", "b"]` pairs or as legacy `"a b"` strings).

use std::io::Write;
use std::path::Path;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::{json, Value};

use crate::byte_level::{bytes_to_token_string, token_string_to_bytes};
use crate::error::{BpeError, Result};
use crate::tokenizer::{AddedToken, Tokenizer};

/// The vocabulary, written in id order (as HuggingFace writes it).
struct VocabInIdOrder(Vec<(String, u32)>);

impl Serialize for VocabInIdOrder {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (token, id) in &self.0 {
            map.serialize_entry(token, id)?;
        }
        map.end()
    }
}

impl Tokenizer {
    /// The `tokenizer.json` text. Deterministic: the same tokenizer gives the same bytes.
    pub fn to_json_string(&self) -> String {
        let token_string = |id: u32| -> String {
            if self.is_added[id as usize] {
                self.added.iter().find(|a| a.id == id).expect("added id").content.clone()
            } else {
                bytes_to_token_string(&self.tokens[id as usize])
            }
        };
        let vocab: Vec<(String, u32)> = (0..self.vocab_size() as u32).map(|id| (token_string(id), id)).collect();
        let merges: Vec<[String; 2]> =
            self.merges.iter().map(|m| [token_string(m.left), token_string(m.right)]).collect();
        let added: Vec<Value> = self
            .added
            .iter()
            .map(|a| {
                json!({"id": a.id, "content": a.content, "single_word": false, "lstrip": false,
                       "rstrip": false, "normalized": false, "special": a.special})
            })
            .collect();
        let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                   "use_regex": true});
        #[derive(Serialize)]
        struct Model {
            r#type: &'static str,
            dropout: Option<f32>,
            unk_token: Option<String>,
            continuing_subword_prefix: Option<String>,
            end_of_word_suffix: Option<String>,
            fuse_unk: bool,
            byte_fallback: bool,
            ignore_merges: bool,
            vocab: VocabInIdOrder,
            merges: Vec<[String; 2]>,
        }
        #[derive(Serialize)]
        struct File {
            version: &'static str,
            truncation: Option<Value>,
            padding: Option<Value>,
            added_tokens: Vec<Value>,
            normalizer: Option<Value>,
            pre_tokenizer: Value,
            post_processor: Option<Value>,
            decoder: Value,
            model: Model,
        }
        let file = File {
            version: "1.0",
            truncation: None,
            padding: None,
            added_tokens: added,
            normalizer: None,
            pre_tokenizer: byte_level.clone(),
            post_processor: None,
            decoder: byte_level,
            model: Model {
                r#type: "BPE",
                dropout: None,
                unk_token: None,
                continuing_subword_prefix: None,
                end_of_word_suffix: None,
                fuse_unk: false,
                byte_fallback: false,
                ignore_merges: false,
                vocab: VocabInIdOrder(vocab),
                merges,
            },
        };
        serde_json::to_string_pretty(&file).expect("serializing plain data cannot fail")
    }

    /// Writes `tokenizer.json` atomically: to a temporary file beside `path`, then renamed,
    /// so `path` is never left half-written.
    pub fn save(&self, path: &Path) -> Result<()> {
        write_atomically(path, self.to_json_string().as_bytes())
    }

    /// Reads a `tokenizer.json` (ours or HuggingFace's byte-level BPE).
    pub fn load(path: &Path) -> Result<Tokenizer> {
        let text = std::fs::read_to_string(path).map_err(|e| BpeError::io(path, e))?;
        Tokenizer::from_json_str(&text, path)
    }

    /// Parses `tokenizer.json` text; `path` names the source in errors.
    pub fn from_json_str(text: &str, path: &Path) -> Result<Tokenizer> {
        let root: Value = serde_json::from_str(text)
            .map_err(|e| BpeError::Json { path: path.to_path_buf(), message: e.to_string() })?;
        let foreign = |field: &str, message: String| BpeError::Foreign {
            path: path.to_path_buf(),
            field: field.to_string(),
            message,
        };
        check_supported(&root, &foreign)?;
        let model = &root["model"];
        let vocab = model["vocab"]
            .as_object()
            .ok_or_else(|| foreign("model.vocab", "expected an object of token → id".into()))?;
        let added = parse_added_tokens(&root["added_tokens"], &foreign)?;
        // Ids are dense: none reaches past the vocabulary and the added tokens together (checked
        // before the table of that size is made).
        let dense = vocab.len() + added.len();
        if let Some((i, a)) = added.iter().enumerate().find(|(_, a)| a.id as usize >= dense) {
            let message = format!("id {} is past the {dense} ids of model.vocab and added_tokens", a.id);
            return Err(foreign(&format!("added_tokens[{i}]"), message));
        }
        let size = vocab.len().max(added.iter().map(|a| a.id as usize + 1).max().unwrap_or(0));
        let mut tokens: Vec<Option<Vec<u8>>> = vec![None; size];
        let mut id_of = std::collections::HashMap::with_capacity(vocab.len());
        for (token, id) in vocab {
            let id = id
                .as_u64()
                .filter(|&id| (id as usize) < size)
                .ok_or_else(|| foreign("model.vocab", format!("{token:?}: bad id {id}")))? as u32;
            id_of.insert(token.as_str(), id);
            if added.iter().any(|a| a.id == id) {
                continue;
            }
            let bytes = token_string_to_bytes(token)
                .ok_or_else(|| foreign("model.vocab", format!("{token:?} is not a byte-level token")))?;
            if tokens[id as usize].replace(bytes).is_some() {
                return Err(foreign("model.vocab", format!("id {id} is used twice")));
            }
        }
        let merges = parse_merges(&model["merges"], &id_of, &foreign)?;
        Tokenizer::from_parts(tokens, added, merges, path)
    }
}

/// Refuses the settings that would make HuggingFace encode differently from us.
fn check_supported(root: &Value, foreign: &impl Fn(&str, String) -> BpeError) -> Result<()> {
    if !root.is_object() {
        return Err(foreign("(root)", "expected a JSON object".into()));
    }
    let model = &root["model"];
    if model.get("type").and_then(Value::as_str).unwrap_or("BPE") != "BPE" || !model.is_object() {
        return Err(foreign("model.type", format!("expected \"BPE\", found {}", model["type"])));
    }
    let pre = &root["pre_tokenizer"];
    if pre["type"] != "ByteLevel" {
        return Err(foreign("pre_tokenizer", format!("expected ByteLevel, found {}", pre["type"])));
    }
    if pre["add_prefix_space"] == true {
        return Err(foreign("pre_tokenizer.add_prefix_space", "only false is supported".into()));
    }
    if pre["use_regex"] == false {
        return Err(foreign("pre_tokenizer.use_regex", "only true is supported".into()));
    }
    if !root["normalizer"].is_null() {
        return Err(foreign("normalizer", "normalizers are not supported".into()));
    }
    for key in ["continuing_subword_prefix", "end_of_word_suffix"] {
        if !model[key].is_null() && model[key] != "" {
            return Err(foreign(&format!("model.{key}"), "not supported in byte-level BPE".into()));
        }
    }
    if model["ignore_merges"] == true {
        return Err(foreign("model.ignore_merges", "only false is supported".into()));
    }
    Ok(())
}

fn parse_added_tokens(value: &Value, foreign: &impl Fn(&str, String) -> BpeError) -> Result<Vec<AddedToken>> {
    let Some(list) = value.as_array() else {
        return if value.is_null() { Ok(Vec::new()) } else { Err(foreign("added_tokens", "expected a list".into())) };
    };
    list.iter()
        .enumerate()
        .map(|(i, t)| {
            let field = format!("added_tokens[{i}]");
            let id = t["id"].as_u64().ok_or_else(|| foreign(&field, "missing id".into()))?;
            let content = t["content"]
                .as_str()
                .filter(|c| !c.is_empty())
                .ok_or_else(|| foreign(&field, "missing or empty content".into()))?;
            let special = t["special"].as_bool().unwrap_or(false);
            let id = u32::try_from(id).map_err(|_| foreign(&field, format!("id {id} is past the u32 ids")))?;
            Ok(AddedToken { id, content: content.to_string(), special })
        })
        .collect()
}

fn parse_merges(
    value: &Value,
    id_of: &std::collections::HashMap<&str, u32>,
    foreign: &impl Fn(&str, String) -> BpeError,
) -> Result<Vec<(u32, u32)>> {
    let list = value.as_array().ok_or_else(|| foreign("model.merges", "expected a list of merges".into()))?;
    list.iter()
        .enumerate()
        .map(|(i, m)| {
            let field = format!("model.merges[{i}]");
            let (a, b) = match m {
                Value::String(s) => {
                    s.split_once(' ').ok_or_else(|| foreign(&field, format!("{s:?}: expected \"left right\"")))?
                }
                Value::Array(pair) if pair.len() == 2 => match (&pair[0], &pair[1]) {
                    (Value::String(a), Value::String(b)) => (a.as_str(), b.as_str()),
                    _ => return Err(foreign(&field, "expected two strings".into())),
                },
                _ => return Err(foreign(&field, "expected [\"left\", \"right\"]".into())),
            };
            let id = |t: &str| {
                id_of.get(t).copied().ok_or_else(|| foreign(&field, format!("{t:?} is not in the vocabulary")))
            };
            Ok((id(a)?, id(b)?))
        })
        .collect()
}

/// Writes `bytes` to a temporary file in `path`'s directory, syncs it, and renames it over
/// `path`. On error the temporary file is removed and `path` is untouched.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let written = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        BpeError::io(path, e)
    })
}
