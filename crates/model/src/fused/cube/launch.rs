//! What the CubeCL kernels' launches share: the grid of a row kernel (a cube a row) and of an
//! element-wise one, whether the device reads four elements at once, and the operands'
//! preparation (a contiguous `[rows, d]` view, one float type, an unwritten output, the
//! attention mask expanded).
//!
//! **Every kernel of ours is launched unchecked** (`launch_unchecked`), as Burn's own are:
//! CubeCL's checked mode (`launch`) bounds every read and write of a tensor by its buffer's
//! length again (a clamped index and a select a read, a branch a write), besides the kernel's
//! own guards. Counted in NVRTC's SASS for an H200 (`scripts/kernel_sass.sh row_source`),
//! checking took attention's weights kernels from 776 to 824 instructions forward and from 312
//! to 384 backward, with a spill (docs/benchmarks.md, "Our row kernels launched unchecked").
//! So each kernel guards its own indices (past the last row or element it stops or reads
//! nothing), and each launch says under `SAFETY` which guards and shapes keep it in bounds.

use burn::tensor::{Shape, TensorMetadata};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};
use cubecl::prelude::*;

/// The most units per cube of the row kernels; a row of `d` takes the power of two at or above
/// `d` up to this, and at least [`MIN_ROW_UNITS`] (the shared-memory reductions halve it).
const MAX_ROW_UNITS: usize = 256;

/// The fewest units per cube of the row kernels (one warp on NVIDIA).
const MIN_ROW_UNITS: usize = 32;

/// Units per cube of the element-wise kernels.
const ELEMENT_UNITS: u32 = 256;

/// `x` as a contiguous `[rows, last]` matrix, with the shape it had.
pub(super) fn as_rows<R: CubeRuntime>(x: CubeTensor<R>) -> (CubeTensor<R>, Shape) {
    let shape = x.shape();
    let last = shape[shape.num_dims() - 1];
    let rows = shape.num_elements() / last.max(1);
    (burn_cubecl::ops::reshape(into_contiguous(x), Shape::new([rows, last])), shape)
}

/// `t` in `like`'s float type (the kernels read every operand as the first one's type; a
/// model in one precision passes them alike, and this cast is then no work).
pub(super) fn alike<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement>(
    t: CubeTensor<R>,
    like: &CubeTensor<R>,
) -> CubeTensor<R> {
    use burn::tensor::ops::FloatTensorOps;
    if t.dtype == like.dtype {
        t
    } else {
        CubeBackend::<R, F, I, BT>::float_cast(t, like.dtype.into())
    }
}

/// An unwritten contiguous tensor like `like` in `shape`.
pub(super) fn empty<R: CubeRuntime>(like: &CubeTensor<R>, shape: Shape) -> CubeTensor<R> {
    empty_device_contiguous_dtype(like.client.clone(), like.device.clone(), shape, like.dtype)
}

/// `mask` expanded to the shape of `like` (attention's `[batch, heads, queries, keys]`).
pub(super) fn expanded_mask<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement>(
    mask: CubeTensor<R>,
    like: &CubeTensor<R>,
) -> CubeTensor<R> {
    use burn::tensor::ops::BoolTensorOps;
    CubeBackend::<R, F, I, BT>::bool_expand(mask, like.shape())
}

/// One cube per row of a `[rows, d]` matrix: the cubes, their units, and that number of units.
pub(super) fn row_launch<R: CubeRuntime>(x: &CubeTensor<R>) -> (CubeCount, CubeDim, usize) {
    let [rows, d] = x.shape().dims::<2>();
    let units = d.next_power_of_two().clamp(MIN_ROW_UNITS, MAX_ROW_UNITS);
    let dim = CubeDim::new_1d(units as u32);
    (cubecl::calculate_cube_count_elemwise(&x.client, rows * units, dim), dim, units)
}

/// Whether the device reads four of `x`'s elements at once (one 128-bit read in `f32`): the
/// kernels that read vectors of four take them only where it does.
pub(super) fn reads_four<R: CubeRuntime>(x: &CubeTensor<R>) -> bool {
    x.client.io_optimized_vector_sizes(x.dtype.size()).any(|size| size == 4)
}

/// One unit per element of `x`.
pub(super) fn element_launch<R: CubeRuntime>(x: &CubeTensor<R>) -> (CubeCount, CubeDim) {
    let dim = CubeDim::new_1d(ELEMENT_UNITS);
    (cubecl::calculate_cube_count_elemwise(&x.client, x.shape().num_elements(), dim), dim)
}
