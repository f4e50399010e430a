//! Matrix products of our own on CubeCL's backends, for the linear maps and attention
//! (`ATTEND_GPU_MATMUL`, the default on wgpu; [`crate::fused::products`] chooses): `C = A·B` over `[m, k]` ×
//! `[k, n]`, or a batch of them, with each operand read through its strides (a transposed view
//! costs no copy).
//!
//! The kernel is the classic register-blocked one with vectorized shared memory: a cube
//! computes a tile of `C` (`ProductTile`, `ATTEND_GPU_TILE`; 128 × 128 with 256 units by
//! default), each unit an 8 × 8 block of it in registers (64 accumulators as 16 four-wide
//! vectors, `f32` whatever the tensors' type), walking `k` in steps of 8 (or 16). `A`'s
//! rows × step and `B`'s step × columns slices are staged in shared memory as rows of
//! four-wide vectors along the tile's side (each unit loads four neighbouring rows at one `k`
//! and stores them as one vector, one or more such vectors a step: where `k` is the operand's
//! contiguous axis, consecutive units read consecutive words; where its rows are, each of a
//! warp's four loads reads every fourth word of the tile's consecutive rows, which the four together
//! cover), in two stages: while a step multiplies out of one, the next step's elements are
//! loaded into registers and then stored into the other, one synchronization a step. A unit's
//! rows are `4·ty + (rows / 2)·h + i` and its columns `4·tx + (cols / 2)·g + j` (`h, g ∈ {0,
//! 1}`, `i, j < 4`), a warp's units 4 `ty` by 8 `tx`: each step along `k` reads two vectors of
//! `A` and two of `B`, four 128-bit reads of shared memory (each 64 or 128 distinct bytes
//! across the warp) for 64 multiply-adds, where the first form of this kernel (scalar reads,
//! two synchronizations a step) took sixteen. The warp's lanes are placed in pairs that read
//! the same vectors ([`unit_place`], `ATTEND_GPU_LANES=pairs`, the default; `rows` keeps eight
//! consecutive lanes a row), so that each read returns in two passes of shared memory, not
//! four, where NVIDIA's rule for such pairs holds (described for compute capability 7.x). An operand whose rows are contiguous (`B` = `W`
//! in the forward, both operands of a weight gradient) is read from global memory as vectors
//! of four rows, one 128-bit read where four were, and `C` is written four columns at a time,
//! where the sizes allow (`product_launch::vectors_of_four_rows`).
//!
//! The wide tiles (`ATTEND_GPU_TILE` names ending in `w`) give each unit an 8 × 16 block,
//! columns `4·tx + (cols / 4)·g + j` (`g < 4`): each step along `k` reads two vectors of `A`
//! and four of `B` for 128 multiply-adds, a quarter fewer reads of shared memory for each
//! multiply-add, for 128 accumulators where there were 64 (more registers, fewer units a
//! cube: 128 for 128 × 128). They are there for `bench products` to time on a GPU; `auto`
//! takes none of them.
//!
//! Why: on an H200 CubeCL's f32 products (its register-tile "unit" matmuls, the only ones
//! without tensor cores) ran at 12-17 TFLOP/s forward and 2.4-9.7 for the weight gradients,
//! against the 36 PyTorch's f32 step implies, and the first form reached 17.3 at best; this
//! form reached 36 in training (the MLP's forward products) and took nanoGPT's GPU step from
//! 92.4 to 53.9 ms (docs/benchmarks.md, "Our product kernel on the H200").
//!
//! The multiply-adds are written as `fma` (`fused`; `ATTEND_GPU_FMA=off` writes them as
//! before, for timing), which asks for one instruction each. Written `acc += x·b`, WGSL has a
//! multiply and an add, and whether they become one instruction is the driver's choice: naga's
//! SPIR-V neither asks for it nor forbids it. On an H200 the large products ran at 30-35
//! TFLOP/s at their best tiles, about one rate across tiles. The H200's f32 peak is about 67
//! TFLOP/s with fused multiply-adds and about 33 without. A GPU has yet to time the change
//! (docs/benchmarks.md, "Fused multiply-adds and wide tiles in the product kernel").
//!
//! A comptime `triangle` (`crate::fused::product_shape`) lets attention's products under a
//! causal mask leave out the steps along `k` (or whole tiles) that the mask makes zero, and
//! `C` is written through its strides, so that the launcher may lay it out heads last.
//!
//! `product_staging.rs` reads the operands and stages them; `product_launch.rs` checks the
//! operands and the tile and launches it.

use cubecl::prelude::*;

use super::product_staging::{fetch, place, slot, stage, Four};

/// `c = a·b` over `[m, k]`, `[k, n]`, `[m, n]`, batched along `CUBE_POS_Z` over the
/// `batch_axes` (0, 1 or 2) axes before those: rank 3 (a batch of matrices) or rank 4 (the
/// batch and the heads of attention's products, `CUBE_POS_Z` = `batch · heads + head`). An
/// operand with one entry along a batch axis is shared along it. A cube computes a
/// `tile_m × tile_n` tile of `C` (64 or 128 each), `step` elements of `k` at a time (8 or 16),
/// with `tile_m · tile_n / (8 · unit_n)` units, each an `8 × unit_n` block (`unit_n` 8 or 16;
/// `ProductTile`), its multiply-adds one `fma` each where `fused`, else a multiply and an add,
/// its warps' lanes placed in pairs where `paired` ([`unit_place`]).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn product_kernel<F: Float, NA: Size, NB: Size, NC: Size>(
    a: &Tensor<Vector<F, NA>>,
    b: &Tensor<Vector<F, NB>>,
    c: &mut Tensor<Vector<F, NC>>,
    offset: u32,
    #[comptime] batch_axes: usize,
    #[comptime] a_k_contiguous: bool,
    #[comptime] b_k_contiguous: bool,
    #[comptime] tile_m: usize,
    #[comptime] tile_n: usize,
    #[comptime] step: usize,
    #[comptime] unit_n: usize,
    #[comptime] fused: bool,
    #[comptime] paired: bool,
    #[comptime] offsets: bool,
    #[comptime] inline_stores: bool,
    #[comptime] exact: bool,
    #[comptime] triangle: u32,
    #[define(F)] _dtype: StorageType,
) {
    comptime![assert!(batch_axes <= 2 && triangle <= 3 && (unit_n == 8 || unit_n == 16))];
    // What of `A` the triangle keeps (`product_staging::kept`): `tril` (2), `triu` (3), all.
    let keep_a = comptime![match triangle {
        2 => 1u32,
        3 => 2u32,
        _ => 0u32,
    }];
    let offset = usize::cast_from(offset);
    let axis = comptime![batch_axes];
    let next = comptime![axis + 1];
    // Units along the tile's rows (columns), each taking 8 rows as two groups of 4 (`unit_n`
    // columns as `unit_n / 4` groups of 4): the offset in vectors from one of a unit's groups
    // to its next.
    let side_m = comptime![tile_m / 8];
    let side_n = comptime![tile_n / unit_n];
    let groups_n = comptime![unit_n / 4];
    let units = comptime![tile_m * tile_n / (8 * unit_n)];
    // A staged row of shared memory in vectors: the tile's side over 4, and with 8-deep steps
    // one of padding. The `k` of one row group that consecutive units store (when `k` is the
    // operand's contiguous axis) then fall in different groups of four banks, as with 16-deep
    // steps, which would not fit 32 KB padded, the rows' vectors permuted by `k` do ([`slot`]).
    let swizzle = comptime![step == 16];
    // `exact`: `m`, `n` and `k`'s range are whole tiles and steps (`product_launch.rs`), so no
    // read or write needs its bounds checked.
    let checked = comptime![!exact];
    let pad = comptime![if swizzle { 0 } else { 1 }];
    let row_a = comptime![tile_m / 4 + pad];
    let row_b = comptime![tile_n / 4 + pad];
    let stage_a_len = comptime![step * row_a];
    let stage_b_len = comptime![step * row_b];
    // Vectors of each operand a unit loads per step.
    let loads_a = comptime![step * tile_m / 4 / units];
    let loads_b = comptime![step * tile_n / 4 / units];
    let warps_n = comptime![side_n / 8];
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
    let row0 = CUBE_POS_Y as usize * tile_m;
    let col0 = CUBE_POS_X as usize * tile_n;
    let unit = UNIT_POS_X as usize;
    // The steps along `k` the triangle leaves (`crate::fused::product_shape`): none for a
    // tile of `tril(A·B)` wholly above the diagonal (1), those up to the tile's last row's
    // diagonal for `tril(A)·B` (2), those from its first row's for `triu(A)·B` (3).
    let mut k_begin = 0usize;
    let mut k_end = depth;
    if comptime![triangle == 1] {
        let above = col0 > row0 + comptime![tile_m - 1] + offset;
        if above {
            k_end = 0;
        }
    }
    if comptime![triangle == 2] {
        let last = row0 + tile_m + offset;
        if last < depth {
            k_end = last;
        }
    }
    if comptime![triangle == 3] {
        let below = row0 > offset;
        if below {
            k_begin = row0 - offset;
        }
    }
    let (ty, tx) = unit_place(unit, warps_n, paired);

    // Two stages of each operand: a step multiplies out of one while the next step's slice is
    // stored into the other, so one synchronization a step suffices.
    let mut stage_a = SharedMemory::<Four>::new(comptime![2 * stage_a_len]);
    let mut stage_b = SharedMemory::<Four>::new(comptime![2 * stage_b_len]);
    // acc[(4·h + i)·G + g] (`G` = `groups_n`): row `4·ty + (tile_m / 2)·h + i`, columns
    // `4·tx + (tile_n / G)·g ..`.
    let accs = comptime![8 * groups_n];
    let mut acc = Array::<Four>::new(accs);
    #[unroll]
    for i in 0..accs {
        acc[i] = Four::zeroed();
    }
    let mut bs = Array::<Four>::new(groups_n);
    let mut next_a = Array::<Four>::new(loads_a);
    let mut next_b = Array::<Four>::new(loads_b);

    #[unroll]
    for l in 0..loads_a {
        let (group, k) = place(unit + l * units, a_k_contiguous, tile_m, step);
        stage_a[k * row_a + slot(k, group, swizzle)] =
            fetch::<F, NA>(a, a_base, row0, k_begin, m, depth, a_rs, a_ks, group, k, offset, keep_a, checked);
    }
    #[unroll]
    for l in 0..loads_b {
        let (group, k) = place(unit + l * units, b_k_contiguous, tile_n, step);
        stage_b[k * row_b + slot(k, group, swizzle)] =
            fetch::<F, NB>(b, b_base, col0, k_begin, n, depth, b_rs, b_ks, group, k, offset, 0u32, checked);
    }
    sync_cube();
    let mut flipped = 0usize;
    let mut k0 = k_begin;
    while k0 < k_end {
        // The stage this step reads, from the step's parity rather than a variable flipped
        // each step (`flipped`, the `sums` form's): so the compiler knows it is 0 or 1, and
        // every index below is this unit's base plus a constant that cannot wrap (`unit_a`).
        let mut this = flipped;
        if comptime![offsets] {
            this = ((k0 - k_begin) / comptime![step]) % 2;
        }
        // The next step's elements travel while this step multiplies (zeros past the end;
        // with `exact` tiles, unguarded, the last step reading its own slice again instead of
        // one past `k`'s end: a branch around the reads held more registers).
        let mut next_k = k0 + step;
        if comptime![exact] {
            next_k = min(next_k, k_end - step);
        }
        #[unroll]
        for l in 0..loads_a {
            let (group, k) = place(unit + l * units, a_k_contiguous, tile_m, step);
            next_a[l] =
                fetch::<F, NA>(a, a_base, row0, next_k, m, depth, a_rs, a_ks, group, k, offset, keep_a, checked);
        }
        #[unroll]
        for l in 0..loads_b {
            let (group, k) = place(unit + l * units, b_k_contiguous, tile_n, step);
            next_b[l] = fetch::<F, NB>(b, b_base, col0, next_k, n, depth, b_rs, b_ks, group, k, offset, 0u32, checked);
        }
        let (this_a, this_b) = (this * stage_a_len, this * stage_b_len);
        // This unit's first vector of `A` and of `B` in this stage; each read of the step adds
        // a constant to them. Written `this_a + k·row_a + ty`, the sum of two unknowns and a
        // constant, each read took two integer instructions for its address (on CUDA: an add
        // and a shift-add, 64 for the 32 reads of an 8-deep step beside its 512 `fma`, read off
        // the SASS with `scripts/product_sass.sh`); written as base plus constant, the constant
        // becomes the read's immediate offset and the reads take none.
        // (Left 0 in the `sums` form, whose indices then hold no trace of them: its SASS is the
        // former kernel's, instruction for instruction.)
        let mut unit_a = 0usize;
        let mut unit_b = 0usize;
        if comptime![offsets && !swizzle] {
            unit_a = this_a + ty;
            unit_b = this_b + tx;
        }
        #[unroll]
        for k in 0..step {
            // Where this unit's vectors lie at `k`: the base plus a constant, or summed.
            let mut a0_at = unit_a + comptime![k * row_a];
            let mut a1_at = unit_a + comptime![k * row_a + side_m];
            let mut b_k = unit_b + comptime![k * row_b];
            if comptime![swizzle || !offsets] {
                // The 16-deep steps' permutation (`slot`) is no constant offset; `sums` is the
                // former form (`ATTEND_GPU_ADDRESSES`).
                let at_a = this_a + k * row_a;
                a0_at = at_a + slot(k, ty, swizzle);
                a1_at = at_a + slot(k, side_m + ty, swizzle);
                b_k = this_b + k * row_b;
            }
            let (a0, a1) = (stage_a[a0_at], stage_a[a1_at]);
            #[unroll]
            for g in 0..groups_n {
                let mut b_at = b_k + comptime![side_n * g];
                if comptime![swizzle || !offsets] {
                    b_at = b_k + slot(k, side_n * g + tx, swizzle);
                }
                bs[g] = stage_b[b_at];
            }
            #[unroll]
            for i in 0usize..4 {
                let (x0, x1) = (Four::new(a0[i]), Four::new(a1[i]));
                #[unroll]
                for g in 0..groups_n {
                    let (at0, at1) = (i * groups_n + g, (4 + i) * groups_n + g);
                    if comptime![fused] {
                        acc[at0] = fma(x0, bs[g], acc[at0]);
                        acc[at1] = fma(x1, bs[g], acc[at1]);
                    } else {
                        acc[at0] += x0 * bs[g];
                        acc[at1] += x1 * bs[g];
                    }
                }
            }
        }
        // The other stage was last read before the previous synchronization.
        let other = 1 - this;
        if comptime![inline_stores] {
            #[unroll]
            for l in 0..loads_a {
                let (group, k) = place(unit + l * units, a_k_contiguous, tile_m, step);
                stage_a[other * stage_a_len + k * row_a + slot(k, group, swizzle)] = next_a[l];
            }
            #[unroll]
            for l in 0..loads_b {
                let (group, k) = place(unit + l * units, b_k_contiguous, tile_n, step);
                stage_b[other * stage_b_len + k * row_b + slot(k, group, swizzle)] = next_b[l];
            }
        } else {
            let (other_a, other_b) = (other * stage_a_len, other * stage_b_len);
            // In a block of their own (`next_k ≥ k0` always holds, but no pass can fold it), so
            // that cubecl-opt's `CopyTransform`, which works within one block, cannot merge a
            // read above and its store here into one copy after the multiply-adds (SPIR-V path;
            // `ATTEND_GPU_STORES`).
            if next_k >= k0 {
                stage(
                    &mut stage_a,
                    &next_a,
                    other_a,
                    unit,
                    loads_a,
                    units,
                    a_k_contiguous,
                    tile_m,
                    step,
                    row_a,
                    swizzle,
                );
                stage(
                    &mut stage_b,
                    &next_b,
                    other_b,
                    unit,
                    loads_b,
                    units,
                    b_k_contiguous,
                    tile_n,
                    step,
                    row_b,
                    swizzle,
                );
            }
        }
        sync_cube();
        flipped = other;
        k0 += step;
    }

    let (c_rs, c_cs) = (c.stride(axis), c.stride(next));
    #[unroll]
    for h in 0usize..2 {
        #[unroll]
        for i in 0usize..4 {
            let row = row0 + comptime![tile_m / 2] * h + 4 * ty + i;
            #[unroll]
            for g in 0..groups_n {
                let mut four = acc[(4 * h + i) * groups_n + g];
                let col = col0 + comptime![tile_n / groups_n] * g + 4 * tx;
                if comptime![triangle == 1] {
                    // `tril(A·B)`: zeros above the diagonal.
                    #[unroll]
                    for j in 0usize..4 {
                        if col + j > row + offset {
                            four[j] = 0.0;
                        }
                    }
                }
                comptime![assert!(c.vector_size() == 1 || c.vector_size() == 4)];
                if comptime![c.vector_size() == 4] {
                    // `n` is a multiple of 4 and `c`'s rows are contiguous: one 128-bit write.
                    if exact || (row < m && col < n) {
                        c[(c_base + row * c_rs + col) / 4] = Vector::cast_from(four);
                    }
                } else {
                    #[unroll]
                    for j in 0usize..4 {
                        if exact || (row < m && col + j < n) {
                            c[c_base + row * c_rs + (col + j) * c_cs] = Vector::new(F::cast_from(four[j]));
                        }
                    }
                }
            }
        }
    }
}

/// Unit `unit`'s place `(ty, tx)` among a tile's units: its rows of `C` start at `4·ty`, its
/// columns at `4·tx`. A warp (32 units) takes 4 `ty` by 8 `tx` (`warps_n` warps along the
/// columns), so that its reads of a step's vectors are 4 distinct 16-byte words of `A` (64
/// bytes) and 8 of `B` (128 bytes), without bank conflicts, where 2 × 16 would read 32 and
/// 256 distinct bytes.
///
/// Within the warp, without `paired`, lanes `8·y .. 8·y + 8` are row `y` (`rows`); with it,
/// lane `ℓ`'s bits 1 and 4 give its row and bits 0, 2 and 3 its column, so that lanes `ℓ` and
/// `ℓ ^ 1` read the same vector of `A` and lanes `ℓ` and `ℓ ^ 2` the same vector of `B`. On
/// NVIDIA GPUs shared memory returns 128 bytes a clock, so a warp's 128-bit read takes four
/// passes, and two where every pair of lanes `ℓ, ℓ ^ 1` (or every pair `ℓ, ℓ ^ 2`) reads the
/// same address (NVIDIA's description for compute capability 7.x; CUTLASS's SIMT products
/// interleave their lanes by two too). In rows the reads of `A` qualify (eight lanes a
/// vector) and those of `B` do not: a warp's step along `k` takes 12 passes (clocks of the
/// SM's shared memory) for 64 multiply-add instructions, which take 16 clocks of the SM's f32
/// units (four warps' instructions a clock), and the stores of the next slice and the
/// operands' reads from global memory return by the same path; in pairs, 8 passes.
#[cube]
pub(super) fn unit_place(unit: usize, #[comptime] warps_n: usize, #[comptime] paired: bool) -> (usize, usize) {
    let (warp, lane) = (unit / 32, unit % 32);
    let mut row = lane / 8;
    let mut col = lane % 8;
    if comptime![paired] {
        row = (lane / 2) % 2 + (lane / 16) * 2;
        col = lane % 2 + ((lane / 4) % 4) * 2;
    }
    ((warp / warps_n) * 4 + row, (warp % warps_n) * 8 + col)
}
