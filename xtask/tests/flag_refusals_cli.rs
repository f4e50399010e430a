//! Flags that would make a command do nothing, or that another flag makes meaningless, are
//! refused by name instead of being ignored or replaced.

use std::process::{Command, Output};

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask")).args(args).stdin(std::process::Stdio::null()).output().unwrap()
}

/// Stderr of a failed command, asserting that it failed and names every one of `names`.
fn refused(args: &[&str], names: &[&str]) -> String {
    let out = xtask(args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{args:?} succeeded: {stderr}");
    for name in names {
        assert!(stderr.contains(name), "{args:?}: {name} missing from {stderr}");
    }
    stderr
}

#[test]
fn counts_of_zero_that_would_run_nothing_are_refused() {
    refused(&["bench", "bpe", "--reps", "0"], &["--reps", "0"]);
    refused(&["bench", "products", "--rows", "0"], &["--rows", "0"]);
    refused(&["soak", "--kills", "0"], &["--kills", "0"]);
}

#[test]
fn flags_another_flag_makes_meaningless_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("nowhere");
    let nowhere = nowhere.to_str().unwrap();
    refused(&["eval", "--run", nowhere, "--split", "test", "--data", "x.txt"], &["--split", "--data"]);
    refused(
        &["generate", "--run", nowhere, "--prompt", "a", "--temperature", "0", "--top-k", "5"],
        &["--temperature 0", "--top-k"],
    );
    refused(
        &["bpe", "train", "--input", "x.txt", "--vocab-size", "300", "--merges", "5", "--output", "t.json"],
        &["--merges", "--classic"],
    );
    refused(&["positions", "--run", nowhere, "--d-model", "64", "--out", "p.svg"], &["--d-model", "--run"]);
    refused(&["train", "--run", nowhere, "--peer-timeout", "5"], &["--peer-timeout", "one device"]);
    // The product kernel's forms choose what `bench products` times, nothing of another bench.
    for flag in ["--tiles", "--lanes", "--fma", "--addresses", "--stores"] {
        refused(&["bench", "bleu", flag, "x"], &[flag, "bench products"]);
    }
    assert!(!std::path::Path::new(nowhere).exists(), "a refused train wrote its run");
}

#[test]
fn a_source_sentence_for_a_language_model_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let defaults = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/default.toml");
    std::fs::copy(defaults, run.join("config.toml")).unwrap();
    let out = dir.path().join("out");
    let (run, out) = (run.to_str().unwrap(), out.to_str().unwrap());
    refused(&["attention", "--run", run, "--text", "a", "--source", "b", "--out", out], &["--source", "\"lm\""]);
}

#[test]
fn a_picture_too_large_to_draw_is_refused() {
    refused(&["positions", "--len", "10000000000", "--out", "p.svg"], &["at most 4096"]);
}
