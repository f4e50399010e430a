//! How the product kernel (`product.rs`) reads its operands and stages them in shared
//! memory: one element or one vector of four rows at a time from global memory (`load`,
//! `fetch`) and stores them (`stage`), which row group and `k` each of a unit's loads takes (`place`), where a vector
//! goes in its staged row (`slot`, the 16-deep steps' permutation), and what a causal
//! triangle keeps (`kept`).

use cubecl::prelude::*;

/// Four `f32` side by side: a row of shared memory's unit, and a quarter of a unit's rows.
pub(super) type Four = Vector<f32, Const<4>>;

/// Element `(r, k)` of an operand at `base` with strides `rs`, `ks`, or 0 outside `rows` × `depth`
/// (an operand read one element at a time: `N` is 1); read unguarded where not `checked` (the
/// caller knows it inside).
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
    #[comptime] checked: bool,
) -> f32 {
    let mut value = 0.0f32;
    if comptime![checked] {
        if r < rows && k < depth {
            value = f32::cast_from(x[base + r * rs + k * ks][0]);
        }
    } else {
        value = f32::cast_from(x[base + r * rs + k * ks][0]);
    }
    value
}

/// The row group and `k` of the `index`-th vector of a step's `step × side` slice of an
/// operand (`side` rows of the tile, `step` elements of `k`): `k_contiguous` (the operand's
/// `k` axis has stride 1): `step` consecutive indices take `step` consecutive `k` of one row;
/// else `side / 4` consecutive indices take `side` consecutive rows at one `k` (four each: a
/// load instruction of the warp reads every fourth word, the four of them all).
#[cube]
pub(super) fn place(
    index: usize,
    #[comptime] k_contiguous: bool,
    #[comptime] side: usize,
    #[comptime] step: usize,
) -> (usize, usize) {
    let groups = comptime![side / 4];
    let mut group = index % groups;
    let mut k = index / groups;
    if comptime![k_contiguous] {
        group = index / step;
        k = index % step;
    }
    (group, k)
}

/// Stores this unit's `loads` vectors of a step's slice (`next`, read by [`fetch`]) into the
/// stage that begins at `at`: the `l`-th at its row group and `k` ([`place`]), in row `k` of
/// `row` vectors, at its [`slot`].
#[cube]
#[allow(clippy::too_many_arguments)]
pub(super) fn stage(
    stages: &mut SharedMemory<Four>,
    next: &Array<Four>,
    at: usize,
    unit: usize,
    #[comptime] loads: usize,
    #[comptime] units: usize,
    #[comptime] k_contiguous: bool,
    #[comptime] side: usize,
    #[comptime] step: usize,
    #[comptime] row: usize,
    #[comptime] swizzle: bool,
) {
    #[unroll]
    for l in 0..loads {
        let (group, k) = place(unit + l * units, k_contiguous, side, step);
        stages[at + k * row + slot(k, group, swizzle)] = next[l];
    }
}

/// Where in its staged row of shared memory the vector `v` at `k` goes: `v` itself, or with
/// `swizzle` `v` with its three low bits exclusive-or'd with `k`'s (a permutation within each
/// aligned run of 8 vectors, 128 bytes: the rows are multiples of 8 vectors long). Eight
/// consecutive `k` of one row group then land in eight different 16-byte columns of the banks;
/// a warp's reads of `B` at one `k` (8 consecutive vectors from a multiple of 8) stay 8
/// distinct columns, and its reads of `A` stay one vector per eight units.
#[cube]
pub(super) fn slot(k: usize, v: usize, #[comptime] swizzle: bool) -> usize {
    let mut at = v;
    if comptime![swizzle] {
        at = v ^ (k % 8);
    }
    at
}

/// This unit's four rows `r0 + 4·group ..` of an operand at `k0 + k`, as one vector: one
/// 128-bit read where the operand comes in vectors of four rows (its rows contiguous, their
/// count and every other stride multiples of 4: `product_launch::vectors_of_four_rows`), else four reads.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(super) fn fetch<F: Float, N: Size>(
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
    offset: usize,
    #[comptime] keep: u32,
    #[comptime] checked: bool,
) -> Four {
    let mut four = Four::zeroed();
    let r = r0 + 4 * group;
    // The host passes 1 or 4 (`vectors_of_four_rows`); any other size would index wrongly.
    comptime![assert!(x.vector_size() == 1 || x.vector_size() == 4)];
    if comptime![x.vector_size() == 4] {
        // `rows` is a multiple of 4: the vector is wholly inside or wholly outside.
        if comptime![checked] {
            if r < rows && k0 + k < depth {
                four = Four::cast_from(x[(base + r + (k0 + k) * ks) / 4]);
            }
        } else {
            four = Four::cast_from(x[(base + r + (k0 + k) * ks) / 4]);
        }
    } else {
        #[unroll]
        for i in 0..4usize {
            four[i] = load::<F, N>(x, base, r + i, k0 + k, rows, depth, rs, ks, checked);
        }
    }
    if comptime![keep != 0] {
        #[unroll]
        for i in 0..4usize {
            if !kept(r + i, k0 + k, offset, keep) {
                four[i] = 0.0;
            }
        }
    }
    four
}

/// Whether element `(r, k)` of an operand is inside its triangle (`keep`, comptime): 0 all, 1
/// `k ≤ r + offset` (`tril`), 2 `k ≥ r − offset` (`triu(·, −offset)`).
#[cube]
fn kept(r: usize, k: usize, offset: usize, #[comptime] keep: u32) -> bool {
    let mut is = true;
    if comptime![keep == 1] {
        is = k <= r + offset;
    }
    if comptime![keep == 2] {
        is = k + offset >= r;
    }
    is
}
