//! Each fused operation against its composed reference, values and gradients: the kernels
//! (`NdArray<f32>`, under `Autodiff` for the gradients) and the composed defaults of
//! [`FusedOps`] (through a backend that implements the trait by naming itself, `NdArray<f32, i32>`: f32
//! like the kernels' backend, since burn-autodiff's graphs are shared between backends, but
//! another type, so the dispatch gives it no kernel).

use burn::backend::Autodiff;
use burn::tensor::{Tensor, TensorData};
use burn_ndarray::NdArray;

use super::*;

mod activation;
mod attention_weights;
mod linear;
mod norm;
mod residual;
#[cfg(feature = "wgpu")]
pub(in crate::fused) use linear::linear_grads;
pub(in crate::fused) use norm::{burns_layer_norm, layer_norm_f64, layer_norm_grads, layer_norm_inputs};

type Cpu = NdArray<f32>;
pub(in crate::fused) type Grad = Autodiff<Cpu>;

/// A backend with no kernels: every fused operation is the trait's composed default.
impl FusedOps for NdArray<f32, i32> {}
impl FusedProducts for NdArray<f32, i32> {}

/// `n` pseudo-random values in `[-scale, scale)` from `seed` (also the AdamW kernel's test).
pub(in crate::fused) fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
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

pub(in crate::fused) fn close(a: &[f32], b: &[f32], tol: f32, what: &str) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(x.is_finite() && (x - y).abs() <= tol * (1.0 + y.abs()), "{what}[{i}]: {x} vs {y}");
    }
}

/// `a` within `share` of `b`'s largest magnitude, everywhere: for values far below 1 (weights of
/// a softmax over hundreds of keys, their gradients), where [`close`]'s `tol·(1 + |y|)` is in
/// effect an absolute bound as large as the values themselves. (The kernels' tests on wgpu use it.)
#[cfg(feature = "wgpu")]
pub(in crate::fused) fn close_to_scale(a: &[f32], b: &[f32], share: f32, what: &str) {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f32, |m, y| m.max(y.abs()));
    assert!(scale > 0.0, "{what}: all zeros");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(x.is_finite() && (x - y).abs() <= share * scale, "{what}[{i}]: {x} vs {y} (scale {scale})");
    }
}

pub(in crate::fused) fn data<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().convert::<f32>().to_vec::<f32>().unwrap()
}

/// Output and input gradient of `f` on `x` (weighted by `w` so every output counts differently).
pub(in crate::fused) fn value_and_grad<B: burn::tensor::backend::AutodiffBackend>(
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

/// The CPU's GELU under autodiff keeps its derivative from the forward: the value and the
/// gradient have the bits of the forward kernel and of the backward that recomputes `erf`
/// and `exp` from the input, and the tracked forward keeps the derivative, not the input.
#[test]
fn gelu_backward_from_the_kept_derivative_has_the_bits_of_recomputing_it() {
    let shape = [3, 5, 2000]; // more than one parallel block
    let n = shape.iter().product();
    let device = Default::default();
    let tensor =
        |v: Vec<f32>| Tensor::<Cpu, 3>::from_data(TensorData::new(v, shape), &device).into_primitive().tensor();
    let (x, g) = (tensor(values(n, 21, 7.0)), tensor(values(n, 22, 1.0)));
    let bits = |t| {
        data(Tensor::<Cpu, 3>::from_primitive(TensorPrimitive::Float(t)))
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    };
    let (y, derivative) = super::activation::gelu_keeping(x.clone());
    assert_eq!(bits(y), bits(super::activation::gelu(x.clone())), "value");
    let kept = bits(super::activation::gelu_backward_from_derivative(derivative, g.clone()));
    assert_eq!(kept, bits(super::activation::gelu_backward(x, g)), "gradient");
    assert!(kept.iter().any(|&b| b != 0), "an all-zero gradient");
    // Under autodiff: the gradient of `Σ w·GELU(x)` is `w·GELU'(x)`, as the kernel gives it.
    let (xs, ws) = (values(n, 21, 7.0), values(n, 22, 1.0));
    let read = || super::activation::DERIVATIVE_READ.with(|c| c.get());
    let before = read();
    let (_, grad) = value_and_grad::<Grad>(&xs, &ws, [1, 3, 5, 2000], gelu);
    assert_eq!(read(), before + 1, "the backward recomputed the derivative");
    let expected = bits(super::activation::gelu_backward(tensor(xs), tensor(ws)));
    assert_eq!(grad.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), expected, "autodiff's gradient");
}

#[test]
fn fused_relu_gives_burns_relu_bit_for_bit_in_value_and_gradient_with_zeros_and_nan() {
    let shape = [2, 3, 5, 700]; // more than one parallel block
    let n = shape.iter().product();
    let special = [0.0, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e-30, -1e-30];
    let x: Vec<f32> =
        values(n, 14, 3.0).into_iter().enumerate().map(|(i, v)| special.get(i % 40).copied().unwrap_or(v)).collect();
    let w = values(n, 15, 1.0);
    let calls = || cpu::CALLS.with(|c| c.get());
    let before = calls();
    let (y, g) = value_and_grad::<Grad>(&x, &w, shape, relu);
    assert!(calls() >= before + 3, "the ReLU kernels (one input forward, two backward) did not run");
    let (y_ref, g_ref) = value_and_grad::<Grad>(&x, &w, shape, burn::tensor::activation::relu);
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    assert_eq!(bits(y), bits(y_ref), "value");
    assert_eq!(bits(g), bits(g_ref), "gradient");
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
    let _ = layer_norm(Tensor::<Grad, 2>::ones([2, 3], &device), Tensor::ones([3], &device), None, 1e-5);
    assert_eq!(calls(), start + 4, "Autodiff<NdArray<f32>> did not run the LayerNorm kernel (x, γ)");
    let targets = Tensor::<Grad, 1, burn::tensor::Int>::zeros([2], &device);
    let _ = cross_entropy(Tensor::<Grad, 2>::ones([2, 3], &device), targets, 0.0);
    assert_eq!(calls(), start + 5, "Autodiff<NdArray<f32>> did not run the cross-entropy kernel");
    let _ = linear(Tensor::<Cpu, 2>::ones([2, 3], &device), Tensor::ones([3, 4], &device), None, Weight::InOut);
    assert_eq!(calls(), start + 7, "NdArray<f32> did not run the linear kernel (x, W)");
    let _ = layer_norm(Tensor::<NdArray<f32, i32>, 2>::ones([2, 3], &device), Tensor::ones([3], &device), None, 1e-5);
    let plain = Tensor::<NdArray<f32, i32>, 2>::ones([2, 3], &device);
    let _ = linear(plain, Tensor::ones([3, 4], &device), None, Weight::InOut);
    let targets = Tensor::<NdArray<f32, i32>, 1, burn::tensor::Int>::zeros([2], &device);
    let _ = cross_entropy(Tensor::<NdArray<f32, i32>, 2>::ones([2, 3], &device), targets, 0.0);
    let _ = gelu(Tensor::<NdArray<f32, i32>, 2>::ones([2, 3], &device));
    let _ = softmax_last(Tensor::<Autodiff<NdArray<f32, i32>>, 2>::ones([2, 3], &device));
    assert_eq!(calls(), start + 7, "a backend without kernels ran one");
}

/// `[nll, smoothed]` and the logits' gradient of a cross-entropy `f(z, t)` on `B`, the two
/// output columns weighted differently so both gradient paths count.
pub(in crate::fused) fn cross_entropy_grads<B: burn::tensor::backend::AutodiffBackend>(
    rows: usize,
    vocab: usize,
    f: impl Fn(Tensor<B, 2>, Tensor<B, 1, burn::tensor::Int>) -> Tensor<B, 2>,
) -> (Vec<f32>, Vec<f32>) {
    let device = Default::default();
    let z = TensorData::new(values(rows * vocab, 12, 9.0), [rows, vocab]).convert::<B::FloatElem>();
    let z = Tensor::<B, 2>::from_data(z, &device).require_grad();
    let targets: Vec<i64> = (0..rows).map(|r| ((r * 7919) % vocab) as i64).collect();
    let t =
        Tensor::<B, 1, burn::tensor::Int>::from_data(TensorData::new(targets, [rows]).convert::<B::IntElem>(), &device);
    let w = TensorData::new(values(rows * 2, 13, 1.0), [rows, 2]).convert::<B::FloatElem>();
    let y = f(z.clone(), t);
    let grads = (y.clone() * Tensor::<B, 2>::from_data(w, &device)).sum().backward();
    (data(y), data(z.grad(&grads).unwrap()))
}

#[test]
fn fused_cross_entropy_matches_the_composed_form_in_value_and_gradient_with_and_without_smoothing() {
    for smoothing in [0.0, 0.1] {
        let (rows, vocab) = (50, 1000); // four parallel blocks of rows
        let (y, g) = cross_entropy_grads::<Grad>(rows, vocab, |z, t| cross_entropy(z, t, smoothing));
        let (y_ref, g_ref) =
            cross_entropy_grads::<Grad>(rows, vocab, |z, t| super::cross_entropy::composed(z, t, smoothing));
        close(&y, &y_ref, 1e-5, "value");
        close(&g, &g_ref, 1e-5, "gradient");
    }
}

#[test]
fn cross_entropy_backward_from_the_forwards_log_normalizers_has_the_bits_of_summing_them_again() {
    let (rows, vocab) = (37, 1000); // more than one parallel block
    let device = Default::default();
    let z = Tensor::<Cpu, 2>::from_data(TensorData::new(values(rows * vocab, 16, 9.0), [rows, vocab]), &device);
    let targets: Vec<i64> = (0..rows).map(|r| ((r * 7919) % vocab) as i64).collect();
    let t = Tensor::<Cpu, 1, burn::tensor::Int>::from_data(TensorData::new(targets, [rows]), &device).into_primitive();
    let g = Tensor::<Cpu, 2>::from_data(TensorData::new(values(rows * 2, 17, 1.0), [rows, 2]), &device);
    let (z, g) = (z.into_primitive().tensor(), g.into_primitive().tensor());
    let (_, kept) = cross_entropy::cpu(z.clone(), t.clone(), 0.1);
    let back = |kept| {
        let dz = cross_entropy::cpu_backward(z.clone(), t.clone(), kept, g.clone(), 0.1);
        data(Tensor::<Cpu, 2>::from_primitive(TensorPrimitive::Float(dz)))
    };
    assert_eq!(back(Some(kept)), back(None));
    // Under autodiff the forward keeps them and the backward reads them.
    let read = || cross_entropy::KEPT_READ.with(|c| c.get());
    let before = read();
    let _ = cross_entropy_grads::<Grad>(3, 7, |z, t| cross_entropy(z, t, 0.1));
    assert_eq!(read(), before + 1, "the backward summed the exponentials again");
}

#[test]
fn composed_cross_entropy_backward_matches_autodiff_of_the_composed_form() {
    type Plain = Autodiff<NdArray<f32, i32>>;
    let smoothing = 0.1;
    let (y, g) = cross_entropy_grads::<Plain>(6, 11, |z, t| {
        let out = Plain::fused_cross_entropy(z.into_primitive().tensor(), t.into_primitive(), smoothing);
        Tensor::from_primitive(TensorPrimitive::Float(out))
    });
    let (y_ref, g_ref) = cross_entropy_grads::<Plain>(6, 11, |z, t| super::cross_entropy::composed(z, t, smoothing));
    close(&y, &y_ref, 1e-5, "value");
    close(&g, &g_ref, 1e-5, "gradient");
}

/// Context, weights and the gradients of `Q`, `K`, `V` of an attention `f` on `B`; the mask
/// is causal over `[1, 1, queries, keys]` plus two padded keys of the second batch entry.
pub(in crate::fused) fn attention_grads<B: burn::tensor::backend::AutodiffBackend>(
    [batch, heads, queries, keys, d]: [usize; 5],
    f: impl Fn(Tensor<B, 4>, Tensor<B, 4>, Tensor<B, 4>, Tensor<B, 4, burn::tensor::Bool>) -> [Tensor<B, 4>; 2],
) -> Vec<Vec<f32>> {
    let device = Default::default();
    let tensor = |v: Vec<f32>, dims: [usize; 4]| {
        Tensor::<B, 4>::from_data(TensorData::new(v, dims).convert::<B::FloatElem>(), &device).require_grad()
    };
    // Q and K laid out `[batch, len, heads, d]` and viewed with heads second, as the model's
    // heads are (strided); V contiguous.
    let q = tensor(values(batch * heads * queries * d, 18, 2.0), [batch, queries, heads, d]);
    let k = tensor(values(batch * heads * keys * d, 19, 2.0), [batch, keys, heads, d]);
    let v = tensor(values(batch * heads * keys * d, 20, 1.0), [batch, heads, keys, d]);
    let causal: Vec<bool> = (0..queries * keys).map(|i| i % keys > i / keys + keys - queries).collect();
    let causal = Tensor::<B, 4, burn::tensor::Bool>::from_data(TensorData::new(causal, [1, 1, queries, keys]), &device);
    let padded: Vec<bool> = (0..batch * keys).map(|i| i / keys == 1 && i % keys >= keys - 2).collect();
    let padded = Tensor::<B, 4, burn::tensor::Bool>::from_data(TensorData::new(padded, [batch, 1, 1, keys]), &device);
    let mask = causal.expand([batch, 1, queries, keys]).bool_or(padded.expand([batch, 1, queries, keys]));
    let w = Tensor::<B, 4>::from_data(
        TensorData::new(values(batch * heads * queries * d, 21, 1.0), [batch, heads, queries, d])
            .convert::<B::FloatElem>(),
        &device,
    );
    let [context, weights] = f(q.clone().swap_dims(1, 2), k.clone().swap_dims(1, 2), v.clone(), mask);
    let grads = (context.clone() * w).sum().backward();
    let grad = |t: &Tensor<B, 4>| data(t.grad(&grads).unwrap());
    vec![data(context), data(weights), grad(&q), grad(&k), grad(&v)]
}

#[test]
fn fused_attention_matches_the_composed_form_in_value_weights_and_gradients_under_masks() {
    let scale = 1.0 / 8f64.sqrt();
    for dims in [[2, 3, 17, 17, 8], [2, 2, 5, 9, 8]] {
        let fused = attention_grads::<Grad>(dims, |q, k, v, m| attention(q, k, v, Some(m), scale));
        let composed = attention_grads::<Grad>(dims, |q, k, v, m| super::attention::composed(q, k, v, Some(m), scale));
        for (what, (a, b)) in ["context", "weights", "dq", "dk", "dv"].iter().zip(fused.iter().zip(&composed)) {
            close(a, b, 2e-5, what);
        }
    }
}

/// `mask` widened to `heads` heads, each batch entry and head masking its own further keys
/// (those with `key + head + batch ≡ 0 mod 3`, never key 0, so that no row is fully masked).
fn by_head<B: Backend>(mask: Tensor<B, 4, burn::tensor::Bool>, heads: usize) -> Tensor<B, 4, burn::tensor::Bool> {
    let [batch, _, queries, keys] = mask.dims();
    let flags: Vec<bool> = (0..batch * heads * queries * keys)
        .map(|i| {
            let (key, head, entry) = (i % keys, i / (queries * keys) % heads, i / (heads * queries * keys));
            key > 0 && (key + head + entry) % 3 == 0
        })
        .collect();
    let own = Tensor::from_data(TensorData::new(flags, [batch, heads, queries, keys]), &mask.device());
    mask.expand([batch, heads, queries, keys]).bool_or(own)
}

/// A mask of `[batch, heads, queries, keys]` (not broadcast over the heads): the kernel must
/// take each head's own rows of it, and each batch entry's.
#[test]
fn fused_attention_matches_the_composed_form_under_a_mask_that_differs_by_head_and_batch_entry() {
    let scale = 1.0 / 8f64.sqrt();
    for dims in [[2, 3, 17, 17, 8], [2, 2, 5, 9, 8]] {
        let heads = dims[1];
        let fused = attention_grads::<Grad>(dims, |q, k, v, m| attention(q, k, v, Some(by_head(m, heads)), scale));
        let composed = attention_grads::<Grad>(dims, |q, k, v, m| {
            super::attention::composed(q, k, v, Some(by_head(m, heads)), scale)
        });
        for (what, (a, b)) in ["context", "weights", "dq", "dk", "dv"].iter().zip(fused.iter().zip(&composed)) {
            close(a, b, 2e-5, what);
        }
    }
}

#[test]
fn composed_attention_backward_matches_autodiff_of_the_composed_form() {
    type Plain = Autodiff<NdArray<f32, i32>>;
    let scale = 0.3;
    let via_trait = attention_grads::<Plain>([2, 2, 4, 6, 3], |q, k, v, m| {
        let p = |t: Tensor<Plain, 4>| t.into_primitive().tensor();
        Plain::fused_attention(p(q), p(k), p(v), Some(m.into_primitive()), scale)
            .map(|t| Tensor::from_primitive(TensorPrimitive::Float(t)))
    });
    let composed =
        attention_grads::<Plain>([2, 2, 4, 6, 3], |q, k, v, m| super::attention::composed(q, k, v, Some(m), scale));
    for (what, (a, b)) in ["context", "weights", "dq", "dk", "dv"].iter().zip(via_trait.iter().zip(&composed)) {
        close(a, b, 2e-5, what);
    }
}
