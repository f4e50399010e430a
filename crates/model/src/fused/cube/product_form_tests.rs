//! Our product kernel in each form of its inner loop (multiply-adds fused or not,
//! `ATTEND_GPU_FMA`; lanes in pairs or in rows, `ATTEND_GPU_LANES`; reads at constant offsets
//! or summed indices, `ATTEND_GPU_ADDRESSES`; the next step's stores inline or apart,
//! `ATTEND_GPU_STORES`) on wgpu (lavapipe will
//! do), launched directly, against Burn's product on the CPU; and the lanes' placement itself.

use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use burn_ndarray::NdArray;

use super::product::unit_place;
use crate::fused::dispatch::WgpuUnfused;
use crate::fused::tests::{close, data, values};
use crate::fused::{ProductForm, ProductShape, ProductTile};

/// `a·b` by our kernel, launched directly under `tile` in `form`.
fn ours(
    a: Tensor<WgpuUnfused, 2>,
    b: Tensor<WgpuUnfused, 2>,
    tile: ProductTile,
    form: ProductForm,
) -> Tensor<WgpuUnfused, 2> {
    let (a, b) = (a.into_primitive().tensor(), b.into_primitive().tensor());
    let c = super::product_launch::product(a, b, tile, ProductShape::PLAIN, form);
    Tensor::from_primitive(TensorPrimitive::Float(c))
}

/// Every combination of multiply-adds, lanes and addresses (the stores inline or apart by their
/// parity), under an 8 × 8 tile and two wide ones (8 deep, where reads take constant
/// offsets, and 16 deep, where the permuted rows keep the summed indices), over sizes that end partway through a tile
/// and a step, `A` read through a transposed view: each the CPU's product. (On lavapipe the
/// forms give the same bits: Mesa fuses `a·b + c` either way, and where a lane sits changes
/// no sum.)
#[test]
fn product_kernel_in_every_form_of_its_inner_loop_on_wgpu_equals_cpu_products() {
    let _turn = super::tests::serial();
    let (m, k, n) = (70, 21, 133);
    let a = TensorData::new(values(m * k, 41, 1.0), [k, m]);
    let b = TensorData::new(values(k * n, 42, 1.0), [k, n]);
    let reference = {
        let device = Default::default();
        let a = Tensor::<NdArray<f32>, 2>::from_data(a.clone(), &device).transpose();
        data(a.matmul(Tensor::from_data(b.clone(), &device)))
    };
    let device = Default::default();
    let tiles = [ProductTile::HALF_ROWS, ProductTile::HALF_ROWS.wide(), ProductTile::of(128, 128, 16).wide()];
    for tile in tiles {
        for bits in 0..8u32 {
            // The stores by the parity of the other three: each switch both ways under each
            // tile in half the kernels of every combination (the stores' meeting with
            // unguarded tiles is the next test's).
            let form = ProductForm {
                fma: bits & 1 == 1,
                paired_lanes: bits & 2 == 2,
                constant_offsets: bits & 4 == 4,
                inline_stores: bits.count_ones() % 2 == 0,
            };
            let ta = Tensor::<WgpuUnfused, 2>::from_data(a.clone(), &device).transpose();
            let tb = Tensor::<WgpuUnfused, 2>::from_data(b.clone(), &device);
            let c = ours(ta, tb, tile, form);
            close(&data(c), &reference, 1e-5, &format!("{} {form:?}", tile.name()));
        }
    }
}

/// Shapes of whole tiles and steps: the `offsets` form reads and writes them unguarded
/// (`exact_tiles`), its next step's stores inline or apart, `sums` keeps every check; each the CPU's product, in every layout of its
/// operands (`A` along `k` or along its rows, `B` the same), under an 8-deep tile, a wide one
/// and a 16-deep one; and shapes ragged for a tile (40 deep for 16-deep steps, 120 rows),
/// guarded again.
#[test]
fn whole_tiles_read_unguarded_in_the_offsets_form_equal_cpu_products_in_every_layout() {
    let _turn = super::tests::serial();
    let device = Default::default();
    let tiles = [ProductTile::HALF_ROWS, ProductTile::HALF_ROWS.wide(), ProductTile::of(128, 128, 16)];
    for (m, k, n) in [(128, 48, 256), (128, 40, 256), (120, 48, 256)] {
        let a = TensorData::new(values(m * k, 45, 1.0), [m, k]);
        let b = TensorData::new(values(k * n, 46, 1.0), [k, n]);
        let reference = {
            let cpu = Default::default();
            let a = Tensor::<NdArray<f32>, 2>::from_data(a.clone(), &cpu);
            data(a.matmul(Tensor::from_data(b.clone(), &cpu)))
        };
        for tile in tiles {
            for (a_t, b_t) in [(false, false), (true, false), (false, true), (true, true)] {
                for (offsets, inline_stores) in [(true, true), (false, true), (true, false)] {
                    let form = ProductForm { constant_offsets: offsets, inline_stores, ..ProductForm::DEFAULT };
                    // A transposed operand is stored transposed and read through its view.
                    let ta = if a_t {
                        let stored = Tensor::<NdArray<f32>, 2>::from_data(a.clone(), &Default::default()).transpose();
                        Tensor::<WgpuUnfused, 2>::from_data(stored.into_data(), &device).transpose()
                    } else {
                        Tensor::<WgpuUnfused, 2>::from_data(a.clone(), &device)
                    };
                    let tb = if b_t {
                        let stored = Tensor::<NdArray<f32>, 2>::from_data(b.clone(), &Default::default()).transpose();
                        Tensor::<WgpuUnfused, 2>::from_data(stored.into_data(), &device).transpose()
                    } else {
                        Tensor::<WgpuUnfused, 2>::from_data(b.clone(), &device)
                    };
                    let c = ours(ta, tb, tile, form);
                    let whole = m % tile.rows == 0 && n % tile.cols == 0 && k % tile.depth == 0;
                    let exact = *super::product_launch::LAST_EXACT.lock().unwrap();
                    assert_eq!(exact, Some(offsets && whole), "{} {form:?} k {k}", tile.name());
                    let what = format!("{} {form:?} k {k} a_t {a_t} b_t {b_t}", tile.name());
                    close(&data(c), &reference, 1e-5, &what);
                }
            }
        }
    }
}

/// Both placements give each unit of a tile its own place, lanes `ℓ` and `ℓ ^ 1` sharing a row
/// of units (the same vector of `A`); in pairs lanes `ℓ` and `ℓ ^ 2` share a column too (the
/// same vector of `B`), which in rows they do not.
#[test]
fn lanes_in_pairs_share_a_vectors_rows_with_their_neighbour_and_columns_with_the_next_and_cover_the_tile() {
    for warps_n in [1usize, 2] {
        for paired in [true, false] {
            let units = 4 * 32 * warps_n;
            let places: Vec<(usize, usize)> = (0..units).map(|u| unit_place(u, warps_n, paired)).collect();
            let mut seen = places.clone();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), units, "warps_n {warps_n} paired {paired}: two units share a place");
            assert!(places.iter().all(|&(ty, tx)| ty < units / (8 * warps_n) && tx < 8 * warps_n));
            let rows_paired = (0..units).all(|u| places[u].0 == places[u ^ 1].0);
            let cols_paired = (0..units).all(|u| places[u].1 == places[u ^ 2].1);
            assert!(rows_paired, "warps_n {warps_n} paired {paired}");
            assert_eq!(cols_paired, paired, "warps_n {warps_n} paired {paired}");
            // Either way a warp spans 4 rows and 8 columns of units.
            for warp in 0..units / 32 {
                let rows: std::collections::BTreeSet<usize> = (0..32).map(|l| places[32 * warp + l].0).collect();
                let cols: std::collections::BTreeSet<usize> = (0..32).map(|l| places[32 * warp + l].1).collect();
                assert_eq!((rows.len(), cols.len()), (4, 8));
            }
        }
    }
}

/// burn-fusion's product operation runs when the stream is flushed, in the form in force when
/// it was registered (as with the tile), so that `bench products` times each form it asks for.
#[test]
fn fusion_runs_the_product_in_the_form_in_force_at_registration() {
    use crate::fused::products::CHOICE;
    use crate::fused::{with_product_form, GpuProducts};

    let _turn = super::tests::serial();
    CHOICE.with(|p| p.set(Some(GpuProducts::Ours)));
    let (m, k, n) = (40, 24, 72);
    let (a, b) = (TensorData::new(values(m * k, 43, 1.0), [m, k]), TensorData::new(values(k * n, 44, 1.0), [k, n]));
    let reference = {
        let device = Default::default();
        let a = Tensor::<NdArray<f32>, 2>::from_data(a.clone(), &device);
        data(a.matmul(Tensor::from_data(b.clone(), &device)))
    };
    let device = Default::default();
    let old = ProductForm { fma: false, paired_lanes: false, constant_offsets: false, inline_stores: false };
    for form in [old, ProductForm::DEFAULT] {
        let c = with_product_form(form, || {
            let a = Tensor::<burn_wgpu::Wgpu, 2>::from_data(a.clone(), &device);
            let b = Tensor::<burn_wgpu::Wgpu, 2>::from_data(b.clone(), &device);
            crate::fused::products::product(a, b)
        });
        *super::product_launch::LAST_FORM.lock().unwrap() = None;
        close(&data(c), &reference, 1e-5, &format!("registered in {form:?}, flushed after"));
        assert_eq!(*super::product_launch::LAST_FORM.lock().unwrap(), Some(form), "the form at registration");
    }
    CHOICE.with(|p| p.set(None));
}
