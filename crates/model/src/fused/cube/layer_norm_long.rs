//! LayerNorm's CubeCL kernels for rows longer than a warp takes ([`MAX_ROW`]): a cube of up to
//! 256 units a row, each unit striding over the row's columns one element a read, the row read
//! twice forward and three times backward, each of four sums in shared memory
//! ([`cube_sum`]); the formulas are [`super::layer_norm`]'s. The form every row had before the
//! warp-a-row kernels, about 0.10x as fast as those on lavapipe (docs/benchmarks.md).

use cubecl::prelude::*;

use super::kernels::cube_sum;
#[cfg(doc)]
use super::warp_rows::MAX_ROW;

/// The mean and `1/√(σ² + ε)` of row `base..base + d` of `x` (two passes: the mean, then the
/// centred squares).
#[cube]
fn row_moments<F: Float>(
    x: &Tensor<F>,
    base: usize,
    d: usize,
    epsilon: f32,
    shared: &mut SharedMemory<f32>,
    #[comptime] units: usize,
) -> (f32, f32) {
    let mut sum = 0.0f32;
    let mut c = UNIT_POS_X as usize;
    while c < d {
        sum += f32::cast_from(x[base + c]);
        c += units;
    }
    let mean = cube_sum(sum, shared) / f32::cast_from(d as u32);
    let mut squares = 0.0f32;
    c = UNIT_POS_X as usize;
    while c < d {
        let centred = f32::cast_from(x[base + c]) - mean;
        squares += centred * centred;
        c += units;
    }
    let variance = cube_sum(squares, shared) / f32::cast_from(d as u32);
    (mean, 1.0f32 / f32::sqrt(variance + epsilon))
}

/// LayerNorm over each row, a cube a row (rows longer than [`MAX_ROW`]): `out = (x − μ)·r·γ + β` with `r = 1/√(σ² + ε)`.
#[cube(launch_unchecked)]
pub fn layer_norm_cube_forward<F: Float>(
    x: &Tensor<F>,
    gamma: &Tensor<F>,
    beta: &Tensor<F>,
    out: &mut Tensor<F>,
    epsilon: f32,
    #[comptime] has_beta: bool,
    #[comptime] units: usize,
    #[define(F)] _dtype: StorageType,
) {
    let row = CUBE_POS;
    if row >= x.shape(0) {
        terminate!();
    }
    let d = x.shape(1);
    let base = row * x.stride(0);
    let mut shared = SharedMemory::<f32>::new(units);
    let (mean, rstd) = row_moments::<F>(x, base, d, epsilon, &mut shared, units);
    let mut c = UNIT_POS_X as usize;
    while c < d {
        let mut y = (f32::cast_from(x[base + c]) - mean) * rstd * f32::cast_from(gamma[c]);
        if comptime![has_beta] {
            y += f32::cast_from(beta[c]);
        }
        out[row * out.stride(0) + c] = F::cast_from(y);
        c += units;
    }
}

/// LayerNorm's backward over each row, a cube a row (rows longer than [`MAX_ROW`]), from the input (moments recomputed): with
/// `x̂ = (x − μ)·r` and `g = grad ⊙ γ`, `dx = r·(g − mean(g) − x̂·mean(g ⊙ x̂))`; also writes
/// `grad ⊙ x̂`, whose column sums are `dγ`; with `has_pending`, `pending` (laid out as `dx`)
/// is added to `dx`.
#[cube(launch_unchecked)]
pub fn layer_norm_cube_backward<F: Float>(
    x: &Tensor<F>,
    gamma: &Tensor<F>,
    grad: &Tensor<F>,
    pending: &Tensor<F>,
    dx: &mut Tensor<F>,
    grad_normalized: &mut Tensor<F>,
    epsilon: f32,
    #[comptime] has_pending: bool,
    #[comptime] units: usize,
    #[define(F)] _dtype: StorageType,
) {
    let row = CUBE_POS;
    if row >= x.shape(0) {
        terminate!();
    }
    let d = x.shape(1);
    let (base, gbase, obase) = (row * x.stride(0), row * grad.stride(0), row * dx.stride(0));
    let mut shared = SharedMemory::<f32>::new(units);
    let (mean, rstd) = row_moments::<F>(x, base, d, epsilon, &mut shared, units);
    let mut sum_g = 0.0f32;
    let mut sum_gx = 0.0f32;
    let mut c = UNIT_POS_X as usize;
    while c < d {
        let normalized = (f32::cast_from(x[base + c]) - mean) * rstd;
        let g = f32::cast_from(grad[gbase + c]) * f32::cast_from(gamma[c]);
        sum_g += g;
        sum_gx += g * normalized;
        c += units;
    }
    let mean_g = cube_sum(sum_g, &mut shared) / f32::cast_from(d as u32);
    let mean_gx = cube_sum(sum_gx, &mut shared) / f32::cast_from(d as u32);
    c = UNIT_POS_X as usize;
    while c < d {
        let normalized = (f32::cast_from(x[base + c]) - mean) * rstd;
        let upstream = f32::cast_from(grad[gbase + c]);
        let g = upstream * f32::cast_from(gamma[c]);
        let mut out = rstd * (g - mean_g - normalized * mean_gx);
        if comptime![has_pending] {
            out += f32::cast_from(pending[obase + c]);
        }
        dx[obase + c] = F::cast_from(out);
        grad_normalized[obase + c] = F::cast_from(upstream * normalized);
        c += units;
    }
}
