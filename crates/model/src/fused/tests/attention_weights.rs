//! [`FusedOps::fused_attention_weights`]' composed default and its backward
//! ([`default_forward`], [`default_backward`]): what the GPU backends run for rows longer than
//! their kernels take. Checked here on a CPU backend, so that the ndarray-only test run (and
//! cargo-mutants on it) reaches them, and not only the lavapipe tests of `cube/`.

use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Tensor, TensorData, TensorPrimitive};
use burn_ndarray::NdArray;

use super::super::attention_weights::{default_backward, default_forward};
use super::{close, data, values};
use crate::mask::MASKED_SCORE;

type Plain = NdArray<f32, i32>;
const SHAPE: [usize; 4] = [2, 2, 9, 40];
const SCALE: f64 = 0.35;
const KEEP: f64 = 0.75;

/// `[batch, 1, queries, keys]`: key `k` masked for query `q` where `k > q + 31`, and the second
/// batch entry's last two keys masked for every query.
fn mask<B: Backend>() -> Tensor<B, 4, Bool> {
    let [batch, _, queries, keys] = SHAPE;
    let flags: Vec<bool> = (0..batch * queries * keys)
        .map(|i| {
            let (key, query, entry) = (i % keys, i / keys % queries, i / (queries * keys));
            key > query + 31 || (entry == 1 && key >= keys - 2)
        })
        .collect();
    Tensor::from_data(TensorData::new(flags, [batch, 1, queries, keys]), &Default::default())
}

fn scores<B: Backend>() -> Tensor<B, 4> {
    Tensor::from_data(TensorData::new(values(SHAPE.iter().product(), 40, 3.0), SHAPE), &Default::default())
}

fn float(t: burn::tensor::ops::FloatTensor<Plain>) -> Tensor<Plain, 4> {
    Tensor::from_primitive(TensorPrimitive::Float(t))
}

/// `[P, P̃]` of the default under a fixed seed.
fn forward() -> [Tensor<Plain, 4>; 2] {
    Plain::seed(&Default::default(), 3);
    let masked = Some(mask::<Plain>().into_primitive());
    default_forward::<Plain>(scores::<Plain>().into_primitive().tensor(), masked, SCALE, KEEP).map(float)
}

#[test]
fn default_attention_weights_are_the_masked_softmax_and_keep_about_keep_of_them_scaled_by_its_inverse() {
    let [p, dropped] = forward().map(data);
    let reference = scores::<Plain>().mul_scalar(SCALE).mask_fill(mask::<Plain>().expand(SHAPE), MASKED_SCORE);
    close(&p, &data(burn::tensor::activation::softmax(reference, 3)), 1e-6, "P");
    let scale = (1.0 / KEEP) as f32;
    for (i, (&p, &d)) in p.iter().zip(&dropped).enumerate() {
        assert!(d == 0.0 || d == p * scale, "P̃[{i}] = {d} is neither 0 nor P/keep = {}", p * scale);
    }
    // 1,290 live weights: the kept share's standard deviation is 0.012; allow 4 of them.
    let live = p.iter().filter(|&&p| p > 0.0).count();
    let kept = dropped.iter().filter(|&&d| d > 0.0).count() as f64 / live as f64;
    assert!((kept - KEEP).abs() < 0.05, "kept {kept} of {live} live weights, not about {KEEP}");
}

#[test]
fn default_attention_weights_backward_is_the_gradient_of_the_dropped_weights_for_the_mask_drawn() {
    let [p, dropped] = forward();
    let kept: Vec<f32> = data(dropped.clone()).iter().map(|&d| if d > 0.0 { 1.0 } else { 0.0 }).collect();
    let w = values(SHAPE.iter().product(), 41, 1.0);
    let device = Default::default();
    let grad = Tensor::<Plain, 4>::from_data(TensorData::new(w.clone(), SHAPE), &device);
    let masked = Some(mask::<Plain>().into_primitive());
    let prim = |t: Tensor<Plain, 4>| t.into_primitive().tensor();
    let ours = data(float(default_backward::<Plain>(prim(p), prim(dropped), prim(grad), masked, SCALE, KEEP)));

    type Ad = Autodiff<Plain>;
    let x = scores::<Ad>().require_grad();
    let weights = burn::tensor::activation::softmax(
        x.clone().mul_scalar(SCALE).mask_fill(mask::<Ad>().expand(SHAPE), MASKED_SCORE),
        3,
    );
    let m = Tensor::<Ad, 4>::from_data(TensorData::new(kept, SHAPE), &device).mul_scalar(1.0 / KEEP);
    let loss = (weights * m * Tensor::<Ad, 4>::from_data(TensorData::new(w, SHAPE), &device)).sum();
    let reference = data(x.grad(&loss.backward()).unwrap());
    close(&ours, &reference, 1e-5, "dX");
    let flags = mask::<Plain>().expand(SHAPE).into_data().to_vec::<bool>().unwrap();
    for (i, (&g, &masked)) in ours.iter().zip(&flags).enumerate() {
        assert!(!masked || g == 0.0, "dX[{i}] = {g} at a masked key");
    }
}
