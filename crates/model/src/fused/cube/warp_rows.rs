//! The launch shape of the row kernels that give each row of a `[rows, d]` matrix one warp
//! (attention's weights, [`super::attention_weights`]; LayerNorm, [`super::layer_norm`]): [`ROWS`]
//! rows a cube, [`UNITS`] units a row, each unit holding every 32nd vector of its row in
//! registers from one read to the writes ([`row_vectors`]), so that a row is read once and
//! all of a unit's reads are under way before the first is used.

use burn::tensor::TensorMetadata;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::ir::VectorSize;
use cubecl::prelude::*;

/// Units per row: one warp on NVIDIA, each unit every 32nd vector of the row (a warp's reads and
/// writes contiguous), the sums in five halvings. On lavapipe, with rows of 256 keys, training ran at
/// 1.19x the tokens/s this way than with a cube of 256 units and eight halvings (the older row
/// kernels' `row_launch`), which had put attention's weights 12% behind burn-fusion's composed form.
pub(super) const UNITS: usize = 32;

/// Rows per cube, a warp each. On an H200 attention's weights kernels with one row a cube took
/// 0.24 ms (forward) and 0.35 ms (backward) a layer of nanoGPT's `[64, 6, 256, 256]` scores,
/// about a third of the rate of memory: cubes of one warp fill at most half an SM's units (32
/// cubes of 32), and each is scheduled on its own.
pub(super) const ROWS: usize = 8;

/// The longest rows these kernels take: a unit holds at most 64 elements of each row it keeps in
/// registers (16 vectors of four, or 64 single elements; attention's backward and LayerNorm's
/// keep two such rows, `P` and `dP`, `x` and `dy`). Longer rows run another form (each kernel
/// says which).
pub(super) const MAX_ROW: usize = 64 * UNITS;

/// Cubes of [`ROWS`] rows of [`UNITS`] for the `[rows, d]` matrix `x`: one per [`ROWS`]
/// rows, the count spread over two axes where it passes one's limit.
pub(super) fn warp_rows<R: CubeRuntime>(x: &CubeTensor<R>) -> (CubeCount, CubeDim) {
    let dim = CubeDim::new_2d(UNITS as u32, ROWS as u32);
    let cubes = x.shape()[0].div_ceil(ROWS);
    (cubecl::calculate_cube_count_elemwise(&x.client, cubes * dim.num_elems() as usize, dim), dim)
}

/// How the kernels read a row of the `[rows, d]` matrix `x`: elements a vector at a time (4
/// where `d` is a multiple of 4 and the device reads four of `x`'s elements at once, else 1),
/// and the vectors each unit holds (at least one). Held in registers, a row is read once and
/// its reads all start before the first is used: on an H200 the form of attention's weights
/// that read each key three times, one at a time, ran at about a third of the rate of memory
/// (docs/benchmarks.md).
pub(super) fn row_vectors<R: CubeRuntime>(x: &CubeTensor<R>) -> (VectorSize, usize) {
    let d = x.shape()[1];
    let four = super::reads_four(x);
    let width = if four && d.is_multiple_of(4) { 4 } else { 1 };
    let chunks = d.div_ceil(UNITS * width).max(1);
    #[cfg(test)]
    {
        *LAST_ROWS.lock().unwrap() = Some((width, chunks));
    }
    (width, chunks)
}

/// `row_vectors`' last answer, which the kernels launched with (tests only).
#[cfg(test)]
pub(super) static LAST_ROWS: std::sync::Mutex<Option<(VectorSize, usize)>> = std::sync::Mutex::new(None);

/// This unit's row of the `rows`, and the elements it walks: `d`, or none past the last row
/// (whose units still meet the others at every synchronization).
#[cube]
pub(super) fn this_row(rows: usize, d: usize) -> (usize, usize) {
    let row = CUBE_POS * CUBE_DIM_Y as usize + UNIT_POS_Y as usize;
    let mut keys = d;
    let mut at = row;
    if row >= rows {
        keys = 0;
        at = 0;
    }
    (at, keys)
}
