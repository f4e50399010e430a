//! The squared norm of many tensors (`fused/norm.rs`) in CubeCL: one launch per tensor writes
//! the partial sums of its squares, one per cube (each unit with several vectors of four
//! elements in flight at once), into a shared `f32` buffer; one more launch,
//! a single cube, adds the partial sums. All launches belong to one operation, so burn-fusion
//! hands one operation to the device's threads where the composed form hands about three per
//! tensor.

use burn::tensor::{DType, Shape, TensorMetadata};
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::ir::VectorSize;
use cubecl::prelude::*;

use super::kernels::cube_sum;

/// Units per cube of both kernels (a power of two, as [`cube_sum`] needs).
const UNITS: usize = 256;

/// The most cubes one tensor's squares are spread over: enough for every unit of a large GPU to
/// read a few vectors of a matrix of nanoGPT's at once, few enough that the final sum is one
/// short pass.
const MAX_CUBES: usize = 1024;

/// The vectors each unit reads at once, [`UNITS`] apart, all under way before the first is
/// squared. On an H200 the form that read one element at a time with at most 64 cubes a
/// tensor took 21 µs for nanoGPT's MLP weights (2.4 MB, 0.5 µs at the rate of memory):
/// a unit's reads waited on each other (docs/benchmarks.md).
const READS: usize = 4;

/// Cube `c` of `cubes` writes `Σ x[i]²` over its share of `x` (read `N` elements at a time:
/// rounds of [`READS`] runs of `units` vectors, every `cubes`-th round from `c`'s) to
/// `partials[offset + c]`.
#[cube(launch_unchecked)]
fn squares_partial<F: Float, N: Size>(
    x: &Tensor<Vector<F, N>>,
    partials: &mut Tensor<f32>,
    offset: u32,
    #[comptime] units: usize,
    #[define(F)] _dtype: StorageType,
) {
    let width = comptime![x.vector_size()];
    let n = x.len();
    let round = CUBE_COUNT * units * READS;
    let mut start = CUBE_POS * units * READS + UNIT_POS_X as usize;
    let mut squares = Vector::<f32, N>::new(0.0);
    while start < n {
        let mut read = Array::<Vector<f32, N>>::new(READS);
        #[unroll]
        for r in 0..READS {
            let i = start + r * units;
            let mut value = Vector::<f32, N>::new(0.0);
            if i < n {
                value = Vector::cast_from(x[i]);
            }
            read[r] = value;
        }
        #[unroll]
        for r in 0..READS {
            squares += read[r] * read[r];
        }
        start += round;
    }
    let mut sum = 0.0f32;
    #[unroll]
    for i in 0..width {
        sum += squares[i];
    }
    let mut shared = SharedMemory::<f32>::new(units);
    let total = cube_sum(sum, &mut shared);
    if UNIT_POS_X == 0 {
        partials[offset as usize + CUBE_POS] = total;
    }
}

/// One cube: `out[0] = Σ partials`.
#[cube(launch_unchecked)]
fn sum_partials<F: Float>(
    partials: &Tensor<f32>,
    out: &mut Tensor<F>,
    #[comptime] units: usize,
    #[define(F)] _dtype: StorageType,
) {
    let n = partials.len();
    let mut i = UNIT_POS_X as usize;
    let mut sum = 0.0f32;
    while i < n {
        sum += partials[i];
        i += units;
    }
    let mut shared = SharedMemory::<f32>::new(units);
    let total = cube_sum(sum, &mut shared);
    if UNIT_POS_X == 0 {
        out[0] = F::cast_from(total);
    }
}

/// How `x` is read (4 elements at a time where its length is a multiple of 4 and the device
/// reads four at once, else 1) and over how many cubes.
fn plan<R: CubeRuntime>(x: &CubeTensor<R>) -> (VectorSize, usize) {
    let n = x.shape().num_elements();
    let four = super::reads_four(x);
    let width = if four && n.is_multiple_of(4) { 4 } else { 1 };
    #[cfg(test)]
    WIDTHS.lock().unwrap().push(width);
    (width, (n / width).div_ceil(UNITS * READS).clamp(1, MAX_CUBES))
}

/// The widths `plan` chose, in order (tests only).
#[cfg(test)]
pub(super) static WIDTHS: std::sync::Mutex<Vec<VectorSize>> = std::sync::Mutex::new(Vec::new());

/// `Σₜ Σᵢ tᵢ²` over contiguous `tensors` (at least one), `[1]` in the first tensor's float
/// type; the sums are kept in `f32`.
pub(super) fn squared_norm<R: CubeRuntime>(tensors: Vec<CubeTensor<R>>) -> CubeTensor<R> {
    let first = &tensors[0];
    let (client, device, dtype) = (first.client.clone(), first.device.clone(), first.dtype);
    let total: usize = tensors.iter().map(|t| plan(t).1).sum();
    let partials = empty_device_contiguous_dtype(client.clone(), device.clone(), Shape::new([total]), DType::F32);
    let dim = CubeDim::new_1d(UNITS as u32);
    let mut offset = 0;
    for t in tensors {
        let (width, count) = plan(&t);
        let t_dtype = t.dtype.into();
        // SAFETY: each read is guarded by `x.len()` (`i < n`), and `partials` holds an entry for
        // every cube of every tensor (`offset + CUBE_POS` below `total`).
        unsafe {
            squares_partial::launch_unchecked::<R>(
                &client,
                CubeCount::Static(count as u32, 1, 1),
                dim,
                width,
                t.into_tensor_arg(),
                partials.clone().into_tensor_arg(),
                offset as u32,
                UNITS,
                t_dtype,
            );
        }
        offset += count;
    }
    let out = empty_device_contiguous_dtype(client.clone(), device, Shape::new([1]), dtype);
    // SAFETY: one cube walks the partials below their length and writes `out[0]`.
    unsafe {
        sum_partials::launch_unchecked::<R>(
            &client,
            CubeCount::Static(1, 1, 1),
            dim,
            partials.into_tensor_arg(),
            out.clone().into_tensor_arg(),
            UNITS,
            dtype.into(),
        );
    }
    out
}
