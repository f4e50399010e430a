//! `--backend cuda`'s first question, asked before the backend asks it: can this process reach
//! an NVIDIA GPU through CUDA?
//!
//! cubecl-cuda 0.10 loads the CUDA driver and NVRTC at run time (cudarc's dynamic loading) and
//! starts the driver on its device thread with `cudarc::driver::result::init().unwrap()`; a
//! machine without the driver library, without a device, or without NVRTC then dies with a
//! panic (or, for NVRTC, at the first kernel it compiles), which names neither the cause nor
//! the fix. [`check`] asks the same things first, through the same cudarc, and turns each "no"
//! into an error that says what is missing and how to get it.

use anyhow::{bail, Result};

/// The other backends, for every error's last words.
const OTHERWISE: &str = "Or run with --backend wgpu (a build with `--features wgpu`) or --backend ndarray.";

/// Fails with a clear error when the CUDA driver, a CUDA device or NVRTC is missing.
pub fn check(flag: &str) -> Result<()> {
    // SAFETY: loads the driver library by name and drops it again; no symbol is called.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        bail!(
            "--backend {flag}: the CUDA driver library (libcuda.so) is not on this machine's library path, so the \
             GPU backend cannot start.\nInstall NVIDIA's driver (it brings libcuda.so), or add the folder that \
             holds it to LD_LIBRARY_PATH. {OTHERWISE}"
        );
    }
    if let Err(error) = cudarc::driver::result::init() {
        bail!(
            "--backend {flag}: the CUDA driver did not start ({error}).\nCheck `nvidia-smi`: the driver \
             library may not match the kernel module, no GPU may be present, or CUDA_VISIBLE_DEVICES may hide \
             them all. {OTHERWISE}"
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
            "--backend {flag}: NVIDIA's run-time compiler NVRTC (libnvrtc.so), which compiles this backend's \
             kernels, is not on this machine's library path.\nInstall it with NVIDIA's CUDA toolkit (its package \
             cuda-nvrtc-12-N is enough) or `pip install nvidia-cuda-nvrtc-cu12`, and add the folder that holds \
             libnvrtc.so to LD_LIBRARY_PATH. {OTHERWISE}"
        );
    }
    Ok(())
}
