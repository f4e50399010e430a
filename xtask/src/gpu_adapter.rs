//! `--backend wgpu`'s first question, asked before the backend asks it: is there a graphics
//! adapter at all?
//!
//! CubeCL (cubecl-wgpu 0.10, `request_adapter`) asks wgpu for an adapter on its device thread
//! and panics there when none is found; the command then dies with two backtraces and
//! "No possible adapter available for backend", which names neither the cause nor the fix. On
//! a fresh Linux machine the cause is nearly always a missing Vulkan loader or driver. [`check`]
//! asks wgpu the same question first, with the same options (the graphics API burn-wgpu's
//! `AutoGraphicsApi` picks, high performance, no fallback adapter), and turns a "none" into an
//! error that gives wgpu's reason and says how to install both. Where
//! `CUBECL_WGPU_DEFAULT_DEVICE` names a device, CubeCL picks from the adapter list instead; the
//! check then asks whether the list is empty (a named device that is not in a non-empty list is
//! still CubeCL's to report).

use anyhow::{bail, Result};
use burn_wgpu::graphics::{AutoGraphicsApi, GraphicsApi};

/// What to install where no adapter was found, for the error's last lines.
const INSTALL: &str = "Install a Vulkan driver: on Debian or Ubuntu, `apt-get install mesa-vulkan-drivers \
     libvulkan1` brings the loader and Mesa's drivers, lavapipe (a CPU one, slow but complete) among \
     them; on an NVIDIA machine the driver's Vulkan ICD (a file nvidia_icd.json, which VK_DRIVER_FILES \
     may name). Or run on the CPU with --backend ndarray.";

/// Fails with a clear error when wgpu finds no adapter for the graphics API burn-wgpu uses.
pub fn check(flag: &str) -> Result<()> {
    let backend = AutoGraphicsApi::backend();
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: backend.into(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let named = std::env::var_os("CUBECL_WGPU_DEFAULT_DEVICE").is_some();
    let found = if named {
        let adapters = cubecl_common::future::block_on(instance.enumerate_adapters(backend.into()));
        if adapters.is_empty() {
            Err(format!("wgpu lists no {backend:?} adapter"))
        } else {
            Ok(())
        }
    } else {
        let options = wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            force_fallback_adapter: false,
            compatible_surface: None,
        };
        cubecl_common::future::block_on(instance.request_adapter(&options)).map(drop).map_err(|error| error.to_string())
    };
    match found {
        Ok(()) => Ok(()),
        Err(detail) => bail!("{}", message(flag, &format!("{backend:?}"), &detail)),
    }
}

/// The error for `--backend FLAG` when wgpu found no `api` adapter, wgpu's own words in `detail`.
fn message(flag: &str, api: &str, detail: &str) -> String {
    format!(
        "--backend {flag}: this machine offers no {api} adapter, so the GPU backend cannot start \
         ({detail}). {INSTALL}"
    )
}
