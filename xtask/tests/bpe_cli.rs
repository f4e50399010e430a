//! `cargo xtask bpe` end to end: the command-line contract of docs/commands.md.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn xtask(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The command may exit (on a bad argument) before reading its input: a broken pipe is
    // expected then, and what matters is its exit status and stderr.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

/// A failed command: non-zero exit, one `error:` line naming `culprit`, no panic.
fn assert_one_line_error(out: &Output, culprit: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure, got success; stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(culprit), "{stderr} should name {culprit}");
}

fn train(dir: &Path, input: &Path, vocab: &str) -> (Output, std::path::PathBuf) {
    let output = dir.join("tokenizer.json");
    let out = xtask(
        &[
            "bpe",
            "train",
            "--input",
            input.to_str().unwrap(),
            "--vocab-size",
            vocab,
            "--output",
            output.to_str().unwrap(),
            "--special",
            "<s>",
            "</s>",
        ],
        b"",
    );
    (out, output)
}

#[test]
fn encode_then_decode_reproduces_every_line() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus.txt");
    let text = "the cat sat on the mat\nthe dog sat on the log\n  spaced  out\t\ttabs\nünïcödé 日本語 👍\n";
    std::fs::write(&corpus, text.repeat(20)).unwrap();
    let (out, tokenizer) = train(dir.path(), &corpus, "300");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tok = tokenizer.to_str().unwrap();
    let input = format!("{text}<s>with special</s>\n\nlast line");
    let ids = xtask(&["bpe", "encode", "--tokenizer", tok], input.as_bytes());
    assert!(ids.status.success());
    let id_lines = String::from_utf8(ids.stdout.clone()).unwrap();
    assert_eq!(id_lines.lines().count(), input.lines().count(), "one id line per input line");
    assert!(id_lines.lines().nth(4).unwrap().starts_with("0 "), "<s> is id 0, never split");
    let back = xtask(&["bpe", "decode", "--tokenizer", tok], &ids.stdout);
    assert!(back.status.success());
    assert_eq!(String::from_utf8(back.stdout).unwrap(), format!("{input}\n"));
}

#[test]
fn bad_training_input_is_a_one_line_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.txt");
    let (out, output) = train(dir.path(), &missing, "300");
    assert_one_line_error(&out, "missing.txt");
    assert!(!output.exists());

    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    let (out, output) = train(dir.path(), &empty, "300");
    assert_one_line_error(&out, "empty.txt: input file is empty");
    assert!(!output.exists());

    let latin1 = dir.path().join("latin1.txt");
    std::fs::write(&latin1, b"line one\nline two\ncaf\xe9\n").unwrap();
    let (out, output) = train(dir.path(), &latin1, "300");
    assert_one_line_error(&out, "latin1.txt:3: invalid UTF-8");
    assert!(!output.exists());

    let fine = dir.path().join("fine.txt");
    std::fs::write(&fine, "some text\n").unwrap();
    let (out, output) = train(dir.path(), &fine, "257");
    assert_one_line_error(&out, "vocab size 257 is too small: it must be at least 258");
    assert!(!output.exists());
    // Only the three inputs written above: no output, no temporary file.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3, "no temporary file left behind");
}

#[test]
fn truncated_or_foreign_tokenizer_json_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus.txt");
    std::fs::write(&corpus, "aa bb aa bb\n").unwrap();
    let (out, tokenizer) = train(dir.path(), &corpus, "270");
    assert!(out.status.success());
    let json = std::fs::read_to_string(&tokenizer).unwrap();

    let truncated = dir.path().join("truncated.json");
    std::fs::write(&truncated, &json[..json.len() / 3]).unwrap();
    let out = xtask(&["bpe", "encode", "--tokenizer", truncated.to_str().unwrap()], b"aa\n");
    assert_one_line_error(&out, "truncated.json: not a valid tokenizer.json");

    let foreign = dir.path().join("wordpiece.json");
    std::fs::write(&foreign, json.replace("\"BPE\"", "\"WordPiece\"")).unwrap();
    let out = xtask(&["bpe", "decode", "--tokenizer", foreign.to_str().unwrap()], b"1\n");
    assert_one_line_error(&out, "wordpiece.json: model.type");

    let tok = tokenizer.to_str().unwrap();
    let out = xtask(&["bpe", "decode", "--tokenizer", tok], b"1 2\n3 x\n");
    assert_one_line_error(&out, "stdin line 2: \"x\" is not a token id");
    let out = xtask(&["bpe", "encode", "--tokenizer", tok], b"ok\n\xff\n");
    assert_one_line_error(&out, "stdin line 2");
}

/// `bpe train --classic`: subword-nmt's codes file (the paper's corpus gives the merges
/// `subword-nmt learn-bpe -s 4` prints) and a HuggingFace tokenizer.json with `</w>`.
#[test]
fn classic_bpe_writes_subword_nmt_codes_and_a_huggingface_tokenizer() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("paper.txt");
    let text = "low ".repeat(5) + &"lower ".repeat(2) + &"newest ".repeat(6) + &"widest ".repeat(3);
    std::fs::write(&input, text).unwrap();
    let output = dir.path().join("classic.json");
    let args = [
        "bpe",
        "train",
        "--classic",
        "--merges",
        "4",
        "--input",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
    ];
    let out = xtask(&args, b"");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let codes = std::fs::read_to_string(dir.path().join("classic.codes")).unwrap();
    assert_eq!(codes, "#version: 0.2\ns t</w>\ne st</w>\nl o\nw est</w>\n");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
    assert_eq!(json["model"]["end_of_word_suffix"], "</w>");
    assert_eq!(json["model"]["merges"][3], "w est</w>");
    assert_eq!(json["pre_tokenizer"]["type"], "WhitespaceSplit");
    let missing = xtask(&["bpe", "train", "--classic", "--input", input.to_str().unwrap(), "--output", "x.json"], b"");
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success() && stderr.contains("--merges") && !stderr.contains("panicked"), "{stderr}");
    // The same command with the codes file named as the output: refused, the output as it was.
    let before = std::fs::read(&output).unwrap();
    let same = xtask(&[&args[..], &["--codes", output.to_str().unwrap()]].concat(), b"");
    let stderr = String::from_utf8_lossy(&same.stderr);
    assert!(!same.status.success() && stderr.contains("the codes file and --output would both be"), "{stderr}");
    assert_eq!(std::fs::read(&output).unwrap(), before, "left as it was");
}
