//! Which kernel multiplies the linear maps' matrices on the GPU backends: Burn's (CubeCL's
//! autotuned matmul, the default) or ours (`fused/cube/product.rs`), by the environment
//! variable `ATTEND_GPU_MATMUL`. Every product of a linear map goes through [`product`]: the
//! forward `x·W`, the backward's `dy·Wᵀ` and the weight gradients `xᵀ·dy` (sliced along the
//! rows or not). Attention's per-head products stay Burn's.
//!
//! Ours is opt-in until a GPU has timed it against CubeCL's: on lavapipe it computes the same
//! products (the tests in `fused/cube/product_tests.rs`), but lavapipe's speed says nothing of
//! an H100's.

use burn::tensor::backend::Backend;
use burn::tensor::{DType, Tensor};

use super::dispatch::Kernels;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
use super::dispatch::{is, same};
#[cfg(any(feature = "wgpu", feature = "cuda"))]
use super::FusedOps;

/// The setting of `ATTEND_GPU_MATMUL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuProducts {
    /// `cubecl` (the default): Burn's matmul.
    Burn,
    /// `attend`: our kernel, on burn-wgpu and burn-cuda, with burn-fusion or without.
    Ours,
}

/// The values `ATTEND_GPU_MATMUL` takes, for its errors.
const EXPECTED: &str = "cubecl (the default) or attend";

/// `ATTEND_GPU_MATMUL` read: unset, or a value [`parse_gpu_products`] takes.
pub fn gpu_products_from_env() -> Result<GpuProducts, String> {
    crate::env_switch::read("ATTEND_GPU_MATMUL", GpuProducts::Burn, EXPECTED, parse_gpu_products)
}

/// A value of `ATTEND_GPU_MATMUL`: `cubecl` (or empty), `attend`; anything else is an error
/// that names the variable and the values it takes.
pub fn parse_gpu_products(value: &str) -> Result<GpuProducts, String> {
    let choices = [("", GpuProducts::Burn), ("cubecl", GpuProducts::Burn), ("attend", GpuProducts::Ours)];
    crate::env_switch::parse("ATTEND_GPU_MATMUL", value, &choices, EXPECTED)
}

/// The setting in force on this thread: [`with_gpu_products`]'s (or the tests') choice, else
/// the environment's, read once (a value the runner would refuse counts as `cubecl` here;
/// `xtask` checks it before a run).
fn setting() -> GpuProducts {
    static ENV: std::sync::OnceLock<GpuProducts> = std::sync::OnceLock::new();
    if let Some(setting) = CHOICE.with(|p| p.get()) {
        return setting;
    }
    *ENV.get_or_init(|| gpu_products_from_env().unwrap_or(GpuProducts::Burn))
}

thread_local! {
    /// The choice of [`GpuProducts`] on this thread (`None`: the environment's): set by
    /// [`with_gpu_products`], and by the tests.
    pub(crate) static CHOICE: std::cell::Cell<Option<GpuProducts>> = const { std::cell::Cell::new(None) };
}

/// Runs `work` with `choice` in force on this thread, whatever `ATTEND_GPU_MATMUL` says (the
/// product benchmark times both kernels in one process); the thread's setting before is
/// restored after.
pub fn with_gpu_products<T>(choice: GpuProducts, work: impl FnOnce() -> T) -> T {
    let before = CHOICE.with(|p| p.replace(Some(choice)));
    let out = work();
    CHOICE.with(|p| p.set(before));
    out
}

/// One of the three products of a linear map `x·W` (`x`: `[rows, d_in]`, `W`: `[d_in, d_out]`)
/// and its backward as the composed form runs them, and the weight gradient in one product,
/// unsliced (what the sliced form replaces), for the product benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinearProduct {
    /// `y = x·W`.
    Forward,
    /// `dx = dy·Wᵀ` (`W` read transposed through its strides).
    InputGradient,
    /// `dW = xᵀ·dy`, the rows cut into slices as the composed backward cuts them.
    WeightGradient,
    /// `dW = xᵀ·dy` as one product.
    WeightGradientWhole,
}

impl LinearProduct {
    pub const ALL: [LinearProduct; 4] = [
        LinearProduct::Forward,
        LinearProduct::InputGradient,
        LinearProduct::WeightGradient,
        LinearProduct::WeightGradientWhole,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LinearProduct::Forward => "forward x·W",
            LinearProduct::InputGradient => "dx = dy·Wᵀ",
            LinearProduct::WeightGradient => "dW = xᵀ·dy (row slices)",
            LinearProduct::WeightGradientWhole => "dW = xᵀ·dy (one product)",
        }
    }

    /// `[m, k, n]` of the product (`2·m·k·n` operations) for a map `d_in → d_out` over `rows`.
    pub fn dims(self, rows: usize, d_in: usize, d_out: usize) -> [usize; 3] {
        match self {
            LinearProduct::Forward => [rows, d_in, d_out],
            LinearProduct::InputGradient => [rows, d_out, d_in],
            LinearProduct::WeightGradient | LinearProduct::WeightGradientWhole => [d_in, rows, d_out],
        }
    }
}

/// The product `kind` of `x` (`[rows, d_in]`), `w` (`[d_in, d_out]`) and `dy` (`[rows, d_out]`)
/// with `choice`'s kernel, as [`super::linear`]'s composed form runs it on a backend without
/// autodiff.
pub fn linear_product<B: Backend>(
    kind: LinearProduct,
    choice: GpuProducts,
    x: Tensor<B, 2>,
    w: Tensor<B, 2>,
    dy: Tensor<B, 2>,
) -> Tensor<B, 2> {
    with_gpu_products(choice, || match kind {
        LinearProduct::Forward => product(x, w),
        LinearProduct::InputGradient => product(dy, w.transpose()),
        LinearProduct::WeightGradient => super::linear::rows_product(x, dy),
        LinearProduct::WeightGradientWhole => product(x.transpose(), dy),
    })
}

/// `a·b` over the last two axes (rank 2, or rank 3 with a batch): our kernel where the setting
/// is `attend`, `B` is a GPU backend without autodiff (the linear maps' products run inside
/// their own autodiff step) and both operands are `f32`, else Burn's `matmul` (half precision
/// keeps CubeCL's products, which use the tensor cores where the backend has them; ours do not).
pub(super) fn product<B: Backend, const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>) -> Tensor<B, D> {
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    fn on<B: Backend, K: FusedOps, const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>) -> Tensor<B, D> {
        let a = same::<Tensor<B, D>, Tensor<K, D>>(a).into_primitive().tensor();
        let b = same::<Tensor<B, D>, Tensor<K, D>>(b).into_primitive().tensor();
        same(Tensor::<K, D>::from_primitive(burn::tensor::TensorPrimitive::Float(K::fused_product(a, b))))
    }
    if setting() == GpuProducts::Burn || !(D == 2 || D == 3) || a.dtype() != DType::F32 || b.dtype() != DType::F32 {
        return a.matmul(b);
    }
    // The kernel's grid: a cube per 128 columns, per 128 rows, and per matrix along its three
    // axes, each at most 65,535 (Vulkan's guaranteed minimum).
    let (rows, cols) = (a.dims()[D - 2], b.dims()[D - 1]);
    let batch = if D == 3 { a.dims()[0].max(b.dims()[0]) } else { 1 };
    if rows.div_ceil(128) > 65_535 || cols.div_ceil(128) > 65_535 || batch > 65_535 {
        return a.matmul(b);
    }
    match Kernels::for_products::<B>() {
        #[cfg(feature = "wgpu")]
        Kernels::Wgpu => on::<B, burn_wgpu::Wgpu, D>(a, b),
        #[cfg(feature = "wgpu")]
        Kernels::WgpuUnfused => on::<B, super::dispatch::WgpuUnfused, D>(a, b),
        #[cfg(feature = "cuda")]
        Kernels::Cuda => on::<B, burn_cuda::Cuda, D>(a, b),
        _ => a.matmul(b),
    }
}

impl Kernels {
    /// The GPU backend without autodiff that `B` is, for [`product`]; `None` for any other.
    #[cfg_attr(not(any(feature = "wgpu", feature = "cuda")), allow(clippy::extra_unused_type_parameters))]
    fn for_products<B: 'static>() -> Kernels {
        #[cfg(feature = "wgpu")]
        if is::<B, burn_wgpu::Wgpu>() {
            return Kernels::Wgpu;
        } else if is::<B, super::dispatch::WgpuUnfused>() {
            return Kernels::WgpuUnfused;
        }
        #[cfg(feature = "cuda")]
        if is::<B, burn_cuda::Cuda>() {
            return Kernels::Cuda;
        }
        Kernels::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_gpu_products_sets_the_choice_for_its_work_and_restores_the_one_before() {
        let initial = setting();
        let inner = with_gpu_products(GpuProducts::Ours, || {
            (setting(), with_gpu_products(GpuProducts::Burn, setting), setting())
        });
        assert_eq!(inner, (GpuProducts::Ours, GpuProducts::Burn, GpuProducts::Ours));
        assert_eq!(setting(), initial);
    }

    #[test]
    fn gpu_products_setting_takes_cubecl_and_attend_and_names_the_variable_on_anything_else() {
        assert_eq!(parse_gpu_products(""), Ok(GpuProducts::Burn));
        assert_eq!(parse_gpu_products(" cubecl "), Ok(GpuProducts::Burn));
        assert_eq!(parse_gpu_products("attend"), Ok(GpuProducts::Ours));
        let error = parse_gpu_products("ours").unwrap_err();
        assert!(
            error.contains("ATTEND_GPU_MATMUL") && error.contains("cubecl") && error.contains("\"ours\""),
            "{error}"
        );
    }
}
