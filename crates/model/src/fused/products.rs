//! Which kernel multiplies the matrices of the linear maps and of attention on the GPU
//! backends: Burn's (CubeCL's autotuned matmul) or ours (`fused/cube/product.rs`), by the
//! environment variable `ATTEND_GPU_MATMUL`. Every product of a linear map goes through
//! [`product`]: the forward `x·W`, the backward's `dy·Wᵀ` and the weight gradients `xᵀ·dy`,
//! cut into slices of rows where they sum over many ([`rows_product`]); attention's per-head
//! products where attention is composed under Burn's autodiff (with dropout on its weights)
//! through [`super::attention_products`] (which asks [`kernels_taking`] here), each one
//! autodiff step whose backward takes the same kernel, and through [`product`] inside
//! attention's own autodiff step (`fused/attention.rs`, without dropout). The CubeCL kernel of the fused attention (`ATTEND_GPU_KERNELS=all`, and
//! wgpu-unfused) keeps Burn's products.
//!
//! Ours computes the same products (the tests in `fused/cube/product_tests.rs`) in exact
//! `f32`. On an H200 its present form (128-bit reads of shared and global memory) trained
//! nanoGPT's GPU configuration at 1.47x CubeCL's tokens/s on wgpu for the linear maps, and
//! at 1.71x with attention's products too, where CubeCL's f32 products are register-tile
//! kernels without tensor cores (docs/benchmarks.md, "Our product kernel on the H200"), so
//! `auto`, the default, takes ours on wgpu. On burn-cuda CubeCL's
//! products of `f32` run on the tensor cores as TF32 (2.2x ours there in the first form), so
//! `auto` keeps Burn's; half precision keeps Burn's everywhere.

use burn::tensor::backend::Backend;
use burn::tensor::{DType, Tensor, TensorPrimitive};

use super::column_sums::sum_of_partials;
use super::dispatch::Kernels;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
use super::dispatch::{is, same};
#[cfg(any(feature = "wgpu", feature = "cuda"))]
use super::FusedOps;

/// The setting of `ATTEND_GPU_MATMUL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuProducts {
    /// `auto` (the default): ours on burn-wgpu, Burn's on burn-cuda.
    Auto,
    /// `cubecl`: Burn's matmul.
    Burn,
    /// `attend`: our kernel, on burn-wgpu and burn-cuda, with burn-fusion or without.
    Ours,
}

/// The values `ATTEND_GPU_MATMUL` takes, for its errors.
const EXPECTED: &str = "auto (the default), cubecl or attend";

/// `ATTEND_GPU_MATMUL` read: unset, or a value [`parse_gpu_products`] takes.
pub fn gpu_products_from_env() -> Result<GpuProducts, String> {
    crate::env_switch::read("ATTEND_GPU_MATMUL", GpuProducts::Auto, EXPECTED, parse_gpu_products)
}

/// A value of `ATTEND_GPU_MATMUL`: `auto` (or empty), `cubecl`, `attend`; anything else is an
/// error that names the variable and the values it takes.
pub fn parse_gpu_products(value: &str) -> Result<GpuProducts, String> {
    let choices = [
        ("", GpuProducts::Auto),
        ("auto", GpuProducts::Auto),
        ("cubecl", GpuProducts::Burn),
        ("attend", GpuProducts::Ours),
    ];
    crate::env_switch::parse("ATTEND_GPU_MATMUL", value, &choices, EXPECTED)
}

/// The setting in force on this thread: [`with_gpu_products`]'s (or the tests') choice, else
/// the environment's, read once (a value the runner would refuse runs `auto` here, said on stderr;
/// `xtask` checks it before a run).
fn setting() -> GpuProducts {
    static ENV: std::sync::OnceLock<GpuProducts> = std::sync::OnceLock::new();
    if let Some(setting) = CHOICE.with(|p| p.get()) {
        return setting;
    }
    *ENV.get_or_init(|| crate::env_switch::or_default(gpu_products_from_env(), GpuProducts::Auto, "auto"))
}

/// Whether our kernel multiplies on `kernels` (a GPU backend) under the setting in force:
/// `auto` takes it on wgpu unless `ATTEND_GPU_KERNELS=off` asks for Burn's operations alone.
pub(in crate::fused) fn ours_on(kernels: &Kernels) -> bool {
    match setting() {
        GpuProducts::Burn => false,
        GpuProducts::Ours => true,
        GpuProducts::Auto => {
            #[cfg(feature = "cuda")]
            if matches!(kernels, Kernels::Cuda | Kernels::CudaAutodiff) {
                return false;
            }
            !matches!(kernels, Kernels::None) && super::dispatch::gpu_kernels() != super::GpuKernels::Off
        }
    }
}

/// Whether our kernel's grid holds a product of `rows × cols` outputs per matrix, each a sum
/// over `depth`, and `batch` matrices: a cube per tile's columns, per tile's rows (the tile
/// `ATTEND_GPU_TILE` gives it), and per matrix along its three axes, each at most 65,535
/// (Vulkan's guaranteed minimum).
fn fits(rows: usize, cols: usize, depth: usize, batch: usize) -> bool {
    let tile = super::product_tile().for_product(cols, depth);
    rows.div_ceil(tile.rows) <= 65_535 && cols.div_ceil(tile.cols) <= 65_535 && batch <= 65_535
}

/// The number of matrices of a product of `a` and `b` (`[.., m, k]`, `[.., k, n]`), and
/// whether their batch axes are alike.
fn batch_of<const D: usize>(a: &[usize; D], b: &[usize; D]) -> (usize, bool) {
    let alike = a[..D - 2] == b[..D - 2];
    (a[..D - 2].iter().zip(&b[..D - 2]).map(|(x, y)| *x.max(y)).product(), alike)
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
    crate::env_switch::with_override(&CHOICE, choice, work)
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
        LinearProduct::WeightGradient => rows_product(x, dy),
        LinearProduct::WeightGradientWhole => product(x.transpose(), dy),
    })
}

/// `a·b` over the last two axes (rank 2, 3 or 4): our kernel where the setting takes it for
/// `B`, a GPU backend, and both operands are `f32`, else Burn's `matmul` (half precision keeps
/// CubeCL's products, which use the tensor cores where the backend has them; ours do not).
/// `B` is mostly a backend without autodiff (the linear maps' products run inside their own
/// autodiff step); with autodiff (the composed forms under `ATTEND_GPU_KERNELS=off`) the
/// product is [`matmul`]'s autodiff step.
pub(super) fn product<B: Backend, const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>) -> Tensor<B, D> {
    matmul(a, b)
}

/// `a·b` over the last two axes, for attention's per-head products (`[batch, heads, m, k]` ·
/// `[batch, heads, k, n]`) and, through [`product`], the linear maps': our kernel on a GPU
/// backend where `takes_ours` says so, with autodiff too, where it is one autodiff step
/// whose backward (`dA = dC·Bᵀ`, `dB = Aᵀ·dC`) takes the same kernel; Burn's `matmul`
/// elsewhere.
pub fn matmul<B: Backend, const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>) -> Tensor<B, D> {
    match kernels_taking(&a, &b) {
        Some(kernels) => multiply_on::<B, D>(kernels, a, b),
        None => a.matmul(b),
    }
}

/// The kernels of `B` (a GPU backend) where our kernel takes `a·b` ([`takes_ours`]), else `None`.
pub(super) fn kernels_taking<B: Backend, const D: usize>(a: &Tensor<B, D>, b: &Tensor<B, D>) -> Option<Kernels> {
    let kernels = Kernels::for_products::<B>();
    takes_ours(&kernels, a, b).then_some(kernels)
}

/// Whether `a·b` on `kernels` takes our kernel: the setting says so there, both operands are
/// `f32` of rank 2 to 4, the grid holds it, and under autodiff the batch axes are alike (the
/// autodiff step sums no gradient over a broadcast axis; without autodiff the kernel shares an
/// operand's single entry along a batch axis).
fn takes_ours<B: Backend, const D: usize>(kernels: &Kernels, a: &Tensor<B, D>, b: &Tensor<B, D>) -> bool {
    if !(2..=4).contains(&D) || !ours_on(kernels) || a.dtype() != DType::F32 || b.dtype() != DType::F32 {
        return false;
    }
    let (da, db) = (a.dims(), b.dims());
    let (batch, alike) = batch_of(&da, &db);
    // An empty product (no rows, columns or matrices) is Burn's: the kernel's grid would be empty.
    let (rows, cols, depth) = (da[D - 2], db[D - 1], da[D - 1]);
    let empty = rows == 0 || cols == 0 || batch == 0;
    (alike || !kernels.is_autodiff()) && !empty && fits(rows, cols, depth, batch)
}

/// `a·b` by `K::fused_product` for the backend `kernels` names (`B` itself).
#[cfg_attr(not(any(feature = "wgpu", feature = "cuda")), allow(unused_variables))]
fn multiply_on<B: Backend, const D: usize>(kernels: Kernels, a: Tensor<B, D>, b: Tensor<B, D>) -> Tensor<B, D> {
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    fn on<B: Backend, K: FusedOps, const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>) -> Tensor<B, D> {
        let a = same::<Tensor<B, D>, Tensor<K, D>>(a).into_primitive().tensor();
        let b = same::<Tensor<B, D>, Tensor<K, D>>(b).into_primitive().tensor();
        same(Tensor::<K, D>::from_primitive(burn::tensor::TensorPrimitive::Float(K::fused_product(a, b))))
    }
    match kernels {
        #[cfg(feature = "wgpu")]
        Kernels::Wgpu => on::<B, burn_wgpu::Wgpu, D>(a, b),
        #[cfg(feature = "wgpu")]
        Kernels::WgpuAutodiff => on::<B, burn::backend::Autodiff<burn_wgpu::Wgpu>, D>(a, b),
        #[cfg(feature = "wgpu")]
        Kernels::WgpuUnfused => on::<B, super::dispatch::WgpuUnfused, D>(a, b),
        #[cfg(feature = "wgpu")]
        Kernels::WgpuUnfusedAutodiff => on::<B, burn::backend::Autodiff<super::dispatch::WgpuUnfused>, D>(a, b),
        #[cfg(feature = "cuda")]
        Kernels::Cuda => on::<B, burn_cuda::Cuda, D>(a, b),
        #[cfg(feature = "cuda")]
        Kernels::CudaAutodiff => on::<B, burn::backend::Autodiff<burn_cuda::Cuda>, D>(a, b),
        _ => a.matmul(b),
    }
}

/// Rows per slice below which [`rows_product`] splits the sum no further.
const MIN_SLICE_ROWS: usize = 512;
/// Rows below which [`rows_product`] does not split at all (a small step gains nothing, and
/// each split hands burn-fusion four more operations).
const MIN_SPLIT_ROWS: usize = 4096;
/// Elements of the partial products [`rows_product`] aims at: enough output tiles to keep a
/// large GPU busy (a `[16384, 384]` product of 6.3M outputs filled an H200).
const SLICE_TARGET: usize = 1 << 22;

/// `aᵀ·b` (`[p, q]`) for `a`: `[n, p]`, `b`: `[n, q]`: a sum over the `n` rows, as every
/// weight's gradient is. With many rows and a small output (a weight gradient over a batch's
/// 16,384 positions; the tied embedding's over the vocabulary) one product leaves most of a
/// GPU idle: CubeCL gives each tile of the `p × q` output to one unit, which walks all `n`
/// rows in turn, so on an H200 the time grew with `n` alone (2.0 ms for `384 × 384` and for
/// `1536 × 384` alike, 2.6 ms for the `65 × 384` embedding, at `n` = 16,384: 2-10 TFLOP/s,
/// where the forward's products ran at 12-17). So the rows are cut into `S` slices
/// ([`row_slices`]), the `S` products run as one batched product, and their sum is a
/// reduction: `aᵀ·b = Σ_s a_sᵀ·b_s`.
pub(super) fn rows_product<B: Backend>(a: Tensor<B, 2>, b: Tensor<B, 2>) -> Tensor<B, 2> {
    let ([n, p], q) = (a.dims(), b.dims()[1]);
    let slices = row_slices(n, p * q);
    if slices == 1 {
        return product(a.transpose(), b);
    }
    let (a, b) = (a.reshape([slices, n / slices, p]), b.reshape([slices, n / slices, q]));
    let partials = product(a.swap_dims(1, 2), b).into_primitive().tensor();
    let sum = Tensor::<B, 3>::from_primitive(TensorPrimitive::Float(sum_of_partials::<B>(partials)));
    sum.reshape([p, q])
}

/// How many slices [`rows_product`] cuts `n` rows into for an output of `outputs` elements:
/// the smallest power of two whose partial products reach [`SLICE_TARGET`] elements, as long
/// as each slice keeps [`MIN_SLICE_ROWS`] rows and the slices are equal (1: no split, also
/// below [`MIN_SPLIT_ROWS`] rows).
pub(super) fn row_slices(n: usize, outputs: usize) -> usize {
    if n < MIN_SPLIT_ROWS {
        return 1;
    }
    let mut slices = 1;
    while slices * outputs < SLICE_TARGET && n.is_multiple_of(2 * slices) && n / (2 * slices) >= MIN_SLICE_ROWS {
        slices *= 2;
    }
    slices
}

impl Kernels {
    /// The GPU backend `B` is, with autodiff or without, for [`product`] and [`matmul`];
    /// `None` for any other.
    #[cfg_attr(not(any(feature = "wgpu", feature = "cuda")), allow(clippy::extra_unused_type_parameters))]
    fn for_products<B: 'static>() -> Kernels {
        #[cfg(feature = "wgpu")]
        if is::<B, burn_wgpu::Wgpu>() {
            return Kernels::Wgpu;
        } else if is::<B, burn::backend::Autodiff<burn_wgpu::Wgpu>>() {
            return Kernels::WgpuAutodiff;
        } else if is::<B, super::dispatch::WgpuUnfused>() {
            return Kernels::WgpuUnfused;
        } else if is::<B, burn::backend::Autodiff<super::dispatch::WgpuUnfused>>() {
            return Kernels::WgpuUnfusedAutodiff;
        }
        #[cfg(feature = "cuda")]
        if is::<B, burn_cuda::Cuda>() {
            return Kernels::Cuda;
        } else if is::<B, burn::backend::Autodiff<burn_cuda::Cuda>>() {
            return Kernels::CudaAutodiff;
        }
        Kernels::None
    }

    /// Whether these are a GPU backend's kernels under autodiff.
    fn is_autodiff(&self) -> bool {
        match self {
            #[cfg(feature = "wgpu")]
            Kernels::WgpuAutodiff | Kernels::WgpuUnfusedAutodiff => true,
            #[cfg(feature = "cuda")]
            Kernels::CudaAutodiff => true,
            _ => false,
        }
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
        assert_eq!(parse_gpu_products(""), Ok(GpuProducts::Auto));
        assert_eq!(parse_gpu_products("auto"), Ok(GpuProducts::Auto));
        assert_eq!(parse_gpu_products(" cubecl "), Ok(GpuProducts::Burn));
        assert_eq!(parse_gpu_products("attend"), Ok(GpuProducts::Ours));
        let error = parse_gpu_products("ours").unwrap_err();
        assert!(
            error.contains("ATTEND_GPU_MATMUL") && error.contains("cubecl") && error.contains("\"ours\""),
            "{error}"
        );
    }

    use burn::tensor::{Distribution, Tolerance};
    use burn_ndarray::NdArray;

    #[test]
    fn row_slices_fill_the_target_with_slices_of_at_least_512_rows() {
        // nanoGPT's GPU step: 16,384 rows; the attention maps, the MLP's, the tied embedding.
        assert_eq!(row_slices(16_384, 384 * 384), 32);
        assert_eq!(row_slices(16_384, 1536 * 384), 8);
        assert_eq!(row_slices(16_384, 65 * 384), 32);
        // Few rows, or an output that fills the GPU alone, or rows that do not halve: no split.
        assert_eq!(row_slices(4096, 64 * 64), 8);
        assert_eq!(row_slices(2048, 64 * 64), 1);
        assert_eq!(row_slices(16_384, 4096 * 1024), 1);
        assert_eq!(row_slices(16_383, 384 * 384), 1);
    }

    #[test]
    fn sliced_row_product_equals_one_product() {
        type B = NdArray<f32>;
        let device = Default::default();
        let a = Tensor::<B, 2>::random([4096, 6], Distribution::Normal(0.0, 1.0), &device);
        let b = Tensor::<B, 2>::random([4096, 5], Distribution::Normal(0.0, 1.0), &device);
        assert_eq!(row_slices(4096, 30), 8, "the case below is split");
        let sliced = rows_product(a.clone(), b.clone());
        assert_eq!(sliced.dims(), [6, 5]);
        sliced.into_data().assert_approx_eq::<f32>(&a.transpose().matmul(b).into_data(), Tolerance::absolute(1e-3));
    }
}
