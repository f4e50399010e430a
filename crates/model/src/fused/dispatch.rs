//! Which backend has kernels: [`Kernels::of`] tells by type, at run time, and [`on_kernels!`]
//! runs a fused operation with that backend named, or its composed form; which GPU backends
//! take the CubeCL kernels is [`GpuKernels`] (`ATTEND_GPU_KERNELS`). Where a GPU backend with
//! burn-fusion takes none of the row kernels (`composed`; `auto` but for attention's weights
//! with dropout), [`Kernels::tracked`] still names its autodiff backend, so that LayerNorm, softmax, attention, the cross-entropy and
//! the linear maps run composed of Burn's operations as one autodiff step each, with a
//! backward of their own.

use core::any::Any;

use burn::backend::Autodiff;
use burn_ndarray::NdArray;

/// The backends with kernels, as [`on_kernels!`] matches them.
pub(super) enum Kernels {
    Cpu,
    CpuAutodiff,
    #[cfg(feature = "wgpu")]
    Wgpu,
    #[cfg(feature = "wgpu")]
    WgpuAutodiff,
    #[cfg(feature = "wgpu")]
    WgpuUnfused,
    #[cfg(feature = "wgpu")]
    WgpuUnfusedAutodiff,
    #[cfg(feature = "cuda")]
    Cuda,
    #[cfg(feature = "cuda")]
    CudaAutodiff,
    None,
}

/// burn-wgpu without burn-fusion (`--backend wgpu-unfused`).
#[cfg(feature = "wgpu")]
pub(super) type WgpuUnfused = burn_wgpu::CubeBackend<burn_wgpu::WgpuRuntime, f32, i32, u32>;

impl Kernels {
    /// Which backend with kernels `B` is, if any.
    pub(super) fn of<B: 'static>() -> Kernels {
        Self::under::<B>(gpu_kernels())
    }

    /// Which backend with kernels `B` is for the optimizer's update of a parameter. Under
    /// `auto` the GPU backends with burn-fusion take it too: fusion fuses the composed update's
    /// ~15 operations into few kernels, but the training thread still hands each operation
    /// over to the device's threads one by one, where the kernel is one custom operation
    /// (docs/benchmarks.md, "Operations per step on the GPU").
    pub(super) fn for_updates<B: 'static>() -> Kernels {
        match gpu_kernels() {
            GpuKernels::Unfused | GpuKernels::Composed | GpuKernels::Attention | GpuKernels::Norm => {
                Self::under::<B>(GpuKernels::All)
            }
            mode => Self::under::<B>(mode),
        }
    }

    /// Which backend with kernels `B` is for a LayerNorm: as [`Kernels::of`], and under `norm`
    /// the GPU backends with burn-fusion too.
    pub(super) fn for_layer_norm<B: 'static>() -> Kernels {
        match gpu_kernels() {
            GpuKernels::Norm => Self::under::<B>(GpuKernels::All),
            mode => Self::under::<B>(mode),
        }
    }

    /// Which backend with kernels `B` is for attention's weights with dropout
    /// ([`crate::fused::attention_weights`]): as [`Kernels::of`], and under `auto` and
    /// `attention` the GPU backends with burn-fusion too.
    pub(super) fn for_attention_weights<B: 'static>() -> Kernels {
        match gpu_kernels() {
            GpuKernels::Unfused | GpuKernels::Attention | GpuKernels::Norm => Self::under::<B>(GpuKernels::All),
            mode => Self::under::<B>(mode),
        }
    }

    /// The autodiff backend of burn-fusion under `auto`, where our kernels are off: an
    /// operation composed of the backend's own operations with a backward of its own (fewer
    /// operations handed to the fusion stream than Burn's autodiff of every step). `None`
    /// otherwise: where there are kernels, [`Kernels::of`] has them, and `off` is Burn's alone.
    pub(super) fn tracked<B: 'static>() -> Kernels {
        let kernels = Self::tracked_of::<B>();
        #[cfg(test)]
        if !matches!(kernels, Kernels::None) {
            TRACKED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        kernels
    }

    fn tracked_of<B: 'static>() -> Kernels {
        match (gpu_kernels(), Self::gpu::<B>(GpuKernels::All)) {
            #[cfg(feature = "wgpu")]
            (
                GpuKernels::Unfused | GpuKernels::Composed | GpuKernels::Attention | GpuKernels::Norm,
                kernels @ Kernels::WgpuAutodiff,
            ) => kernels,
            #[cfg(feature = "cuda")]
            (
                GpuKernels::Unfused | GpuKernels::Composed | GpuKernels::Attention | GpuKernels::Norm,
                kernels @ Kernels::CudaAutodiff,
            ) => kernels,
            _ => Kernels::None,
        }
    }

    fn under<B: 'static>(mode: GpuKernels) -> Kernels {
        if is::<B, Autodiff<NdArray<f32>>>() {
            Kernels::CpuAutodiff
        } else if is::<B, NdArray<f32>>() {
            Kernels::Cpu
        } else {
            Self::gpu::<B>(mode)
        }
    }

    fn gpu<B: 'static>(mode: GpuKernels) -> Kernels {
        let kernels = Self::cuda::<B>().or_else(Self::wgpu::<B>);
        match (mode, kernels) {
            (GpuKernels::Off, _) => Kernels::None,
            (
                GpuKernels::Unfused | GpuKernels::Composed | GpuKernels::Attention | GpuKernels::Norm,
                Some((_, true)),
            ) => Kernels::None,
            (_, Some((kernels, _))) => kernels,
            (_, None) => Kernels::None,
        }
    }

    /// The burn-cuda backend `B` is, and whether it runs burn-fusion.
    #[cfg(feature = "cuda")]
    fn cuda<B: 'static>() -> Option<(Kernels, bool)> {
        if is::<B, Autodiff<burn_cuda::Cuda>>() {
            Some((Kernels::CudaAutodiff, true))
        } else if is::<B, burn_cuda::Cuda>() {
            Some((Kernels::Cuda, true))
        } else {
            None
        }
    }

    #[cfg(not(feature = "cuda"))]
    #[allow(clippy::extra_unused_type_parameters)] // the same signature as with the feature
    fn cuda<B: 'static>() -> Option<(Kernels, bool)> {
        None
    }

    /// The burn-wgpu backend `B` is, and whether it runs burn-fusion. `burn_wgpu::Wgpu` is the
    /// fused one because burn-wgpu's default feature `fusion` is on (the workspace's
    /// Cargo.toml); without it `Wgpu` would be `WgpuUnfused` and match first as fused.
    #[cfg(feature = "wgpu")]
    fn wgpu<B: 'static>() -> Option<(Kernels, bool)> {
        if is::<B, Autodiff<burn_wgpu::Wgpu>>() {
            Some((Kernels::WgpuAutodiff, true))
        } else if is::<B, burn_wgpu::Wgpu>() {
            Some((Kernels::Wgpu, true))
        } else if is::<B, Autodiff<WgpuUnfused>>() {
            Some((Kernels::WgpuUnfusedAutodiff, false))
        } else if is::<B, WgpuUnfused>() {
            Some((Kernels::WgpuUnfused, false))
        } else {
            None
        }
    }

    #[cfg(not(feature = "wgpu"))]
    #[allow(clippy::extra_unused_type_parameters)] // the same signature as with the feature
    fn wgpu<B: 'static>() -> Option<(Kernels, bool)> {
        None
    }
}

/// Which GPU backends take the CubeCL kernels (the environment variable `ATTEND_GPU_KERNELS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuKernels {
    /// `auto` (the default): the backends without burn-fusion, where the kernels were measured
    /// faster than the composed form; under fusion the composed form, which burn-fusion fuses
    /// (on lavapipe the kernels' custom operations cost more than they save: docs/benchmarks.md),
    /// each operation one autodiff step with its own backward ([`Kernels::tracked`]), except
    /// attention's weights with dropout, which take their two kernels there too: on an H200
    /// they trained nanoGPT's GPU configuration at 1.026x the composed form's tokens/s
    /// (docs/benchmarks.md, "Product tiles on the H200").
    Unfused,
    /// `composed`: as `auto`, but attention's weights with dropout composed under burn-fusion
    /// as well (what `auto` was until the thirty-fifth session; their masks then come from
    /// Burn's generator).
    Composed,
    /// `all`: every GPU backend, under burn-fusion as custom operations of its stream.
    All,
    /// `off`: none; every fused operation on a GPU is composed of Burn's operations.
    Off,
    /// `attention`: as `auto`, and attention without dropout takes its masked softmax kernel
    /// under burn-fusion too (a custom operation between attention's two products, and its
    /// backward likewise). On an H200 that changed nothing (docs/benchmarks.md, "Our product
    /// kernel on the H200"); until the thirty-fifth session this was also the one setting
    /// that put attention's weights with dropout ([`crate::fused::attention_weights`]) in
    /// our kernels under fusion, which `auto` now does.
    Attention,
    /// `norm`: as `auto`, and LayerNorm takes its kernels (a warp a row, the residual stream's
    /// gradient added in the backward) under burn-fusion too, as custom operations. Not yet
    /// timed on a GPU: on an H200 the composed LayerNorm took about 85 µs forward and 128 µs
    /// backward besides `dγ` for 10 and 21 µs of memory traffic (docs/benchmarks.md,
    /// "LayerNorm a warp a row").
    Norm,
}

/// The values `ATTEND_GPU_KERNELS` takes, for its errors.
const EXPECTED: &str = "auto (the default), all, attention, composed, norm or off";

/// `ATTEND_GPU_KERNELS` read: unset, or a value [`parse_gpu_kernels`] takes.
pub fn gpu_kernels_from_env() -> Result<GpuKernels, String> {
    crate::env_switch::read("ATTEND_GPU_KERNELS", GpuKernels::Unfused, EXPECTED, parse_gpu_kernels)
}

/// Every GPU switch read (`ATTEND_GPU_KERNELS`, `ATTEND_GPU_MATMUL`, `ATTEND_GPU_TILE`,
/// `ATTEND_GPU_FMA`, `ATTEND_GPU_LANES`, `ATTEND_GPU_ADDRESSES`, `ATTEND_GPU_STORES`): the first value the model would not take, as an error
/// naming its variable and the values it takes. A runner calls it before a GPU backend's first
/// use, so that such a value stops the run instead of running the default.
pub fn gpu_switches_from_env() -> Result<(), String> {
    gpu_kernels_from_env()?;
    super::gpu_products_from_env()?;
    super::product_tile_from_env()?;
    super::product_form_from_env()?;
    Ok(())
}

/// A value of `ATTEND_GPU_KERNELS`: `auto` (or empty), `all`, `attention`, `composed`, `norm`, `off`; anything else is an error
/// that names the variable and the values it takes.
pub fn parse_gpu_kernels(value: &str) -> Result<GpuKernels, String> {
    let choices = [
        ("", GpuKernels::Unfused),
        ("auto", GpuKernels::Unfused),
        ("all", GpuKernels::All),
        ("off", GpuKernels::Off),
        ("attention", GpuKernels::Attention),
        ("composed", GpuKernels::Composed),
        ("norm", GpuKernels::Norm),
    ];
    crate::env_switch::parse("ATTEND_GPU_KERNELS", value, &choices, EXPECTED)
}

/// The setting in force on this thread: the tests' choice, else the environment's, read once
/// (a value the runner would refuse runs `auto` here, said on stderr; `xtask` checks it before a run).
/// Whether burn-fusion's implementation runs our kernels (`all`) or the composed forms
/// (`auto`, reached through [`Kernels::tracked`]).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(super) fn kernels_under_fusion() -> bool {
    gpu_kernels() == GpuKernels::All
}

/// Whether burn-fusion's implementation runs our attention kernels (`all`, `attention`).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(super) fn attention_kernels_under_fusion() -> bool {
    matches!(gpu_kernels(), GpuKernels::All | GpuKernels::Attention)
}

pub(super) fn gpu_kernels() -> GpuKernels {
    static ENV: std::sync::OnceLock<GpuKernels> = std::sync::OnceLock::new();
    #[cfg(test)]
    if let Some(mode) = TEST_GPU_KERNELS.with(|m| m.get()) {
        return mode;
    }
    *ENV.get_or_init(|| crate::env_switch::or_default(gpu_kernels_from_env(), GpuKernels::Unfused, "auto"))
}

/// Operations sent on through [`Kernels::tracked`], for the tests that check the dispatch.
#[cfg(test)]
pub(crate) static TRACKED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[cfg(test)]
thread_local! {
    /// The tests' choice of [`GpuKernels`] on this thread (`None`: the environment's).
    pub(crate) static TEST_GPU_KERNELS: std::cell::Cell<Option<GpuKernels>> = const { std::cell::Cell::new(None) };
}

/// `$fused` with the type `$K` naming the backend with kernels that `$B` is, else
/// `$composed`: `on_kernels!(B, K => on::<B, K>(x), _ => composed(x))`.
/// `on_kernels!(updates B, ..)` chooses by [`Kernels::for_updates`] instead, `on_kernels!(weights
/// B, ..)` by [`Kernels::for_attention_weights`], `on_kernels!(norm B, ..)` by
/// [`Kernels::for_layer_norm`].
macro_rules! on_kernels {
    ($B:ty, $K:ident => $fused:expr, _ => $composed:expr) => {
        $crate::fused::dispatch::on_kernels!(@match $crate::fused::dispatch::Kernels::of::<$B>(), $K => $fused, _ => $composed)
    };
    (tracked $B:ty, $K:ident => $fused:expr, _ => $composed:expr) => {
        $crate::fused::dispatch::on_kernels!(
            @match $crate::fused::dispatch::Kernels::tracked::<$B>(), $K => $fused, _ => $composed
        )
    };
    (weights $B:ty, $K:ident => $fused:expr, _ => $composed:expr) => {
        $crate::fused::dispatch::on_kernels!(
            @match $crate::fused::dispatch::Kernels::for_attention_weights::<$B>(), $K => $fused, _ => $composed
        )
    };
    (norm $B:ty, $K:ident => $fused:expr, _ => $composed:expr) => {
        $crate::fused::dispatch::on_kernels!(
            @match $crate::fused::dispatch::Kernels::for_layer_norm::<$B>(), $K => $fused, _ => $composed
        )
    };
    (updates $B:ty, $K:ident => $fused:expr, _ => $composed:expr) => {
        $crate::fused::dispatch::on_kernels!(
            @match $crate::fused::dispatch::Kernels::for_updates::<$B>(), $K => $fused, _ => $composed
        )
    };
    (@match $kernels:expr, $K:ident => $fused:expr, _ => $composed:expr) => {
        match $kernels {
            $crate::fused::dispatch::Kernels::CpuAutodiff => {
                type $K = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;
                $fused
            }
            $crate::fused::dispatch::Kernels::Cpu => {
                type $K = burn_ndarray::NdArray<f32>;
                $fused
            }
            #[cfg(feature = "wgpu")]
            $crate::fused::dispatch::Kernels::WgpuAutodiff => {
                type $K = burn::backend::Autodiff<burn_wgpu::Wgpu>;
                $fused
            }
            #[cfg(feature = "wgpu")]
            $crate::fused::dispatch::Kernels::Wgpu => {
                type $K = burn_wgpu::Wgpu;
                $fused
            }
            #[cfg(feature = "wgpu")]
            $crate::fused::dispatch::Kernels::WgpuUnfusedAutodiff => {
                type $K = burn::backend::Autodiff<$crate::fused::dispatch::WgpuUnfused>;
                $fused
            }
            #[cfg(feature = "wgpu")]
            $crate::fused::dispatch::Kernels::WgpuUnfused => {
                type $K = $crate::fused::dispatch::WgpuUnfused;
                $fused
            }
            #[cfg(feature = "cuda")]
            $crate::fused::dispatch::Kernels::CudaAutodiff => {
                type $K = burn::backend::Autodiff<burn_cuda::Cuda>;
                $fused
            }
            #[cfg(feature = "cuda")]
            $crate::fused::dispatch::Kernels::Cuda => {
                type $K = burn_cuda::Cuda;
                $fused
            }
            $crate::fused::dispatch::Kernels::None => $composed,
        }
    };
}
pub(crate) use on_kernels;

/// Whether `B` is the CPU backend (burn-ndarray in f32, with or without autodiff), whose
/// kernels run whatever `ATTEND_GPU_KERNELS` says.
pub fn is_cpu_backend<B: 'static>() -> bool {
    matches!(Kernels::of::<B>(), Kernels::Cpu | Kernels::CpuAutodiff)
}

/// Whether `A` and `T` are the same type.
pub(super) fn is<A: 'static, T: 'static>() -> bool {
    core::any::TypeId::of::<A>() == core::any::TypeId::of::<T>()
}

/// `value` as a `T`, where the caller has checked that `A` is `T` (with [`is`]).
pub(super) fn same<A: 'static, T: 'static>(value: A) -> T {
    let mut slot = Some(value);
    match (&mut slot as &mut dyn Any).downcast_mut::<Option<T>>() {
        Some(same) => same.take().expect("just filled"),
        None => unreachable!("checked to be the same type"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_kernels_setting_takes_auto_all_attention_composed_norm_off_and_names_the_variable_on_anything_else() {
        assert_eq!(parse_gpu_kernels(""), Ok(GpuKernels::Unfused));
        assert_eq!(parse_gpu_kernels(" auto "), Ok(GpuKernels::Unfused));
        assert_eq!(parse_gpu_kernels("all"), Ok(GpuKernels::All));
        assert_eq!(parse_gpu_kernels("off"), Ok(GpuKernels::Off));
        assert_eq!(parse_gpu_kernels("attention"), Ok(GpuKernels::Attention));
        assert_eq!(parse_gpu_kernels("composed"), Ok(GpuKernels::Composed));
        assert_eq!(parse_gpu_kernels("norm"), Ok(GpuKernels::Norm));
        let error = parse_gpu_kernels("1").unwrap_err();
        assert!(error.contains("ATTEND_GPU_KERNELS") && error.contains("auto") && error.contains("\"1\""), "{error}");
    }

    #[test]
    fn cpu_backends_take_their_kernels_whatever_the_gpu_setting() {
        TEST_GPU_KERNELS.with(|m| m.set(Some(GpuKernels::Off)));
        assert!(matches!(Kernels::of::<NdArray<f32>>(), Kernels::Cpu));
        assert!(matches!(Kernels::of::<Autodiff<NdArray<f32>>>(), Kernels::CpuAutodiff));
        assert!(matches!(Kernels::of::<NdArray<f64>>(), Kernels::None));
        TEST_GPU_KERNELS.with(|m| m.set(None));
    }
}
