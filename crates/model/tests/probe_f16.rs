#![cfg(feature = "test-wgpu")]
use burn::prelude::Backend;
use burn::tensor::{DType, Distribution, FloatDType, Tensor};
type B = burn::backend::Autodiff<burn_wgpu::Wgpu>;

#[test]
fn probe() {
    let device = burn_wgpu::WgpuDevice::default();
    println!("supports f16: {:?}", <burn_wgpu::Wgpu as Backend>::supports_dtype(&device, DType::F16));
    let w = Tensor::<B, 2>::random([4, 4], Distribution::Default, &device).require_grad();
    let x = Tensor::<B, 2>::random([3, 4], Distribution::Default, &device);
    let wh = w.clone().cast(FloatDType::F16);
    let h = x.clone().cast(FloatDType::F16).matmul(wh);
    println!("h dtype {:?}", h.dtype());
    let y = h.cast(FloatDType::F32).sum();
    let g = y.backward();
    let gw = w.grad(&g).unwrap();
    println!("gw dtype {:?} {}", gw.dtype(), gw);
    let x32 = x.inner();
    println!("expected {}", x32.sum_dim(0).transpose().repeat_dim(1, 4));
}
