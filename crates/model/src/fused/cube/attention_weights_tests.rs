//! Attention's weights with dropout as CubeCL kernels (`attention_weights.rs`) against the
//! composed form on the same GPU backend, given the mask the kernel drew; run with `--features
//! test-wgpu` (lavapipe will do).

use burn::nn::DropoutConfig;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Bool, Tensor, TensorData};
use std::sync::atomic::Ordering;

use super::attention_weights::{threshold, MAX_KEYS};
use super::tests::serial;
use super::warp_rows::{row_vectors, LAST_ROWS};
use super::CALLS;
use crate::fused::dispatch::{WgpuUnfused, TEST_GPU_KERNELS};
use crate::fused::tests::{close, close_to_scale, data, values};
use crate::fused::{attention_weights, GpuKernels};
use crate::mask::MASKED_SCORE;

type Fused = burn::backend::Autodiff<burn_wgpu::Wgpu>;
type Unfused = burn::backend::Autodiff<WgpuUnfused>;

/// Rows longer than the largest cube (256 units), read four keys at a time in three vectors a
/// unit (the last of them partly past the row's end), a mask per batch entry shared by the
/// heads, and one query (batch 1, query 5) with every key masked.
const SHAPE: [usize; 4] = [2, 3, 17, 300];
/// Keys that are not a multiple of four: read one at a time, two a unit (the second partly past
/// the row's end).
const ODD: [usize; 4] = [2, 4, 24, 37];
const SCALE: f64 = 0.125;
const P: f64 = 0.2;

fn mask_values(shape: [usize; 4]) -> Vec<bool> {
    let [batch, _, queries, keys] = shape;
    let mut mask = Vec::with_capacity(batch * queries * keys);
    for b in 0..batch {
        for q in 0..queries {
            for k in 0..keys {
                mask.push(k > 10 * q + 3 * b || (b == 1 && q == 5));
            }
        }
    }
    mask
}

struct Run {
    weights: Vec<f32>,
    dropped: Vec<f32>,
    grad: Vec<f32>,
}

/// The raw scores (tracked), the weights of the output's sum, and the mask ([`mask_values`],
/// where `masked`).
fn inputs<B: AutodiffBackend>(
    shape: [usize; 4],
    masked: bool,
) -> (Tensor<B, 4>, Tensor<B, 4>, Option<Tensor<B, 4, Bool>>) {
    let device = Default::default();
    let n: usize = shape.iter().product();
    let x = Tensor::<B, 4>::from_data(TensorData::new(values(n, 31, 24.0), shape), &device).require_grad();
    let w = Tensor::<B, 4>::from_data(TensorData::new(values(n, 32, 1.0), shape), &device);
    let [b, _, q, k] = shape;
    let mask =
        masked.then(|| Tensor::<B, 4, Bool>::from_data(TensorData::new(mask_values(shape), [b, 1, q, k]), &device));
    (x, w, mask)
}

/// `[P, P̃]` of the kernels and the raw scores' gradient of `Σ P̃ ⊙ W`.
fn kernels<B: AutodiffBackend>(shape: [usize; 4], masked: bool) -> Run {
    let (x, w, mask) = inputs::<B>(shape, masked);
    let [weights, dropped] = attention_weights(x.clone(), mask, SCALE, &DropoutConfig::new(P).init());
    let grads = (dropped.clone() * w).sum().backward();
    Run { weights: data(weights), dropped: data(dropped), grad: data(x.grad(&grads).unwrap()) }
}

/// The same through Burn's operations, with the mask `kept` (1 where kept) as a constant.
fn composed<B: AutodiffBackend>(shape: [usize; 4], masked: bool, kept: &[f32]) -> Run {
    let (x, w, mask) = inputs::<B>(shape, masked);
    let mut scores = x.clone().mul_scalar(SCALE);
    if let Some(mask) = mask {
        scores = scores.mask_fill(mask.expand(shape), MASKED_SCORE);
    }
    let weights = burn::tensor::activation::softmax(scores, 3);
    let m = Tensor::<B, 4>::from_data(TensorData::new(kept.to_vec(), shape), &x.device());
    let dropped = weights.clone() * m.mul_scalar(1.0 / (1.0 - P));
    let grads = (dropped.clone() * w).sum().backward();
    Run { weights: data(weights), dropped: data(dropped), grad: data(x.grad(&grads).unwrap()) }
}

/// `ours` is the composed form's weights, dropped weights and gradient for the mask it drew,
/// each weight either dropped or kept and scaled.
fn matches_composed<B: AutodiffBackend>(ours: &Run, shape: [usize; 4], masked: bool) {
    let scale = (1.0 / (1.0 - P)) as f32;
    for (i, (&p, &d)) in ours.weights.iter().zip(&ours.dropped).enumerate() {
        assert!(d == 0.0 || d == p * scale, "P̃[{i}] = {d} is neither 0 nor P/keep = {}", p * scale);
    }
    let kept: Vec<f32> = ours.dropped.iter().map(|&d| if d > 0.0 { 1.0 } else { 0.0 }).collect();
    let reference = composed::<B>(shape, masked, &kept);
    close(&ours.weights, &reference.weights, 1e-5, "P");
    close(&ours.dropped, &reference.dropped, 1e-5, "P̃");
    close(&ours.grad, &reference.grad, 1e-5, "dX");
}

/// How the kernels read `shape`'s rows (vectors of four keys or single keys, and how many a
/// unit), and the case itself.
fn case<B: AutodiffBackend>(shape: [usize; 4], rows: (usize, usize)) {
    let before = CALLS.load(Ordering::Relaxed);
    *LAST_ROWS.lock().unwrap() = None;
    let ours = kernels::<B>(shape, true);
    let ran = CALLS.load(Ordering::Relaxed) - before;
    assert!(ran >= 2, "the kernels ran {ran} times, not forward and backward");
    assert_eq!(*LAST_ROWS.lock().unwrap(), Some(rows), "the kernels read {shape:?}'s rows otherwise");
    matches_composed::<B>(&ours, shape, true);
    // The masked keys (a whole row among them) have no gradient; the drawn share is `keep`.
    let masked = mask_values(shape);
    let [_, h, q, k] = shape;
    let at = |i: usize| (i / (h * q * k)) * q * k + (i % (q * k));
    for (i, &g) in ours.grad.iter().enumerate() {
        assert!(!masked[at(i)] || g == 0.0, "dX[{i}] = {g} at a masked key");
    }
    let live = ours.weights.iter().filter(|&&p| p > 0.0).count();
    let share = ours.dropped.iter().filter(|&&d| d > 0.0).count() as f64 / live as f64;
    assert!((share - (1.0 - P)).abs() < 0.02, "kept {share} of {live} weights, not about {}", 1.0 - P);
    // Each weight has a draw of its own, not each vector of four: of four neighbouring live
    // weights all four are kept or all dropped with chance keep⁴ + p⁴ (0.41), not 1.
    let (mut alike, mut groups) = (0, 0);
    for (w, d) in ours.weights.chunks_exact(4).zip(ours.dropped.chunks_exact(4)) {
        if w.iter().all(|&p| p > 0.0) {
            groups += 1;
            alike += usize::from(d.iter().all(|&x| x > 0.0) || d.iter().all(|&x| x == 0.0));
        }
    }
    let share = alike as f64 / groups as f64;
    assert!(groups > 500 && share < 0.55, "{alike} of {groups} groups of four kept or dropped together");
}

/// On both GPU backends (burn-fusion under `attention`), the kernels give the composed form's
/// weights, dropped weights and gradient for the mask they drew, which keeps `1 − p` of them,
/// with rows read four keys at a time and one at a time.
#[test]
fn attention_weights_kernels_give_the_composed_softmax_dropout_and_gradient_for_the_mask_they_drew() {
    let _turn = serial();
    TEST_GPU_KERNELS.with(|m| m.set(Some(GpuKernels::Attention)));
    for (shape, rows) in [(SHAPE, (4, 3)), (ODD, (1, 2))] {
        case::<Fused>(shape, rows);
        case::<Unfused>(shape, rows);
    }
}

/// Rows longer than the kernels take ([`MAX_KEYS`]) run the composed form on both GPU
/// backends: its weights, dropped weights and gradient for the mask it drew, and no kernel.
#[test]
fn attention_weights_on_rows_longer_than_the_kernels_take_run_composed() {
    let _turn = serial();
    TEST_GPU_KERNELS.with(|m| m.set(Some(GpuKernels::Attention)));
    let shape = [1, 2, 3, MAX_KEYS + 1];
    let before = CALLS.load(Ordering::Relaxed);
    let (fused, unfused) = (kernels::<Fused>(shape, false), kernels::<Unfused>(shape, false));
    assert_eq!(CALLS.load(Ordering::Relaxed), before, "the kernels ran on rows of {} keys", MAX_KEYS + 1);
    for ours in [fused, unfused] {
        let live = ours.dropped.iter().filter(|&&d| d > 0.0).count() as f64 / ours.dropped.len() as f64;
        assert!((live - (1.0 - P)).abs() < 0.03, "kept {live} of the weights");
        matches_composed::<Unfused>(&ours, shape, false);
    }
}

/// Rows whose keys are a multiple of four are read as vectors of four, others one key at a
/// time, each unit holding every 32nd vector of its row.
#[test]
fn attention_weights_kernels_read_rows_four_keys_at_a_time_where_the_keys_allow() {
    let device = Default::default();
    let rows = |keys: usize| {
        let x = Tensor::<WgpuUnfused, 2>::zeros([3, keys], &device).into_primitive().tensor();
        row_vectors(&x)
    };
    assert_eq!(rows(300), (4, 3), "300 keys: 75 vectors of four, three a unit");
    assert_eq!(rows(256), (4, 2), "256 keys: 64 vectors of four, two a unit");
    assert_eq!(rows(37), (1, 2), "37 keys: one at a time, two a unit");
    assert_eq!(rows(8), (4, 1), "8 keys: two vectors, one a unit");
}

fn drawn<B: AutodiffBackend>() -> Vec<f32> {
    let device = Default::default();
    let x = Tensor::<B, 4>::from_data(TensorData::new(values(4 * 64, 33, 1.0), [1, 2, 2, 64]), &device).require_grad();
    let [_, dropped] = attention_weights(x, None, 1.0, &DropoutConfig::new(0.5).init());
    data(dropped).iter().map(|&d| if d > 0.0 { 1.0 } else { 0.0 }).collect()
}

/// Every call draws a new mask; seeding the backend again draws the same masks again.
#[test]
fn attention_weights_kernels_draw_a_new_mask_each_call_and_the_same_ones_after_the_same_seed() {
    let _turn = serial();
    TEST_GPU_KERNELS.with(|m| m.set(Some(GpuKernels::Attention)));
    let device = Default::default();
    Fused::seed(&device, 11);
    let before = CALLS.load(Ordering::Relaxed);
    let (first, second) = (drawn::<Fused>(), drawn::<Fused>());
    Fused::seed(&device, 11);
    let again = drawn::<Fused>();
    // Burn's own draws would pass the rest too: these are the kernels' (one forward a call).
    let ran = CALLS.load(Ordering::Relaxed) - before;
    assert!(ran >= 3, "the kernels ran {ran} times for three draws");
    assert_ne!(first, second, "two calls drew the same mask");
    assert_eq!(first, again, "the same seed drew another mask");
}

/// Under `auto`, `attention` and `all` both GPU backends take the kernels; under `composed`
/// burn-fusion keeps the composed form and the backend without fusion takes the kernels; `off`
/// takes none.
#[test]
fn attention_weights_take_the_kernels_on_both_gpu_backends_by_default_and_composed_under_fusion_when_asked() {
    let _turn = serial();
    let ran = |mode, run: fn() -> Vec<f32>| {
        TEST_GPU_KERNELS.with(|m| m.set(Some(mode)));
        let before = CALLS.load(Ordering::Relaxed);
        run();
        CALLS.load(Ordering::Relaxed) > before
    };
    assert!(ran(GpuKernels::Unfused, drawn::<Fused>), "auto: burn-fusion kept the composed form");
    assert!(ran(GpuKernels::Unfused, drawn::<Unfused>), "auto: wgpu-unfused kept the composed form");
    assert!(!ran(GpuKernels::Composed, drawn::<Fused>), "composed: burn-fusion ran the kernels");
    assert!(ran(GpuKernels::Composed, drawn::<Unfused>), "composed: wgpu-unfused kept the composed form");
    assert!(ran(GpuKernels::Attention, drawn::<Fused>), "attention: burn-fusion kept the composed form");
    assert!(ran(GpuKernels::Norm, drawn::<Fused>), "norm: burn-fusion kept the composed form");
    assert!(ran(GpuKernels::All, drawn::<Fused>), "all: burn-fusion kept the composed form");
    assert!(!ran(GpuKernels::Off, drawn::<Unfused>), "off: wgpu-unfused ran the kernels");
}

/// The draws' threshold is `keep·2³²`.
#[test]
fn the_draws_threshold_is_the_keep_share_of_two_to_the_32() {
    assert_eq!(threshold(0.5), 1 << 31);
    assert_eq!(threshold(0.75), 3 << 30);
}

/// `[P, P̃]` and the raw scores' gradient of `Σ P̃ ⊙ W` with the scores cast to `dtype` first,
/// the backend seeded alike (so the same key, the same mask).
fn in_dtype(dtype: burn::tensor::DType) -> [Vec<f32>; 3] {
    let device = Default::default();
    let shape = [2, 3, 8, 256];
    let n: usize = shape.iter().product();
    let x = Tensor::<Unfused, 4>::from_data(TensorData::new(values(n, 35, 24.0), shape), &device).require_grad();
    let w = Tensor::<Unfused, 4>::from_data(TensorData::new(values(n, 36, 1.0), shape), &device).cast(dtype);
    Unfused::seed(&device, 5);
    let [weights, dropped] = attention_weights(x.clone().cast(dtype), None, SCALE, &DropoutConfig::new(P).init());
    let grads = (dropped.clone() * w).sum().backward();
    [data(weights), data(dropped), data(x.grad(&grads).unwrap())]
}

/// In f16 the kernels read the rows four keys (eight bytes) at a time and stay within half
/// precision's resolution of the f32 kernels, drawing the same mask from the same key.
#[test]
fn attention_weights_kernels_run_in_half_precision_with_the_f32_mask() {
    let _turn = serial();
    TEST_GPU_KERNELS.with(|m| m.set(Some(GpuKernels::Attention)));
    let before = CALLS.load(Ordering::Relaxed);
    let half = in_dtype(burn::tensor::DType::F16);
    assert_eq!(LAST_ROWS.lock().unwrap().map(|(width, _)| width), Some(4), "f16 rows read four keys at a time");
    let full = in_dtype(burn::tensor::DType::F32);
    assert!(CALLS.load(Ordering::Relaxed) >= before + 4, "the kernels did not run");
    let kept = |d: &[f32]| d.iter().map(|&x| x > 0.0).collect::<Vec<_>>();
    assert_eq!(kept(&half[1]), kept(&full[1]), "f16 and f32 drew different masks");
    // Within a share of each tensor's largest value (the weights are about 1/256 each).
    for (what, (a, b)) in ["P", "P̃", "dX"].iter().zip(half.iter().zip(&full)) {
        close_to_scale(a, b, 4e-3, what);
    }
}
