//! The optimizer's CubeCL kernels (AdamW's update of one parameter and of many, the gradients'
//! squared norm) against their composed forms on the same GPU backend, with and without
//! burn-fusion, and which settings of `ATTEND_GPU_KERNELS` take them; run with
//! `--features test-wgpu` (lavapipe will do).

use burn::tensor::Tensor;
use std::sync::atomic::Ordering;

use super::tests::{on_both, runs, serial};
use super::CALLS;
use crate::fused::dispatch::WgpuUnfused;
use crate::fused::tests::{close, data, values};
use crate::fused::GpuKernels;

/// Three AdamW updates (the first from zero moments) of a parameter that is not a whole number
/// of cubes, with decay and exempt from it, with the gradient scaled and not: the kernel's parameter and moments equal the
/// composed form's on the same backend within f32 rounding.
fn adamw_case<B: burn::tensor::backend::Backend>() {
    use crate::fused::adamw::{composed, AdamWStep};
    let device = Default::default();
    let n = 7 * 113; // 791 elements: three cubes of 256 units and part of a fourth
    let tensor = |seed: u64, scale: f32| {
        Tensor::<B, 2>::from_data(burn::tensor::TensorData::new(values(n, seed, scale), [n / 7, 7]), &device)
    };
    for (decay_rate, scale) in [(0.1, None), (0.0, None), (0.1, Some(0.37f32))] {
        let scale = scale.map(|s| Tensor::<B, 1>::from_data([s], &device));
        let (mut kernel, mut reference) = ((tensor(21, 0.5), None), (tensor(21, 0.5), None));
        for time in 1..=3 {
            let grad = tensor(30 + time as u64, 2.0);
            let lr = 1e-2 / time as f64;
            let step = AdamWStep { lr, beta_1: 0.9, beta_2: 0.95, epsilon: 1e-8, decay: 1.0 - lr * decay_rate, time };
            let [p, m, v] = crate::fused::adamw(kernel.0, grad.clone(), kernel.1, scale.clone(), step);
            kernel = (p, Some((m, v)));
            let [p, m, v] = composed(reference.0, grad, reference.1, scale.clone(), step);
            reference = (p, Some((m, v)));
        }
        let (Some((m, v)), Some((m_ref, v_ref))) = (kernel.1, reference.1) else { unreachable!() };
        close(&data(kernel.0), &data(reference.0), 1e-6, "parameter");
        close(&data(m), &data(m_ref), 1e-6, "first moment");
        close(&data(v), &data(v_ref), 1e-6, "second moment");
    }
}

#[test]
fn cubecl_adamw_update_matches_the_composed_form() {
    let _turn = serial();
    on_both("AdamW", 9, adamw_case::<burn_wgpu::Wgpu>, adamw_case::<WgpuUnfused>);
}

/// The optimizer's update takes the kernel under `auto` on both GPU backends, fusion included
/// (one custom operation instead of ~15 handed to the device's threads), and none under `off`.
#[test]
fn by_default_the_adamw_update_takes_the_kernel_with_and_without_fusion() {
    let _turn = serial();
    assert!(runs(GpuKernels::Unfused, adamw_case::<burn_wgpu::Wgpu>), "auto: wgpu (fusion) ran no AdamW kernel");
    assert!(runs(GpuKernels::Unfused, adamw_case::<WgpuUnfused>), "auto: wgpu-unfused ran no AdamW kernel");
    assert!(runs(GpuKernels::Norm, adamw_case::<burn_wgpu::Wgpu>), "norm: wgpu (fusion) ran no AdamW kernel");
    assert!(!runs(GpuKernels::Off, adamw_case::<burn_wgpu::Wgpu>), "off: wgpu (fusion) ran the AdamW kernel");
}

/// The squared norm of tensors of 1 to 4.4 million elements (more than one round of the 1,024
/// cubes one tensor is spread over, and fewer than one cube; read four at a time and one at a
/// time): the kernels' sum is the f64 sum within f32 rounding, and the composed form's on the same
/// backend near it.
fn squared_norm_case<B: burn::tensor::backend::Backend>() {
    use burn::tensor::ElementConversion;
    let device = Default::default();
    let sizes = [[1, 1], [3, 1], [300, 1], [7, 113], [40_000, 1], [200, 200], [1_100, 4_000]];
    let mut truth = 0.0f64;
    let tensors: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, &[rows, cols])| {
            let values = values(rows * cols, 50 + i as u64, 3.0);
            truth += values.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>();
            let data = burn::tensor::TensorData::new(values, [rows, cols]);
            Tensor::<B, 2>::from_data(data, &device).into_primitive().tensor()
        })
        .collect();
    super::norm::WIDTHS.lock().unwrap().clear();
    let before = CALLS.load(Ordering::Relaxed);
    let kernel: f32 = crate::fused::squared_norm::<B>(tensors.clone()).into_scalar().elem();
    let ran = CALLS.load(Ordering::Relaxed) > before;
    let reference: f32 = Tensor::<B, 1>::from_primitive(burn::tensor::TensorPrimitive::Float(
        crate::fused::norm::composed::<B>(tensors),
    ))
    .into_scalar()
    .elem();
    // Our sums are short (a few reads a unit, then halvings); Burn's run long ones.
    let off = |x: f32| (f64::from(x) - truth).abs() / truth;
    assert!(off(reference) <= 1e-4, "composed {reference} vs the f64 sum {truth}");
    if ran {
        assert!(off(kernel) <= 2e-6, "kernel {kernel} vs the f64 sum {truth}");
        // The rows of 300 elements read four at a time, those of 791 one at a time.
        let widths = super::norm::WIDTHS.lock().unwrap().clone();
        assert!(widths.contains(&4) && widths.contains(&1), "the tensors were read {widths:?} at a time");
    } else {
        let apart = (kernel - reference).abs() / reference;
        assert!(apart <= 1e-6, "without the kernels the norm is the composed form's: {kernel} vs {reference}");
    }
}

#[test]
fn cubecl_squared_norm_matches_the_composed_form() {
    let _turn = serial();
    on_both("squared norm", 1, squared_norm_case::<burn_wgpu::Wgpu>, squared_norm_case::<WgpuUnfused>);
}

/// Clipping's squared norm takes the kernels under `auto` on both GPU backends, fusion
/// included (one custom operation where the composed form is three per tensor), and none
/// under `off`.
#[test]
fn by_default_the_squared_norm_takes_the_kernels_with_and_without_fusion() {
    let _turn = serial();
    assert!(runs(GpuKernels::Unfused, squared_norm_case::<burn_wgpu::Wgpu>), "auto: wgpu (fusion) ran no kernel");
    assert!(runs(GpuKernels::Unfused, squared_norm_case::<WgpuUnfused>), "auto: wgpu-unfused ran no kernel");
    assert!(!runs(GpuKernels::Off, squared_norm_case::<burn_wgpu::Wgpu>), "off: wgpu (fusion) ran the kernels");
}

/// AdamW updates of three parameters as one operation (`adamw_many`: a matrix on its first
/// update, a vector and a matrix later, the gradients scaled): each parameter and moment has
/// the bits of `fused::adamw` on that parameter alone, on the same backend.
fn adamw_many_case<B: burn::tensor::backend::Backend>() {
    use crate::fused::adamw::AdamWStep;
    use crate::fused::adamw_many::{adamw_many, Update};
    use burn::tensor::TensorPrimitive;
    let device = Default::default();
    let tensor = |n: usize, seed: u64| {
        Tensor::<B, 2>::from_data(burn::tensor::TensorData::new(values(n, seed, 1.0), [n / 7, 7]), &device)
    };
    let step = |time, decay| AdamWStep { lr: 1e-2, beta_1: 0.9, beta_2: 0.95, epsilon: 1e-8, decay, time };
    // (parameter, gradient, moments, step) of each update; the moments' second is made positive.
    let cases = || {
        [(7 * 113, 1, false, step(1, 0.999)), (7, 2, true, step(4, 1.0)), (7 * 40, 3, true, step(2, 0.999))].map(
            |(n, seed, moments, step)| {
                let moments = moments.then(|| (tensor(n, seed + 20), tensor(n, seed + 30).abs()));
                (tensor(n, seed), tensor(n, seed + 10), moments, step)
            },
        )
    };
    let scale = Tensor::<B, 1>::from_data([0.37f32], &device);
    let raw = |t: Tensor<B, 2>| t.into_primitive().tensor();
    let updates = cases()
        .into_iter()
        .map(|(p, g, moments, step)| Update {
            param: raw(p),
            grad: raw(g),
            moments: moments.map(|(m, v)| [raw(m), raw(v)]),
            step,
        })
        .collect();
    // Read back before the updates alone run, so that what ran counts for `adamw_many` alone
    // (under burn-fusion the kernels run when the stream is flushed).
    let before = CALLS.load(Ordering::Relaxed);
    let many: Vec<Vec<Vec<f32>>> = adamw_many::<B>(updates, Some(scale.clone()))
        .into_iter()
        .map(|outputs| {
            outputs.into_iter().map(|t| data(Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(t)))).collect()
        })
        .collect();
    let ran = CALLS.load(Ordering::Relaxed) - before;
    assert!(ran >= 3, "adamw_many ran the kernel {ran} times for 3 parameters");
    assert_eq!(many.len(), 3);
    for (got, (p, g, moments, step)) in many.into_iter().zip(cases()) {
        let alone = crate::fused::adamw(p, g, moments, Some(scale.clone()), step);
        for (got, want) in got.into_iter().zip(alone) {
            assert_eq!(got, data(want), "adamw_many against adamw alone");
        }
    }
}

#[test]
fn cubecl_adamw_many_gives_each_parameter_the_bits_of_its_update_alone() {
    let _turn = serial();
    on_both("AdamW of many", 6, adamw_many_case::<burn_wgpu::Wgpu>, adamw_many_case::<WgpuUnfused>);
}
