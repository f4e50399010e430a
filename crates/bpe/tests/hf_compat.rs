//! Differential tests against HuggingFace `tokenizers` (the reference implementation).
//!
//! Fixtures in `fixtures/` were made by `fixtures/make_hf_fixture.py` with Python
//! `tokenizers` 0.23.3: `hf_tokenizer.json` (a byte-level BPE that HuggingFace trained on
//! `hf_train_text.txt`, fed one line per item), and `hf_encodings.json` (tricky strings with
//! the ids and pre-tokenized pieces HuggingFace gives them).

use std::path::{Path, PathBuf};

use attend_bpe::pretokenize::pieces;
use attend_bpe::{Tokenizer, Trainer, TrainerConfig};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn cases() -> Vec<Value> {
    let text = std::fs::read_to_string(fixture("hf_encodings.json")).unwrap();
    let root: Value = serde_json::from_str(&text).unwrap();
    root["cases"].as_array().unwrap().clone()
}

#[test]
fn hf_written_tokenizer_encodes_to_hf_ids() {
    let tok = Tokenizer::load(&fixture("hf_tokenizer.json")).unwrap();
    let cases = cases();
    assert!(cases.len() > 50);
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let want: Vec<u32> = case["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        assert_eq!(tok.encode(text), want, "text {text:?}");
        assert_eq!(tok.decode(&want).unwrap(), text);
    }
}

#[test]
fn pre_tokenizer_splits_as_hf_byte_level() {
    for case in cases() {
        let text = case["text"].as_str().unwrap();
        let want: Vec<&str> = case["pieces_raw"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        // HuggingFace's pre_tokenize_str does not look for added tokens; neither does this.
        assert_eq!(pieces(text), want, "text {text:?}");
    }
}

#[test]
fn trainer_reproduces_hf_vocab_and_merges_exactly() {
    let text = std::fs::read_to_string(fixture("hf_train_text.txt")).unwrap();
    let trainer = Trainer::new(TrainerConfig {
        vocab_size: 600,
        min_frequency: 2,
        special_tokens: ["<pad>", "<unk>", "<s>", "</s>"].map(String::from).to_vec(),
        show_progress: false,
    })
    .unwrap();
    let ours: Value = serde_json::from_str(&trainer.train_texts(text.split('\n')).to_json_string()).unwrap();
    let theirs: Value = serde_json::from_str(&std::fs::read_to_string(fixture("hf_tokenizer.json")).unwrap()).unwrap();
    assert_eq!(ours["model"]["vocab"], theirs["model"]["vocab"]);
    assert_eq!(ours["model"]["merges"], theirs["model"]["merges"]);
    assert_eq!(ours["added_tokens"], theirs["added_tokens"]);
}

#[test]
fn saving_a_loaded_hf_tokenizer_keeps_its_vocab_and_merges() {
    let tok = Tokenizer::load(&fixture("hf_tokenizer.json")).unwrap();
    let again = Tokenizer::from_json_str(&tok.to_json_string(), Path::new("memory")).unwrap();
    assert_eq!(again.merges(), tok.merges());
    assert_eq!(again.to_json_string(), tok.to_json_string());
}
