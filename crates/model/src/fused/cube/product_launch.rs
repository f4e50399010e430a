//! Launching our product kernel (`product.rs`): the operands' layouts (which axis is
//! contiguous, whether rows come four to a 128-bit vector), the output, the grid of cubes for
//! the tile, and the checks that make the unchecked launch safe.

use burn::tensor::{Shape, TensorMetadata};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::ir::VectorSize;
use cubecl::prelude::*;

use super::empty;
use super::product::product_kernel;
use crate::fused::{ProductForm, ProductShape, ProductTile, Triangle};

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
/// type; each cube computes a `tile`; what `shape` leaves out left out, the result laid out as
/// it says (`crate::fused::product_shape`); its inner loop in `form` (`ATTEND_GPU_FMA`,
/// `ATTEND_GPU_LANES`, `ATTEND_GPU_ADDRESSES`, `ATTEND_GPU_STORES`).
pub(super) fn product<R: CubeRuntime>(
    a: CubeTensor<R>,
    b: CubeTensor<R>,
    tile: ProductTile,
    shape: ProductShape,
    form: ProductForm,
) -> CubeTensor<R> {
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
    let out = if shape.heads_last && rank == 4 {
        // `[batch, m, heads, n]` in memory, handed out as its `[batch, heads, m, n]` view.
        let stored = empty(&a, Shape::from([batch_dims[0], m, batch_dims[1], n]));
        burn_cubecl::ops::permute(stored, &[0, 2, 1, 3])
    } else {
        empty(&a, Shape::from([batch_dims, vec![m, n]].concat()))
    };
    let (triangle, offset) = shape.triangle.code();
    let offset = u32::try_from(offset).expect("a causal offset below 2³² positions");
    assert!(ProductTile::ALL.contains(&tile), "product tile {tile:?} is not one the kernel takes");
    // A launch past the device's shared memory fails without a word, leaving `out` unwritten.
    let limit = a.client.properties().hardware.max_shared_memory_size;
    assert!(
        tile.shared_bytes() <= limit,
        "the product kernel's tile {} (ATTEND_GPU_TILE) needs {} bytes of shared memory, this device gives {limit}",
        tile.name(),
        tile.shared_bytes()
    );
    let count = CubeCount::Static(n.div_ceil(tile.cols) as u32, m.div_ceil(tile.rows) as u32, batch as u32);
    let dtype = a.dtype.into();
    // `A`'s rows are its second-last axis, `B`'s and `C`'s columns their last.
    let (va, vb, vc) =
        (vectors_of_four_rows(&a, false), vectors_of_four_rows(&b, true), vectors_of_four_rows(&out, true));
    let exact = exact_tiles(whole_tiles(m, n, sa[rank - 1], tile, shape.triangle), form);
    #[cfg(test)]
    {
        *LAST_TILE.lock().unwrap() = Some(tile);
        *LAST_FORM.lock().unwrap() = Some(form);
        *LAST_EXACT.lock().unwrap() = Some(exact);
        LAUNCHES.lock().unwrap().push((shape, batch));
    }
    #[cfg(test)]
    VECTORS.fetch_add([va, vb, vc].iter().filter(|&&v| v == 4).count(), std::sync::atomic::Ordering::Relaxed);
    // SAFETY: every read of an operand is guarded by its rows and depth, every write of `out`
    // by its rows and columns (`load`, `fetch`, the final loop), or, where `exact`, lies inside
    // them unguarded (every tile whole, every step of `k` whole and below its length, which is
    // not 0, a triangle's range of `k` whole steps and at least one step in every tile, the
    // next step read only where there is one: `whole_tiles`), the tile is one the kernel takes (asserted: whole warps, whole loads), the shapes match (asserted above) and
    // the position along each batch axis is below `out`'s size there and each operand's (or
    // the operand has one entry there: `CUBE_POS_Z` counts `out`'s batch entries); shared memory is indexed below its size (two stages of `step` rows); the loop over `k` ends (from `k_begin` to `k_end`, which a triangle only narrows; every
    // read stays guarded by `k`'s length whatever they are); the heads-last output is a permuted view of a buffer of its size. A
    // vector of four is read or written only where `vectors_of_four_rows` found the rows
    // contiguous and every offset a multiple of four, so that it starts at a multiple of four
    // and lies wholly inside or wholly outside the guarded rows and columns.
    unsafe {
        product_kernel::launch_unchecked::<R>(
            &a.client.clone(),
            count,
            CubeDim::new_1d(tile.units() as u32),
            va,
            vb,
            vc,
            a.into_tensor_arg(),
            b.into_tensor_arg(),
            out.clone().into_tensor_arg(),
            offset,
            rank - 2,
            a_k,
            // `B`'s `k` is its second-last axis: contiguous when its last axis is not.
            !b_n,
            tile.rows,
            tile.cols,
            tile.depth,
            tile.unit_cols,
            form.fma,
            form.paired_lanes,
            form.constant_offsets,
            form.inline_stores,
            exact,
            triangle,
            dtype,
        );
    }
    out
}

/// The tile of the kernel's last launch (tests only).
#[cfg(test)]
pub(super) static LAST_TILE: std::sync::Mutex<Option<ProductTile>> = std::sync::Mutex::new(None);

/// Whether the kernel's last launch took whole tiles unguarded (tests only).
#[cfg(test)]
pub(super) static LAST_EXACT: std::sync::Mutex<Option<bool>> = std::sync::Mutex::new(None);

/// Whether the kernel may read and write without bounds checks (its `exact`): shapes of
/// [`whole_tiles`] (`whole`), in the `offsets` form only, so that `sums` stays the former
/// kernel (`ATTEND_GPU_ADDRESSES`). In an H200's SASS the bounds checks of the next
/// slice's reads cost 8-40 instructions a step and up to 32 registers a unit (docs/benchmarks.md,
/// "The product kernel's SASS, read without a GPU").
pub(super) fn exact_tiles(whole: bool, form: ProductForm) -> bool {
    whole && form.constant_offsets
}

/// `m` rows and `n` columns of whole tiles, and `depth`, not 0, of whole steps, as is every
/// step of `k` the triangle leaves a tile:
/// `tril(A)·B`'s end and `triu(A)·B`'s start at a tile's diagonal are whole steps where the
/// offset is, and `triu(A)·B` leaves every tile a step where `m ≤ depth + offset` (its last
/// tile starts at `m − rows − offset`, which is then below `depth`). Causal self-attention's
/// products (offset 0, `m` = `depth` = the length) qualify wherever the length is whole tiles.
pub(super) fn whole_tiles(m: usize, n: usize, depth: usize, tile: ProductTile, triangle: Triangle) -> bool {
    let steps = match triangle {
        Triangle::LowerA(offset) => offset.is_multiple_of(tile.depth),
        Triangle::UpperA(offset) => offset.is_multiple_of(tile.depth) && m <= depth + offset,
        Triangle::Full | Triangle::Output(_) => true,
    };
    steps && depth > 0 && m.is_multiple_of(tile.rows) && n.is_multiple_of(tile.cols) && depth.is_multiple_of(tile.depth)
}

/// The form of the kernel's last launch (tests only).
#[cfg(test)]
pub(super) static LAST_FORM: std::sync::Mutex<Option<ProductForm>> = std::sync::Mutex::new(None);

/// The shape (triangle, heads last) and the number of matrices of every launch since the list
/// was last cleared (tests only).
#[cfg(test)]
pub(super) static LAUNCHES: std::sync::Mutex<Vec<(ProductShape, usize)>> = std::sync::Mutex::new(Vec::new());

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
    let four = super::reads_four(x);
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
