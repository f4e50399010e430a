//! The weight gradients' products on wgpu (lavapipe will do), over enough rows to be cut into
//! slices, on the fused and the unfused backend: the token lookup's gradient as a one-hot
//! product against Burn's `select_add` on the CPU, self-attention's merged projections
//! against three products on the CPU, and our product kernel (`ATTEND_GPU_MATMUL`)
//! against the CPU's products for every layout and ragged shapes, under every tile of
//! `ATTEND_GPU_TILE`, with a linear map's values and gradients through it. Every test that
//! runs our kernel takes the module's turn (`serial`): some count its launches and tiles.

use burn::backend::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{DType, Int, Tensor, TensorData};
use std::sync::atomic::Ordering;

use crate::fused::dispatch::{WgpuUnfused, TEST_GPU_KERNELS, TRACKED};
use crate::fused::tests::{close, data, values};
use crate::fused::{embedding, GpuKernels};

/// Vocabulary, width, and `[batch, len]` of 4,096 ids: [`super::super::products::row_slices`]
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
    // Our kernel runs here: the tests that count its launches and tiles must not see it.
    let _turn = super::tests::serial();
    type Cpu = Autodiff<burn_ndarray::NdArray<f32>>;
    let (y_ref, g_ref) = lookup_grad::<Cpu>(burn::tensor::module::embedding, DType::F32);
    assert!(g_ref[(V - 1) * D..].iter().all(|&g| g == 0.0) && g_ref.iter().any(|&g| g != 0.0));
    TEST_GPU_KERNELS.with(|m| m.set(Some(GpuKernels::Unfused)));
    let tracked = TRACKED.load(Ordering::Relaxed);
    super::product_launch::LAUNCHES.lock().unwrap().clear();
    for (backend, (y, g)) in [
        ("wgpu", lookup_grad::<Autodiff<burn_wgpu::Wgpu>>(embedding, DType::F32)),
        ("wgpu-unfused", lookup_grad::<Autodiff<WgpuUnfused>>(embedding, DType::F32)),
    ] {
        close(&y, &y_ref, 0.0, &format!("{backend} value"));
        close(&g, &g_ref, 1e-4, &format!("{backend} gradient"));
    }
    // Select-add's sums would match too: on each backend our kernel ran the one-hot product,
    // its rows cut into slices (one launch of that many matrices).
    let slices = super::super::products::row_slices(SHAPE[0] * SHAPE[1], V * D);
    let launches = std::mem::take(&mut *super::product_launch::LAUNCHES.lock().unwrap());
    assert!(slices > 1, "the case is split");
    assert_eq!(launches.iter().filter(|(_, batch)| *batch == slices).count(), 2, "sliced launches of {launches:?}");
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
/// `ATTEND_QKV=merged` merges on a GPU; the weight gradient is then cut into slices of rows).
#[test]
fn merged_projections_on_wgpu_equal_three_products_on_cpu() {
    let _turn = super::tests::serial();
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

/// `a·b` on `B` by [`crate::fused::products::product`], the operands given as `[.., k, m]` / `[.., n, k]` and
/// transposed where `a_t` / `b_t` say.
fn run<B: burn::tensor::backend::Backend, const R: usize>(
    a: &TensorData,
    b: &TensorData,
    (a_t, b_t): (bool, bool),
    ours: bool,
) -> Vec<f32> {
    let device = Default::default();
    let (a, b) = (Tensor::<B, R>::from_data(a.clone(), &device), Tensor::<B, R>::from_data(b.clone(), &device));
    let a = if a_t { a.swap_dims(R - 2, R - 1) } else { a };
    let b = if b_t { b.swap_dims(R - 2, R - 1) } else { b };
    if ours {
        data(crate::fused::products::product(a, b))
    } else {
        data(a.matmul(b))
    }
}

/// The operands of `[batch_a or batch_b, m, k]·[.., k, n]`, stored as `run` reads them.
fn operands<const R: usize>(dims: [[usize; R]; 2], seed: u64) -> (TensorData, TensorData) {
    let make = |shape: [usize; R], s| TensorData::new(values(shape.iter().product(), s, 1.0), shape);
    (make(dims[0], seed), make(dims[1], seed + 1))
}

/// `a·b` by our kernel on wgpu, fused and unfused, against Burn's on the CPU.
fn check<const R: usize>(name: &str, a: [usize; R], b: [usize; R], layout: (bool, bool)) {
    let (da, db) = operands([a, b], 11);
    let reference = run::<burn_ndarray::NdArray<f32>, R>(&da, &db, layout, false);
    for (backend, ours) in [
        ("wgpu", run::<burn_wgpu::Wgpu, R>(&da, &db, layout, true)),
        ("wgpu-unfused", run::<WgpuUnfused, R>(&da, &db, layout, true)),
    ] {
        close(&ours, &reference, 1e-5, &format!("{backend} {name} {layout:?}"));
    }
}

/// Our product kernel (`ATTEND_GPU_MATMUL`) on wgpu, fused and unfused, against Burn's
/// product on the CPU: shapes that end partway through a 128 × 128 tile and an 8-deep step,
/// each operand plain or a transposed view (the kernel reads both through their strides), a
/// batch, a batch sharing one right-hand matrix, and two batch axes (attention's) with an
/// operand shared along one; with sizes that are not multiples of four
/// (read element by element) and sizes that are (contiguous rows read four at a time).
#[test]
fn our_product_kernel_on_wgpu_equals_cpu_products_for_every_layout_and_ragged_shape() {
    use crate::fused::products::CHOICE;
    use crate::fused::GpuProducts;

    let _turn = super::tests::serial();
    CHOICE.with(|p| p.set(Some(GpuProducts::Ours)));
    let before = super::CALLS.load(Ordering::Relaxed);
    let (m, k, n) = (130, 19, 137);
    for (a_t, b_t) in [(false, false), (true, false), (false, true), (true, true)] {
        let a = if a_t { [k, m] } else { [m, k] };
        let b = if b_t { [n, k] } else { [k, n] };
        check("2-d", a, b, (a_t, b_t));
    }
    check("batched", [3, 70, 9], [3, 9, 260], (false, false));
    check("batched, a transposed", [3, 9, 70], [3, 9, 260], (true, false));
    check("batched, one right-hand matrix", [3, 70, 9], [1, 9, 33], (false, false));
    // Two batch axes (attention's batch and heads), with an operand shared along either.
    check("two batch axes", [2, 3, 70, 9], [2, 3, 9, 130], (false, false));
    check("two batch axes, both transposed", [2, 3, 9, 70], [2, 3, 130, 9], (true, true));
    check("two batch axes, b shared along the second", [2, 3, 70, 9], [2, 1, 9, 33], (false, false));
    check("two batch axes, a shared along the first", [1, 3, 70, 9], [2, 3, 33, 9], (false, true));
    let runs = super::CALLS.load(Ordering::Relaxed) - before;
    assert!(runs >= 22, "our kernel ran {runs} times for 22 products");

    // Sizes that are multiples of four (but not of the tile or the step): each operand whose
    // rows are contiguous, and every output, is read or written four rows at a time.
    let vectors = super::product_launch::VECTORS.load(Ordering::Relaxed);
    let (m, n) = (132, 140);
    let mut expected = 0;
    for (a_t, b_t) in [(false, false), (true, false), (false, true), (true, true)] {
        let a = if a_t { [k, m] } else { [m, k] };
        let b = if b_t { [n, k] } else { [k, n] };
        check("2-d, sizes of four", a, b, (a_t, b_t));
        // Per backend: `A` where stored transposed, `B` where not, and `C`.
        expected += 2 * (usize::from(a_t) + usize::from(!b_t) + 1);
    }
    check("batched, a transposed, sizes of four", [3, 9, 72], [3, 9, 260], (true, false));
    check("batched, one right-hand matrix of four", [3, 72, 9], [1, 9, 36], (false, false));
    expected += 2 * 3 + 2 * 2;
    let vectors = super::product_launch::VECTORS.load(Ordering::Relaxed) - vectors;
    CHOICE.with(|p| p.set(None));
    assert_eq!(vectors, expected, "operands and outputs read or written as vectors of four");
}

/// Every tile `ATTEND_GPU_TILE` takes computes what Burn's products compute: shapes that end
/// partway through a tile's rows and columns and through a 16-deep step after more than one
/// step, each operand plain or transposed, two batch axes with an operand shared, sizes of four
/// (read and written as vectors); and burn-fusion's product operation, which runs when the
/// stream is flushed, runs under the tile in force when it was registered, not the one at
/// the flush; `auto` takes its tile by the product's columns and the length of its sums.
#[test]
fn every_product_tile_on_wgpu_equals_cpu_products_fusion_keeps_the_registered_tile_and_auto_picks_by_shape() {
    use crate::fused::products::CHOICE;
    use crate::fused::{with_product_tile, GpuProducts, ProductTile, TileChoice};

    let _turn = super::tests::serial();
    CHOICE.with(|p| p.set(Some(GpuProducts::Ours)));
    let (m, k, n) = (130, 37, 69);
    for tile in ProductTile::ALL {
        let name = tile.name();
        *super::product_launch::LAST_TILE.lock().unwrap() = None;
        with_product_tile(TileChoice::Fixed(tile), || {
            for (a_t, b_t) in [(false, false), (true, false), (false, true), (true, true)] {
                let a = if a_t { [k, m] } else { [m, k] };
                let b = if b_t { [n, k] } else { [k, n] };
                check(&format!("{name} 2-d"), a, b, (a_t, b_t));
            }
            check(&format!("{name} two batch axes, b shared"), [2, 3, 70, k], [2, 1, k, 66], (false, false));
            check(&format!("{name} sizes of four"), [k, 132], [k, 68], (true, false));
            assert_eq!(*super::product_launch::LAST_TILE.lock().unwrap(), Some(tile), "{name} ran");
        });
    }

    let (da, db) = operands([[m, k], [k, n]], 5);
    let reference = run::<burn_ndarray::NdArray<f32>, 2>(&da, &db, (false, false), false);
    let narrow = ProductTile::of(128, 64, 16);
    let device = Default::default();
    let c = with_product_tile(TileChoice::Fixed(narrow), || {
        let a = Tensor::<burn_wgpu::Wgpu, 2>::from_data(da, &device);
        let b = Tensor::<burn_wgpu::Wgpu, 2>::from_data(db, &device);
        crate::fused::products::product(a, b)
    });
    *super::product_launch::LAST_TILE.lock().unwrap() = None;
    close(&data(c), &reference, 1e-5, "registered under 128x64x16, flushed after");
    assert_eq!(*super::product_launch::LAST_TILE.lock().unwrap(), Some(narrow), "the tile at registration");

    // `auto`: the narrow tile for at most 64 columns (attention's context), the default for
    // wider products summed over at most 64 (attention's scores), half the rows for the rest.
    for (cols, depth, tile) in
        [(64, 65, ProductTile::NARROW), (65, 64, ProductTile::DEFAULT), (65, 65, ProductTile::HALF_ROWS)]
    {
        with_product_tile(TileChoice::Auto, || {
            check(&format!("auto, {cols} columns over {depth}"), [m, depth], [depth, cols], (false, false))
        });
        let ran = *super::product_launch::LAST_TILE.lock().unwrap();
        assert_eq!(ran, Some(tile), "auto at {cols} columns over {depth}");
    }
    CHOICE.with(|p| p.set(None));
}

/// A linear map's value and gradients (input, weight) with our product kernel on wgpu equal
/// Burn's products on the CPU, for both weight layouts, over 4,096 rows (so that the weight
/// gradient runs as a batch of row slices).
#[test]
fn linear_map_with_our_products_on_wgpu_equals_cpu_in_values_and_gradients() {
    use crate::fused::products::CHOICE;
    use crate::fused::{linear, GpuProducts, Weight};

    fn grads<B: AutodiffBackend>(layout: Weight) -> [Vec<f32>; 3] {
        let device = Default::default();
        let (rows, d_in, d_out) = (4096, 24, 40);
        let w_shape = if layout == Weight::InOut { [d_in, d_out] } else { [d_out, d_in] };
        let x = Tensor::<B, 2>::from_data(TensorData::new(values(rows * d_in, 5, 1.0), [rows, d_in]), &device)
            .require_grad();
        let w =
            Tensor::<B, 2>::from_data(TensorData::new(values(d_in * d_out, 6, 0.5), w_shape), &device).require_grad();
        let weights = Tensor::<B, 2>::from_data(TensorData::new(values(rows * d_out, 7, 1.0), [rows, d_out]), &device);
        let y = linear(x.clone().reshape([8, rows / 8, d_in]), w.clone(), None, layout).reshape([rows, d_out]);
        let g = (y.clone() * weights).sum().backward();
        [data(y), data(x.grad(&g).unwrap()), data(w.grad(&g).unwrap())]
    }

    let _turn = super::tests::serial();
    for layout in [Weight::InOut, Weight::OutIn] {
        let reference = grads::<Autodiff<burn_ndarray::NdArray<f32>>>(layout);
        CHOICE.with(|p| p.set(Some(GpuProducts::Ours)));
        TEST_GPU_KERNELS.with(|m| m.set(Some(GpuKernels::Unfused)));
        let before = super::CALLS.load(Ordering::Relaxed);
        let fused = grads::<Autodiff<burn_wgpu::Wgpu>>(layout);
        let unfused = grads::<Autodiff<WgpuUnfused>>(layout);
        let runs = super::CALLS.load(Ordering::Relaxed) - before;
        CHOICE.with(|p| p.set(None));
        assert!(runs >= 6, "{layout:?}: our kernel ran {runs} times for 6 products");
        for (backend, ours) in [("wgpu", fused), ("wgpu-unfused", unfused)] {
            for (what, (o, r)) in ["value", "input gradient", "weight gradient"].iter().zip(ours.iter().zip(&reference))
            {
                close(o, r, 1e-4, &format!("{backend} {layout:?} {what}"));
            }
        }
    }
}

/// Attention's per-head products through `fused::matmul` with our kernel on wgpu (fused and
/// unfused, under autodiff): the scores `Q·Kᵀ` and the context `P·V` give the CPU's values
/// and gradients for `Q`, `K`, `V`, and every product of the forward and backward runs in
/// our kernel (two forward, four backward).
#[test]
fn attention_products_with_our_kernel_on_wgpu_equal_cpu_in_values_and_gradients() {
    use crate::fused::products::CHOICE;
    use crate::fused::{matmul, GpuProducts};

    fn grads<B: AutodiffBackend>() -> [Vec<f32>; 4] {
        let device = Default::default();
        let shape = [2, 3, 70, 12];
        let n = shape.iter().product::<usize>();
        let make = |seed, scale| {
            Tensor::<B, 4>::from_data(TensorData::new(values(n, seed, scale), shape), &device).require_grad()
        };
        let (q, k, v) = (make(21, 1.0), make(22, 1.0), make(23, 0.5));
        let scores = matmul(q.clone(), k.clone().swap_dims(2, 3)).mul_scalar(0.25);
        let context = matmul(burn::tensor::activation::softmax(scores, 3), v.clone());
        let w = Tensor::<B, 4>::from_data(TensorData::new(values(n, 24, 1.0), shape), &device);
        let g = (context.clone() * w).sum().backward();
        [data(context), data(q.grad(&g).unwrap()), data(k.grad(&g).unwrap()), data(v.grad(&g).unwrap())]
    }

    let _turn = super::tests::serial();
    let reference = grads::<Autodiff<burn_ndarray::NdArray<f32>>>();
    CHOICE.with(|p| p.set(Some(GpuProducts::Ours)));
    let before = super::CALLS.load(Ordering::Relaxed);
    let fused = grads::<Autodiff<burn_wgpu::Wgpu>>();
    let unfused = grads::<Autodiff<WgpuUnfused>>();
    let runs = super::CALLS.load(Ordering::Relaxed) - before;
    CHOICE.with(|p| p.set(None));
    assert!(runs >= 12, "our kernel ran {runs} times for 12 products");
    for (backend, ours) in [("wgpu", fused), ("wgpu-unfused", unfused)] {
        for (what, (o, r)) in ["context", "dQ", "dK", "dV"].iter().zip(ours.iter().zip(&reference)) {
            close(o, r, 1e-4, &format!("{backend} {what}"));
        }
    }
}

/// `auto` takes our kernel on wgpu (fused or not, with autodiff or without) unless
/// `ATTEND_GPU_KERNELS=off`, Burn's on cuda and on a backend without GPU kernels; `cubecl`
/// and `attend` choose alike everywhere.
#[test]
fn auto_takes_our_products_on_wgpu_and_burns_under_off_on_cuda_and_elsewhere() {
    use crate::fused::dispatch::Kernels;
    use crate::fused::products::{ours_on, with_gpu_products};
    use crate::fused::GpuProducts;
    let wgpu = [Kernels::Wgpu, Kernels::WgpuAutodiff, Kernels::WgpuUnfused, Kernels::WgpuUnfusedAutodiff];
    let choose = |choice, mode, kernels: &Kernels| {
        TEST_GPU_KERNELS.with(|m| m.set(Some(mode)));
        let ours = with_gpu_products(choice, || ours_on(kernels));
        TEST_GPU_KERNELS.with(|m| m.set(None));
        ours
    };
    for kernels in &wgpu {
        assert!(choose(GpuProducts::Auto, GpuKernels::Unfused, kernels));
        assert!(choose(GpuProducts::Auto, GpuKernels::All, kernels));
        assert!(!choose(GpuProducts::Auto, GpuKernels::Off, kernels));
        assert!(!choose(GpuProducts::Burn, GpuKernels::Unfused, kernels));
        assert!(choose(GpuProducts::Ours, GpuKernels::Off, kernels));
    }
    assert!(!choose(GpuProducts::Auto, GpuKernels::Unfused, &Kernels::None));
    #[cfg(feature = "cuda")]
    for kernels in [Kernels::Cuda, Kernels::CudaAutodiff] {
        assert!(!choose(GpuProducts::Auto, GpuKernels::Unfused, &kernels));
        assert!(choose(GpuProducts::Ours, GpuKernels::Unfused, &kernels));
    }
}
