//! `cargo xtask bleu`: stdout is sacreBLEU's one line, and the slides' interpretation band of
//! the score goes to stderr.

use std::io::Write;
use std::process::{Command, Stdio};

#[test]
fn bleu_prints_sacrebleu_s_line_on_stdout_and_the_interpretation_band_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let refs = dir.path().join("ref.txt");
    std::fs::write(&refs, "the cat sat on the mat\na dog\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["bleu", "--ref", refs.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"the cat sat on a mat\na dog\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1);
    assert!(stdout.starts_with("BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = 55.84 "), "{stdout}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.trim(), "interpretation: 50-60: very high quality, adequate and fluent translations");
}
