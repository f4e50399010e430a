//! `train --devices N` from the command line: one run written by peer 0, and the refusals.

use std::process::{Command, Output};

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask")).args(args).stdin(std::process::Stdio::null()).output().unwrap()
}

#[test]
fn two_cpu_peers_write_one_run_with_the_collectives_time_and_its_summary() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let out = xtask(&[
        "train",
        "--devices",
        "2",
        "--run",
        run.to_str().unwrap(),
        "--set",
        "train.max_steps=12",
        "--set",
        "train.eval_every=6",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("valid loss"), "{stdout}");
    let log = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    let train: Vec<&str> = log.lines().filter(|l| l.contains("\"event\":\"train\"")).collect();
    assert_eq!(train.len(), 12, "one train event per step, from peer 0 alone");
    assert!(train.iter().all(|l| l.contains("\"collective_ms\":")), "{log}");
    assert!(run.join("checkpoints/step-0000012/manifest.json").exists());
}

#[test]
fn several_machines_are_refused_naming_the_upstream_hang_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let out = xtask(&[
        "train",
        "--run",
        run.to_str().unwrap(),
        "--nodes",
        "2",
        "--node-rank",
        "0",
        "--orchestrator",
        "ws://127.0.0.1:39311",
        "--node-address",
        "ws://127.0.0.1:39312",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--nodes: runs across machines are blocked") && stderr.contains("sync.rs"), "{stderr}");
    assert!(!run.exists());
}

#[test]
fn an_indivisible_global_batch_names_the_key_and_the_peers() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let out = xtask(&["train", "--devices", "2", "--run", run.to_str().unwrap(), "--set", "train.batch_size=31"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("train.batch_size = 31 is the global batch: 2 peers"), "{stderr}");
}
