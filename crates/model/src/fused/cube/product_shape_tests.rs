//! Our product kernel's triangles and its heads-last results on wgpu (lavapipe will do),
//! fused and unfused, against the composed reference on the CPU (`fused/product_shape.rs`),
//! and attention's two products as autodiff steps (`fused/attention_products.rs`) against
//! Burn's products on the CPU, with a causal mask and without.

use burn::backend::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use burn_ndarray::NdArray;
use std::sync::atomic::Ordering;

use crate::fused::dispatch::WgpuUnfused;
use crate::fused::product_shape::composed;
use crate::fused::tests::{close, data, values};
use crate::fused::{with_product_tile, FusedOps, ProductShape, ProductTile, TileChoice, Triangle};

/// `a·b` (each operand stored as given, `a` read through a transposed view where `a_t`)
/// under `shape` by `K`'s `fused_product_shaped`.
fn shaped<K: FusedOps>(a: &TensorData, b: &TensorData, a_t: bool, shape: ProductShape) -> Tensor<K, 4> {
    let device = Default::default();
    let a = Tensor::<K, 4>::from_data(a.clone(), &device);
    let a = if a_t { a.swap_dims(2, 3) } else { a };
    let b = Tensor::<K, 4>::from_data(b.clone(), &device).into_primitive().tensor();
    let c = K::fused_product_shaped(a.into_primitive().tensor(), b, shape);
    Tensor::from_primitive(TensorPrimitive::Float(c))
}

/// Each triangle at offsets 0 and 5, over `[2, 3]` matrices whose sides end partway through
/// a tile, `A` plain and transposed, under `auto`'s tiles, a 64 × 64 × 16 one and a wide one: what the
/// kernel computes is the CPU's product of the masked operand (or the masked product). The
/// operands hold values everywhere, so a triangle not applied (or applied to too much) differs.
#[test]
fn triangular_products_on_wgpu_equal_the_masked_products_on_the_cpu() {
    let _turn = super::tests::serial();
    let before = super::CALLS.load(Ordering::Relaxed);
    let mut runs = 0;
    for offset in [0, 5] {
        // `[m, k]·[k, n]`: the scores `[queries, d]·[d, keys]`, the context `[queries,
        // keys]·[keys, d]`, `dV` `[keys, queries]·[queries, d]`.
        let (queries, keys, d) = (150, 150 + offset, 19);
        for (triangle, m, k, n) in [
            (Triangle::Output(offset), queries, d, keys),
            (Triangle::LowerA(offset), queries, keys, d),
            (Triangle::UpperA(offset), keys, queries, d),
        ] {
            let shape = ProductShape::new(triangle, false);
            for a_t in [false, true] {
                let a_dims = if a_t { [2, 3, k, m] } else { [2, 3, m, k] };
                let a = TensorData::new(values(6 * m * k, 31, 1.0), a_dims);
                let b = TensorData::new(values(6 * k * n, 32, 1.0), [2, 3, k, n]);
                let reference = {
                    let device = Default::default();
                    let a = Tensor::<NdArray<f32>, 4>::from_data(a.clone(), &device);
                    let a = if a_t { a.swap_dims(2, 3) } else { a };
                    data(composed(a, Tensor::from_data(b.clone(), &device), shape))
                };
                let full = data(shaped::<NdArray<f32>>(&a, &b, a_t, ProductShape::PLAIN));
                assert!(full.iter().zip(&reference).any(|(f, r)| f != r), "{triangle:?} leaves something out");
                let tiles = [ProductTile::of(64, 64, 16), ProductTile::of(64, 128, 8).wide()];
                for tile in [TileChoice::Auto].into_iter().chain(tiles.map(TileChoice::Fixed)) {
                    let what = format!("{triangle:?}, a transposed {a_t}, {tile:?}");
                    with_product_tile(tile, || {
                        close(&data(shaped::<burn_wgpu::Wgpu>(&a, &b, a_t, shape)), &reference, 1e-5, &what);
                        close(&data(shaped::<WgpuUnfused>(&a, &b, a_t, shape)), &reference, 1e-5, &what);
                    });
                    runs += 2;
                }
            }
        }
    }
    let ran = super::CALLS.load(Ordering::Relaxed) - before;
    assert!(ran >= runs, "our kernel ran {ran} times for {runs} products");
}

/// Triangles over whole tiles: where `k`'s range at every tile's diagonal is whole steps (the
/// offset a multiple of the step) the kernel reads and writes them unguarded (`whole_tiles`),
/// still zeroing what the triangle leaves out of `A`; an offset of 8 under 16-deep steps, a
/// side of 136 rows, and `triu(A)·B` with more rows than `k` and the offset cover (its last
/// tile would start past `k`'s end) stay guarded. Each the CPU's product of the masked operand.
#[test]
fn triangles_of_whole_tiles_and_steps_read_unguarded_and_equal_the_masked_products_on_the_cpu() {
    let _turn = super::tests::serial();
    let (narrow, deep) = (ProductTile::NARROW, ProductTile::of(64, 64, 16));
    let d = 64;
    // (triangle, m, k, n, tile, unguarded): attention's three shapes at offsets 0, 8 and 128.
    let mut cases = Vec::new();
    for (offset, step8, step16) in [(0, true, true), (8, true, false), (128, true, true)] {
        let (queries, keys) = (128, 128 + offset);
        for tile in [narrow, deep] {
            let steps = if tile == narrow { step8 } else { step16 };
            // 136 keys are no whole tile of `C`'s columns (the scores) or `A`'s rows (`dV`).
            let keys_whole = keys % tile.rows == 0;
            cases.push((Triangle::Output(offset), queries, d, keys, tile, keys_whole));
            cases.push((Triangle::LowerA(offset), queries, keys, d, tile, steps));
            cases.push((Triangle::UpperA(offset), keys, queries, d, tile, steps && keys_whole));
        }
    }
    cases.push((Triangle::UpperA(0), 256, 128, d, narrow, false));
    for (triangle, m, k, n, tile, unguarded) in cases {
        let shape = ProductShape::new(triangle, false);
        let a = TensorData::new(values(6 * m * k, 33, 1.0), [2, 3, m, k]);
        let b = TensorData::new(values(6 * k * n, 34, 1.0), [2, 3, k, n]);
        let reference = {
            let a = Tensor::<NdArray<f32>, 4>::from_data(a.clone(), &Default::default());
            data(composed(a, Tensor::from_data(b.clone(), &Default::default()), shape))
        };
        let what = format!("{triangle:?} [{m} x {k}]·[{k} x {n}], {}", tile.name());
        with_product_tile(TileChoice::Fixed(tile), || {
            *super::product_launch::LAST_EXACT.lock().unwrap() = None;
            let c = shaped::<WgpuUnfused>(&a, &b, false, shape);
            close(&data(c), &reference, 1e-4, &what);
            assert_eq!(*super::product_launch::LAST_EXACT.lock().unwrap(), Some(unguarded), "{what}");
        });
    }
}

/// With heads last a rank-4 result is `[batch, m, heads, n]` in memory, handed out as the
/// `[batch, heads, m, n]` view of it: the same values, strides permuted, so that joining the
/// heads (`swap_dims(1, 2)` and a reshape) copies nothing.
#[test]
fn heads_last_product_holds_the_same_values_stored_batch_len_heads() {
    let _turn = super::tests::serial();
    let (m, k, n) = (70, 12, 16);
    let a = TensorData::new(values(2 * 3 * m * k, 41, 1.0), [2, 3, m, k]);
    let b = TensorData::new(values(2 * 3 * k * n, 42, 1.0), [2, 3, k, n]);
    let plain = data(shaped::<WgpuUnfused>(&a, &b, false, ProductShape::PLAIN));
    let last = shaped::<WgpuUnfused>(&a, &b, false, ProductShape::new(Triangle::Full, true));
    let strides = last.clone().into_primitive().tensor().meta.strides().to_vec();
    assert_eq!(strides, vec![m * 3 * n, n, 3 * n, 1], "stored as [batch, m, heads, n]");
    close(&data(last), &plain, 0.0, "heads last, unfused");
    super::product_launch::LAUNCHES.lock().unwrap().clear();
    let fused = shaped::<burn_wgpu::Wgpu>(&a, &b, false, ProductShape::new(Triangle::Full, true));
    let joined = fused.swap_dims(1, 2).reshape([2, m, 3 * n]);
    let expected = Tensor::<NdArray<f32>, 4>::from_data(TensorData::new(plain, [2, 3, m, n]), &Default::default());
    close(&data(joined), &data(expected.swap_dims(1, 2).reshape([2, m, 3 * n])), 0.0, "heads last, fused, joined");
    // The values alone would not show it: burn-fusion's custom operation launched our kernel
    // with the heads last.
    assert_eq!(
        *super::product_launch::LAUNCHES.lock().unwrap(),
        vec![(ProductShape::new(Triangle::Full, true), 6)],
        "the fused launches"
    );
}

/// Attention's scores and context as autodiff steps with our kernel (fused and unfused),
/// with a causal mask (offset 0, and 3: queries after 3 cached keys) and without: the
/// context and the gradients of `Q`, `K`, `V` are the CPU's through Burn's full products.
#[test]
fn attention_products_with_triangles_on_wgpu_equal_full_products_on_cpu_in_values_and_gradients() {
    use crate::fused::products::CHOICE;
    use crate::fused::{attention_context, attention_scores, GpuProducts};
    use crate::mask::{causal_mask, MASKED_SCORE};

    fn grads<B: AutodiffBackend>(queries: usize, causal: Option<usize>) -> [Vec<f32>; 4] {
        let device = Default::default();
        let (d, offset) = (12, causal.unwrap_or(0));
        let keys = queries + offset;
        let tensor = |len, seed, scale| {
            let shape = [2, 3, len, d];
            let n = shape.iter().product::<usize>();
            Tensor::<B, 4>::from_data(TensorData::new(values(n, seed, scale), shape), &device).require_grad()
        };
        let (q, k, v) = (tensor(queries, 51, 1.0), tensor(keys, 52, 1.0), tensor(keys, 53, 0.5));
        let mut scores = attention_scores(q.clone(), k.clone(), causal).mul_scalar(0.25);
        if causal.is_some() {
            let mask = causal_mask::<B>(queries, keys, offset, &device).expand([2, 3, queries, keys]);
            scores = scores.mask_fill(mask, MASKED_SCORE);
        }
        let weights = burn::tensor::activation::softmax(scores, 3);
        let context = attention_context(weights, v.clone(), causal);
        let w =
            Tensor::<B, 4>::from_data(TensorData::new(values(6 * queries * d, 54, 1.0), [2, 3, queries, d]), &device);
        let g = (context.clone() * w).sum().backward();
        [data(context), data(q.grad(&g).unwrap()), data(k.grad(&g).unwrap()), data(v.grad(&g).unwrap())]
    }

    let _turn = super::tests::serial();
    for (queries, causal) in [(140, Some(0)), (137, Some(3)), (70, None)] {
        let reference = grads::<Autodiff<NdArray<f32>>>(queries, causal);
        CHOICE.with(|p| p.set(Some(GpuProducts::Ours)));
        super::product_launch::LAUNCHES.lock().unwrap().clear();
        let before = super::CALLS.load(Ordering::Relaxed);
        let ours =
            [grads::<Autodiff<burn_wgpu::Wgpu>>(queries, causal), grads::<Autodiff<WgpuUnfused>>(queries, causal)];
        let runs = super::CALLS.load(Ordering::Relaxed) - before;
        CHOICE.with(|p| p.set(None));
        assert!(runs >= 12, "our kernel ran {runs} times for 12 products");
        // The triangles reached the kernel: with a causal mask each of the six products of
        // either backend leaves out what the mask makes zero (the values alone could not tell,
        // since the softmax's mask makes the full products equal).
        let launches = std::mem::take(&mut *super::product_launch::LAUNCHES.lock().unwrap());
        let cut = launches.iter().filter(|(s, _)| s.triangle != Triangle::Full).count();
        assert_eq!(cut, if causal.is_some() { 12 } else { 0 }, "triangular launches of {launches:?}");
        for (backend, ours) in ["wgpu", "wgpu-unfused"].iter().zip(ours) {
            for (what, (o, r)) in ["context", "dQ", "dK", "dV"].iter().zip(ours.iter().zip(&reference)) {
                close(o, r, 1e-4, &format!("{backend} {what}, causal {causal:?}"));
            }
        }
    }
}
