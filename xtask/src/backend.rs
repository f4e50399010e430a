//! `--backend ndarray|wgpu`: the one place that maps the flag to a Burn backend type.
//!
//! A command that runs a model implements [`OnBackend`] once, generically; [`run_on`] calls it
//! with the backend the flag names (the autodiff backend: commands that only infer use its
//! `InnerBackend`).

use anyhow::Result;
use burn::tensor::backend::AutodiffBackend;
use clap::ValueEnum;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// CPU, burn-ndarray.
    Ndarray,
    /// GPU, burn-wgpu (needs a build with the `wgpu` feature).
    Wgpu,
}

impl Backend {
    /// The flag's spelling, for passing it on to a child process.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Ndarray => "ndarray",
            Backend::Wgpu => "wgpu",
        }
    }
}

/// A command's work, generic over the backend.
pub trait OnBackend {
    type Output;
    fn run<B: AutodiffBackend>(self, device: &B::Device) -> Result<Self::Output>;
}

/// Runs `work` on `backend`'s default device.
pub fn run_on<W: OnBackend>(backend: Backend, work: W) -> Result<W::Output> {
    match backend {
        Backend::Ndarray => work.run::<burn::backend::Autodiff<burn_ndarray::NdArray<f32>>>(&Default::default()),
        #[cfg(feature = "wgpu")]
        Backend::Wgpu => work.run::<burn::backend::Autodiff<burn_wgpu::Wgpu>>(&Default::default()),
        #[cfg(not(feature = "wgpu"))]
        Backend::Wgpu => {
            let _ = work;
            anyhow::bail!(
                "--backend wgpu: this build has no wgpu backend; build xtask with `--features wgpu` \
                 (cargo run --release -p xtask --features wgpu -- ...), or use --backend ndarray"
            )
        }
    }
}
