//! `cargo xtask params` end to end: the command-line contract of docs/commands.md.

use std::path::Path;
use std::process::{Command, Output};

fn params(config: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask")).args(["params", "--config", config.to_str().unwrap()]).output().unwrap()
}

fn configs() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs")
}

/// The last stdout line is JSON with `params` and `flops_per_token`; base ≈ 63M, big ≈ 214M.
#[test]
fn params_prints_the_paper_counts_as_a_last_json_line() {
    for (file, expected) in [("transformer-base.toml", 63_082_496u64), ("transformer-big.toml", 214_245_376)] {
        let out = params(&configs().join(file));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8(out.stdout).unwrap();
        let last: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        assert_eq!(last["params"].as_u64(), Some(expected), "{file}");
        assert!(last["flops_per_token"].as_u64().unwrap() > 2 * expected / 3, "{file}");
    }
}

#[test]
fn params_error_names_the_unknown_key_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[data]\nvocab_size = 65\n[model]\nflux_capacitor = 1\n").unwrap();
    let out = params(&path);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: ") && stderr.contains("unknown key model.flux_capacitor"), "{stderr}");
}
