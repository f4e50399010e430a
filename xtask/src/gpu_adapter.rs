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
//! `CUBECL_WGPU_DEFAULT_DEVICE` names a device, CubeCL picks from the adapter list instead and
//! panics where the list lacks it; the check then picks as CubeCL does, and an adapter that is
//! not there is an error listing those that are. A value CubeCL cannot read is an error too.

use anyhow::{bail, Result};
use burn_wgpu::graphics::{AutoGraphicsApi, GraphicsApi};

/// What to install where no adapter was found, for the error's last lines.
const INSTALL: &str = "Install a Vulkan driver: on Debian or Ubuntu, `apt-get install mesa-vulkan-drivers \
     libvulkan1` brings the loader and Mesa's drivers, lavapipe (a CPU one, slow but complete) among \
     them; on an NVIDIA machine the driver's Vulkan ICD (a file nvidia_icd.json, which VK_DRIVER_FILES \
     may name). Or run on the CPU with --backend ndarray.";

/// Fails with a clear error when wgpu finds no adapter for the graphics API burn-wgpu uses, or
/// none of the kind `CUBECL_WGPU_DEFAULT_DEVICE` names.
pub fn check(flag: &str) -> Result<()> {
    let named = match std::env::var("CUBECL_WGPU_DEFAULT_DEVICE") {
        Ok(var) => Some((named_device(&var).ok_or_else(|| unreadable(flag, &var))?, var)),
        Err(_) => None,
    };
    let backend = AutoGraphicsApi::backend();
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: backend.into(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let found = if let Some(((kind, index), var)) = named {
        let adapters = cubecl_common::future::block_on(instance.enumerate_adapters(backend.into()));
        let infos: Vec<wgpu::AdapterInfo> = adapters.iter().map(|adapter| adapter.get_info()).collect();
        let of = |wanted: wgpu::DeviceType| infos.iter().filter(|info| info.device_type == wanted).count();
        // cubecl-wgpu's `select_from_adapter_list`: the index-th adapter of the kind, else the
        // index-th of kind `Other`.
        if of(kind) > index || of(wgpu::DeviceType::Other) > index {
            Ok(())
        } else if infos.is_empty() {
            Err(format!("wgpu lists no {backend:?} adapter"))
        } else {
            let listed: Vec<String> =
                infos.iter().map(|info| format!("{:?} {:?}", info.device_type, info.name)).collect();
            bail!(
                "--backend {flag}: CUBECL_WGPU_DEFAULT_DEVICE={var} names a {kind:?} adapter (number {index} from 0) \
                 that this machine does not have; wgpu lists {}; unset it to take the best adapter, or name one \
                 of those by its kind (DiscreteGpu(N), IntegratedGpu(N), VirtualGpu(N) or Cpu)",
                listed.join(", ")
            );
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

/// `CUBECL_WGPU_DEFAULT_DEVICE` as cubecl-wgpu 0.10 reads it (`get_device_override`): an
/// adapter kind and an index among that kind's adapters. CubeCL logs a value it cannot read
/// and ignores it; here that is an error, so that a misspelled device is not silently replaced.
fn named_device(var: &str) -> Option<(wgpu::DeviceType, usize)> {
    let indexed = |prefix: &str| var.strip_prefix(prefix)?.strip_suffix(')')?.parse::<usize>().ok();
    if let Some(index) = indexed("DiscreteGpu(") {
        Some((wgpu::DeviceType::DiscreteGpu, index))
    } else if let Some(index) = indexed("IntegratedGpu(") {
        Some((wgpu::DeviceType::IntegratedGpu, index))
    } else if let Some(index) = indexed("VirtualGpu(") {
        Some((wgpu::DeviceType::VirtualGpu, index))
    } else if var == "Cpu" {
        Some((wgpu::DeviceType::Cpu, 0))
    } else {
        None
    }
}

/// The error for a `CUBECL_WGPU_DEFAULT_DEVICE` CubeCL would ignore.
fn unreadable(flag: &str, var: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "--backend {flag}: CUBECL_WGPU_DEFAULT_DEVICE={var:?} is not a device CubeCL reads (DiscreteGpu(N), \
         IntegratedGpu(N), VirtualGpu(N) or Cpu, N from 0); CubeCL would ignore it and take the best adapter: \
         correct it or unset it"
    )
}

/// The error for `--backend FLAG` when wgpu found no `api` adapter, wgpu's own words in `detail`.
fn message(flag: &str, api: &str, detail: &str) -> String {
    format!(
        "--backend {flag}: this machine offers no {api} adapter, so the GPU backend cannot start \
         ({detail}). {INSTALL}"
    )
}
