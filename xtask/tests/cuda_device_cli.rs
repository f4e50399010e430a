//! `--backend cuda` where this process can reach no CUDA GPU: a clear error that says what is
//! missing, not cubecl-cuda's panic. `CUDA_VISIBLE_DEVICES` is emptied, so on a machine with a
//! GPU the driver hides it (`cuInit` answers CUDA_ERROR_NO_DEVICE) and a machine without the
//! driver library lacks that first: either way the command must stop with our error, on one
//! line, before the run starts. Needs a
//! build with the `cuda` feature (not built by default CI; it needs no CUDA toolkit):
//! `cargo test --release -p xtask --features cuda --test cuda_device_cli`.
#![cfg(feature = "cuda")]

use std::process::{Command, Stdio};

#[test]
fn cuda_without_a_reachable_gpu_is_an_error_naming_the_fix_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("cuda");
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["train", "--backend", "cuda", "--run", run.to_str().unwrap()])
        .args(["--set", "train.max_steps=1"])
        .env("CUDA_VISIBLE_DEVICES", "")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "ran without a GPU: {stderr}");
    assert!(!stderr.contains("panicked"), "panicked: {stderr}");
    let last = stderr.trim_end().lines().last().unwrap_or_default();
    assert!(last.starts_with("error: --backend cuda:"), "the error is not one line: {stderr}");
    for part in ["--backend cuda:", "--backend ndarray"] {
        assert!(stderr.contains(part), "{part:?} missing from {stderr}");
    }
    assert!(!run.exists(), "the run directory was created before the check");
}
