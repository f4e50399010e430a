//! The CubeCL kernels against the composed reference on the same GPU backend (values and
//! gradients), with and without burn-fusion; run with `--features test-wgpu` (lavapipe will do).

use burn::backend::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use std::sync::atomic::Ordering;

use super::CALLS;
use crate::fused::dispatch::{WgpuUnfused, TEST_GPU_KERNELS};
use crate::fused::tests::{
    attention_grads, burns_layer_norm, close, cross_entropy_grads, data, layer_norm_grads, value_and_grad, values,
};
use crate::fused::{attention, cross_entropy, gelu, layer_norm, softmax_last, Gelu, GpuKernels, SoftmaxLast, Unary};

pub(super) type Fused = Autodiff<burn_wgpu::Wgpu>;
pub(super) type Unfused = Autodiff<WgpuUnfused>;

/// One test at a time: [`CALLS`] counts every thread's kernels (under fusion they run on the
/// stream's thread), so a test that checks a backend ran none must run alone.
pub(super) fn serial() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Every GPU backend takes the kernels on this thread (`ATTEND_GPU_KERNELS=all`).
pub(super) fn all_kernels() {
    TEST_GPU_KERNELS.with(|m| m.set(Some(GpuKernels::All)));
}

/// Runs `fused` and `unfused` (the same check on the two GPU backends) with every kernel on,
/// and checks that each ran the kernels at least `calls` times (each forward and backward the
/// case asks for: a backward that fell back to the composed form would leave one out).
pub(super) fn on_both(name: &str, calls: usize, fused: fn(), unfused: fn()) {
    all_kernels();
    for (backend, run) in [("wgpu", fused), ("wgpu-unfused", unfused)] {
        let before = CALLS.load(Ordering::Relaxed);
        run();
        let ran = CALLS.load(Ordering::Relaxed) - before;
        assert!(ran >= calls, "{backend}: {name} ran the CubeCL kernels {ran} times, not {calls}");
    }
}

/// Whether `run` ran any CubeCL kernel with `mode` in force on this thread.
pub(super) fn runs(mode: GpuKernels, run: fn()) -> bool {
    TEST_GPU_KERNELS.with(|m| m.set(Some(mode)));
    let before = CALLS.load(Ordering::Relaxed);
    run();
    CALLS.load(Ordering::Relaxed) > before
}

fn gelu_case<B: AutodiffBackend>() {
    let shape = [2, 3, 5, 70];
    let n = shape.iter().product();
    let (x, w) = (values(n, 1, 6.0), values(n, 2, 1.0));
    let (y, g) = value_and_grad::<B>(&x, &w, shape, gelu);
    let (y_ref, g_ref) = value_and_grad::<B>(&x, &w, shape, Gelu::composed);
    close(&y, &y_ref, 1e-5, "value");
    close(&g, &g_ref, 1e-5, "gradient");
}

#[test]
fn cubecl_gelu_matches_the_composed_form_in_value_and_gradient() {
    let _turn = serial();
    // Under burn-fusion GELU stays composed (fusion fuses it); the kernel runs without fusion.
    all_kernels();
    let before = CALLS.load(Ordering::Relaxed);
    gelu_case::<Unfused>();
    let ran = CALLS.load(Ordering::Relaxed) - before;
    assert!(ran >= 2, "wgpu-unfused: GELU ran the CubeCL kernels {ran} times, not forward and backward");
    let before = CALLS.load(Ordering::Relaxed);
    gelu_case::<Fused>();
    assert_eq!(CALLS.load(Ordering::Relaxed), before, "wgpu (fusion): GELU ran a CubeCL kernel");
}

pub(super) fn softmax_case<B: AutodiffBackend>() {
    let shape = [3, 2, 33, 300]; // rows longer than the largest cube (256 units)
    let n = shape.iter().product();
    let x: Vec<f32> =
        values(n, 3, 8.0).into_iter().enumerate().map(|(i, v)| if i % 7 == 3 { -1.0e9 } else { v }).collect();
    let w = values(n, 4, 1.0);
    let (y, g) = value_and_grad::<B>(&x, &w, shape, softmax_last);
    let (y_ref, g_ref) = value_and_grad::<B>(&x, &w, shape, SoftmaxLast::composed);
    close(&y, &y_ref, 1e-5, "value");
    close(&g, &g_ref, 1e-5, "gradient");
}

#[test]
fn cubecl_softmax_matches_the_composed_form_in_value_and_gradient() {
    let _turn = serial();
    on_both("softmax", 2, softmax_case::<Fused>, softmax_case::<Unfused>);
}

/// Rows a warp each, four elements a read (384, three vectors a unit; 1,000, the eighth vector
/// partly past the row) and one (5; 131, five a unit, the last partly past the row), and rows
/// longer than a warp takes (a cube each).
pub(super) fn layer_norm_case<B: AutodiffBackend>() {
    for bias in [true, false] {
        for shape in [[2, 7, 384], [1, 3, 5], [2, 3, 1000], [2, 3, 131], [1, 3, super::warp_rows::MAX_ROW + 2]] {
            let fused = layer_norm_grads::<B>(shape, bias, |x, g, b| layer_norm(x, g, b, 1e-5));
            let burns = layer_norm_grads::<B>(shape, bias, burns_layer_norm);
            for (what, (a, b)) in ["value", "dx", "dgamma", "dbeta"].iter().zip(fused.iter().zip(&burns)) {
                close(a, b, 2e-4, what);
            }
        }
    }
}

#[test]
fn cubecl_layer_norm_matches_burns_in_value_and_gradients_of_x_gamma_and_beta() {
    let _turn = serial();
    on_both("LayerNorm", 20, layer_norm_case::<Fused>, layer_norm_case::<Unfused>);
}

pub(super) fn cross_entropy_case<B: AutodiffBackend>() {
    for smoothing in [0.0, 0.1] {
        let (rows, vocab) = (50, 1000);
        let (y, g) = cross_entropy_grads::<B>(rows, vocab, |z, t| cross_entropy(z, t, smoothing));
        let (y_ref, g_ref) =
            cross_entropy_grads::<B>(rows, vocab, |z, t| crate::fused::cross_entropy::composed(z, t, smoothing));
        close(&y, &y_ref, 1e-5, "value");
        close(&g, &g_ref, 1e-5, "gradient");
    }
}

#[test]
fn cubecl_cross_entropy_matches_the_composed_form_with_and_without_smoothing() {
    let _turn = serial();
    on_both("cross-entropy", 4, cross_entropy_case::<Fused>, cross_entropy_case::<Unfused>);
}

pub(super) fn attention_case<B: AutodiffBackend>() {
    let scale = 1.0 / 8f64.sqrt();
    for dims in [[2, 3, 17, 17, 8], [2, 2, 5, 9, 8]] {
        let fused = attention_grads::<B>(dims, |q, k, v, m| attention(q, k, v, Some(m), scale));
        let composed =
            attention_grads::<B>(dims, |q, k, v, m| crate::fused::attention::composed(q, k, v, Some(m), scale));
        for (what, (a, b)) in ["context", "weights", "dq", "dk", "dv"].iter().zip(fused.iter().zip(&composed)) {
            close(a, b, 2e-5, what);
        }
    }
}

#[test]
fn cubecl_attention_matches_the_composed_form_in_value_weights_and_gradients_under_masks() {
    let _turn = serial();
    on_both("attention", 4, attention_case::<Fused>, attention_case::<Unfused>);
}

/// The kernels read the tensors' own float type: in f16, GELU, LayerNorm, the softmax and the
/// cross-entropy (forwards) run as kernels and stay within half precision's resolution of the
/// composed form in f32.
#[test]
fn cubecl_kernels_run_in_half_precision() {
    let _turn = serial();
    all_kernels();
    type Gpu = WgpuUnfused;
    let device = Default::default();
    let x = Tensor::<Gpu, 2>::from_data(burn::tensor::TensorData::new(values(4 * 96, 5, 3.0), [4, 96]), &device);
    let gamma = Tensor::<Gpu, 1>::from_data(burn::tensor::TensorData::new(values(96, 6, 1.0), [96]), &device) + 1.0;
    let targets = Tensor::<Gpu, 1, burn::tensor::Int>::from_data([3, 0, 95, 17], &device);
    let half = |t: Tensor<Gpu, 2>| t.cast(burn::tensor::DType::F16);
    let before = CALLS.load(Ordering::Relaxed);
    let norm = layer_norm(gelu(half(x.clone())), gamma.clone().cast(burn::tensor::DType::F16), None, 1e-5);
    let reduced =
        [data(norm.clone()), data(softmax_last(norm.clone())), data(cross_entropy(norm, targets.clone(), 0.1))];
    assert!(CALLS.load(Ordering::Relaxed) >= before + 4, "the f16 operations did not run the kernels");
    let burns = |x: Tensor<Gpu, 2>, gamma: Tensor<Gpu, 1>| {
        use burn::tensor::TensorPrimitive;
        let y = <Gpu as burn::tensor::ops::ModuleOps<Gpu>>::layer_norm(
            x.into_primitive().tensor(),
            gamma.into_primitive().tensor(),
            None,
            1e-5,
        );
        Tensor::<Gpu, 2>::from_primitive(TensorPrimitive::Float(y))
    };
    let norm = burns(Gelu::composed(x), gamma);
    let full = [
        data(norm.clone()),
        data(SoftmaxLast::composed(norm.clone())),
        data(crate::fused::cross_entropy::composed(norm, targets, 0.1)),
    ];
    let [norm, softmax, loss] = &reduced;
    close(norm, &full[0], 1e-2, "LayerNorm(GELU)");
    // The softmax's weights (about 1/96 each) within a share of the largest, not of 1.
    crate::fused::tests::close_to_scale(softmax, &full[1], 1e-2, "softmax");
    close(loss, &full[2], 1e-2, "cross-entropy");
}

/// The default (`auto`): burn-wgpu without fusion runs the kernels, with fusion the composed
/// form; `off` runs the composed form on both.
#[test]
fn by_default_only_the_backend_without_fusion_takes_the_kernels() {
    let _turn = serial();
    assert!(runs(GpuKernels::Unfused, softmax_case::<Unfused>), "auto: wgpu-unfused ran no kernel");
    assert!(!runs(GpuKernels::Unfused, softmax_case::<Fused>), "auto: wgpu (fusion) ran a kernel");
    assert!(!runs(GpuKernels::Off, softmax_case::<Unfused>), "off: wgpu-unfused ran a kernel");
}

pub(super) fn linear_case<B: AutodiffBackend>() {
    use crate::fused::tests::linear_grads;
    use crate::fused::{linear, Weight};
    for layout in [Weight::InOut, Weight::OutIn] {
        let dims = [37, 24, 40];
        let ours = linear_grads::<B>(dims, layout, |x, w, b| linear(x, w, b, layout));
        let composed = linear_grads::<B>(dims, layout, |x, w, b| crate::fused::linear::composed(x, w, b, layout));
        for (what, (a, b)) in ["value", "dx", "dW", "db"].iter().zip(ours.iter().zip(&composed)) {
            close(a, b, 1e-5, what);
        }
    }
}

/// Under `auto` burn-wgpu with fusion runs no kernel of ours, and each row operation and
/// linear map is one step of autodiff with a backward of its own, in Burn's operations (fewer
/// operations for the fusion stream than Burn's autodiff of each part), with the values and
/// gradients of the composed forms; GELU stays Burn's autodiff of its composed form. Under
/// `off` none of them goes that way.
#[test]
fn under_auto_the_fusion_backend_takes_each_operation_as_one_composed_step_with_the_same_gradients() {
    use crate::fused::dispatch::TRACKED;
    use crate::fused::products::CHOICE;
    let _turn = serial();
    // The products' kernel is `ATTEND_GPU_MATMUL`'s (our kernel by default on wgpu, tested in
    // `product_tests.rs`): here Burn's, so that a kernel run counted is one of the operations'.
    CHOICE.with(|p| p.set(Some(crate::fused::GpuProducts::Burn)));
    let cases: [(&str, fn(), bool); 6] = [
        ("GELU", gelu_case::<Fused>, false),
        ("softmax", softmax_case::<Fused>, true),
        ("LayerNorm", layer_norm_case::<Fused>, true),
        ("cross-entropy", cross_entropy_case::<Fused>, true),
        ("attention", attention_case::<Fused>, true),
        ("linear", linear_case::<Fused>, true),
    ];
    for (name, case, one_step) in cases {
        let tracked = TRACKED.load(Ordering::Relaxed);
        assert!(!runs(GpuKernels::Unfused, case), "auto: {name} ran a kernel under fusion");
        assert_eq!(TRACKED.load(Ordering::Relaxed) > tracked, one_step, "auto: {name} as one composed step");
        let tracked = TRACKED.load(Ordering::Relaxed);
        assert!(!runs(GpuKernels::Off, case), "off: {name} ran a kernel");
        assert_eq!(TRACKED.load(Ordering::Relaxed), tracked, "off: {name} went as one composed step");
    }
    CHOICE.with(|p| p.set(None));
}

/// `ATTEND_GPU_KERNELS=attention`: under burn-fusion attention alone runs our kernels (with the
/// composed form's values and gradients, which the case checks); the other operations stay
/// composed.
#[test]
fn under_attention_the_fusion_backend_runs_the_attention_kernel_alone() {
    let _turn = serial();
    assert!(runs(GpuKernels::Attention, attention_case::<Fused>), "attention: no kernel under fusion");
    assert!(!runs(GpuKernels::Attention, layer_norm_case::<Fused>), "attention: LayerNorm ran a kernel");
    assert!(!runs(GpuKernels::Attention, softmax_case::<Fused>), "attention: the softmax ran a kernel");
}

/// A target outside the vocabulary gives an infinite loss (which the training loop stops on)
/// instead of another row's logit; a target inside gives `ln V` on uniform logits.
#[test]
fn cubecl_cross_entropy_of_a_target_outside_the_vocabulary_is_infinite() {
    let _turn = serial();
    all_kernels();
    let device = Default::default();
    let z = Tensor::<WgpuUnfused, 2>::zeros([2, 5], &device);
    let targets = Tensor::<WgpuUnfused, 1, burn::tensor::Int>::from_data([1, 5], &device);
    let out = data(cross_entropy(z, targets, 0.0));
    assert!((out[0] - 5f32.ln()).abs() < 1e-5, "in the vocabulary: {}", out[0]);
    assert!(out[2].is_infinite() && out[2] > 0.0, "outside the vocabulary: {}", out[2]);
}
