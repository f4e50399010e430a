//! Matrix products of our own on CubeCL's backends, for the linear maps
//! (`ATTEND_GPU_MATMUL=attend`; [`crate::fused::products`] chooses): `C = A·B` over `[m, k]` ×
//! `[k, n]`, or a batch of them, with each operand read through its strides (a transposed view
//! costs no copy).
//!
//! The kernel is the classic register-blocked one: a cube of 256 units computes a 128 × 128
//! tile of `C`, each unit an 8 × 8 block of it in registers (64 accumulators, `f32` whatever
//! the tensors' type), walking `k` in steps of 8. Each step stages `A`'s 128 × 8 and `B`'s
//! 8 × 128 slices in shared memory (each unit loads four elements of each, in the order that
//! keeps a warp's reads of global memory side by side for either layout of the operand), and
//! the next step's elements are loaded into registers while this step multiplies. A unit's
//! rows are `ty + 16·i` and its columns `tx + 16·j`: its reads of shared memory are then
//! broadcasts or consecutive words (no bank conflicts), and its writes of `C` consecutive
//! columns across the warp. Why: on an H200 CubeCL's f32 products (its register-tile "unit"
//! matmuls, the only ones without tensor cores) ran at 12-17 TFLOP/s forward and 2.4-9.7 for the
//! weight gradients, against the 36 PyTorch's f32 step implies (docs/benchmarks.md).

use burn::tensor::{Shape, TensorMetadata};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::prelude::*;

use super::empty;

/// Rows (and columns) of `C` per cube.
const TILE: usize = 128;
/// The step along `k`.
const DEPTH: usize = 8;
/// Rows (and columns) of `C` per unit.
const PER_UNIT: usize = 8;
/// Units along a side of the tile (`TILE / PER_UNIT`).
const SIDE: usize = 16;
/// Units per cube (`SIDE²`).
const UNITS: u32 = 256;
/// A staged row of shared memory: `TILE` words and 4 of padding, so that the loads of one
/// warp (8 steps of `k` × 4 rows, when `k` is the operand's contiguous axis) fall in 32
/// different banks.
const STAGE_ROW: usize = TILE + 4;

/// Element `(r, k)` of an operand at `base` with strides `rs`, `ks`, or 0 outside `rows` × `depth`.
#[cube]
#[allow(clippy::too_many_arguments)]
fn load<F: Float>(
    x: &Tensor<F>,
    base: usize,
    r: usize,
    k: usize,
    rows: usize,
    depth: usize,
    rs: usize,
    ks: usize,
) -> f32 {
    let mut value = 0.0f32;
    if r < rows && k < depth {
        value = f32::cast_from(x[base + r * rs + k * ks]);
    }
    value
}

/// Loads this unit's four elements of the `DEPTH × TILE` slice of an operand at step `k0`
/// (its rows `r0..r0 + TILE` along the tile's side): into `staged[j]`, with their place in
/// the stage in `places[j]`. `k_contiguous`: the operand's `k` axis has stride 1 (then 8
/// consecutive units read 8 consecutive `k` of one row), else its row axis has.
#[cube]
#[allow(clippy::too_many_arguments)]
fn fetch<F: Float>(
    x: &Tensor<F>,
    base: usize,
    r0: usize,
    k0: usize,
    rows: usize,
    depth: usize,
    rs: usize,
    ks: usize,
    staged: &mut Array<f32>,
    places: &mut Array<u32>,
    #[comptime] k_contiguous: bool,
) {
    let unit = UNIT_POS_X as usize;
    #[unroll]
    for j in 0..4usize {
        let mut r = unit % TILE;
        let mut k = unit / TILE + j * 2;
        if comptime![k_contiguous] {
            r = unit / DEPTH + j * (TILE / 4);
            k = unit % DEPTH;
        }
        staged[j] = load::<F>(x, base, r0 + r, k0 + k, rows, depth, rs, ks);
        places[j] = (k * STAGE_ROW + r) as u32;
    }
}

/// `c = a·b`, batched along `CUBE_POS_Z` when `batched` (rank 3; an operand with one matrix
/// is shared by the batch), over `[m, k]`, `[k, n]`, `[m, n]` otherwise.
#[cube(launch)]
pub fn product_kernel<F: Float>(
    a: &Tensor<F>,
    b: &Tensor<F>,
    c: &mut Tensor<F>,
    #[comptime] batched: bool,
    #[comptime] a_k_contiguous: bool,
    #[comptime] b_k_contiguous: bool,
    #[define(F)] _dtype: StorageType,
) {
    let axis = comptime![if batched { 1usize } else { 0usize }];
    let next = comptime![axis + 1];
    let mut a_base = 0usize;
    let mut b_base = 0usize;
    let mut c_base = 0usize;
    if comptime![batched] {
        let batch = CUBE_POS_Z as usize;
        if a.shape(0) > 1usize {
            a_base = batch * a.stride(0);
        }
        if b.shape(0) > 1usize {
            b_base = batch * b.stride(0);
        }
        c_base = batch * c.stride(0);
    }
    let m = c.shape(axis);
    let n = c.shape(next);
    let depth = a.shape(next);
    // `A` is read as rows of `m` along `k`; `B` as rows of `n` along `k` (its transpose).
    let (a_rs, a_ks) = (a.stride(axis), a.stride(next));
    let (b_rs, b_ks) = (b.stride(next), b.stride(axis));
    let row0 = CUBE_POS_Y as usize * TILE;
    let col0 = CUBE_POS_X as usize * TILE;
    let unit = UNIT_POS_X as usize;
    let ty = unit / SIDE;
    let tx = unit % SIDE;

    let mut stage_a = SharedMemory::<f32>::new(DEPTH * STAGE_ROW);
    let mut stage_b = SharedMemory::<f32>::new(DEPTH * STAGE_ROW);
    let mut acc = Array::<f32>::new(PER_UNIT * PER_UNIT);
    #[unroll]
    for i in 0usize..PER_UNIT * PER_UNIT {
        acc[i] = 0.0f32;
    }
    let mut col_a = Array::<f32>::new(PER_UNIT);
    let mut row_b = Array::<f32>::new(PER_UNIT);
    let mut next_a = Array::<f32>::new(4usize);
    let mut next_b = Array::<f32>::new(4usize);
    let mut at_a = Array::<u32>::new(4usize);
    let mut at_b = Array::<u32>::new(4usize);

    fetch::<F>(a, a_base, row0, 0usize, m, depth, a_rs, a_ks, &mut next_a, &mut at_a, a_k_contiguous);
    fetch::<F>(b, b_base, col0, 0usize, n, depth, b_rs, b_ks, &mut next_b, &mut at_b, b_k_contiguous);
    let mut k0 = 0usize;
    while k0 < depth {
        #[unroll]
        for j in 0..4usize {
            stage_a[at_a[j] as usize] = next_a[j];
            stage_b[at_b[j] as usize] = next_b[j];
        }
        sync_cube();
        // The next step's elements travel while this step multiplies (zeros past the end).
        fetch::<F>(a, a_base, row0, k0 + DEPTH, m, depth, a_rs, a_ks, &mut next_a, &mut at_a, a_k_contiguous);
        fetch::<F>(b, b_base, col0, k0 + DEPTH, n, depth, b_rs, b_ks, &mut next_b, &mut at_b, b_k_contiguous);
        #[unroll]
        for k in 0usize..DEPTH {
            #[unroll]
            for i in 0usize..PER_UNIT {
                col_a[i] = stage_a[k * STAGE_ROW + ty + SIDE * i];
                row_b[i] = stage_b[k * STAGE_ROW + tx + SIDE * i];
            }
            #[unroll]
            for i in 0usize..PER_UNIT {
                #[unroll]
                for j in 0usize..PER_UNIT {
                    acc[i * PER_UNIT + j] += col_a[i] * row_b[j];
                }
            }
        }
        sync_cube();
        k0 += DEPTH;
    }

    let (c_rs, c_cs) = (c.stride(axis), c.stride(next));
    #[unroll]
    for i in 0usize..PER_UNIT {
        let row = row0 + ty + SIDE * i;
        #[unroll]
        for j in 0usize..PER_UNIT {
            let col = col0 + tx + SIDE * j;
            if row < m && col < n {
                c[c_base + row * c_rs + col * c_cs] = F::cast_from(acc[i * PER_UNIT + j]);
            }
        }
    }
}

/// Whether `x`'s last axis (`true`) or the one before it (`false`) has stride 1, or `None`
/// (neither: the operand is copied first).
fn unit_axis<R: CubeRuntime>(x: &CubeTensor<R>) -> Option<bool> {
    let strides = x.meta.strides();
    let rank = strides.len();
    if strides[rank - 1] == 1 {
        Some(true)
    } else if strides[rank - 2] == 1 {
        Some(false)
    } else {
        None
    }
}

/// `a·b` by [`product_kernel`]: `[m, k]·[k, n]`, or `[s, m, k]·[s, k, n]` (either operand may
/// have one matrix for the batch); operands in the same float type.
pub(super) fn product<R: CubeRuntime>(a: CubeTensor<R>, b: CubeTensor<R>) -> CubeTensor<R> {
    let (a, a_k) = contiguous_along_one_axis(a);
    let (b, b_n) = contiguous_along_one_axis(b);
    let (sa, sb) = (a.shape(), b.shape());
    let rank = sa.num_dims();
    assert!(rank == sb.num_dims() && (rank == 2 || rank == 3), "product of ranks {sa:?} and {sb:?}");
    let (m, n) = (sa[rank - 2], sb[rank - 1]);
    let batch = if rank == 3 { sa[0].max(sb[0]) } else { 1 };
    let out = empty(&a, if rank == 3 { Shape::new([batch, m, n]) } else { Shape::new([m, n]) });
    let count = CubeCount::Static(n.div_ceil(TILE) as u32, m.div_ceil(TILE) as u32, batch as u32);
    let dtype = a.dtype.into();
    product_kernel::launch::<R>(
        &a.client.clone(),
        count,
        CubeDim::new_1d(UNITS),
        a.into_tensor_arg(),
        b.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        rank == 3,
        a_k,
        // `B`'s `k` is its second-last axis: contiguous when its last axis is not.
        !b_n,
        dtype,
    );
    out
}

/// `x` (copied if neither of its last two axes has stride 1), and whether its last axis is the
/// one with stride 1.
fn contiguous_along_one_axis<R: CubeRuntime>(x: CubeTensor<R>) -> (CubeTensor<R>, bool) {
    match unit_axis(&x) {
        Some(last) => (x, last),
        None => (into_contiguous(x), true),
    }
}
