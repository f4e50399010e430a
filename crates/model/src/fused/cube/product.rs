//! Matrix products of our own on CubeCL's backends, for the linear maps and attention
//! (`ATTEND_GPU_MATMUL`, the default on wgpu; [`crate::fused::products`] chooses): `C = A·B` over `[m, k]` ×
//! `[k, n]`, or a batch of them, with each operand read through its strides (a transposed view
//! costs no copy).
//!
//! The kernel is the classic register-blocked one with vectorized shared memory: a cube of 256
//! units computes a 128 × 128 tile of `C`, each unit an 8 × 8 block of it in registers (64
//! accumulators as 16 four-wide vectors, `f32` whatever the tensors' type), walking `k` in steps
//! of 8. `A`'s 128 × 8 and `B`'s 8 × 128 slices are staged in shared memory as rows of
//! four-wide vectors along the tile's side (each unit loads four neighbouring rows at one `k`
//! and stores them as one vector: where `k` is the operand's contiguous axis, 8 consecutive
//! units read 8 consecutive words; where its rows are, each of a warp's four loads reads every
//! fourth word of 128 consecutive rows, which the four together cover), in two stages: while a step multiplies out of
//! one, the next step's elements are loaded into registers and then stored into the other, one
//! synchronization a step. A unit's rows are `4·ty + 64·h + i` and its columns `4·tx + 64·g +
//! j` (`h, g ∈ {0, 1}`, `i, j < 4`), a warp's units 4 `ty` by 8 `tx`: each step along `k` reads
//! two vectors of `A` and two of `B`, four 128-bit reads of shared memory (each 64 or 128
//! distinct bytes across the warp) for 64 multiply-adds, where the first form of this kernel
//! (scalar reads, two synchronizations a step) took sixteen. An operand whose rows are
//! contiguous (`B` = `W` in the forward, both operands of a weight gradient) is read from
//! global memory as vectors of four rows, one 128-bit read where four were, and `C` is written
//! four columns at a time, where the sizes allow ([`vectors_of_four_rows`]).
//!
//! Why: on an H200 CubeCL's f32 products (its register-tile "unit" matmuls, the only ones
//! without tensor cores) ran at 12-17 TFLOP/s forward and 2.4-9.7 for the weight gradients,
//! against the 36 PyTorch's f32 step implies, and the first form reached 17.3 at best; this
//! form reached 36 in training (the MLP's forward products) and took nanoGPT's GPU step from
//! 92.4 to 53.9 ms (docs/benchmarks.md, "Our product kernel on the H200").

use burn::tensor::{Shape, TensorMetadata};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::ir::VectorSize;
use cubecl::prelude::*;

use super::empty;

/// Four `f32` side by side: a row of shared memory's unit, and a quarter of a unit's rows.
type Four = Vector<f32, Const<4>>;

/// Rows (and columns) of `C` per cube.
const TILE: usize = 128;
/// The step along `k`.
const DEPTH: usize = 8;
/// Units along a side of the tile: each takes 8 of its rows (columns), as two groups of 4.
const SIDE: usize = 16;
/// Units per cube (`SIDE²`).
const UNITS: u32 = 256;
/// A staged row of shared memory in vectors: the tile's `TILE / 4` and one of padding. An odd
/// count puts the eight `k` of one row group that eight consecutive units store (when `k` is
/// the operand's contiguous axis) in eight different groups of four banks.
const STAGE_ROW: usize = TILE / 4 + 1;
/// One stage of an operand: `DEPTH` rows.
const STAGE: usize = DEPTH * STAGE_ROW;

/// Element `(r, k)` of an operand at `base` with strides `rs`, `ks`, or 0 outside `rows` × `depth`
/// (an operand read one element at a time: `N` is 1).
#[cube]
#[allow(clippy::too_many_arguments)]
fn load<F: Float, N: Size>(
    x: &Tensor<Vector<F, N>>,
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
        value = f32::cast_from(x[base + r * rs + k * ks][0]);
    }
    value
}

/// This unit's row group and `k` within a `DEPTH × TILE` slice of an operand:
/// `k_contiguous` (the operand's `k` axis has stride 1): 8 consecutive units read 8
/// consecutive `k` of one row; else 32 consecutive units read 128 consecutive rows at one `k`
/// (four each: a load instruction of the warp reads every fourth word, the four of them all).
#[cube]
fn place(#[comptime] k_contiguous: bool) -> (usize, usize) {
    let unit = UNIT_POS_X as usize;
    let mut group = unit % (TILE / 4);
    let mut k = unit / (TILE / 4);
    if comptime![k_contiguous] {
        group = unit / DEPTH;
        k = unit % DEPTH;
    }
    (group, k)
}

/// This unit's four rows `r0 + 4·group ..` of an operand at `k0 + k`, as one vector: one
/// 128-bit read where the operand comes in vectors of four rows (its rows contiguous, their
/// count and every other stride multiples of 4: [`vectors_of_four_rows`]), else four reads.
#[cube]
#[allow(clippy::too_many_arguments)]
fn fetch<F: Float, N: Size>(
    x: &Tensor<Vector<F, N>>,
    base: usize,
    r0: usize,
    k0: usize,
    rows: usize,
    depth: usize,
    rs: usize,
    ks: usize,
    group: usize,
    k: usize,
) -> Four {
    let mut four = Four::zeroed();
    let r = r0 + 4 * group;
    // The host passes 1 or 4 (`vectors_of_four_rows`); any other size would index wrongly.
    comptime![assert!(x.vector_size() == 1 || x.vector_size() == 4)];
    if comptime![x.vector_size() == 4] {
        // `rows` is a multiple of 4: the vector is wholly inside or wholly outside.
        if r < rows && k0 + k < depth {
            four = Four::cast_from(x[(base + r + (k0 + k) * ks) / 4]);
        }
    } else {
        #[unroll]
        for i in 0..4usize {
            four[i] = load::<F, N>(x, base, r + i, k0 + k, rows, depth, rs, ks);
        }
    }
    four
}

/// `c = a·b` over `[m, k]`, `[k, n]`, `[m, n]`, batched along `CUBE_POS_Z` over the
/// `batch_axes` (0, 1 or 2) axes before those: rank 3 (a batch of matrices) or rank 4 (the
/// batch and the heads of attention's products, `CUBE_POS_Z` = `batch · heads + head`). An
/// operand with one entry along a batch axis is shared along it.
#[cube(launch_unchecked)]
pub fn product_kernel<F: Float, NA: Size, NB: Size, NC: Size>(
    a: &Tensor<Vector<F, NA>>,
    b: &Tensor<Vector<F, NB>>,
    c: &mut Tensor<Vector<F, NC>>,
    #[comptime] batch_axes: usize,
    #[comptime] a_k_contiguous: bool,
    #[comptime] b_k_contiguous: bool,
    #[define(F)] _dtype: StorageType,
) {
    comptime![assert!(batch_axes <= 2)];
    let axis = comptime![batch_axes];
    let next = comptime![axis + 1];
    let mut a_base = 0usize;
    let mut b_base = 0usize;
    let mut c_base = 0usize;
    if comptime![batch_axes >= 1] {
        let z = CUBE_POS_Z as usize;
        // The position along each batch axis: `z` itself with one, `(z / H, z % H)` with two.
        let mut outer = z;
        if comptime![batch_axes == 2] {
            let inner = z % c.shape(1);
            outer = z / c.shape(1);
            if a.shape(1) > 1usize {
                a_base += inner * a.stride(1);
            }
            if b.shape(1) > 1usize {
                b_base += inner * b.stride(1);
            }
            c_base += inner * c.stride(1);
        }
        if a.shape(0) > 1usize {
            a_base += outer * a.stride(0);
        }
        if b.shape(0) > 1usize {
            b_base += outer * b.stride(0);
        }
        c_base += outer * c.stride(0);
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
    // A warp (32 units) takes 4 `ty` by 8 `tx`: its reads of a step's two vectors of `A` are
    // 4 distinct words of 16 bytes (64 bytes), of `B` 8 (128 bytes), one pass of shared
    // memory's 128 bytes each, where 2 × 16 would take one and two.
    let (warp, lane) = (unit / 32, unit % 32);
    let ty = (warp / 2) * 4 + lane / 8;
    let tx = (warp % 2) * 8 + lane % 8;

    // Two stages of each operand: a step multiplies out of one while the next step's slice is
    // stored into the other, so one synchronization a step suffices.
    let mut stage_a = SharedMemory::<Four>::new(2 * STAGE);
    let mut stage_b = SharedMemory::<Four>::new(2 * STAGE);
    // acc[(4·h + i)·2 + g]: row `4·ty + 64·h + i`, columns `4·tx + 64·g ..`.
    let mut acc = Array::<Four>::new(16usize);
    #[unroll]
    for i in 0usize..16 {
        acc[i] = Four::zeroed();
    }
    let (a_group, a_k) = place(a_k_contiguous);
    let (b_group, b_k) = place(b_k_contiguous);
    let a_at = a_k * STAGE_ROW + a_group;
    let b_at = b_k * STAGE_ROW + b_group;

    stage_a[a_at] = fetch::<F, NA>(a, a_base, row0, 0usize, m, depth, a_rs, a_ks, a_group, a_k);
    stage_b[b_at] = fetch::<F, NB>(b, b_base, col0, 0usize, n, depth, b_rs, b_ks, b_group, b_k);
    sync_cube();
    let mut this = 0usize;
    let mut k0 = 0usize;
    while k0 < depth {
        // The next step's elements travel while this step multiplies (zeros past the end).
        let next_a = fetch::<F, NA>(a, a_base, row0, k0 + DEPTH, m, depth, a_rs, a_ks, a_group, a_k);
        let next_b = fetch::<F, NB>(b, b_base, col0, k0 + DEPTH, n, depth, b_rs, b_ks, b_group, b_k);
        #[unroll]
        for k in 0usize..DEPTH {
            let at = this + k * STAGE_ROW;
            let a0 = stage_a[at + ty];
            let a1 = stage_a[at + SIDE + ty];
            let b0 = stage_b[at + tx];
            let b1 = stage_b[at + SIDE + tx];
            #[unroll]
            for i in 0usize..4 {
                let (x0, x1) = (Four::new(a0[i]), Four::new(a1[i]));
                acc[i * 2] += x0 * b0;
                acc[i * 2 + 1] += x0 * b1;
                acc[(4 + i) * 2] += x1 * b0;
                acc[(4 + i) * 2 + 1] += x1 * b1;
            }
        }
        // The other stage was last read before the previous synchronization.
        let other = STAGE - this;
        stage_a[other + a_at] = next_a;
        stage_b[other + b_at] = next_b;
        sync_cube();
        this = other;
        k0 += DEPTH;
    }

    let (c_rs, c_cs) = (c.stride(axis), c.stride(next));
    #[unroll]
    for h in 0usize..2 {
        #[unroll]
        for i in 0usize..4 {
            let row = row0 + TILE / 2 * h + 4 * ty + i;
            #[unroll]
            for g in 0usize..2 {
                let four = acc[(4 * h + i) * 2 + g];
                let col = col0 + TILE / 2 * g + 4 * tx;
                comptime![assert!(c.vector_size() == 1 || c.vector_size() == 4)];
                if comptime![c.vector_size() == 4] {
                    // `n` is a multiple of 4 and `c`'s rows are contiguous: one 128-bit write.
                    if row < m && col < n {
                        c[(c_base + row * c_rs + col) / 4] = Vector::cast_from(four);
                    }
                } else {
                    #[unroll]
                    for j in 0usize..4 {
                        if row < m && col + j < n {
                            c[c_base + row * c_rs + (col + j) * c_cs] = Vector::new(F::cast_from(four[j]));
                        }
                    }
                }
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

/// `a·b` by [`product_kernel`]: `[m, k]·[k, n]`, `[s, m, k]·[s, k, n]` or `[s, h, m, k]·[s, h,
/// k, n]` (either operand may have one entry along a batch axis); operands in the same float
/// type.
pub(super) fn product<R: CubeRuntime>(a: CubeTensor<R>, b: CubeTensor<R>) -> CubeTensor<R> {
    let (a, a_k) = contiguous_along_one_axis(a);
    let (b, b_n) = contiguous_along_one_axis(b);
    let (sa, sb) = (a.shape(), b.shape());
    let rank = sa.num_dims();
    assert!(rank == sb.num_dims() && (2..=4).contains(&rank), "product of ranks {sa:?} and {sb:?}");
    // The kernel's reads stay inside the operands only for matching shapes.
    assert_eq!(sa[rank - 1], sb[rank - 2], "product of {sa:?} and {sb:?}: inner sizes differ");
    let batch_dims: Vec<usize> = (0..rank - 2)
        .map(|i| {
            assert!(sa[i] == sb[i] || sa[i] == 1 || sb[i] == 1, "product of {sa:?} and {sb:?}: batches differ");
            sa[i].max(sb[i])
        })
        .collect();
    let (m, n) = (sa[rank - 2], sb[rank - 1]);
    let batch: usize = batch_dims.iter().product();
    let out = empty(&a, Shape::from([batch_dims, vec![m, n]].concat()));
    let count = CubeCount::Static(n.div_ceil(TILE) as u32, m.div_ceil(TILE) as u32, batch as u32);
    let dtype = a.dtype.into();
    // `A`'s rows are its second-last axis, `B`'s and `C`'s columns their last.
    let (va, vb, vc) =
        (vectors_of_four_rows(&a, false), vectors_of_four_rows(&b, true), vectors_of_four_rows(&out, true));
    #[cfg(test)]
    VECTORS.fetch_add([va, vb, vc].iter().filter(|&&v| v == 4).count(), std::sync::atomic::Ordering::Relaxed);
    // SAFETY: every read of an operand is guarded by its rows and depth, every write of `out`
    // by its rows and columns (`load`, the final loop), the shapes match (asserted above) and
    // the position along each batch axis is below `out`'s size there and each operand's (or
    // the operand has one entry there: `CUBE_POS_Z` counts `out`'s batch entries); shared memory is indexed below its size (`2·STAGE`); the loop over `k` ends. A
    // vector of four is read or written only where `vectors_of_four_rows` found the rows
    // contiguous and every offset a multiple of four, so that it starts at a multiple of four
    // and lies wholly inside or wholly outside the guarded rows and columns.
    unsafe {
        product_kernel::launch_unchecked::<R>(
            &a.client.clone(),
            count,
            CubeDim::new_1d(UNITS),
            va,
            vb,
            vc,
            a.into_tensor_arg(),
            b.into_tensor_arg(),
            out.clone().into_tensor_arg(),
            rank - 2,
            a_k,
            // `B`'s `k` is its second-last axis: contiguous when its last axis is not.
            !b_n,
            dtype,
        );
    }
    out
}

/// Operands and outputs the kernel has read or written as vectors of four rows (tests only).
#[cfg(test)]
pub(super) static VECTORS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// 4 where `x`'s rows (its last axis where `last`, else the one before) are contiguous, their
/// count and every other axis's stride are multiples of 4 and the device reads four of its
/// elements at once, so that the kernel reads (writes) four neighbouring rows as one vector; 1
/// otherwise.
fn vectors_of_four_rows<R: CubeRuntime>(x: &CubeTensor<R>, last: bool) -> VectorSize {
    let rank = x.meta.num_dims();
    let axis = if last { rank - 1 } else { rank - 2 };
    let four = x.client.io_optimized_vector_sizes(x.dtype.size()).any(|size| size == 4);
    let (shape, strides) = (x.meta.shape(), x.meta.strides());
    // Every stride the kernel multiplies by a position (each one of an axis longer than 1) a
    // multiple of 4: CubeCL's `try_tensor_vector_size_parallel` checks only the smallest.
    let aligned = (0..rank).all(|i| i == axis || shape[i] == 1 || strides[i] % 4 == 0);
    if four && strides[axis] == 1 && shape[axis] % 4 == 0 && aligned {
        4
    } else {
        1
    }
}

/// `x` (copied if neither of its last two axes has stride 1), and whether its last axis is the
/// one with stride 1.
fn contiguous_along_one_axis<R: CubeRuntime>(x: CubeTensor<R>) -> (CubeTensor<R>, bool) {
    match unit_axis(&x) {
        Some(last) => (x, last),
        None => (into_contiguous(x), true),
    }
}
