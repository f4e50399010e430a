//! LayerNorm's fused forms against exact f64 values from the definitions and against Burn's
//! own `layer_norm`, values and gradients of `x`, `γ` and `β`; the helpers are shared with the
//! CubeCL kernels' tests (`fused/cube/tests.rs`) and the composed backward's
//! (`fused/composed_norm.rs`).

use burn::backend::Autodiff;
use burn::tensor::{Tensor, TensorData};
use burn_ndarray::NdArray;

use super::super::*;
use super::{close, data, values, Grad};

/// `[x, γ, β, w]` for a LayerNorm test over rows of `d`: rows with a large common offset
/// (the centring has to happen before the variance), `γ` around 1, output weights `w`.
pub(in crate::fused) fn layer_norm_inputs(n: usize, d: usize) -> [Vec<f32>; 4] {
    let x = values(n, 8, 3.0).iter().enumerate().map(|(i, v)| v + (i / d) as f32 % 5.0 * 40.0).collect();
    let gamma = values(d, 9, 1.0).iter().map(|v| v + 1.0).collect();
    [x, gamma, values(d, 10, 1.0), values(n, 11, 1.0)]
}

/// Output and the gradients of `x`, `γ` and `β` (if `bias`) of a LayerNorm `f(x, γ, β)` on `B`,
/// on [`layer_norm_inputs`].
pub(in crate::fused) fn layer_norm_grads<B: burn::tensor::backend::AutodiffBackend>(
    shape: [usize; 3],
    bias: bool,
    f: impl Fn(Tensor<B, 3>, Tensor<B, 1>, Option<Tensor<B, 1>>) -> Tensor<B, 3>,
) -> Vec<Vec<f32>> {
    let device = Default::default();
    let (n, d) = (shape.iter().product(), shape[2]);
    let [x, gamma, beta, w] = layer_norm_inputs(n, d);
    let tensor = |v: Vec<f32>, dims: Vec<usize>| TensorData::new(v, dims).convert::<B::FloatElem>();
    let x = Tensor::<B, 3>::from_data(tensor(x, shape.to_vec()), &device).require_grad();
    let gamma = Tensor::<B, 1>::from_data(tensor(gamma, vec![d]), &device).require_grad();
    let beta = Tensor::<B, 1>::from_data(tensor(beta, vec![d]), &device).require_grad();
    let w = Tensor::<B, 3>::from_data(tensor(w, shape.to_vec()), &device);
    let y = f(x.clone(), gamma.clone(), bias.then(|| beta.clone()));
    let grads = (y.clone() * w).sum().backward();
    let mut out = vec![data(y), data(x.grad(&grads).unwrap()), data(gamma.grad(&grads).unwrap())];
    if bias {
        out.push(data(beta.grad(&grads).unwrap()));
    }
    out
}

/// Burn's own `layer_norm` (composed of tracked operations under autodiff).
pub(in crate::fused) fn burns_layer_norm<B: Backend>(
    x: Tensor<B, 3>,
    gamma: Tensor<B, 1>,
    beta: Option<Tensor<B, 1>>,
) -> Tensor<B, 3> {
    let beta = beta.map(|b| b.into_primitive().tensor());
    let y = B::layer_norm(x.into_primitive().tensor(), gamma.into_primitive().tensor(), beta, 1e-5);
    Tensor::from_primitive(TensorPrimitive::Float(y))
}

/// LayerNorm's value and gradients `[y, dx, dγ, dβ]` in f64, from the definitions, for inputs
/// of `[rows, d]` and the output weights `w` (the loss is `Σ w ⊙ y`).
pub(in crate::fused) fn layer_norm_f64(x: &[f32], gamma: &[f32], beta: &[f32], w: &[f32], d: usize) -> Vec<Vec<f32>> {
    let mut out = vec![vec![0.0f64; x.len()], vec![0.0; x.len()], vec![0.0; d], vec![0.0; d]];
    for (row, (x, w)) in x.chunks(d).zip(w.chunks(d)).enumerate() {
        let n = d as f64;
        let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
        let rstd = 1.0 / (var + 1e-5).sqrt();
        let xhat: Vec<f64> = x.iter().map(|&v| (v as f64 - mean) * rstd).collect();
        let g: Vec<f64> = w.iter().zip(gamma).map(|(&w, &c)| w as f64 * c as f64).collect();
        let (mean_g, mean_gx) = (g.iter().sum::<f64>() / n, g.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / n);
        for i in 0..d {
            out[0][row * d + i] = xhat[i] * gamma[i] as f64 + beta[i] as f64;
            out[1][row * d + i] = rstd * (g[i] - mean_g - xhat[i] * mean_gx);
            out[2][i] += w[i] as f64 * xhat[i];
            out[3][i] += w[i] as f64;
        }
    }
    out.into_iter().map(|v| v.into_iter().map(|v| v as f32).collect()).collect()
}

#[test]
fn fused_layer_norm_matches_exact_f64_values_and_gradients_of_x_gamma_and_beta() {
    let shape = [4, 37, 300]; // three parallel blocks of rows
    let (n, d) = (shape.iter().product::<usize>(), shape[2]);
    let inputs = layer_norm_inputs(n, d);
    let truth = layer_norm_f64(&inputs[0], &inputs[1], &inputs[2], &inputs[3], d);
    for bias in [true, false] {
        let fused = layer_norm_grads::<Grad>(shape, bias, |x, g, b| layer_norm(x, g, b, 1e-5));
        let burns = layer_norm_grads::<Grad>(shape, bias, burns_layer_norm);
        assert_eq!((fused.len(), burns.len()), if bias { (4, 4) } else { (3, 3) }, "a gradient for each input");
        for (i, what) in ["value", "dx", "dgamma", "dbeta"].iter().enumerate().take(fused.len()) {
            // β shifts the value only; the f64 truth has it.
            let truth: Vec<f32> = match (i, bias) {
                (0, false) => truth[0].iter().enumerate().map(|(j, v)| v - inputs[2][j % d]).collect(),
                _ => truth[i].clone(),
            };
            close(&fused[i], &truth, 2e-5, what);
            close(&fused[i], &burns[i], 2e-3, what);
        }
    }
}

#[test]
fn composed_layer_norm_backward_matches_burns_on_a_backend_without_kernels() {
    type Plain = Autodiff<NdArray<f32, i32>>;
    let shape = [2, 5, 24];
    let composed = layer_norm_grads::<Plain>(shape, true, |x, g, b| {
        let b = b.map(|b| b.into_primitive().tensor());
        let y = Plain::fused_layer_norm(x.into_primitive().tensor(), g.into_primitive().tensor(), b, 1e-5);
        Tensor::from_primitive(TensorPrimitive::Float(y))
    });
    let reference = layer_norm_grads::<Plain>(shape, true, burns_layer_norm);
    for (what, (a, b)) in ["value", "dx", "dgamma", "dbeta"].iter().zip(composed.iter().zip(&reference)) {
        close(a, b, 2e-4, what);
    }
}

/// The CPU's LayerNorm under autodiff keeps each row's mean and `1/√(σ² + ε)` from the
/// forward, and its backward reads them: `dx` (with and without a pending gradient), `dγ` and
/// `dβ` have the bits of the backward that computes them again from `x`, over blocks of rows
/// of every size the parallel split makes.
#[test]
fn layer_norm_backward_from_the_kept_moments_has_the_bits_of_recomputing_them() {
    use super::super::layer_norm_cpu::{layer_norm_backward, layer_norm_keeping, MOMENTS_READ};
    type T = burn::tensor::ops::FloatTensor<NdArray<f32>>;
    let shape = [3, 41, 300]; // blocks of 54 rows: two whole ones and a shorter last one
    let (n, d) = (shape.iter().product::<usize>(), shape[2]);
    let [x, gamma, beta, w] = layer_norm_inputs(n, d);
    let t = |v: &[f32], dims: Vec<usize>| -> T {
        burn_ndarray::NdArrayTensor::from_data(TensorData::new(v.to_vec(), dims))
    };
    let bits = |t: T| super::super::cpu::values(t).1.to_vec();
    let (xs, g) = (t(&x, shape.to_vec()), t(&gamma, vec![d]));
    let (y, moments) = layer_norm_keeping(xs.clone(), g.clone(), Some(t(&beta, vec![d])), 1e-5);
    assert_eq!(
        bits(y),
        bits(super::super::layer_norm_cpu::layer_norm(xs.clone(), g.clone(), Some(t(&beta, vec![d])), 1e-5))
    );
    for pending in [None, Some(t(&values(n, 12, 1.0), shape.to_vec()))] {
        let grad = t(&w, shape.to_vec());
        let kept =
            layer_norm_backward(xs.clone(), g.clone(), grad.clone(), 1e-5, Some(moments.clone()), pending.clone());
        let again = layer_norm_backward(xs.clone(), g.clone(), grad, 1e-5, None, pending);
        for (what, (a, b)) in ["dx", "dgamma", "dbeta"].iter().zip(kept.into_iter().zip(again)) {
            let bits_of = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
            assert_eq!(bits_of(bits(a)), bits_of(bits(b)), "{what}");
        }
    }
    // Under autodiff the backward reads what the forward kept.
    let read = || MOMENTS_READ.with(|c| c.get());
    let before = read();
    let fused = layer_norm_grads::<Grad>(shape, true, |x, g, b| layer_norm(x, g, b, 1e-5));
    assert_eq!(read(), before + 1, "the backward computed the moments again");
    let truth = layer_norm_f64(&x, &gamma, &beta, &w, d);
    close(&fused[1], &truth[1], 2e-5, "dx");
}
