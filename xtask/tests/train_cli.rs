//! `cargo xtask train | eval | generate` end to end on a tiny generated run (seconds).

use std::path::Path;
use std::process::{Command, Output};

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask")).args(args).output().unwrap()
}

const TINY: [&str; 16] = [
    "--set",
    "data.synthetic_size=3000",
    "--set",
    "model.d_model=16",
    "--set",
    "model.n_heads=2",
    "--set",
    "model.n_layers=1",
    "--set",
    "model.block_size=8",
    "--set",
    "train.max_steps=6",
    "--set",
    "train.eval_every=3",
    "--set",
    "train.batch_size=4",
];

fn train(run: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["train", "--run", run.to_str().unwrap()];
    args.extend(TINY);
    args.extend(extra);
    xtask(&args)
}

#[test]
fn train_then_eval_and_generate_follow_the_command_line_contract() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let out = train(&run, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("entropy rate") && stdout.contains("source's loss") && stdout.contains("valid ppl"),
        "{stdout}"
    );

    let eval = xtask(&["eval", "--run", run.to_str().unwrap(), "--split", "test", "--dynamic"]);
    assert!(eval.status.success(), "{}", String::from_utf8_lossy(&eval.stderr));
    let text = String::from_utf8(eval.stdout).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    for key in ["loss", "ppl", "ppl_word", "bpc", "bits_per_byte", "dynamic_ppl", "entropy_rate", "source_loss"] {
        assert!(last[key].as_f64().is_some_and(f64::is_finite), "{key} in {last}");
    }
    // Generated data: the source's own score on the test split, which six steps cannot reach.
    assert!(text.contains("source's loss: "), "{text}");
    assert!(last["source_loss"].as_f64() < last["loss"].as_f64(), "{last}");

    // Every window's context within block_size = 8: the same stream, no token scored twice
    // and none left out that the blocks score.
    let widest = xtask(&["eval", "--run", run.to_str().unwrap(), "--split", "test", "--context-window", "8"]);
    assert!(widest.status.success(), "{}", String::from_utf8_lossy(&widest.stderr));
    let text = String::from_utf8(widest.stdout).unwrap();
    let windowed: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(windowed["context_window"], 8, "{windowed}");
    assert!(windowed["tokens"].as_u64() >= last["tokens"].as_u64(), "{windowed} against {last}");
    let too_wide = xtask(&["eval", "--run", run.to_str().unwrap(), "--context-window", "9"]);
    let err = String::from_utf8_lossy(&too_wide.stderr);
    assert!(!too_wide.status.success() && err.contains("--context-window 9") && err.contains("block_size, 8"), "{err}");

    let words: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("vocab.json")).unwrap()).unwrap();
    let first = words["symbols"][0].as_str().unwrap().to_string();
    let gen =
        xtask(&["generate", "--run", run.to_str().unwrap(), "--prompt", &first, "--max-tokens", "12", "--seed", "1"]);
    assert!(gen.status.success(), "{}", String::from_utf8_lossy(&gen.stderr));
    let text = String::from_utf8(gen.stdout).unwrap();
    assert!(text.starts_with(&first));
    assert_eq!(text.split_whitespace().count(), 13, "prompt + 12 words: {text}");

    let again = train(&run, &[]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds a run"));

    let out = xtask(&["translate", "--run", run.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("holds a language model"), "{stderr}");

    // --resume of a finished run: nothing to do, and its log stays whole.
    let log = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    let resumed = xtask(&["train", "--resume", "--run", run.to_str().unwrap()]);
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert!(String::from_utf8_lossy(&resumed.stdout).starts_with("nothing to do"));
    assert_eq!(std::fs::read_to_string(run.join("metrics.jsonl")).unwrap(), log);
    // --config beside --resume must describe the run being continued.
    let other = dir.path().join("other.toml");
    std::fs::write(&other, "[model]\nd_model = 32\n").unwrap();
    let out = xtask(&["train", "--resume", "--run", run.to_str().unwrap(), "--config", other.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("differs from") && stderr.contains("config.toml ("), "{stderr}");
}

#[test]
fn configuration_errors_name_the_key_and_exit_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let out = train(&run, &["--set", "model.flux_capacitor=1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("unknown key model.flux_capacitor") && stderr.lines().count() == 1, "{stderr}");
    let out = train(&run, &["--set", "model.n_heads=3"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("model.n_heads = 3 must divide model.d_model = 16"));
    let out = xtask(&["train", "--resume", "--run", run.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no checkpoint to resume in"));
    assert!(!run.join("checkpoints").exists(), "nothing written by failed commands");
}

/// A masked LM: `eval`'s last line carries the masked-LM keys; `generate` refuses it.
#[test]
fn a_masked_lm_run_evaluates_with_the_masked_keys_and_cannot_generate() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("mlm");
    let out = train(&run, &["--set", "model.arch=encoder", "--set", "train.objective=mlm"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("masked acc."));
    let eval = xtask(&["eval", "--run", run.to_str().unwrap()]);
    assert!(eval.status.success(), "{}", String::from_utf8_lossy(&eval.stderr));
    let text = String::from_utf8(eval.stdout).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    for key in ["masked_loss", "masked_ppl", "masked_accuracy", "baseline_accuracy"] {
        assert!(last[key].as_f64().is_some_and(f64::is_finite), "{key} in {last}");
    }
    let gen = xtask(&["generate", "--run", run.to_str().unwrap(), "--prompt", "x"]);
    assert!(!gen.status.success());
    assert!(String::from_utf8_lossy(&gen.stderr).contains("masked LM"), "{}", String::from_utf8_lossy(&gen.stderr));
}
