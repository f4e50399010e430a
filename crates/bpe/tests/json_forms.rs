//! The forms of `tokenizer.json` that HuggingFace writes and we read: merges as `"left right"`
//! strings (tokenizers before 0.20) or as pairs, added tokens beyond the model's vocabulary
//! (`Tokenizer.add_tokens`), and the edges of what is refused.

use std::path::Path;

use attend_bpe::{Tokenizer, Trainer, TrainerConfig};
use serde_json::{json, Value};

fn trained() -> Tokenizer {
    Trainer::new(TrainerConfig {
        vocab_size: 280,
        min_frequency: 2,
        special_tokens: vec!["<s>".into(), "<pad>".into()],
        show_progress: false,
    })
    .unwrap()
    .train_texts(["the cat sat on the mat\n", "the hat that sat\n", "a cat, a hat, a mat\n"])
}

fn as_value(tok: &Tokenizer) -> Value {
    serde_json::from_str(&tok.to_json_string()).unwrap()
}

fn load(value: &Value) -> attend_bpe::Result<Tokenizer> {
    Tokenizer::from_json_str(&value.to_string(), Path::new("tok.json"))
}

const TEXT: &str = "the cat sat on a mat, that hat";

#[test]
fn merges_written_as_strings_load_as_the_same_pairs() {
    let tok = trained();
    let mut value = as_value(&tok);
    let merges = value["model"]["merges"].as_array_mut().unwrap();
    assert!(!merges.is_empty());
    for merge in merges.iter_mut() {
        let pair = merge.as_array().expect("we write merges as pairs").clone();
        *merge = json!(format!("{} {}", pair[0].as_str().unwrap(), pair[1].as_str().unwrap()));
    }
    let loaded = load(&value).unwrap();
    assert_eq!(loaded.merges(), tok.merges());
    assert_eq!(loaded.encode(TEXT), tok.encode(TEXT));
}

#[test]
fn a_merge_of_other_than_two_strings_is_refused_naming_it() {
    let mut value = as_value(&trained());
    value["model"]["merges"][1] = json!(["t", "h", "e"]);
    let err = load(&value).unwrap_err().to_string();
    assert!(err.contains("model.merges[1]"), "{err}");
}

#[test]
fn added_tokens_after_the_vocabulary_load_and_one_past_the_dense_ids_is_refused() {
    let tok = trained();
    let mut value = as_value(&tok);
    let vocab = value["model"]["vocab"].as_object().unwrap().len() as u64;
    // Two tokens added after the vocabulary take its next two ids.
    let added = value["added_tokens"].as_array_mut().unwrap();
    let before = added.len() as u64;
    for (i, content) in ["<new>", "<newer>"].iter().enumerate() {
        added.push(json!({"id": vocab + i as u64, "content": content, "special": true}));
    }
    let loaded = load(&value).unwrap();
    assert_eq!(loaded.vocab_size() as u64, vocab + 2);
    assert_eq!(loaded.encode("<newer>the<new>")[0], vocab as u32 + 1);
    assert_eq!(loaded.decode(&loaded.encode("<newer>the<new>")).unwrap(), "<newer>the<new>");
    // Ids are dense: none reaches the count of the vocabulary and the added tokens together
    // (the specials are in both), refused naming the token, not sized into a table with holes.
    value["added_tokens"][before as usize + 1]["id"] = json!(vocab + before + 2);
    let err = load(&value).unwrap_err().to_string();
    assert!(err.contains(&format!("added_tokens[{}]", before + 1)) && err.contains("is past"), "{err}");
}

#[test]
fn a_vocabulary_id_equal_to_the_vocabulary_size_is_refused() {
    let tok = trained();
    let mut value = as_value(&tok);
    let vocab = value["model"]["vocab"].as_object_mut().unwrap();
    let size = vocab.len();
    let last = vocab.iter().max_by_key(|(_, id)| id.as_u64()).map(|(token, _)| token.clone()).unwrap();
    vocab[&last] = json!(size);
    let err = load(&value).unwrap_err().to_string();
    assert!(err.contains("model.vocab") && err.contains("bad id"), "{err}");
}

#[test]
fn an_empty_subword_prefix_loads_and_a_set_one_is_refused() {
    let mut value = as_value(&trained());
    value["model"]["continuing_subword_prefix"] = json!("");
    assert!(load(&value).is_ok());
    value["model"]["continuing_subword_prefix"] = json!("##");
    let err = load(&value).unwrap_err().to_string();
    assert!(err.contains("model.continuing_subword_prefix"), "{err}");
}

#[test]
fn a_merge_with_an_added_token_as_either_part_is_refused_as_such() {
    for side in 0..2 {
        let mut value = as_value(&trained());
        value["model"]["merges"][0][side] = json!("<s>");
        let err = load(&value).unwrap_err().to_string();
        assert!(err.contains("model.merges[0]") && err.contains("not a model token"), "{err}");
    }
}

#[test]
fn added_token_ids_are_found_by_content() {
    let tok = trained();
    assert_eq!((tok.added_token_id("<s>"), tok.added_token_id("<pad>")), (Some(0), Some(1)));
    assert_eq!(tok.added_token_id("<unk>"), None);
}
