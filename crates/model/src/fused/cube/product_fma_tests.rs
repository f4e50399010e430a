//! Our product kernel with its multiply-adds fused (`fma`, `ATTEND_GPU_FMA=on`) and as a
//! multiply and an add (`off`) on wgpu (lavapipe will do), launched directly, against Burn's
//! product on the CPU.

use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use burn_ndarray::NdArray;

use crate::fused::dispatch::WgpuUnfused;
use crate::fused::tests::{close, data, values};
use crate::fused::{ProductShape, ProductTile};

/// Both forms of the multiply-adds, under an 8 × 8 tile and a wide one, over sizes that end
/// partway through a tile and a step, `A` read through a transposed view: each the CPU's
/// product. (On lavapipe the two give the same bits: Mesa fuses `a·b + c` either way.)
#[test]
fn product_kernel_with_and_without_fused_multiply_adds_on_wgpu_equals_cpu_products() {
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
    for tile in [ProductTile::HALF_ROWS, ProductTile::of(128, 128, 16).wide()] {
        for fused in [true, false] {
            let ta = Tensor::<WgpuUnfused, 2>::from_data(a.clone(), &device).transpose();
            let tb = Tensor::<WgpuUnfused, 2>::from_data(b.clone(), &device);
            let c = super::product_launch::product(
                ta.into_primitive().tensor(),
                tb.into_primitive().tensor(),
                tile,
                ProductShape::PLAIN,
                fused,
            );
            let c = Tensor::<WgpuUnfused, 2>::from_primitive(TensorPrimitive::Float(c));
            close(&data(c), &reference, 1e-5, &format!("{} fused {fused}", tile.name()));
        }
    }
}
