//! `--backend ndarray|wgpu|wgpu-unfused|cuda`: the one place that maps the flag to a Burn
//! backend type.
//!
//! A command that runs a model implements [`OnBackend`] once, generically; [`run_on`] calls it
//! with the backend the flag names (the autodiff backend: commands that only infer use its
//! `InnerBackend`). The GPU backends need the build features that bring them in (`wgpu`, `cuda`);
//! a flag whose backend is not built is an error that says which feature to build with. Before a
//! GPU backend's first use, the machine is asked whether it has the device (`gpu_adapter` asks
//! wgpu for an adapter, `cuda_device` the CUDA driver for a GPU and NVRTC: a machine without one
//! gets an error that says what to install, not CubeCL's panic), its kernel caches are set up
//! (`kernel_cache`) and `ATTEND_GPU_KERNELS` is checked; `ATTEND_QKV` is checked on every backend.

use anyhow::Result;
use burn::tensor::backend::AutodiffBackend;
use clap::ValueEnum;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// CPU, burn-ndarray.
    Ndarray,
    /// GPU through Vulkan/Metal/DX12, burn-wgpu with operation fusion (feature `wgpu`).
    Wgpu,
    /// burn-wgpu without burn-fusion: every operation is its own kernel (feature `wgpu`).
    WgpuUnfused,
    /// NVIDIA GPUs through CUDA, burn-cuda with operation fusion (feature `cuda`; the CUDA
    /// driver and NVRTC are loaded at run time, no toolkit is needed to build). Its `f32`
    /// matrix products may run in TF32 on tensor cores, where CubeCL's autotuner picks them.
    Cuda,
}

impl Backend {
    /// The flag's spelling, for passing it on to a child process.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Ndarray => "ndarray",
            Backend::Wgpu => "wgpu",
            Backend::WgpuUnfused => "wgpu-unfused",
            Backend::Cuda => "cuda",
        }
    }
}

/// A command's work, generic over the backend.
pub trait OnBackend {
    type Output;
    fn run<B: AutodiffBackend>(self, device: &B::Device) -> Result<Self::Output>;
}

/// `ATTEND_QKV` (self-attention's projections as one product or three), which the model reads
/// on every backend: a value it would not take stops the command instead of being ignored.
/// `run_on` checks it; the commands that run a model on burn-ndarray themselves call it first.
pub fn check_model_switches() -> Result<()> {
    attend_model::projections::projections_from_env().map_err(anyhow::Error::msg)?;
    Ok(())
}

/// Runs `work` on `backend`'s default device.
pub fn run_on<W: OnBackend>(backend: Backend, work: W) -> Result<W::Output> {
    use burn::backend::Autodiff;
    check_model_switches()?;
    match backend {
        Backend::Ndarray => work.run::<Autodiff<burn_ndarray::NdArray<f32>>>(&Default::default()),
        #[cfg(feature = "wgpu")]
        Backend::Wgpu => {
            crate::gpu_adapter::check(backend.name())?;
            gpu_setup()?;
            work.run::<Autodiff<burn_wgpu::Wgpu>>(&Default::default())
        }
        #[cfg(feature = "wgpu")]
        Backend::WgpuUnfused => {
            crate::gpu_adapter::check(backend.name())?;
            gpu_setup()?;
            type Unfused = burn_wgpu::CubeBackend<burn_wgpu::WgpuRuntime, f32, i32, u32>;
            work.run::<Autodiff<Unfused>>(&Default::default())
        }
        #[cfg(feature = "cuda")]
        Backend::Cuda => {
            crate::cuda_device::check(backend.name())?;
            gpu_setup()?;
            work.run::<Autodiff<burn_cuda::Cuda>>(&Default::default())
        }
        #[allow(unreachable_patterns)]
        other => {
            let _ = work;
            let feature = if other == Backend::Cuda { "cuda" } else { "wgpu" };
            anyhow::bail!(
                "--backend {}: this build has no such backend; build xtask with `--features {feature}` \
                 (cargo run --release -p xtask --features {feature} -- ...), or use --backend ndarray",
                other.name()
            )
        }
    }
}

/// Before a GPU backend's first use: its kernel caches (`kernel_cache`), and a check of
/// `ATTEND_GPU_KERNELS` (which GPU backends run the CubeCL kernels of the fused operations),
/// `ATTEND_GPU_MATMUL` (whose kernel multiplies the linear maps and attention) and
/// `ATTEND_GPU_TILE` (our product kernel's tile), `ATTEND_GPU_FMA`, `ATTEND_GPU_LANES`,
/// `ATTEND_GPU_ADDRESSES` and `ATTEND_GPU_STORES` (its inner loop's form), so that a value the
/// model would not take stops the run instead of being ignored.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn gpu_setup() -> Result<()> {
    crate::kernel_cache::configure()?;
    attend_model::fused::gpu_switches_from_env().map_err(anyhow::Error::msg)?;
    Ok(())
}
