//! `--backend cuda`'s first question, asked before the backend asks it: can this process reach
//! an NVIDIA GPU through CUDA, and compile kernels for it?
//!
//! cubecl-cuda 0.10 loads the CUDA driver and NVRTC at run time (cudarc's dynamic loading),
//! starts the driver on its device thread with `cudarc::driver::result::init().unwrap()`, and
//! compiles each kernel with NVRTC against the headers of a CUDA directory
//! (`cubecl_cuda::install::include_path`, which panics where `cuda_path` finds none). A machine
//! without the driver library, without a visible device, without NVRTC or without that
//! directory then dies with a panic on the device thread (the last two at the first kernel),
//! which names neither the cause nor the fix. [`check`] asks the same things first, through the
//! same cudarc and the same path search, and turns each "no" into an error that says what is
//! missing and how to get it.
//!
//! NVRTC and the headers are asked for even where CubeCL's PTX cache (`kernel_cache`) might
//! hold every kernel a run needs: any kernel not in it (a new shape, a new autotune candidate)
//! would otherwise stop the run at that kernel, after it started.

use anyhow::{bail, Result};
use std::path::PathBuf;

/// The other backends, for every error's last words.
const OTHERWISE: &str = "Or run with --backend wgpu (a build with `--features wgpu`) or --backend ndarray.";

/// Fails with a clear error when the CUDA driver, a visible GPU, NVRTC or CUDA's headers are
/// missing.
pub fn check(flag: &str) -> Result<()> {
    // SAFETY: loads the driver library by name and drops it again; no symbol is called.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        bail!(
            "--backend {flag}: the CUDA driver library (libcuda.so.1) is not on this machine's library path, so \
             the GPU backend cannot start; install NVIDIA's driver (in a container, start it with the GPU passed \
             through, e.g. `docker run --gpus all` with NVIDIA's container toolkit), or add the folder that holds \
             libcuda.so.1 to LD_LIBRARY_PATH. {OTHERWISE}"
        );
    }
    if let Err(error) = cudarc::driver::result::init() {
        bail!(
            "--backend {flag}: the CUDA driver did not start ({error}); check `nvidia-smi`: no GPU may be present \
             or CUDA_VISIBLE_DEVICES may hide them all, or the driver library may not match the loaded kernel \
             module (reinstall NVIDIA's driver, or reboot after upgrading it). {OTHERWISE}"
        );
    }
    match cudarc::driver::result::device::get_count() {
        Ok(0) => {
            bail!("--backend {flag}: the CUDA driver sees no GPU (CUDA_VISIBLE_DEVICES may hide them all). {OTHERWISE}")
        }
        Ok(_) => {}
        Err(error) => bail!("--backend {flag}: the CUDA driver could not count its GPUs ({error}). {OTHERWISE}"),
    }
    // SAFETY: as above, for NVRTC.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        bail!(
            "--backend {flag}: NVIDIA's run-time compiler NVRTC (libnvrtc.so.12 or .13), which compiles this \
             backend's kernels, is not on this machine's library path; install it with NVIDIA's CUDA toolkit (its \
             package cuda-nvrtc-12-N), or `pip install nvidia-cuda-nvrtc-cu12` and add the wheel's \
             nvidia/cuda_nvrtc/lib to LD_LIBRARY_PATH. {OTHERWISE}"
        );
    }
    headers(flag, cubecl::cuda::install::cuda_path())
}

/// The CUDA directory (`root`, as cubecl-cuda finds it) whose `include/cuda_runtime.h` every
/// kernel of cubecl-cuda includes.
fn headers(flag: &str, root: Option<PathBuf>) -> Result<()> {
    let Some(root) = root else {
        bail!(
            "--backend {flag}: no CUDA directory found (CUDA_PATH is unset, and there is no /usr/local/cuda, \
             /opt/cuda or /usr/bin/nvcc); this backend compiles its kernels against CUDA's headers: install NVIDIA's \
             CUDA toolkit (its package cuda-cudart-dev-12-N is enough), or set CUDA_PATH to a folder whose \
             include/ holds cuda_runtime.h (e.g. the `nvidia-cuda-runtime-cu12` wheel's nvidia/cuda_runtime). \
             {OTHERWISE}"
        );
    };
    if !root.join("include").join("cuda_runtime.h").is_file() {
        bail!(
            "--backend {flag}: the CUDA directory {} has no include/cuda_runtime.h, which every kernel of this \
             backend includes; install CUDA's headers there (NVIDIA's package cuda-cudart-dev-12-N), or set \
             CUDA_PATH to a folder whose include/ holds them. {OTHERWISE}",
            root.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::headers;

    #[test]
    fn a_cuda_directory_is_accepted_only_with_its_cuda_runtime_header() {
        let dir = tempfile::tempdir().unwrap();
        let missing = headers("cuda", None).unwrap_err().to_string();
        assert!(missing.contains("no CUDA directory found") && missing.contains("CUDA_PATH"), "{missing}");
        let bare = headers("cuda", Some(dir.path().to_path_buf())).unwrap_err().to_string();
        assert!(bare.contains("has no include/cuda_runtime.h"), "{bare}");
        std::fs::create_dir(dir.path().join("include")).unwrap();
        std::fs::write(dir.path().join("include").join("cuda_runtime.h"), "").unwrap();
        headers("cuda", Some(dir.path().to_path_buf())).unwrap();
    }
}
