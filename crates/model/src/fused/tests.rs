//! Each fused operation against its composed reference, values and gradients: the kernels
//! (`NdArray<f32>`, under `Autodiff` for the gradients) and the composed defaults of
//! [`FusedOps`] (through a backend that implements the trait by naming itself, `NdArray<f32, i32>`: f32
//! like the kernels' backend, since burn-autodiff's graphs are shared between backends, but
//! another type, so the dispatch gives it no kernel).

use burn::backend::Autodiff;
use burn::tensor::{Tensor, TensorData};
use burn_ndarray::NdArray;

use super::*;

type Cpu = NdArray<f32>;
type Grad = Autodiff<Cpu>;

/// A backend with no kernels: every fused operation is the trait's composed default.
impl FusedOps for NdArray<f32, i32> {}

fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn close(a: &[f32], b: &[f32], tol: f32, what: &str) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(x.is_finite() && (x - y).abs() <= tol * (1.0 + y.abs()), "{what}[{i}]: {x} vs {y}");
    }
}

fn data<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().convert::<f32>().to_vec::<f32>().unwrap()
}

/// Output and input gradient of `f` on `x` (weighted by `w` so every output counts differently).
fn value_and_grad<B: burn::tensor::backend::AutodiffBackend>(
    x: &[f32],
    w: &[f32],
    shape: [usize; 4],
    f: impl Fn(Tensor<B, 4>) -> Tensor<B, 4>,
) -> (Vec<f32>, Vec<f32>) {
    let device = Default::default();
    let x =
        Tensor::<B, 4>::from_data(TensorData::new(x.to_vec(), shape).convert::<B::FloatElem>(), &device).require_grad();
    let w = Tensor::<B, 4>::from_data(TensorData::new(w.to_vec(), shape).convert::<B::FloatElem>(), &device);
    let y = f(x.clone());
    let grads = (y.clone() * w).sum().backward();
    (data(y), data(x.grad(&grads).unwrap()))
}

#[test]
fn fused_gelu_matches_the_composed_form_in_value_and_gradient() {
    let shape = [2, 3, 5, 700]; // more than one parallel block
    let n = shape.iter().product();
    let (x, w) = (values(n, 1, 6.0), values(n, 2, 1.0));
    let (y, g) = value_and_grad::<Grad>(&x, &w, shape, gelu);
    let (y_ref, g_ref) = value_and_grad::<Grad>(&x, &w, shape, Gelu::composed);
    close(&y, &y_ref, 1e-6, "value");
    close(&g, &g_ref, 1e-5, "gradient");
}

#[test]
fn fused_softmax_matches_the_composed_form_in_value_and_gradient() {
    let shape = [3, 4, 33, 47];
    let n = shape.iter().product();
    // Scores of attention's size, with masked entries (-1e9) as attention writes them.
    let x: Vec<f32> =
        values(n, 3, 8.0).into_iter().enumerate().map(|(i, v)| if i % 7 == 3 { -1.0e9 } else { v }).collect();
    let w = values(n, 4, 1.0);
    let (y, g) = value_and_grad::<Grad>(&x, &w, shape, softmax_last);
    let (y_ref, g_ref) = value_and_grad::<Grad>(&x, &w, shape, SoftmaxLast::composed);
    close(&y, &y_ref, 1e-6, "value");
    close(&g, &g_ref, 1e-5, "gradient");
}

#[test]
fn fused_softmax_reads_a_transposed_input_in_its_logical_order() {
    let device = Default::default();
    let x = Tensor::<Cpu, 3>::from_data(TensorData::new(values(2 * 5 * 9, 5, 3.0), [2, 5, 9]), &device);
    let transposed = x.swap_dims(1, 2); // not contiguous: the kernel gathers it
    close(&data(softmax_last(transposed.clone())), &data(SoftmaxLast::composed(transposed)), 1e-6, "value");
}

#[test]
fn composed_defaults_give_the_same_gradients_on_a_backend_without_kernels() {
    let shape = [2, 2, 3, 17];
    let n = shape.iter().product();
    let (x, w) = (values(n, 6, 4.0), values(n, 7, 1.0));
    type Plain = Autodiff<NdArray<f32, i32>>;
    let on = |f: fn(FloatTensor<Plain>) -> FloatTensor<Plain>| {
        move |t: Tensor<Plain, 4>| Tensor::from_primitive(TensorPrimitive::Float(f(t.into_primitive().tensor())))
    };
    for (name, fused, composed) in [
        ("gelu", on(Plain::fused_gelu), Gelu::composed as fn(Tensor<Plain, 4>) -> Tensor<Plain, 4>),
        ("softmax", on(Plain::fused_softmax_last), SoftmaxLast::composed),
    ] {
        let (y, g) = value_and_grad::<Plain>(&x, &w, shape, fused);
        let (y_ref, g_ref) = value_and_grad::<Plain>(&x, &w, shape, composed);
        close(&y, &y_ref, 1e-6, name);
        close(&g, &g_ref, 1e-5, name);
    }
}

#[test]
fn the_cpu_backends_take_the_kernels_and_other_backends_the_composed_form() {
    let device = Default::default();
    let calls = || cpu::CALLS.with(|c| c.get());
    let start = calls();
    let _ = gelu(Tensor::<Cpu, 2>::ones([2, 3], &device));
    assert_eq!(calls(), start + 1, "NdArray<f32> did not run the GELU kernel");
    let _ = softmax_last(Tensor::<Grad, 2>::ones([2, 3], &device));
    assert_eq!(calls(), start + 2, "Autodiff<NdArray<f32>> did not run the softmax kernel");
    let _ = gelu(Tensor::<NdArray<f32, i32>, 2>::ones([2, 3], &device));
    let _ = softmax_last(Tensor::<Autodiff<NdArray<f32, i32>>, 2>::ones([2, 3], &device));
    assert_eq!(calls(), start + 2, "a backend without kernels ran one");
}
