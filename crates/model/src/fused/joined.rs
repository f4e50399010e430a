//! Three linear maps side by side as one product, `x·[W_1 | W_2 | W_3] (+ [b_1 | b_2 | b_3])`,
//! as one autodiff step on the CPU whose parents are the parts themselves (self-attention's
//! `W^Q`, `W^K`, `W^V`).
//!
//! Composed ([`super::cat_columns`], then [`super::linear`]) the product's weight is the
//! output of a `cat`, not a parameter: its gradient passes through the `cat`'s backward step
//! on its way to the parts, so the linear map's step cannot leave it to a job beside the rest
//! of the pass ([`super::overlap`]), and on nanoGPT's CPU model these are the largest
//! products of a layer. Here the step computes `dx` and hands `dW` (cut back into the parts'
//! columns, with `db`) to a job inside [`super::backward`]; outside, `dx` and `dW` run side by
//! side as the linear map's backward does.
//! The values are those of the composed form, bit for bit: the same copies and products.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use burn::tensor::ops::{FloatTensor, FloatTensorOps};
use burn::tensor::{Tensor, TensorMetadata, TensorPrimitive};
use burn_ndarray::NdArray;

use super::concat::{columns_cpu, split_columns};
use super::linear::{cpu as linear_cpu, cpu_input_backward, cpu_weight_backward};
use super::{is, overlap, same, Weight};

type Cpu = NdArray<f32>;
type Tracked = Autodiff<NdArray<f32>>;
type F = FloatTensor<Cpu>;

/// `x·[W_1 | W_2 | W_3] (+ [b_1 | b_2 | b_3])` as one step on `Autodiff<NdArray<f32>>`;
/// `None` on every other backend (the caller composes it there), and where some parts have
/// a bias and others not.
///
/// # Shapes
/// - `x`: `[..., d_in]`; `weights[i]`: `[d_in, d_i]`; `biases[i]`: `[d_i]`
/// - output: `[..., Σ d_i]`
pub fn linear_joined<B: Backend, const D: usize>(
    x: &Tensor<B, D>,
    weights: &[Tensor<B, 2>; 3],
    biases: &[Option<Tensor<B, 1>>; 3],
) -> Option<Tensor<B, D>> {
    if !is::<B, Tracked>() {
        return None;
    }
    let prim = |t: &Tensor<B, 2>| same::<Tensor<B, 2>, Tensor<Tracked, 2>>(t.clone()).into_primitive().tensor();
    let bias = |t: &Tensor<B, 1>| same::<Tensor<B, 1>, Tensor<Tracked, 1>>(t.clone()).into_primitive().tensor();
    let x = same::<Tensor<B, D>, Tensor<Tracked, D>>(x.clone()).into_primitive().tensor();
    let weights = weights.each_ref().map(prim);
    let y = match biases {
        [Some(a), Some(b), Some(c)] => {
            tracked::<7>([x, weights[0].clone(), weights[1].clone(), weights[2].clone(), bias(a), bias(b), bias(c)])
        }
        [None, None, None] => tracked::<4>([x, weights[0].clone(), weights[1].clone(), weights[2].clone()]),
        _ => return None,
    };
    Some(same(Tensor::<Tracked, D>::from_primitive(TensorPrimitive::Float(y))))
}

/// Parents `[x, W_1, W_2, W_3]`, or with `[b_1, b_2, b_3]` after them.
#[derive(Debug)]
struct JoinedBackward;

impl<const N: usize> Backward<Cpu, N> for JoinedBackward {
    /// The input, the joined weight and the parts' widths.
    type State = (F, F, [usize; 3]);

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (x, weight, widths) = ops.state;
        let grad = grads.consume::<Cpu>(&ops.node);
        let grad_for_weight = grad.clone();
        let ids = ops.parents.each_ref().map(|p| p.as_ref().map(|node| node.id));
        let parts = move || {
            let (dw, db) = cpu_weight_backward(x, grad_for_weight, Weight::InOut, N == 7, 1);
            let dw = split_columns(dw, widths);
            let db = db.map(|db| split_columns(row(db), widths).map(vector));
            move |grads: &mut Gradients| {
                for (i, dw) in dw.into_iter().enumerate() {
                    if let Some(id) = ids[1 + i] {
                        grads.register::<Cpu>(id, dw);
                    }
                }
                for (i, db) in db.into_iter().flatten().enumerate() {
                    if let Some(id) = ids[4 + i] {
                        grads.register::<Cpu>(id, db);
                    }
                }
            }
        };
        let input = || ids[0].map(|id| (id, cpu_input_backward(weight, grad, Weight::InOut)));
        // Parameters only (leaves, nodes without parents).
        if overlap::may_defer(ops.parents[1..].iter().map(|p| p.as_ref().map(|node| node.parents.is_empty()))) {
            overlap::defer(move || Box::new(parts()));
            if let Some((id, dx)) = input() {
                grads.register::<Cpu>(id, dx);
            }
        } else {
            let (register, dx) = rayon::join(parts, input);
            if let Some((id, dx)) = dx {
                grads.register::<Cpu>(id, dx);
            }
            register(grads);
        }
    }
}

/// A `[d]` vector as a `[1, d]` matrix, and back (a bias: a copy of a few floats).
fn row(v: F) -> F {
    let d = v.shape()[0];
    Cpu::float_reshape(v, [1, d].into())
}

fn vector(m: F) -> F {
    let d = m.shape()[1];
    Cpu::float_reshape(m, [d].into())
}

/// The step over `inputs` (`[x, W_1, W_2, W_3]` and the biases, `N` = 4 or 7).
fn tracked<const N: usize>(inputs: [FloatTensor<Tracked>; N]) -> FloatTensor<Tracked> {
    let nodes = inputs.each_ref().map(|t| t.node.clone());
    let x = inputs[0].primitive.clone();
    let parts: [F; 3] = [1, 2, 3].map(|i| inputs[i].primitive.clone());
    let widths = parts.each_ref().map(|w| w.shape()[1]);
    let weight = columns_cpu(&parts);
    let bias = (N == 7).then(|| {
        let biases: [F; 3] = [4, 5, 6].map(|i| row(inputs[i].primitive.clone()));
        vector(columns_cpu(&biases))
    });
    let y = linear_cpu(x.clone(), weight.clone(), bias, Weight::InOut);
    match JoinedBackward.prepare::<NoCheckpointing>(nodes).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish((x, weight, widths), y),
        OpsKind::UnTracked(prep) => prep.finish(y),
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Tensor, TensorData};

    use super::*;
    use crate::fused::tests::values;
    use crate::fused::{backward, cat_columns, linear};

    /// The output's and every input's gradient as bits, joined (`linear_joined`) or composed
    /// (`cat_columns` then `linear`), through `Tensor::backward` or `fused::backward`; and
    /// how many steps deferred their weights' gradients.
    fn run(joined: bool, overlapped: bool, with_bias: bool) -> (Vec<Vec<u32>>, usize) {
        let device = Default::default();
        let tensor = |shape: Vec<usize>, seed| {
            let n = shape.iter().product();
            Tensor::<Tracked, 2>::from_data(TensorData::new(values(n, seed, 0.7), shape), &device).require_grad()
        };
        let x: Tensor<Tracked, 3> = tensor(vec![10, 8], 1).reshape([2, 5, 8]).detach().require_grad();
        let weights = [3, 4, 5].map(|w| tensor(vec![8, w], w as u64 + 10));
        let biases = [3, 4, 5]
            .map(|w| with_bias.then(|| tensor(vec![1, w], w as u64 + 20).reshape([w]).detach().require_grad()));
        let y = if joined {
            linear_joined(&x, &weights, &biases).expect("the CPU under autodiff")
        } else {
            let bias = with_bias.then(|| Tensor::cat(biases.iter().flatten().cloned().collect(), 0));
            linear(x.clone(), cat_columns(weights.clone()), bias, Weight::InOut)
        };
        let w = Tensor::<Tracked, 3>::from_data(TensorData::new(values(120, 30, 1.0), [2, 5, 12]), &device);
        let loss = (y.clone() * w).sum();
        overlap::DEFERRED.with(|c| c.set(0));
        let grads = if overlapped { backward(loss) } else { loss.backward() };
        let bits = |v: Vec<f32>| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let mut all =
            vec![bits(y.into_data().to_vec().unwrap()), bits(x.grad(&grads).unwrap().into_data().to_vec().unwrap())];
        all.extend(weights.iter().map(|w| bits(w.grad(&grads).unwrap().into_data().to_vec().unwrap())));
        all.extend(biases.iter().flatten().map(|b| bits(b.grad(&grads).unwrap().into_data().to_vec().unwrap())));
        (all, overlap::DEFERRED.with(|c| c.get()))
    }

    /// Self-attention's three projections as one step give the output and the gradients of
    /// `cat_columns` then `linear` bit for bit, with and without biases, and inside
    /// `fused::backward` the step defers its weights' gradients.
    #[test]
    fn joined_maps_equal_the_composed_cat_and_map_bit_for_bit_and_defer_their_weights() {
        for with_bias in [false, true] {
            let (reference, _) = run(false, false, with_bias);
            assert_eq!(reference.len(), if with_bias { 8 } else { 5 });
            assert!(reference.iter().all(|g| g.iter().any(|&b| b != 0)), "an all-zero gradient");
            let (plain, none) = run(true, false, with_bias);
            let (overlapped, deferred) = run(true, true, with_bias);
            assert_eq!(plain, reference, "joined, Tensor::backward (bias: {with_bias})");
            assert_eq!(overlapped, reference, "joined, fused::backward (bias: {with_bias})");
            assert_eq!((none, deferred), (0, 1), "deferred steps (bias: {with_bias})");
        }
    }

    /// Other backends compose the maps themselves.
    #[test]
    fn joined_maps_are_left_to_the_caller_off_the_cpu_under_autodiff() {
        let device = Default::default();
        let x = Tensor::<Cpu, 3>::zeros([1, 2, 4], &device);
        let weights = [1, 2, 3].map(|w| Tensor::<Cpu, 2>::zeros([4, w], &device));
        assert!(linear_joined(&x, &weights, &[None, None, None]).is_none());
    }
}
