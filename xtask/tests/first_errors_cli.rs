//! A newcomer's first errors (issue 14): each names what was being done, the path, and the
//! way forward, on one line, with no cause repeated.

use std::process::{Command, Output};

fn xtask(args: &[&str]) -> Output {
    xtask_with(args, &[])
}

/// `xtask` with the environment variables `env` set.
fn xtask_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_xtask"));
    command.args(args).envs(env.iter().copied()).stdin(std::process::Stdio::null());
    command.output().unwrap()
}

/// The one line of stderr of a failed command (asserting it failed and said it once).
fn error_line(out: &Output) -> String {
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.matches("os error").count() <= 1, "a cause repeated: {stderr}");
    stderr
}

#[test]
fn a_named_dataset_missing_from_the_data_directory_names_it_and_both_ways_out() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("data");
    std::fs::create_dir_all(&empty).unwrap();
    let run = dir.path().join("run");
    let (run, empty) = (run.to_str().unwrap(), empty.to_str().unwrap());
    for (config, dataset) in [
        ("../configs/lm-shakespeare.toml", "tiny-shakespeare"),
        ("../configs/lm-ptb.toml", "ptb"),
        ("../configs/mt-multi30k-de-en.toml", "multi30k"),
    ] {
        let line = error_line(&xtask(&["train", "--config", config, "--data-dir", empty, "--run", run]));
        for part in [
            format!("data.dataset = \"{dataset}\""),
            format!("cargo xtask data fetch {dataset}"),
            "--data-dir".into(),
            "ATTEND_DATA_DIR".into(),
            empty.to_string(),
        ] {
            assert!(line.contains(&part), "{part} missing: {line}");
        }
    }
}

#[test]
fn missing_files_and_runs_are_named_once_with_what_was_being_done() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("nowhere");
    let nowhere = nowhere.to_str().unwrap();
    let line = error_line(&xtask(&["train", "--config", "no-such-config.toml", "--run", nowhere]));
    assert!(line.contains("no-such-config.toml") && line.contains("No such file"), "{line}");
    let line = error_line(&xtask(&["eval", "--run", nowhere]));
    assert!(line.contains(&format!("{nowhere} is not a run directory (it has no config.toml)")), "{line}");
    let line = error_line(&xtask(&["generate", "--run", nowhere, "--prompt", "a"]));
    assert!(line.contains(nowhere), "{line}");
    let mut bleu = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["bleu", "--ref", "no-ref.txt"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut bleu.stdin.take().unwrap(), b"a hypothesis\n").unwrap();
    let line = error_line(&bleu.wait_with_output().unwrap());
    assert!(line.contains("no-ref.txt"), "{line}");
}

#[test]
fn sampling_flags_out_of_range_are_refused_before_the_run_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("nowhere");
    let nowhere = nowhere.to_str().unwrap();
    let generate =
        |flag: &str, value: &str| error_line(&xtask(&["generate", "--run", nowhere, "--prompt", "a", flag, value]));
    let line = generate("--top-k", "0");
    assert!(line.contains("--top-k 0: expected at least 1"), "{line}");
    let line = generate("--temperature", "inf");
    assert!(line.contains("--temperature inf: expected a finite non-negative number"), "{line}");
}

/// The commands that run a model on the CPU themselves check `ATTEND_QKV` as `run_on` does.
#[test]
fn a_bad_attend_qkv_stops_the_cpu_commands_that_run_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("nowhere");
    let nowhere = nowhere.to_str().unwrap();
    for args in [
        vec!["compress", "--run", nowhere],
        vec!["decompress", "--run", nowhere],
        vec!["attention", "--run", nowhere, "--text", "a", "--out", nowhere],
    ] {
        let out = xtask_with(&args, &[("ATTEND_QKV", "bogus")]);
        let line = error_line(&out);
        assert!(line.contains("ATTEND_QKV") && line.contains("bogus"), "{}: {line}", args[0]);
    }
}
