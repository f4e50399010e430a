//! The CUDA C++ of our product kernel (`product.rs`), compiled on the host by CubeCL's CUDA
//! compiler without a GPU (feature `kernel-source`), so that its machine code can be read
//! offline: `scripts/product_sass.sh` hands the source to NVRTC and `nvdisasm` for an
//! H100/H200's SASS (registers, spills, the instructions of the loop along `k`).
//!
//! The kernel is defined as a launch would define it: its operands are registered on a
//! burn-wgpu client (lavapipe will do: only their vector sizes reach the kernel's
//! definition), and the definition goes to `cubecl-cpp`'s CUDA compiler instead of the
//! client's. burn-cuda compiles the same definition with the same compiler (with its own
//! device's properties), and burn-wgpu's WGSL comes from the same definition too, so the
//! SASS shows what our code asks of the GPU, read on the CUDA path.

use burn_wgpu::{WgpuDevice, WgpuRuntime};
use cubecl::prelude::*;
use cubecl::server::ExecutionMode;
use cubecl_cpp::cuda::mma::CudaWmmaCompiler;
use cubecl_cpp::cuda::CudaDialect;
use cubecl_cpp::shared::CppCompiler;
use cubecl_cpp::shared::{CompilationOptions, CppSupportedFeatures};
use cubecl_runtime::compiler::CubeTask;
use cubecl_runtime::kernel::KernelTask;

use super::product::product_kernel;
use crate::fused::{ProductForm, ProductTile, Triangle};

/// How the kernel reads its operands: which axis of each is contiguous and whether each
/// operand (and the output) is read as vectors of four rows (`product_launch.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProductLayout {
    /// `A`'s `k` axis has stride 1 (`x` in the forward `x·W`).
    pub a_k_contiguous: bool,
    /// `B`'s `k` axis has stride 1 (`Wᵀ` in `dx = dy·Wᵀ`).
    pub b_k_contiguous: bool,
    /// Vector sizes (1 or 4) of `A`, `B` and `C`.
    pub vectors: [usize; 3],
    /// The shapes are whole tiles and steps, so that the `offsets` form reads and writes
    /// unguarded (`product_launch::exact_tiles`), as nanoGPT's products are; `false`: ragged.
    pub exact: bool,
}

impl ProductLayout {
    /// A linear map's forward `x·W`: `x` along `k`, `W`'s rows as vectors of four.
    pub const FORWARD: ProductLayout =
        ProductLayout { a_k_contiguous: true, b_k_contiguous: false, vectors: [1, 4, 4], exact: true };
    /// Its input gradient `dy·Wᵀ`: both operands along `k`.
    pub const INPUT_GRADIENT: ProductLayout =
        ProductLayout { a_k_contiguous: true, b_k_contiguous: true, vectors: [1, 1, 4], exact: true };
    /// Its weight gradient `xᵀ·dy`: both operands' rows as vectors of four.
    pub const WEIGHT_GRADIENT: ProductLayout =
        ProductLayout { a_k_contiguous: false, b_k_contiguous: false, vectors: [4, 4, 4], exact: true };

    /// The layout named `forward`, `dx` or `dw`, of whole tiles, or ragged with `-ragged`
    /// after the name (`dx-ragged`).
    pub fn parse(name: &str) -> Result<ProductLayout, String> {
        let (base, exact) = match name.strip_suffix("-ragged") {
            Some(base) => (base, false),
            None => (name, true),
        };
        let layout = match base {
            "forward" => Self::FORWARD,
            "dx" => Self::INPUT_GRADIENT,
            "dw" => Self::WEIGHT_GRADIENT,
            _ => {
                return Err(format!(
                    "unknown product layout `{name}`: expected forward, dx or dw, each with or without -ragged"
                ))
            }
        };
        Ok(ProductLayout { exact, ..layout })
    }
}

/// The CUDA C++ of the product kernel in `f32` for `tile`, `form`, `layout` and `triangle`
/// (rank 2; attention's products are batched over its heads, with the same loop), as CubeCL's
/// CUDA compiler writes it with fast math on (burn-cuda's options).
pub fn product_cuda_source(tile: ProductTile, form: ProductForm, layout: ProductLayout, triangle: Triangle) -> String {
    assert!(ProductTile::ALL.contains(&tile), "product tile {tile:?} is not one the kernel takes");
    let client = WgpuRuntime::client(&WgpuDevice::default());
    let settings =
        KernelSettings::default().cube_dim(CubeDim::new_1d(tile.units() as u32)).address_type(AddressType::U32);
    let mut launcher = KernelLauncher::<WgpuRuntime>::new(settings.clone());
    // The operands' sizes, strides and vector sizes are not compiled in from these handles
    // (the vector sizes are the kernel's arguments below): one element each will do.
    let [va, vb, vc] = layout.vectors;
    let arg = || {
        let handle = client.empty(4);
        // SAFETY: the kernel is defined, never launched, on these arguments.
        unsafe { TensorArg::<WgpuRuntime>::from_raw_parts(handle, [1, 1].into(), [1, 1].into()) }
    };
    type Operand = Tensor<Vector<f32, Const<4>>>;
    let a = <Operand as LaunchArg>::register(arg(), &mut launcher);
    let b = <Operand as LaunchArg>::register(arg(), &mut launcher);
    let c = <Operand as LaunchArg>::register(arg(), &mut launcher);
    // A scalar's compilation argument is `()`: its value is read at run time.
    <u32 as LaunchArg>::register(0u32, &mut launcher);
    let kernel = product_kernel::ProductKernel::<WgpuRuntime>::new(
        settings,
        client.clone(),
        a,
        b,
        c,
        (),
        va,
        vb,
        vc,
        0,
        layout.a_k_contiguous,
        layout.b_k_contiguous,
        tile.rows,
        tile.cols,
        tile.depth,
        tile.unit_cols,
        form.fma,
        form.paired_lanes,
        form.constant_offsets,
        form.inline_stores,
        // Whole tiles as a launch on `[256 × 256]·[256 × 256]` (every tile divides 256) finds them.
        super::product_launch::exact_tiles(
            layout.exact && super::product_launch::whole_tiles(256, 256, 256, tile, triangle),
            form,
        ),
        triangle.code().0,
        f32::as_type_native_unchecked().storage_type(),
    );
    cuda_source(kernel, ExecutionMode::Unchecked)
}

/// The CUDA C++ that CubeCL's CUDA compiler writes for `kernel` in `mode`, with fast math on
/// (burn-cuda's options) and 32-bit addresses.
pub(super) fn cuda_source<K: cubecl_runtime::kernel::CubeKernel>(kernel: K, mode: ExecutionMode) -> String {
    let options = CompilationOptions {
        supports_features: CppSupportedFeatures { fast_math: true, ..Default::default() },
        ..Default::default()
    };
    type Cuda = CppCompiler<CudaDialect<CudaWmmaCompiler>>;
    let task = KernelTask::<Cuda, _>::new(kernel);
    let compiled = task
        .compile(&mut Cuda::default(), &options, mode, AddressType::U32.unsigned_type())
        .expect("CubeCL's CUDA compiler takes our kernels");
    compiled.source
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_source_of_the_product_kernel_is_one_entry_point_of_the_tiles_units_in_the_form_asked() {
        let _turn = super::super::tests::serial();
        let full = Triangle::Full;
        let fused = product_cuda_source(ProductTile::HALF_ROWS, ProductForm::DEFAULT, ProductLayout::FORWARD, full);
        assert_eq!(fused.matches("__global__").count(), 1, "{fused}");
        assert!(fused.contains("__launch_bounds__(128)") && fused.contains("product_kernel"), "{fused}");
        assert!(fused.contains("fma("), "fma on writes fused multiply-adds");
        let unfused = ProductForm { fma: false, ..ProductForm::DEFAULT };
        let plain = product_cuda_source(ProductTile::DEFAULT, unfused, ProductLayout::WEIGHT_GRADIENT, full);
        assert!(plain.contains("__launch_bounds__(256)") && !plain.contains("fma("), "{plain}");
        // The layouts' vector sizes reach the kernel's name (`na`, `nb`, `nc`).
        assert!(fused.contains("na_1_nb_4_nc_4") && plain.contains("na_4_nb_4_nc_4"));
        let sums = ProductForm { constant_offsets: false, ..ProductForm::DEFAULT };
        let summed = product_cuda_source(ProductTile::HALF_ROWS, sums, ProductLayout::FORWARD, full);
        assert_ne!(summed, fused, "ATTEND_GPU_ADDRESSES reaches the kernel");
        let apart = ProductForm { inline_stores: false, ..ProductForm::DEFAULT };
        let stored_apart = product_cuda_source(ProductTile::HALF_ROWS, apart, ProductLayout::FORWARD, full);
        assert_ne!(stored_apart, fused, "ATTEND_GPU_STORES reaches the kernel");
        let lower = product_cuda_source(
            ProductTile::HALF_ROWS,
            ProductForm::DEFAULT,
            ProductLayout::FORWARD,
            Triangle::LowerA(0),
        );
        assert_ne!(lower, fused, "the triangle reaches the kernel");
    }

    #[test]
    fn product_layout_names_are_forward_dx_dw_and_anything_else_is_named_in_the_error() {
        assert_eq!(ProductLayout::parse("forward"), Ok(ProductLayout::FORWARD));
        assert_eq!(ProductLayout::parse("dx"), Ok(ProductLayout::INPUT_GRADIENT));
        assert_eq!(ProductLayout::parse("dw"), Ok(ProductLayout::WEIGHT_GRADIENT));
        let ragged = ProductLayout { exact: false, ..ProductLayout::INPUT_GRADIENT };
        assert_eq!(ProductLayout::parse("dx-ragged"), Ok(ragged));
        let error = ProductLayout::parse("backward").unwrap_err();
        assert!(error.contains("backward") && error.contains("forward, dx or dw"), "{error}");
    }
}
