//! `cargo xtask soak`: real SIGKILLs of real training processes, resumed; every logged loss
//! must equal an uninterrupted run's (a few kills of both tasks, seconds).

use std::process::Command;

#[test]
fn three_kills_of_the_lm_and_translation_runs_are_all_survived_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["soak", "--kills", "3", "--seed", "3", "--run"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.iter().filter(|l| l.starts_with("kill ") && l.contains("(lm)")).count(), 2, "{stdout}");
    assert_eq!(lines.iter().filter(|l| l.starts_with("kill ") && l.contains("(mt)")).count(), 1, "{stdout}");
    assert_eq!(lines.last(), Some(&"3/3 kills survived"), "{stdout}");
}
