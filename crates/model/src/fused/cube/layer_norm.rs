//! LayerNorm as CubeCL kernels: forward `y = (x − μ)·r·γ + β` with `r = 1/√(σ² + ε)` over
//! each row of a `[rows, d]` matrix, and backward, from the input (the moments recomputed),
//! `dx = r·(g − mean(g) − x̂·mean(g ⊙ x̂))` with `x̂ = (x − μ)·r`, `g = grad ⊙ γ`, plus the
//! gradient the input already has from its other uses (`pending`: the residual stream's, in a
//! pre-norm layer) where given, and `grad ⊙ x̂`, whose column sums are `dγ`.
//!
//! Rows of up to [`MAX_ROW`] elements take a warp each, eight rows a cube
//! ([`super::warp_rows`]): each unit reads its share of the row (every 32nd vector of four, or
//! of one where `d` is not a multiple of four) once, all its reads under way before the first
//! is used, and keeps it in registers until it writes; the forward's two sums (`Σx`, then
//! `Σ(x − μ)²`) take one set of halvings each, the backward's four two ([`cube_sum_two`]:
//! `Σx` with `Σg`, then `Σ(x − μ)²` with `Σ g·(x − μ)`, since `Σ g ⊙ x̂ = r·Σ g·(x − μ)`).
//! The older form, kept for longer rows (`layer_norm_long.rs`), gives each row a cube of up to 256 units that reads
//! the row one element at a time, twice forward and three times backward, with eight
//! halvings for each of its four sums: the form attention's weights had when an H200 ran them
//! at about a third of its rate of memory (docs/benchmarks.md). On that H200 each of
//! nanoGPT's 13 LayerNorms took about 85 µs forward and 128 µs backward besides `dγ` in the
//! composed form under burn-fusion, for about 50 MB (forward) and 100 MB (backward) of reads
//! and writes, 10 and 21 µs at its rate of memory.
//!
//! Every sum is kept in `f32`, whatever the tensors' float type.

use burn::tensor::TensorMetadata;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::prelude::*;

use super::empty;
use super::kernels::{cube_sum, cube_sum_two};
use super::launch::row_launch;
use super::layer_norm_long::{layer_norm_cube_backward, layer_norm_cube_forward};
use super::warp_rows::{row_vectors, this_row, warp_rows, MAX_ROW, ROWS, UNITS};

/// LayerNorm over each row of `x` (`[rows, d]`, contiguous, read `N` elements at a time), a
/// warp a row: a unit holds its `chunks` vectors of the row (every [`UNITS`]th), centred
/// after the first sum, from one read to the writes.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_forward<F: Float, N: Size>(
    x: &Tensor<Vector<F, N>>,
    gamma: &Tensor<Vector<F, N>>,
    beta: &Tensor<Vector<F, N>>,
    out: &mut Tensor<Vector<F, N>>,
    epsilon: f32,
    #[comptime] has_beta: bool,
    #[comptime] chunks: usize,
    #[define(F)] _dtype: StorageType,
) {
    let width = comptime![x.vector_size()];
    let (row, d) = this_row(x.shape(0), x.shape(1));
    let (vectors, base) = (d / width, row * x.shape(1) / width);
    let count = f32::cast_from(x.shape(1) as u32);
    let mut shared = SharedMemory::<f32>::new(comptime![UNITS * ROWS]);
    let mut v = Array::<Vector<f32, N>>::new(chunks);
    let mut sum = 0.0f32;
    #[unroll]
    for j in 0..chunks {
        let at = j * UNITS + UNIT_POS_X as usize;
        let mut xs = Vector::<f32, N>::new(0.0);
        if at < vectors {
            xs = Vector::<f32, N>::cast_from(x[base + at]);
            #[unroll]
            for i in 0..width {
                sum += xs[i];
            }
        }
        v[j] = xs;
    }
    let mean = cube_sum(sum, &mut shared) / count;
    let mut squares = 0.0f32;
    #[unroll]
    for j in 0..chunks {
        let at = j * UNITS + UNIT_POS_X as usize;
        if at < vectors {
            let centred = v[j] - Vector::new(mean);
            #[unroll]
            for i in 0..width {
                squares += centred[i] * centred[i];
            }
            v[j] = centred;
        }
    }
    let rstd = 1.0f32 / f32::sqrt(cube_sum(squares, &mut shared) / count + epsilon);
    #[unroll]
    for j in 0..chunks {
        let at = j * UNITS + UNIT_POS_X as usize;
        if at < vectors {
            let mut y = v[j] * Vector::new(rstd) * Vector::<f32, N>::cast_from(gamma[at]);
            if comptime![has_beta] {
                y += Vector::<f32, N>::cast_from(beta[at]);
            }
            out[base + at] = Vector::cast_from(y);
        }
    }
}

/// LayerNorm's backward over each row of `x` (`[rows, d]`; `grad`, `pending`, `dx` and
/// `grad_normalized` laid out alike, contiguous, read `N` elements at a time), a warp a row:
/// a unit holds its `chunks` vectors of `x` and of `grad` in registers (`g = grad ⊙ γ` is
/// formed again where it is needed, from `γ`'s few cached reads, instead of a third array).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_backward<F: Float, N: Size>(
    x: &Tensor<Vector<F, N>>,
    gamma: &Tensor<Vector<F, N>>,
    grad: &Tensor<Vector<F, N>>,
    pending: &Tensor<Vector<F, N>>,
    dx: &mut Tensor<Vector<F, N>>,
    grad_normalized: &mut Tensor<Vector<F, N>>,
    epsilon: f32,
    #[comptime] has_pending: bool,
    #[comptime] chunks: usize,
    #[define(F)] _dtype: StorageType,
) {
    let width = comptime![x.vector_size()];
    let (row, d) = this_row(x.shape(0), x.shape(1));
    let (vectors, base) = (d / width, row * x.shape(1) / width);
    let count = f32::cast_from(x.shape(1) as u32);
    let mut shared = SharedMemory::<f32>::new(comptime![2 * UNITS * ROWS]);
    let mut v = Array::<Vector<f32, N>>::new(chunks);
    let mut upstream = Array::<Vector<f32, N>>::new(chunks);
    let mut sum_x = 0.0f32;
    let mut sum_g = 0.0f32;
    #[unroll]
    for j in 0..chunks {
        let at = j * UNITS + UNIT_POS_X as usize;
        let mut xs = Vector::<f32, N>::new(0.0);
        let mut up = Vector::<f32, N>::new(0.0);
        if at < vectors {
            xs = Vector::<f32, N>::cast_from(x[base + at]);
            up = Vector::<f32, N>::cast_from(grad[base + at]);
            let gs = up * Vector::<f32, N>::cast_from(gamma[at]);
            #[unroll]
            for i in 0..width {
                sum_x += xs[i];
                sum_g += gs[i];
            }
        }
        v[j] = xs;
        upstream[j] = up;
    }
    let (sum_x, sum_g) = cube_sum_two(sum_x, sum_g, &mut shared);
    let (mean, mean_g) = (sum_x / count, sum_g / count);
    let mut squares = 0.0f32;
    let mut dot = 0.0f32;
    #[unroll]
    for j in 0..chunks {
        let at = j * UNITS + UNIT_POS_X as usize;
        if at < vectors {
            let centred = v[j] - Vector::new(mean);
            let gs = upstream[j] * Vector::<f32, N>::cast_from(gamma[at]);
            #[unroll]
            for i in 0..width {
                squares += centred[i] * centred[i];
                dot += gs[i] * centred[i];
            }
            v[j] = centred;
        }
    }
    let (squares, dot) = cube_sum_two(squares, dot, &mut shared);
    let rstd = 1.0f32 / f32::sqrt(squares / count + epsilon);
    let mean_gx = dot * rstd / count;
    #[unroll]
    for j in 0..chunks {
        let at = j * UNITS + UNIT_POS_X as usize;
        if at < vectors {
            let normalized = v[j] * Vector::new(rstd);
            let gs = upstream[j] * Vector::<f32, N>::cast_from(gamma[at]);
            let mut out = Vector::new(rstd) * (gs - Vector::new(mean_g) - normalized * Vector::new(mean_gx));
            if comptime![has_pending] {
                out += Vector::<f32, N>::cast_from(pending[base + at]);
            }
            dx[base + at] = Vector::cast_from(out);
            grad_normalized[base + at] = Vector::cast_from(upstream[j] * normalized);
        }
    }
}

/// Backwards that added the residual stream's gradient in the kernel (tests only).
#[cfg(test)]
pub(super) static PENDING_ADDED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// LayerNorm of the rows of `x` (`[rows, d]`, contiguous; `gamma`, `beta` contiguous `[d]` of
/// `x`'s float type).
pub(super) fn forward<R: CubeRuntime>(
    x: CubeTensor<R>,
    gamma: CubeTensor<R>,
    beta: Option<CubeTensor<R>>,
    epsilon: f64,
) -> CubeTensor<R> {
    let out = empty(&x, x.shape());
    let has_beta = beta.is_some();
    // Without β the kernels still take a tensor there (never read): γ.
    let beta = beta.unwrap_or_else(|| gamma.clone());
    let (client, dtype) = (x.client.clone(), x.dtype.into());
    if x.shape()[1] > MAX_ROW {
        let (count, dim, units) = row_launch(&x);
        // SAFETY: units past the last row stop (`terminate!`), each column read or written is below
        // the row's length, and γ (and β, read only with `has_beta`) hold one entry a column.
        unsafe {
            layer_norm_cube_forward::launch_unchecked::<R>(
                &client,
                count,
                dim,
                x.into_tensor_arg(),
                gamma.into_tensor_arg(),
                beta.into_tensor_arg(),
                out.clone().into_tensor_arg(),
                epsilon as f32,
                has_beta,
                units,
                dtype,
            );
        }
    } else {
        let (count, dim) = warp_rows(&x);
        let (width, chunks) = row_vectors(&x);
        // SAFETY: `this_row` gives units past the last row no columns, each read and write is of a
        // vector below the row's (`at < vectors`), and γ (and β, read only with `has_beta`) hold
        // one entry a column.
        unsafe {
            layer_norm_forward::launch_unchecked::<R>(
                &client,
                count,
                dim,
                width,
                x.into_tensor_arg(),
                gamma.into_tensor_arg(),
                beta.into_tensor_arg(),
                out.clone().into_tensor_arg(),
                epsilon as f32,
                has_beta,
                chunks,
                dtype,
            );
        }
    }
    out
}

/// `[dx, grad ⊙ x̂]` of LayerNorm over the rows of `x` (`[rows, d]`; `grad` and `pending`, if
/// any, laid out alike; all contiguous, of one float type), `pending` added to `dx`.
pub(super) fn backward<R: CubeRuntime>(
    x: CubeTensor<R>,
    gamma: CubeTensor<R>,
    grad: CubeTensor<R>,
    pending: Option<CubeTensor<R>>,
    epsilon: f64,
) -> [CubeTensor<R>; 2] {
    let dx = empty(&x, x.shape());
    let grad_normalized = empty(&x, x.shape());
    let has_pending = pending.is_some();
    #[cfg(test)]
    if has_pending {
        PENDING_ADDED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    // Without `pending` the kernels still take a tensor there (never read): `grad`.
    let pending = pending.unwrap_or_else(|| grad.clone());
    let (client, dtype) = (x.client.clone(), x.dtype.into());
    if x.shape()[1] > MAX_ROW {
        let (count, dim, units) = row_launch(&x);
        // SAFETY: units past the last row stop (`terminate!`), each column read or written is below
        // the row's length, `grad`, `pending` (read only with `has_pending`) and the outputs are
        // laid out as `x`, and γ holds one entry a column.
        unsafe {
            layer_norm_cube_backward::launch_unchecked::<R>(
                &client,
                count,
                dim,
                x.into_tensor_arg(),
                gamma.into_tensor_arg(),
                grad.into_tensor_arg(),
                pending.into_tensor_arg(),
                dx.clone().into_tensor_arg(),
                grad_normalized.clone().into_tensor_arg(),
                epsilon as f32,
                has_pending,
                units,
                dtype,
            );
        }
    } else {
        let (count, dim) = warp_rows(&x);
        let (width, chunks) = row_vectors(&x);
        // SAFETY: `this_row` gives units past the last row no columns, each read and write is of a
        // vector below the row's (`at < vectors`), `grad`, `pending` (read only with `has_pending`)
        // and the outputs are laid out as `x`, and γ holds one entry a column.
        unsafe {
            layer_norm_backward::launch_unchecked::<R>(
                &client,
                count,
                dim,
                width,
                x.into_tensor_arg(),
                gamma.into_tensor_arg(),
                grad.into_tensor_arg(),
                pending.into_tensor_arg(),
                dx.clone().into_tensor_arg(),
                grad_normalized.clone().into_tensor_arg(),
                epsilon as f32,
                has_pending,
                chunks,
                dtype,
            );
        }
    }
    [dx, grad_normalized]
}
