//! LayerNorm's kernels ([`super::layer_norm`]) beyond the row kernels' common test in
//! `tests.rs`: the residual stream's gradient added in the backward kernel, which rows take a
//! warp and which a cube, and `ATTEND_GPU_KERNELS=norm` (feature `test-wgpu`, lavapipe).

use burn::tensor::backend::AutodiffBackend;
use std::sync::atomic::Ordering;

use super::layer_norm::PENDING_ADDED;
use super::tests::{
    all_kernels, attention_case, cross_entropy_case, layer_norm_case, linear_case, on_both, runs, serial, softmax_case,
    Fused, Unfused,
};
use super::warp_rows::{LAST_ROWS, MAX_ROW};
use crate::fused::tests::{burns_layer_norm, close, layer_norm_grads};
use crate::fused::{layer_norm, GpuKernels};

/// `x + LayerNorm(x)`, as a pre-norm layer's residual stream reads its input: the LayerNorm's
/// backward finds the sum's gradient of `x` already there and adds it to its own `dx`.
fn residual_case<B: AutodiffBackend>() {
    for shape in [[2, 7, 384], [1, 3, MAX_ROW + 2]] {
        let ours = layer_norm_grads::<B>(shape, true, |x, g, b| x.clone() + layer_norm(x, g, b, 1e-5));
        let burns = layer_norm_grads::<B>(shape, true, |x, g, b| x.clone() + burns_layer_norm(x, g, b));
        for (what, (a, b)) in ["value", "dx", "dgamma", "dbeta"].iter().zip(ours.iter().zip(&burns)) {
            close(a, b, 2e-4, what);
        }
    }
}

#[test]
fn cubecl_layer_norm_adds_the_residual_streams_gradient_in_its_backward_kernel_with_autodiffs_values() {
    let _turn = serial();
    let before = PENDING_ADDED.load(Ordering::Relaxed);
    on_both("LayerNorm under a residual sum", 4, residual_case::<Fused>, residual_case::<Unfused>);
    // Two shapes on each backend: every backward took the sum's gradient into its kernel.
    let added = PENDING_ADDED.load(Ordering::Relaxed) - before;
    assert_eq!(added, 4, "backwards that added the residual gradient in the kernel");
}

#[test]
fn layer_norm_rows_up_to_max_row_take_a_warp_reading_four_at_a_time_where_they_can_and_longer_rows_a_cube() {
    let _turn = serial();
    all_kernels();
    let cases = [
        (384, Some((4, 3))),
        (1000, Some((4, 8))),
        (5, Some((1, 1))),
        (131, Some((1, 5))),
        (MAX_ROW, Some((4, 16))),
        (MAX_ROW + 2, None),
    ];
    for (d, warp) in cases {
        *LAST_ROWS.lock().unwrap() = None;
        layer_norm_grads::<Unfused>([1, 3, d], true, |x, g, b| layer_norm(x, g, b, 1e-5));
        assert_eq!(*LAST_ROWS.lock().unwrap(), warp, "rows of {d}: (elements a read, vectors a unit)");
    }
}

/// `norm`: under burn-fusion the LayerNorm runs its kernels (forward, backward, and the backward
/// that adds the residual gradient), while the other row operations and the linear maps stay
/// as under `auto`, each one composed autodiff step of its own; under `auto` the LayerNorm is
/// composed there.
#[test]
fn under_norm_the_fusion_backend_runs_the_layer_norm_kernels_alone() {
    use crate::fused::dispatch::TRACKED;
    use crate::fused::products::CHOICE;
    let _turn = serial();
    assert!(runs(GpuKernels::Norm, layer_norm_case::<Fused>), "norm: no LayerNorm kernel under fusion");
    let before = PENDING_ADDED.load(Ordering::Relaxed);
    assert!(runs(GpuKernels::Norm, residual_case::<Fused>), "norm: no LayerNorm kernel under a residual sum");
    assert_eq!(PENDING_ADDED.load(Ordering::Relaxed) - before, 2, "norm: the residual gradient added apart");
    assert!(!runs(GpuKernels::Unfused, layer_norm_case::<Fused>), "auto: LayerNorm ran a kernel under fusion");
    // Burn's products, so that a kernel counted is one of the operations' (as in `tests.rs`).
    CHOICE.with(|p| p.set(Some(crate::fused::GpuProducts::Burn)));
    let cases: [(&str, fn()); 4] = [
        ("softmax", softmax_case::<Fused>),
        ("cross-entropy", cross_entropy_case::<Fused>),
        ("attention", attention_case::<Fused>),
        ("linear", linear_case::<Fused>),
    ];
    for (name, case) in cases {
        let tracked = TRACKED.load(Ordering::Relaxed);
        assert!(!runs(GpuKernels::Norm, case), "norm: {name} ran a kernel under fusion");
        assert!(TRACKED.load(Ordering::Relaxed) > tracked, "norm: {name} not as one composed step");
    }
    CHOICE.with(|p| p.set(None));
}

/// In f16 the warp kernels read and write half precision and sum in single: `x + LayerNorm(x)`'s
/// value and the gradients of `x`, `γ`, `β` (the residual gradient added in the kernel) within
/// a share of half precision's resolution of the f32 kernels'.
#[test]
fn cubecl_layer_norm_in_half_precision_stays_within_its_resolution_of_f32_forward_and_backward() {
    use burn::tensor::{DType, Tensor};
    let _turn = serial();
    all_kernels();
    let half = |x: Tensor<Unfused, 3>, g: Tensor<Unfused, 1>, b: Option<Tensor<Unfused, 1>>| {
        let h = x.cast(DType::F16);
        let y = layer_norm(h.clone(), g.cast(DType::F16), b.map(|b| b.cast(DType::F16)), 1e-5);
        (h + y).cast(DType::F32)
    };
    let before = PENDING_ADDED.load(Ordering::Relaxed);
    let ours = layer_norm_grads::<Unfused>([2, 7, 384], true, half);
    assert_eq!(PENDING_ADDED.load(Ordering::Relaxed) - before, 1, "the f16 backward added the residual gradient");
    let full = layer_norm_grads::<Unfused>([2, 7, 384], true, |x, g, b| x.clone() + layer_norm(x, g, b, 1e-5));
    for (what, (a, b)) in ["value", "dx", "dgamma", "dbeta"].iter().zip(ours.iter().zip(&full)) {
        crate::fused::tests::close_to_scale(a, b, 1e-2, what);
    }
}
