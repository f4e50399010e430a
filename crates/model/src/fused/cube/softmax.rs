//! Launching the softmax row kernels (`kernels.rs`): over the rows of a `[rows, d]` matrix,
//! with attention's mask where there is one, and the backward.

use burn::tensor::TensorMetadata;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;

use super::{empty, kernels, row_launch};
use crate::mask::MASKED_SCORE;

/// Softmax over the rows of `x` (`[rows, d]`), with attention's mask (viewed as `[batch,
/// heads, queries, keys]`) where there is one.
pub(super) fn softmax_rows<R: CubeRuntime>(x: CubeTensor<R>, mask: Option<CubeTensor<R>>) -> CubeTensor<R> {
    let out = empty(&x, x.shape());
    let (count, dim, units) = row_launch(&x);
    let has_mask = mask.is_some();
    // Without a mask the kernel still takes a tensor there (never read): `x` itself.
    let mask = mask.unwrap_or_else(|| x.clone());
    let dtypes = [x.dtype.into(), mask.dtype.into()];
    // SAFETY: cubes past the last row stop (`terminate!`), each unit walks the columns below the
    // row's length, and `out` is `x`'s shape; the mask is read through its own strides.
    unsafe {
        kernels::softmax_forward::launch_unchecked::<R>(
            &x.client.clone(),
            count,
            dim,
            x.into_tensor_arg(),
            mask.into_tensor_arg(),
            out.clone().into_tensor_arg(),
            MASKED_SCORE,
            has_mask,
            units,
            dtypes,
        );
    }
    out
}

/// The softmax's backward over rows, from its output `y` and the gradient (both `[rows, d]`).
pub(super) fn softmax_rows_backward<R: CubeRuntime>(y: CubeTensor<R>, grad: CubeTensor<R>) -> CubeTensor<R> {
    let dx = empty(&y, y.shape());
    let (count, dim, units) = row_launch(&y);
    let dtype = y.dtype.into();
    // SAFETY: cubes past the last row stop (`terminate!`), each unit walks the columns below the
    // row's length, and `grad` and `dx` are `y`'s shape.
    unsafe {
        kernels::softmax_backward::launch_unchecked::<R>(
            &y.client.clone(),
            count,
            dim,
            y.into_tensor_arg(),
            grad.into_tensor_arg(),
            dx.clone().into_tensor_arg(),
            units,
            dtype,
        );
    }
    dx
}
