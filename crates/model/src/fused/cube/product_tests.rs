//! The weight gradients' products on wgpu (lavapipe will do), over enough rows to be cut into
//! slices, on the fused and the unfused backend: the token lookup's gradient as a one-hot
//! product against Burn's `select_add` on the CPU, and self-attention's merged projections
//! against three products on the CPU.

use burn::backend::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{DType, Int, Tensor, TensorData};
use std::sync::atomic::Ordering;

use crate::fused::dispatch::{WgpuUnfused, TEST_GPU_KERNELS, TRACKED};
use crate::fused::tests::{close, data, values};
use crate::fused::{embedding, GpuKernels};

/// Vocabulary, width, and `[batch, len]` of 4,096 ids: [`super::super::linear::row_slices`]
/// cuts them into 32 slices.
const V: usize = 11;
const D: usize = 8;
const SHAPE: [usize; 2] = [8, 512];

/// The lookup's value and its weight's gradient under `lookup` (the weight in `dtype`), with
/// each output weighted differently.
fn lookup_grad<B: AutodiffBackend>(
    lookup: impl Fn(Tensor<B, 2>, Tensor<B, 2, Int>) -> Tensor<B, 3>,
    dtype: DType,
) -> (Vec<f32>, Vec<f32>) {
    let device = Default::default();
    let n = SHAPE[0] * SHAPE[1];
    // Every id from 0 to V - 2 often, V - 1 never (its gradient row must stay zero).
    let ids: Vec<i64> = (0..n).map(|i| ((i * 7 + i / 13) % (V - 1)) as i64).collect();
    let tokens = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, SHAPE), &device);
    let weight = Tensor::<B, 2>::from_data(TensorData::new(values(V * D, 3, 1.0), [V, D]), &device);
    let weight = if dtype == DType::F32 { weight } else { weight.cast(dtype) }.require_grad();
    let w = Tensor::<B, 3>::from_data(TensorData::new(values(n * D, 4, 1.0), [SHAPE[0], SHAPE[1], D]), &device);
    let y = lookup(weight.clone(), tokens);
    let w = if dtype == DType::F32 { w } else { w.cast(dtype) };
    let grads = (y.clone() * w).sum().backward();
    (data(y), data(weight.grad(&grads).unwrap()))
}

#[test]
fn lookup_gradient_as_sliced_one_hot_product_on_wgpu_equals_select_add_on_cpu() {
    type Cpu = Autodiff<burn_ndarray::NdArray<f32>>;
    let (y_ref, g_ref) = lookup_grad::<Cpu>(burn::tensor::module::embedding, DType::F32);
    assert!(g_ref[(V - 1) * D..].iter().all(|&g| g == 0.0) && g_ref.iter().any(|&g| g != 0.0));
    TEST_GPU_KERNELS.with(|m| m.set(Some(GpuKernels::Unfused)));
    let tracked = TRACKED.load(Ordering::Relaxed);
    for (backend, (y, g)) in [
        ("wgpu", lookup_grad::<Autodiff<burn_wgpu::Wgpu>>(embedding, DType::F32)),
        ("wgpu-unfused", lookup_grad::<Autodiff<WgpuUnfused>>(embedding, DType::F32)),
    ] {
        close(&y, &y_ref, 0.0, &format!("{backend} value"));
        close(&g, &g_ref, 1e-4, &format!("{backend} gradient"));
    }
    // In f16 (the partial sums added in f32): within half precision's resolution. Each
    // gradient entry sums ~400 products of size ≤ 1, so the tolerance is relative to ~20.
    let (y, g) = lookup_grad::<Autodiff<burn_wgpu::Wgpu>>(embedding, DType::F16);
    close(&y, &y_ref, 1e-3, "wgpu f16 value");
    let scale = g_ref.iter().fold(0f32, |m, g| m.max(g.abs()));
    close(
        &g.iter().map(|g| g / scale).collect::<Vec<_>>(),
        &g_ref.iter().map(|g| g / scale).collect::<Vec<_>>(),
        5e-3,
        "wgpu f16 gradient",
    );
    assert!(TRACKED.load(Ordering::Relaxed) > tracked, "under burn-fusion the lookup is one autodiff step");
}

/// Self-attention's three projections as one product on wgpu (fused and unfused) give the
/// values and gradients that three products give on the CPU, over 4,096 positions (what
/// `ATTEND_QKV=auto` merges on a GPU; the weight gradient is then cut into slices of rows).
#[test]
fn merged_projections_on_wgpu_equal_three_products_on_cpu() {
    use crate::attention::MultiHeadAttention;
    use crate::config::ModelConfig;
    use crate::projections::tests::{projected, worst_difference};
    use burn::module::Param;
    use burn::nn::Linear;
    use burn_ndarray::NdArray;

    /// `layer` with the CPU layer's parameters.
    fn copy<B: AutodiffBackend>(
        cpu: &MultiHeadAttention<Autodiff<NdArray<f32>>>,
        config: &ModelConfig,
    ) -> MultiHeadAttention<B> {
        let device = Default::default();
        let mut layer = MultiHeadAttention::<B>::new(config, &device);
        let set = |to: &mut Linear<B>, from: &Linear<Autodiff<NdArray<f32>>>| {
            to.weight = Param::from_tensor(Tensor::from_data(from.weight.val().into_data(), &device));
            to.bias = from.bias.as_ref().map(|b| Param::from_tensor(Tensor::from_data(b.val().into_data(), &device)));
        };
        set(&mut layer.query, &cpu.query);
        set(&mut layer.key, &cpu.key);
        set(&mut layer.value, &cpu.value);
        layer
    }

    let config = ModelConfig { d_model: 16, n_heads: 2, bias: true, ..ModelConfig::base() };
    let cpu = MultiHeadAttention::<Autodiff<NdArray<f32>>>::new(&config, &Default::default());
    let shape = [8, 512, 16];
    let values: Vec<f32> =
        (0..shape.iter().product::<usize>()).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
    let x = TensorData::new(values, shape);
    let reference = projected(&cpu, x.clone(), false);
    let fused = projected(&copy::<Autodiff<burn_wgpu::Wgpu>>(&cpu, &config), x.clone(), true);
    let unfused = projected(&copy::<Autodiff<WgpuUnfused>>(&cpu, &config), x, true);
    for (name, ours) in [("wgpu", fused), ("wgpu-unfused", unfused)] {
        let worst = worst_difference(&reference, &ours);
        assert!(worst < 2e-3, "{name}: merged on wgpu and separate on the CPU differ by {worst}");
    }
}
