//! The CubeCL kernels of the fused operations (compiled for the GPU at first use).
//!
//! Row kernels ([`softmax_forward`], [`cross_entropy_forward`] and their backwards; LayerNorm's
//! are in `layer_norm.rs` and `layer_norm_long.rs`) give each row of a `[rows, d]` matrix to one cube: its units stride over the row's columns, and their partial
//! sums meet in shared memory ([`cube_sum`], [`cube_max`], [`cube_sum_two`], which also serve
//! cubes of several rows, a warp each). Every sum is kept in `f32`,
//! whatever the tensors' float type (`f16` runs read and write half precision but reduce in
//! single). Element-wise kernels ([`gelu_forward`],
//! [`gelu_backward`]) give each element to one unit. The formulas are those of the CPU
//! kernels and of the composed reference (`fused/mod.rs`, `cross_entropy.rs`).

use cubecl::prelude::*;

/// The sum over the units of this unit's row of the cube of `value` (one per unit), returned
/// to each of them. A row is the cube's `CUBE_DIM_X` units at one `UNIT_POS_Y` (a 1-D cube is
/// one row; attention's weights give each of a cube's rows a row of scores); `shared` holds one
/// `f32` per unit of the cube; `CUBE_DIM_X` is a power of two. Every unit of the cube meets
/// every synchronization.
#[cube]
pub(super) fn cube_sum(value: f32, shared: &mut SharedMemory<f32>) -> f32 {
    row_reduce(value, shared, false)
}

/// The maximum over the units of this unit's row of the cube of `value`, as [`cube_sum`].
#[cube]
pub(super) fn cube_max(value: f32, shared: &mut SharedMemory<f32>) -> f32 {
    row_reduce(value, shared, true)
}

/// The sums over this unit's row of the cube of `a` and of `b`, each as [`cube_sum`] adds
/// it, in one set of halvings: `shared` holds two `f32` per unit of the cube.
#[cube]
pub(super) fn cube_sum_two(a: f32, b: f32, shared: &mut SharedMemory<f32>) -> (f32, f32) {
    let lane = UNIT_POS_X as usize;
    let at = UNIT_POS_Y as usize * CUBE_DIM_X as usize;
    let other = CUBE_DIM_X as usize * CUBE_DIM_Y as usize;
    shared[at + lane] = a;
    shared[other + at + lane] = b;
    sync_cube();
    let mut half = CUBE_DIM_X as usize / 2;
    while half > 0 {
        if lane < half {
            shared[at + lane] = shared[at + lane] + shared[at + lane + half];
            shared[other + at + lane] = shared[other + at + lane] + shared[other + at + lane + half];
        }
        sync_cube();
        half /= 2;
    }
    let sums = (shared[at], shared[other + at]);
    sync_cube();
    sums
}

/// [`cube_sum`] (or, `max`, [`cube_max`]): halvings in the row's own `CUBE_DIM_X` words of
/// `shared`, each adding (or taking the larger of) a word and the one `half` after it.
#[cube]
fn row_reduce(value: f32, shared: &mut SharedMemory<f32>, #[comptime] max: bool) -> f32 {
    let lane = UNIT_POS_X as usize;
    let at = UNIT_POS_Y as usize * CUBE_DIM_X as usize;
    shared[at + lane] = value;
    sync_cube();
    let mut half = CUBE_DIM_X as usize / 2;
    while half > 0 {
        if lane < half {
            let (a, b) = (shared[at + lane], shared[at + lane + half]);
            let mut both = a + b;
            if comptime![max] {
                both = f32::max(a, b);
            }
            shared[at + lane] = both;
        }
        sync_cube();
        half /= 2;
    }
    let total = shared[at];
    sync_cube();
    total
}

/// The offset of row `row`'s entries in a mask viewed as `[batch, heads, queries, keys]`
/// through its strides (rows being `(batch, head, query)`).
#[cube]
pub(super) fn mask_row<M: Numeric>(mask: &Tensor<M>, row: usize) -> usize {
    let queries = mask.shape(2);
    let heads = mask.shape(1);
    let (query, head, batch) = (row % queries, (row / queries) % heads, row / (queries * heads));
    batch * mask.stride(0) + head * mask.stride(1) + query * mask.stride(2)
}

/// The score in column `c` of the row at `base` of `x`: `masked_score` where `has_mask` and the
/// mask (its row at `mask_base`) is set there.
#[cube]
#[allow(clippy::collapsible_if)] // the outer `if` is decided when the kernel is compiled
fn score<F: Float, M: Numeric>(
    x: &Tensor<F>,
    mask: &Tensor<M>,
    base: usize,
    mask_base: usize,
    c: usize,
    masked_score: f32,
    #[comptime] has_mask: bool,
) -> f32 {
    let mut s = f32::cast_from(x[base + c]);
    if comptime![has_mask] {
        if u32::cast_from(mask[mask_base + c * mask.stride(3)]) != 0 {
            s = masked_score;
        }
    }
    s
}

/// Softmax over each row of `x`; where `has_mask`, the entries whose `mask` (viewed as
/// `[batch, heads, queries, keys]` through its strides, rows being `(batch, head, query)`) is
/// set count as `masked_score` first (attention's masked softmax).
#[cube(launch_unchecked)]
pub fn softmax_forward<F: Float, M: Numeric>(
    x: &Tensor<F>,
    mask: &Tensor<M>,
    out: &mut Tensor<F>,
    masked_score: f32,
    #[comptime] has_mask: bool,
    #[comptime] units: usize,
    #[define(F, M)] _dtypes: [StorageType; 2],
) {
    let row = CUBE_POS;
    if row >= x.shape(0) {
        terminate!();
    }
    let d = x.shape(1);
    let (base, obase) = (row * x.stride(0), row * out.stride(0));
    let mut mask_base = 0;
    if comptime![has_mask] {
        mask_base = mask_row::<M>(mask, row);
    }
    let mut shared = SharedMemory::<f32>::new(units);
    let lse = log_sum_exp::<F, M>(x, mask, base, mask_base, d, masked_score, &mut shared, has_mask, units);
    let mut c = UNIT_POS_X as usize;
    while c < d {
        let s = score::<F, M>(x, mask, base, mask_base, c, masked_score, has_mask);
        out[obase + c] = F::cast_from(f32::exp(s - lse));
        c += units;
    }
}

/// The softmax's backward over each row, from its output `y`: `y ⊙ (grad − Σ grad ⊙ y)`.
#[cube(launch_unchecked)]
pub fn softmax_backward<F: Float>(
    y: &Tensor<F>,
    grad: &Tensor<F>,
    dx: &mut Tensor<F>,
    #[comptime] units: usize,
    #[define(F)] _dtype: StorageType,
) {
    let row = CUBE_POS;
    if row >= y.shape(0) {
        terminate!();
    }
    let d = y.shape(1);
    let (base, gbase, obase) = (row * y.stride(0), row * grad.stride(0), row * dx.stride(0));
    let mut shared = SharedMemory::<f32>::new(units);
    let mut dot = 0.0f32;
    let mut c = UNIT_POS_X as usize;
    while c < d {
        dot += f32::cast_from(y[base + c]) * f32::cast_from(grad[gbase + c]);
        c += units;
    }
    let dot = cube_sum(dot, &mut shared);
    c = UNIT_POS_X as usize;
    while c < d {
        let p = f32::cast_from(y[base + c]);
        dx[obase + c] = F::cast_from(p * (f32::cast_from(grad[gbase + c]) - dot));
        c += units;
    }
}

/// `log Σ_c e^{s_c}` of the row at `base` (`d` columns) of `x`, with the scores `s` of
/// [`score`] (masked where `has_mask`): the row's maximum first, then the sum of exponentials.
#[cube]
#[allow(clippy::too_many_arguments)]
fn log_sum_exp<F: Float, M: Numeric>(
    x: &Tensor<F>,
    mask: &Tensor<M>,
    base: usize,
    mask_base: usize,
    d: usize,
    masked_score: f32,
    shared: &mut SharedMemory<f32>,
    #[comptime] has_mask: bool,
    #[comptime] units: usize,
) -> f32 {
    let mut top = f32::new(-3.0e38);
    let mut c = UNIT_POS_X as usize;
    while c < d {
        top = f32::max(top, score::<F, M>(x, mask, base, mask_base, c, masked_score, has_mask));
        c += units;
    }
    let top = cube_max(top, shared);
    let mut sum = 0.0f32;
    c = UNIT_POS_X as usize;
    while c < d {
        sum += f32::exp(score::<F, M>(x, mask, base, mask_base, c, masked_score, has_mask) - top);
        c += units;
    }
    top + f32::ln(cube_sum(sum, shared))
}

/// Softmax + cross-entropy per row of logits `z` against `targets`: `out[row] = [nll,
/// smoothed]` with `nll = lse − z_t` and `smoothed = (1 − s)·nll + s·(lse − mean z)`.
#[cube(launch_unchecked)]
pub fn cross_entropy_forward<F: Float, I: Numeric>(
    z: &Tensor<F>,
    targets: &Tensor<I>,
    out: &mut Tensor<F>,
    smoothing: f32,
    #[comptime] units: usize,
    #[define(F, I)] _dtypes: [StorageType; 2],
) {
    let row = CUBE_POS;
    if row >= z.shape(0) {
        terminate!();
    }
    let vocab = z.shape(1);
    let base = row * z.stride(0);
    let mut shared = SharedMemory::<f32>::new(units);
    let lse = log_sum_exp::<F, I>(z, targets, base, 0, vocab, 0.0f32, &mut shared, false, units);
    let mut sum = 0.0f32;
    let mut c = UNIT_POS_X as usize;
    while c < vocab {
        sum += f32::cast_from(z[base + c]);
        c += units;
    }
    let mean = cube_sum(sum, &mut shared) / f32::cast_from(vocab as u32);
    if UNIT_POS_X == 0 {
        let target = u32::cast_from(targets[row * targets.stride(0)]) as usize;
        // A target outside the vocabulary gives an infinite loss (the loop's non-finite check
        // stops there) instead of reading another row's logit. `exp(1000·target)` overflows to
        // +inf at run time (WGSL has no infinite literal, and a constant would be folded).
        let mut nll = f32::exp(1000.0f32 * f32::cast_from(target as u32));
        if target < vocab {
            nll = lse - f32::cast_from(z[base + target]);
        }
        out[row * out.stride(0)] = F::cast_from(nll);
        out[row * out.stride(0) + out.stride(1)] = F::cast_from((1.0f32 - smoothing) * nll + smoothing * (lse - mean));
    }
}

/// The cross-entropy's gradient with respect to the logits, from the output's gradient
/// `(g₀, g₁)` per row and `p = softmax(z)`:
/// `dz = (g₀ + g₁)·p − g₁·s/V − (g₀ + (1 − s)·g₁)·onehot(t)`.
#[cube(launch_unchecked)]
pub fn cross_entropy_backward<F: Float, I: Numeric>(
    z: &Tensor<F>,
    targets: &Tensor<I>,
    grad: &Tensor<F>,
    dz: &mut Tensor<F>,
    smoothing: f32,
    #[comptime] units: usize,
    #[define(F, I)] _dtypes: [StorageType; 2],
) {
    let row = CUBE_POS;
    if row >= z.shape(0) {
        terminate!();
    }
    let vocab = z.shape(1);
    let (base, obase) = (row * z.stride(0), row * dz.stride(0));
    let mut shared = SharedMemory::<f32>::new(units);
    let lse = log_sum_exp::<F, I>(z, targets, base, 0, vocab, 0.0f32, &mut shared, false, units);
    let target = u32::cast_from(targets[row * targets.stride(0)]) as usize;
    let g0 = f32::cast_from(grad[row * grad.stride(0)]);
    let g1 = f32::cast_from(grad[row * grad.stride(0) + grad.stride(1)]);
    let uniform = g1 * smoothing / f32::cast_from(vocab as u32);
    let mut c = UNIT_POS_X as usize;
    while c < vocab {
        let p = f32::exp(f32::cast_from(z[base + c]) - lse);
        let mut d = (g0 + g1) * p - uniform;
        if c == target {
            d -= g0 + (1.0f32 - smoothing) * g1;
        }
        dz[obase + c] = F::cast_from(d);
        c += units;
    }
}

/// `Φ(x) = ½(1 + erf(x/√2))`.
#[cube]
fn normal_cdf(x: f32) -> f32 {
    0.5f32 * (1.0f32 + Erf::erf(x * f32::new(core::f32::consts::FRAC_1_SQRT_2)))
}

/// Exact GELU, element-wise: `x·Φ(x)`.
#[cube(launch_unchecked)]
pub fn gelu_forward<F: Float>(x: &Tensor<F>, out: &mut Tensor<F>, #[define(F)] _dtype: StorageType) {
    let i = ABSOLUTE_POS;
    if i >= x.len() {
        terminate!();
    }
    let v = f32::cast_from(x[i]);
    out[i] = F::cast_from(v * normal_cdf(v));
}

/// GELU's backward, element-wise: `grad·(Φ(x) + x·φ(x))`.
#[cube(launch_unchecked)]
pub fn gelu_backward<F: Float>(x: &Tensor<F>, grad: &Tensor<F>, dx: &mut Tensor<F>, #[define(F)] _dtype: StorageType) {
    let i = ABSOLUTE_POS;
    if i >= x.len() {
        terminate!();
    }
    let v = f32::cast_from(x[i]);
    let density = f32::exp(-0.5f32 * v * v) * f32::new(0.398_942_3);
    dx[i] = F::cast_from(f32::cast_from(grad[i]) * (normal_cdf(v) + v * density));
}
