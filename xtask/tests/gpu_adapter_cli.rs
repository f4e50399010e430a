//! `--backend wgpu` on a machine whose Vulkan loader finds no driver: a clear error that says
//! what to install, not CubeCL's panic. Needs a build with the `wgpu` feature:
//! `cargo test --release -p xtask --features wgpu --test gpu_adapter_cli`.
#![cfg(feature = "wgpu")]

use std::process::{Command, Stdio};

/// `train --backend BACKEND` for one step with the environment `env` (`None` removes a
/// variable): its exit status and stderr, and whether it made its run directory.
fn train(backend: &str, env: &[(&str, Option<&std::ffi::OsStr>)]) -> (bool, String, bool) {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let mut command = Command::new(env!("CARGO_BIN_EXE_xtask"));
    command.args(["train", "--backend", backend, "--run", run.to_str().unwrap()]);
    command.args(["--set", "train.max_steps=1"]).stdin(Stdio::null());
    for (name, value) in env {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let out = command.output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned(), run.exists())
}

/// `train --backend wgpu` with `CUBECL_WGPU_DEFAULT_DEVICE` set to `device`.
fn train_naming(device: &str) -> (bool, String, bool) {
    train("wgpu", &[("CUBECL_WGPU_DEFAULT_DEVICE", Some(device.as_ref()))])
}

#[test]
fn wgpu_without_a_vulkan_driver_is_an_error_naming_the_fix_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    // An ICD list naming a file that does not exist: the loader loads no driver.
    let none = dir.path().join("no_icd.json");
    for backend in ["wgpu", "wgpu-unfused"] {
        let env = [
            ("VK_DRIVER_FILES", Some(none.as_os_str())),
            ("VK_ICD_FILENAMES", Some(none.as_os_str())),
            ("CUBECL_WGPU_DEFAULT_DEVICE", None),
        ];
        let (ok, stderr, made) = train(backend, &env);
        assert!(!ok, "{backend}: ran without a driver: {stderr}");
        assert!(!stderr.contains("panicked"), "{backend}: panicked: {stderr}");
        let last = stderr.trim_end().lines().last().unwrap_or_default();
        assert!(last.starts_with("error: --backend"), "{backend}: the error is not one line: {stderr}");
        for part in [format!("--backend {backend}"), "no Vulkan adapter".into(), "mesa-vulkan-drivers".into()] {
            assert!(stderr.contains(&part), "{backend}: {part:?} missing from {stderr}");
        }
        assert!(!made, "{backend}: the run directory was created before the check");
    }
}

/// Needs a Vulkan driver (CI installs lavapipe): the adapter list must not be empty.
#[test]
fn a_named_wgpu_device_the_machine_lacks_is_an_error_listing_its_adapters() {
    let (ok, stderr, made) = train_naming("DiscreteGpu(7)");
    assert!(!ok, "ran on a device it lacks: {stderr}");
    assert!(!stderr.contains("panicked"), "panicked: {stderr}");
    for part in ["CUBECL_WGPU_DEFAULT_DEVICE=DiscreteGpu(7)", "does not have", "wgpu lists"] {
        assert!(stderr.contains(part), "{part:?} missing from {stderr}");
    }
    assert!(!made, "the run directory was created before the check");
}

#[test]
fn a_named_wgpu_device_cubecl_cannot_read_is_an_error_not_ignored() {
    let (ok, stderr, made) = train_naming("DiscreteGPU(0)");
    assert!(!ok, "ran with an unreadable device name: {stderr}");
    assert!(stderr.contains("is not a device CubeCL reads"), "{stderr}");
    assert!(!made, "the run directory was created before the check");
}
