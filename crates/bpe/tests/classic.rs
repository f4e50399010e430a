//! Classic BPE against subword-nmt 0.3.8 (`fixtures/classic/make.py`): on the same corpus and
//! number of merges, the same merges in the same order, and the same segmentation of a text;
//! and its `tokenizer.json` against HuggingFace `tokenizers` (`fixtures/classic/make_hf_ids.py`).

use std::path::Path;

use attend_bpe::classic::learn;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/classic").join(name)).unwrap()
}

#[test]
fn merges_and_segmentation_equal_subword_nmt_s() {
    let bpe = learn(&fixture("corpus.txt"), 300, 2);
    assert_eq!(bpe.codes(), fixture("codes.txt"));
    let corpus = fixture("corpus.txt");
    let words: Vec<&str> = corpus.split_whitespace().take(200).collect();
    // subword-nmt marks a piece that does not end its word with "@@"; ours end with "</w>".
    let theirs: Vec<String> = fixture("segmented.txt")
        .split_whitespace()
        .map(|piece| piece.strip_suffix("@@").map_or(format!("{piece}</w>"), str::to_string))
        .collect();
    let ours: Vec<String> = words.iter().flat_map(|w| bpe.segment(w)).collect();
    assert_eq!(ours, theirs);
}

/// The `tokenizer.json` we write, read by HuggingFace `tokenizers` 0.23.3
/// (`fixtures/classic/make_hf_ids.py`), gives subword-nmt's pieces with these ids: each of our
/// pieces must have that id in the file's vocabulary, and the file's merges must be the codes'.
#[test]
fn the_tokenizer_json_gives_huggingfaces_ids_and_save_writes_both_files() {
    let bpe = learn(&fixture("corpus.txt"), 300, 2);
    let json: serde_json::Value = serde_json::from_str(&bpe.tokenizer_json()).unwrap();
    let vocab = json["model"]["vocab"].as_object().expect("model.vocab");
    let hf: serde_json::Value = serde_json::from_str(&fixture("hf_ids.json")).unwrap();
    let ours: Vec<u64> = hf["text"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .flat_map(|word| bpe.segment(word))
        .map(|piece| vocab.get(&piece).and_then(|id| id.as_u64()).unwrap_or_else(|| panic!("{piece:?} has no id")))
        .collect();
    let theirs: Vec<u64> = hf["ids"].as_array().unwrap().iter().map(|id| id.as_u64().unwrap()).collect();
    assert_eq!(ours, theirs);
    let merges: Vec<&str> = json["model"]["merges"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    assert_eq!(merges, bpe.codes().lines().skip(1).collect::<Vec<_>>());

    let dir = tempfile::tempdir().unwrap();
    let (codes, tokenizer) = (dir.path().join("bpe.codes"), dir.path().join("tokenizer.json"));
    bpe.save(&codes, &tokenizer).unwrap();
    assert_eq!(std::fs::read_to_string(codes).unwrap(), bpe.codes());
    assert_eq!(std::fs::read_to_string(tokenizer).unwrap(), bpe.tokenizer_json());
}
