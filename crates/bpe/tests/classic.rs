//! Classic BPE against subword-nmt 0.3.8 (`fixtures/classic/make.py`): on the same corpus and
//! number of merges, the same merges in the same order, and the same segmentation of a text.

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
