//! The squared norm of many tensors (`fused/norm.rs`) in CubeCL: one launch per tensor writes
//! the partial sums of its squares, one per cube, into a shared `f32` buffer; one more launch,
//! a single cube, adds the partial sums. All launches belong to one operation, so burn-fusion
//! hands one operation to the device's threads where the composed form hands about three per
//! tensor.

use burn::tensor::{DType, Shape, TensorMetadata};
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::prelude::*;

use super::kernels::cube_sum;

/// Units per cube of both kernels (a power of two, as [`cube_sum`] needs).
const UNITS: usize = 256;

/// The most cubes one tensor's squares are spread over: enough to fill a large GPU with a
/// matrix of nanoGPT's, few enough that the final sum is one short pass.
const MAX_CUBES: usize = 64;

/// Cube `c` of `cubes` writes `Σ x[i]²` over its share of `x` (every `cubes·units`-th run of
/// `units` elements from `c·units`) to `partials[offset + c]`.
#[cube(launch)]
fn squares_partial<F: Float>(
    x: &Tensor<F>,
    partials: &mut Tensor<f32>,
    offset: u32,
    #[comptime] units: usize,
    #[define(F)] _dtype: StorageType,
) {
    let n = x.len();
    let stride = CUBE_COUNT * units;
    let mut i = CUBE_POS * units + UNIT_POS_X as usize;
    let mut sum = 0.0f32;
    while i < n {
        let v = f32::cast_from(x[i]);
        sum += v * v;
        i += stride;
    }
    let mut shared = SharedMemory::<f32>::new(units);
    let total = cube_sum(sum, &mut shared);
    if UNIT_POS_X == 0 {
        partials[offset as usize + CUBE_POS] = total;
    }
}

/// One cube: `out[0] = Σ partials`.
#[cube(launch)]
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

/// The cubes that sum the squares of `n` elements.
fn cubes(n: usize) -> usize {
    n.div_ceil(UNITS).clamp(1, MAX_CUBES)
}

/// `Σₜ Σᵢ tᵢ²` over contiguous `tensors` (at least one), `[1]` in the first tensor's float
/// type; the sums are kept in `f32`.
pub(super) fn squared_norm<R: CubeRuntime>(tensors: Vec<CubeTensor<R>>) -> CubeTensor<R> {
    let first = &tensors[0];
    let (client, device, dtype) = (first.client.clone(), first.device.clone(), first.dtype);
    let total: usize = tensors.iter().map(|t| cubes(t.shape().num_elements())).sum();
    let partials = empty_device_contiguous_dtype(client.clone(), device.clone(), Shape::new([total]), DType::F32);
    let dim = CubeDim::new_1d(UNITS as u32);
    let mut offset = 0;
    for t in tensors {
        let count = cubes(t.shape().num_elements());
        let t_dtype = t.dtype.into();
        squares_partial::launch::<R>(
            &client,
            CubeCount::Static(count as u32, 1, 1),
            dim,
            t.into_tensor_arg(),
            partials.clone().into_tensor_arg(),
            offset as u32,
            UNITS,
            t_dtype,
        );
        offset += count;
    }
    let out = empty_device_contiguous_dtype(client.clone(), device, Shape::new([1]), dtype);
    sum_partials::launch::<R>(
        &client,
        CubeCount::Static(1, 1, 1),
        dim,
        partials.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        UNITS,
        dtype.into(),
    );
    out
}
