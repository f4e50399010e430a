//! Bad input gets an error that names the culprit; nothing panics.

use std::path::Path;

use attend_bpe::{BpeError, Tokenizer, Trainer, TrainerConfig};

fn trainer(vocab_size: usize, specials: &[&str]) -> Result<Trainer, BpeError> {
    Trainer::new(TrainerConfig {
        vocab_size,
        min_frequency: 2,
        special_tokens: specials.iter().map(|s| s.to_string()).collect(),
        show_progress: false,
    })
}

#[test]
fn vocab_smaller_than_bytes_plus_specials_is_refused() {
    let err = trainer(257, &["<a>", "<b>"]).unwrap_err();
    assert!(matches!(err, BpeError::VocabTooSmall { minimum: 258, .. }), "{err}");
    assert!(err.to_string().contains("258"));
    assert!(trainer(258, &["<a>", "<b>"]).is_ok());
}

#[test]
fn duplicate_or_empty_special_tokens_are_refused() {
    assert!(matches!(trainer(300, &["<a>", "<a>"]), Err(BpeError::BadSpecialToken { .. })));
    assert!(matches!(trainer(300, &[""]), Err(BpeError::BadSpecialToken { .. })));
}

#[test]
fn missing_empty_and_non_utf8_inputs_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let t = trainer(300, &[]).unwrap();
    let missing = dir.path().join("missing.txt");
    let err = t.train_files(&[missing]).unwrap_err();
    assert!(err.to_string().contains("missing.txt"), "{err}");

    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    let err = t.train_files(&[empty]).unwrap_err();
    assert!(matches!(err, BpeError::EmptyInput { .. }), "{err}");

    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, b"fine\nalso fine\nnot \xff fine\n").unwrap();
    let err = t.train_files(&[bad]).unwrap_err();
    assert!(err.to_string().ends_with("bad.txt:3: invalid UTF-8 (the trainer reads UTF-8 text)"), "{err}");
    assert!(matches!(t.train_files(&[]), Err(BpeError::NoInputs)));
}

#[test]
fn truncated_foreign_or_far_id_tokenizer_json_is_refused() {
    let tok = trainer(270, &["<s>"]).unwrap().train_texts(["aa bb aa bb\n"]);
    let json = tok.to_json_string();
    let origin = Path::new("tok.json");
    let err = Tokenizer::from_json_str(&json[..json.len() / 2], origin).unwrap_err();
    assert!(matches!(err, BpeError::Json { .. }), "{err}");
    assert!(err.to_string().starts_with("tok.json: not a valid tokenizer.json"));

    let wordpiece = json.replace("\"type\": \"BPE\"", "\"type\": \"WordPiece\"");
    let err = Tokenizer::from_json_str(&wordpiece, origin).unwrap_err();
    assert!(err.to_string().contains("model.type"), "{err}");

    let prefixed = json.replace("\"add_prefix_space\": false", "\"add_prefix_space\": true");
    let err = Tokenizer::from_json_str(&prefixed, origin).unwrap_err();
    assert!(err.to_string().contains("add_prefix_space"), "{err}");

    assert!(Tokenizer::from_json_str("[1, 2]", origin).is_err());
    assert!(Tokenizer::from_json_str("{}", origin).is_err());

    // An added token's id past the dense ids (or past u32) is refused naming it, not wrapped
    // onto token 0 or sized into a table of billions.
    let id = tok.added_tokens()[0].id;
    for far in [4_000_000_000u64, 1 << 32] {
        let moved = json.replacen(&format!("\"id\": {id},"), &format!("\"id\": {far},"), 1);
        assert_ne!(moved, json, "the added token's id is written as `\"id\": {id},`");
        let err = Tokenizer::from_json_str(&moved, origin).unwrap_err().to_string();
        assert!(err.contains("added_tokens[0]") && err.contains(&format!("id {far} is past")), "{err}");
    }
}

#[test]
fn decoding_an_unknown_id_is_an_error() {
    let tok = trainer(270, &[]).unwrap().train_texts(["aa bb\n"]);
    let err = tok.decode(&[0, 99_999]).unwrap_err();
    assert!(matches!(err, BpeError::UnknownId { id: 99_999, .. }), "{err}");
}
