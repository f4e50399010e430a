//! The residual stream's sums on the CPU ([`super::super::add`]): the forward sum and the
//! gradient sum folded into the LayerNorm's backward give Burn's own sums bit for bit, write
//! over a buffer only where nothing else holds it, and are taken where the model needs them.

use burn::tensor::{Tensor, TensorData};

use super::super::*;
use super::{data, layer_norm_inputs, values, Grad};

type Cpu = burn_ndarray::NdArray<f32>;

fn tensor<B: Backend, const D: usize>(v: Vec<f32>, shape: [usize; D]) -> Tensor<B, D> {
    Tensor::from_data(TensorData::new(v, shape), &Default::default())
}

fn in_place() -> usize {
    super::super::add::IN_PLACE.with(|c| c.get())
}

#[test]
fn residual_add_gives_burns_sum_bit_for_bit_and_leaves_a_shared_input_as_it_was() {
    let shape = [3, 37, 300];
    let n = shape.iter().product();
    let (xs, ys) = (values(n, 1, 4.0), values(n, 2, 0.3));
    let burns = data(tensor::<Cpu, 3>(xs.clone(), shape) + tensor::<Cpu, 3>(ys.clone(), shape));
    // Both inputs held elsewhere: a new buffer, the inputs untouched.
    let (x, y) = (tensor::<Cpu, 3>(xs.clone(), shape), tensor::<Cpu, 3>(ys.clone(), shape));
    let before = in_place();
    assert_eq!(data(add(x.clone(), y.clone())), burns);
    assert_eq!(in_place(), before, "no input was free to write over");
    assert_eq!((data(x.clone()), data(y)), (xs.clone(), ys.clone()), "a shared input was overwritten");
    // The second input held by nothing else (a sub-layer's output): written over, same bits.
    assert_eq!(data(add(x.clone(), tensor::<Cpu, 3>(ys.clone(), shape))), burns);
    assert_eq!(in_place(), before + 1, "the unshared input was not written over");
    assert_eq!(data(x), xs, "the shared residual was overwritten");
    // Under autodiff each input's gradient is the output's, as Burn's sum gives it.
    let w = tensor::<Grad, 3>(values(n, 3, 1.0), shape);
    let grads_of = |fused: bool| {
        let (x, y) =
            (tensor::<Grad, 3>(xs.clone(), shape).require_grad(), tensor::<Grad, 3>(ys.clone(), shape).require_grad());
        let z = if fused { add(x.clone(), y.clone() * 1.0) } else { x.clone() + y.clone() * 1.0 };
        let grads = (z.clone() * w.clone()).sum().backward();
        [data(z), data(x.grad(&grads).unwrap()), data(y.grad(&grads).unwrap())]
    };
    assert_eq!(grads_of(true), grads_of(false));
}

#[test]
fn layer_norm_backward_adds_the_residual_gradient_with_the_bits_of_burns_sum() {
    // x + LN(x)·v: x's gradient is the residual's plus the LayerNorm's. With x read by the
    // LayerNorm itself, its backward finds the residual's already registered and adds it; read
    // through `x·1` (another node, the same values), Burn adds the two when registering.
    let shape = [2, 37, 300];
    let (n, d) = (shape.iter().product::<usize>(), shape[2]);
    let [xs, gamma, beta, w] = layer_norm_inputs(n, d);
    let v = values(n, 4, 2.0);
    let run = |folded: bool| {
        let x = tensor::<Grad, 3>(xs.clone(), shape).require_grad();
        let (g, b) =
            (tensor::<Grad, 1>(gamma.clone(), [d]).require_grad(), tensor::<Grad, 1>(beta.clone(), [d]).require_grad());
        let input = if folded { x.clone() } else { x.clone() * 1.0 };
        let z =
            add(x.clone(), layer_norm(input, g.clone(), Some(b.clone()), 1e-5) * tensor::<Grad, 3>(v.clone(), shape));
        let before = layer_norm_cpu::ADDED_PENDING.with(|c| c.get());
        let grads = (z * tensor::<Grad, 3>(w.clone(), shape)).sum().backward();
        let added = layer_norm_cpu::ADDED_PENDING.with(|c| c.get()) - before;
        (added, [data(x.grad(&grads).unwrap()), data(g.grad(&grads).unwrap()), data(b.grad(&grads).unwrap())])
    };
    let (added, folded) = run(true);
    let (separate, reference) = run(false);
    assert_eq!((added, separate), (1, 0), "the LayerNorm's backward did not (only) add the residual's gradient");
    assert_eq!(folded, reference);
}

/// A tensor read by two linear maps (the encoder's output by a decoder layer's keys and
/// values): its gradient is the sum of the two maps' input gradients, bit for bit what each map
/// alone gives summed, and the sum is made over one of their buffers, not a new one.
#[test]
fn a_tensor_read_by_two_linear_maps_gets_the_sum_of_their_gradients_in_place() {
    let (rows, d_in, d_out) = (37, 24, 40);
    let xs = values(rows * d_in, 51, 1.0);
    let ws = [values(d_in * d_out, 52, 0.5), values(d_in * d_out, 53, 0.5)];
    let out_weights = tensor::<Grad, 2>(values(rows * d_out, 54, 1.0), [rows, d_out]);
    // The input's gradient through the maps given (0, 1 or both).
    let grad_through = |maps: &[usize]| {
        let x = tensor::<Grad, 2>(xs.clone(), [rows, d_in]).require_grad();
        let mut loss = None;
        for &i in maps {
            let w = tensor::<Grad, 2>(ws[i].clone(), [d_in, d_out]);
            let y = (linear(x.clone(), w, None, Weight::InOut) * out_weights.clone()).sum();
            loss = Some(match loss {
                Some(l) => l + y,
                None => y,
            });
        }
        let grads = loss.expect("a map").backward();
        data(x.grad(&grads).expect("x's gradient"))
    };
    let (first, second) = (grad_through(&[0]), grad_through(&[1]));
    let before = in_place();
    let both = grad_through(&[0, 1]);
    assert!(in_place() > before, "the two gradients were not summed in place");
    let summed: Vec<f32> = first.iter().zip(&second).map(|(a, b)| a + b).collect();
    assert_eq!(
        both.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        summed.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
}
