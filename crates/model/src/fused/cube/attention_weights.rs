//! Attention's weights with dropout, as two CubeCL row kernels ([`crate::fused::attention_weights`]):
//! forward, from the raw scores `X = QKᵀ` of one row (a query of one head), `P = softmax(s·X)`
//! with the masked keys at `MASKED_SCORE`, and `P̃ = P ⊙ m / keep` with `m` drawn in the
//! kernel; backward, from `P`, `P̃` and `dP̃`, `dX = s·P ⊙ (dP − Σ dP ⊙ P)` with
//! `dP = dP̃ ⊙ [P̃ > 0] / keep`, and 0 at masked keys.
//!
//! What this saves on a GPU: the composed form runs the scale and mask, the softmax (burn-fusion's
//! reduction gives one unit a row: 0.78 ms a layer on an H200 for nanoGPT's `[64, 6, 256, 256]`
//! scores, where reading them takes about 0.03), Burn's Bernoulli draw into a mask tensor,
//! the product by it, and in the backward the product by the mask again, the softmax's backward
//! (a reduction) and the scale, each a pass over a score-sized tensor. Here each direction is one
//! launch, each row one warp of [`UNITS`] units, [`ROWS`] rows a cube. Each unit reads its share
//! of the row (every 32nd vector of four keys, or of one where the keys are not a multiple of
//! four, [`row_vectors`]) once, all its reads under way before the first is used, and keeps it
//! in registers until it writes the results: a warp's reads and writes are contiguous (512 bytes
//! a read in `f32` with four keys a vector). Rows longer than [`MAX_KEYS`] run composed; each
//! distinct count of vectors a unit is a kernel compiled of its own (one for up to 128 keys,
//! one more for each further 128).
//!
//! **The mask** `m` of element `i` (its index in the `[rows, keys]` matrix) is
//! `mix(mix(i ⊕ k₀) + k₁) < keep·2³²` with `mix` the "lowbias32" integer hash (xor-shifts and
//! two odd multipliers, a bijection of `u32`) and `(k₀, k₁)` a key of two 24-bit draws from the
//! backend's seeded generator, new for every call: a run is as reproducible as with Burn's
//! draws, and `h(i)` is a keyed permutation of the indices, so no two elements of one call share
//! a draw (below 2³² elements). The backward does not draw again: where `P > 0` the element
//! was kept exactly where `P̃ > 0`, and where `P = 0` the element adds nothing to `dX`.

use burn::tensor::TensorMetadata;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::prelude::*;

use super::kernels::{cube_max, cube_sum, mask_row};
use super::warp_rows::{row_vectors, this_row, warp_rows, ROWS, UNITS};
use super::{as_rows, empty};
use crate::mask::MASKED_SCORE;

/// The "lowbias32" hash of `x` (Chris Wellons' hash-prospector): a bijection of `u32` whose
/// output bits each depend on every input bit.
#[cube]
fn mix(x: u32) -> u32 {
    let x = (x ^ (x >> 16u32)) * 0x7feb_352du32;
    let x = (x ^ (x >> 15u32)) * 0x846c_a68bu32;
    x ^ (x >> 16u32)
}

/// Whether key `c` of the row at `mask_base` is masked.
#[cube]
fn masked<M: Numeric>(mask: &Tensor<M>, mask_base: usize, c: usize, #[comptime] has_mask: bool) -> bool {
    let mut is = false;
    if comptime![has_mask] {
        is = u32::cast_from(mask[mask_base + c * mask.stride(3)]) != 0;
    }
    is
}

/// `P` and `P̃` of each row of the raw scores `x` (`[rows, keys]`, contiguous, read `N` keys at
/// a time): scores `s·x`, `masked_score` where `mask` is set, their softmax, and each weight
/// kept (times `inverse_keep`) where its draw is below `threshold`. A unit holds its `chunks`
/// vectors of the row (every [`UNITS`]th) in registers from one read to the writes.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn attention_weights_forward<F: Float, M: Numeric, I: Numeric, N: Size>(
    x: &Tensor<Vector<F, N>>,
    mask: &Tensor<M>,
    key: &Tensor<I>,
    weights: &mut Tensor<Vector<F, N>>,
    dropped: &mut Tensor<Vector<F, N>>,
    scale: f32,
    masked_score: f32,
    threshold: u32,
    inverse_keep: f32,
    #[comptime] has_mask: bool,
    #[comptime] chunks: usize,
    #[define(F, M, I)] _dtypes: [StorageType; 3],
) {
    let width = comptime![x.vector_size()];
    let (row, d) = this_row(x.shape(0), x.shape(1));
    let (vectors, base) = (d / width, row * x.shape(1));
    let mut mask_base = 0;
    if comptime![has_mask] {
        mask_base = mask_row::<M>(mask, row);
    }
    let mut shared = SharedMemory::<f32>::new(comptime![UNITS * ROWS]);
    let mut s = Array::<Vector<f32, N>>::new(chunks);
    let mut top = f32::new(-3.0e38);
    #[unroll]
    for j in 0..chunks {
        let v = j * UNITS + UNIT_POS_X as usize;
        let mut scores = Vector::<f32, N>::new(masked_score);
        if v < vectors {
            scores = Vector::<f32, N>::cast_from(x[base / width + v]) * Vector::new(scale);
            #[unroll]
            for i in 0..width {
                if masked::<M>(mask, mask_base, v * width + i, has_mask) {
                    scores[i] = masked_score;
                }
                top = f32::max(top, scores[i]);
            }
        }
        s[j] = scores;
    }
    let top = cube_max(top, &mut shared);
    let mut sum = 0.0f32;
    #[unroll]
    for j in 0..chunks {
        let v = j * UNITS + UNIT_POS_X as usize;
        if v < vectors {
            let e = Vector::exp(s[j] - Vector::new(top));
            #[unroll]
            for i in 0..width {
                sum += e[i];
            }
            s[j] = e;
        }
    }
    let sum = cube_sum(sum, &mut shared);
    let (k0, k1) = (u32::cast_from(key[0]), u32::cast_from(key[key.stride(0)]));
    #[unroll]
    for j in 0..chunks {
        let v = j * UNITS + UNIT_POS_X as usize;
        if v < vectors {
            let p = s[j] / Vector::new(sum);
            weights[base / width + v] = Vector::cast_from(p);
            let mut kept = Vector::<f32, N>::new(0.0);
            #[unroll]
            for i in 0..width {
                let draw = mix(mix(u32::cast_from(base + v * width + i) ^ k0) + k1);
                if draw < threshold {
                    kept[i] = p[i] * inverse_keep;
                }
            }
            dropped[base / width + v] = Vector::cast_from(kept);
        }
    }
}

/// The gradient of each row's raw scores from `P` (`weights`), `P̃` (`dropped`) and `dP̃`
/// (`grad`), all `[rows, keys]`, contiguous and read `N` keys at a time: `s·P ⊙ (dP − Σ dP ⊙
/// P)`, 0 where `mask` is set. A unit holds its `chunks` vectors of `P` and `dP` in registers.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn attention_weights_backward<F: Float, M: Numeric, N: Size>(
    weights: &Tensor<Vector<F, N>>,
    dropped: &Tensor<Vector<F, N>>,
    grad: &Tensor<Vector<F, N>>,
    mask: &Tensor<M>,
    dx: &mut Tensor<Vector<F, N>>,
    scale: f32,
    inverse_keep: f32,
    #[comptime] has_mask: bool,
    #[comptime] chunks: usize,
    #[define(F, M)] _dtypes: [StorageType; 2],
) {
    let width = comptime![weights.vector_size()];
    let (row, d) = this_row(weights.shape(0), weights.shape(1));
    let (vectors, base) = (d / width, row * weights.shape(1));
    let mut mask_base = 0;
    if comptime![has_mask] {
        mask_base = mask_row::<M>(mask, row);
    }
    let mut shared = SharedMemory::<f32>::new(comptime![UNITS * ROWS]);
    let mut p = Array::<Vector<f32, N>>::new(chunks);
    let mut dp = Array::<Vector<f32, N>>::new(chunks);
    let mut dot = 0.0f32;
    #[unroll]
    for j in 0..chunks {
        let v = j * UNITS + UNIT_POS_X as usize;
        let mut pv = Vector::<f32, N>::new(0.0);
        let mut dv = Vector::<f32, N>::new(0.0);
        if v < vectors {
            let at = base / width + v;
            pv = Vector::cast_from(weights[at]);
            let (kept, g) = (Vector::<f32, N>::cast_from(dropped[at]), Vector::<f32, N>::cast_from(grad[at]));
            #[unroll]
            for i in 0..width {
                if kept[i] > 0.0f32 {
                    dv[i] = g[i] * inverse_keep;
                }
                dot += dv[i] * pv[i];
            }
        }
        p[j] = pv;
        dp[j] = dv;
    }
    let dot = cube_sum(dot, &mut shared);
    #[unroll]
    for j in 0..chunks {
        let v = j * UNITS + UNIT_POS_X as usize;
        if v < vectors {
            let mut ds = Vector::new(scale) * p[j] * (dp[j] - Vector::new(dot));
            #[unroll]
            for i in 0..width {
                if masked::<M>(mask, mask_base, v * width + i, has_mask) {
                    ds[i] = 0.0f32;
                }
            }
            dx[base / width + v] = Vector::cast_from(ds);
        }
    }
}

/// The longest rows the kernels take ([`super::warp_rows::MAX_ROW`]: 64 keys a unit in
/// registers). Longer rows run the composed form
/// ([`crate::fused::FusedOps::fused_attention_weights`]' default, Burn's draw for the mask).
pub(super) const MAX_KEYS: usize = super::warp_rows::MAX_ROW;

/// `keep·2³²` as the draws' threshold (`keep` in `(0, 1)`).
pub(super) fn threshold(keep: f64) -> u32 {
    assert!(keep > 0.0 && keep < 1.0, "attention dropout keeps a share in (0, 1), not {keep}");
    (keep * 4_294_967_296.0) as u32
}

/// `[P, P̃]` of the raw scores `x` (`[batch, heads, queries, keys]`), the mask expanded to
/// that shape if any, the key (two integers) and keep probability `keep`.
pub(super) fn forward<R: CubeRuntime>(
    x: CubeTensor<R>,
    mask: Option<CubeTensor<R>>,
    key: CubeTensor<R>,
    scale: f64,
    keep: f64,
) -> [CubeTensor<R>; 2] {
    let (x, shape) = as_rows(x);
    let key = into_contiguous(key);
    let (weights, dropped) = (empty(&x, x.shape()), empty(&x, x.shape()));
    let (count, dim) = warp_rows(&x);
    let (width, chunks) = row_vectors(&x);
    let has_mask = mask.is_some();
    // Without a mask the kernel still takes a tensor there (never read): `x` itself.
    let mask = mask.unwrap_or_else(|| x.clone());
    let dtypes = [x.dtype.into(), mask.dtype.into(), key.dtype.into()];
    // SAFETY: `this_row` gives units past the last row no keys, each read and write is of a vector
    // below the row's (`v < vectors`), the mask is read through its own strides at those keys, the
    // key at 0 and its stride.
    unsafe {
        attention_weights_forward::launch_unchecked::<R>(
            &x.client.clone(),
            count,
            dim,
            width,
            x.into_tensor_arg(),
            mask.into_tensor_arg(),
            key.into_tensor_arg(),
            weights.clone().into_tensor_arg(),
            dropped.clone().into_tensor_arg(),
            scale as f32,
            MASKED_SCORE,
            threshold(keep),
            (1.0 / keep) as f32,
            has_mask,
            chunks,
            dtypes,
        );
    }
    [weights, dropped].map(|t| burn_cubecl::ops::reshape(t, shape.clone()))
}

/// The raw scores' gradient from `P`, `P̃`, `dP̃` (`[batch, heads, queries, keys]`) and the
/// mask expanded to that shape if any.
pub(super) fn backward<R: CubeRuntime>(
    weights: CubeTensor<R>,
    dropped: CubeTensor<R>,
    grad: CubeTensor<R>,
    mask: Option<CubeTensor<R>>,
    scale: f64,
    keep: f64,
) -> CubeTensor<R> {
    let (weights, shape) = as_rows(weights);
    let ((dropped, _), (grad, _)) = (as_rows(dropped), as_rows(grad));
    let dx = empty(&weights, weights.shape());
    let (count, dim) = warp_rows(&weights);
    let (width, chunks) = row_vectors(&weights);
    let has_mask = mask.is_some();
    let mask = mask.unwrap_or_else(|| weights.clone());
    let dtypes = [weights.dtype.into(), mask.dtype.into()];
    // SAFETY: `this_row` gives units past the last row no keys, each read and write is of a vector
    // below the row's (`v < vectors`), and `weights`, `dropped`, `grad` and `dx` are laid out
    // alike; the mask is read through its own strides.
    unsafe {
        attention_weights_backward::launch_unchecked::<R>(
            &weights.client.clone(),
            count,
            dim,
            width,
            weights.into_tensor_arg(),
            dropped.into_tensor_arg(),
            grad.into_tensor_arg(),
            mask.into_tensor_arg(),
            dx.clone().into_tensor_arg(),
            scale as f32,
            (1.0 / keep) as f32,
            has_mask,
            chunks,
            dtypes,
        );
    }
    burn_cubecl::ops::reshape(dx, shape)
}
