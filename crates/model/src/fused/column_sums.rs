//! The sums over the rows of a `[rows, d]` matrix, as `[d]`, in two reductions where the rows
//! are many: LayerNorm's `dγ`, `dβ` and a linear map's `db` on the GPU backends.
//!
//! Why: one reduction over the rows leaves a GPU nearly idle. CubeCL's reduction (cubek-reduce)
//! along an axis that is not contiguous gives each output column (four, vectorized) to its own
//! worker, which walks every row in turn: `d` = 384 columns are 96 workers for a `[16384, 384]`
//! gradient, and on an H200 each of nanoGPT's 13 LayerNorms' `dγ` took 140 µs a step (1.8 ms
//! of a 48.5 ms step; docs/benchmarks.md, "LayerNorm's `1/σ`, GELU's fusion and column sums"),
//! for 25 MB that the GPU reads in about 6 µs. Here the rows are cut into `blocks` consecutive
//! blocks ([`row_blocks`]): the first reduction sums each block's rows (`blocks · d` outputs,
//! as many workers), the second the `blocks` partial sums. The sum is the same up to rounding (the
//! terms added in another order).
//!
//! The CPU backend keeps its own kernels' sums; this serves the backends without them.

use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, Shape, TensorMetadata};

/// Fewer rows than this are summed in one reduction: a second launch would cost more than the
/// workers it adds.
const TWO_STAGES_FROM: usize = 1024;

/// At least this many blocks, else one reduction: a split into fewer adds a launch for little.
const MIN_BLOCKS: usize = 8;

/// The blocks of consecutive rows the first reduction sums (1: one reduction over all): the
/// largest divisor of `rows` at most `√rows`, so that both reductions' workers walk at most
/// about `√rows` rows (128 blocks of 128 rows for 16,384); 1 where that is below
/// [`MIN_BLOCKS`] (a prime count of rows) or `rows` is below [`TWO_STAGES_FROM`].
pub(super) fn row_blocks(rows: usize) -> usize {
    if rows < TWO_STAGES_FROM {
        return 1;
    }
    let root = (rows as f64).sqrt() as usize;
    let blocks = (1..=root).rev().find(|&b| rows.is_multiple_of(b)).unwrap_or(1);
    if blocks < MIN_BLOCKS {
        1
    } else {
        blocks
    }
}

/// `Σ_rows t` of a `[rows, d]` tensor `t`, as `[d]` (in `t`'s float type; half-precision
/// partial sums are added in `f32`, as one reduction's accumulator adds them).
pub(super) fn column_sums<B: Backend>(t: FloatTensor<B>) -> FloatTensor<B> {
    let shape = t.shape();
    assert_eq!(shape.num_dims(), 2, "column sums of a matrix, not of {shape:?}");
    let (rows, d) = (shape[0], shape[1]);
    let blocks = row_blocks(rows);
    if blocks == 1 {
        return B::float_reshape(B::float_sum_dim(t, 0), Shape::new([d]));
    }
    let blocked = B::float_reshape(t, Shape::new([blocks, rows / blocks, d]));
    let partials = B::float_reshape(B::float_sum_dim(blocked, 1), Shape::new([blocks, d]));
    B::float_reshape(sum_of_partials::<B>(partials), Shape::new([d]))
}

/// The sum of partial sums over the first axis of `partials` (that axis of size one after),
/// in its float type: half-precision partials are added in `f32`, as one reduction's or one
/// product's accumulator would add them (also [`super::products::rows_product`]'s slices).
pub(super) fn sum_of_partials<B: Backend>(partials: FloatTensor<B>) -> FloatTensor<B> {
    let dtype = partials.dtype();
    if dtype == DType::F32 {
        return B::float_sum_dim(partials, 0);
    }
    let sums = B::float_sum_dim(B::float_cast(partials, DType::F32.into()), 0);
    B::float_cast(sums, dtype.into())
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Tensor, TensorData, TensorPrimitive};
    use burn_ndarray::NdArray;

    use super::*;

    type B = NdArray<f32>;

    #[test]
    fn row_blocks_take_the_largest_divisor_below_the_root_and_one_for_few_or_prime_rows() {
        assert_eq!(row_blocks(16_384), 128);
        assert_eq!(row_blocks(4_096), 64);
        assert_eq!(row_blocks(1_024), 32);
        assert_eq!(row_blocks(3_000), 50);
        assert_eq!(row_blocks(1_023), 1, "below the threshold");
        assert_eq!(row_blocks(1_031), 1, "a prime");
        assert_eq!(row_blocks(2 * 1_031), 1, "no divisor from 8 to the root");
    }

    #[test]
    fn column_sums_in_two_reductions_equal_the_exact_sums_for_blocked_and_single_counts_of_rows() {
        for (rows, d) in [(4_096, 5), (1_031, 3), (7, 4)] {
            let values: Vec<f32> = (0..rows * d).map(|i| ((i * 37 % 101) as f32 - 50.0) / 8.0).collect();
            let t = Tensor::<B, 2>::from_data(TensorData::new(values.clone(), [rows, d]), &Default::default());
            let sums = column_sums::<B>(t.into_primitive().tensor());
            let got = Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(sums)).into_data().to_vec::<f32>().unwrap();
            let exact: Vec<f64> = (0..d).map(|c| (0..rows).map(|r| values[r * d + c] as f64).sum()).collect();
            assert_eq!(got.len(), d);
            for (g, e) in got.iter().zip(&exact) {
                // Every value is a multiple of 1/8 below 2^8: each partial sum is exact in f32.
                assert_eq!(*g as f64, *e, "{rows} × {d}");
            }
        }
    }
}
