//! The activations' CPU kernels ([`super::super::activation`]) written over an input that
//! nothing else holds: the same bits as into a new buffer, a shared input left as it was, and
//! under autodiff GELU's forward writes over the linear map's output it is given.

use burn::tensor::{Tensor, TensorData, TensorPrimitive};

use super::super::activation::{self, OVER_INPUT};
use super::super::*;
use super::{data, values, Grad};

type Cpu = burn_ndarray::NdArray<f32>;
type T = burn::tensor::ops::FloatTensor<Cpu>;

fn primitive(v: &[f32], shape: [usize; 3]) -> T {
    Tensor::<Cpu, 3>::from_data(TensorData::new(v.to_vec(), shape), &Default::default()).into_primitive().tensor()
}

fn bits(t: T) -> Vec<u32> {
    data(Tensor::<Cpu, 3>::from_primitive(TensorPrimitive::Float(t))).iter().map(|v| v.to_bits()).collect()
}

fn over_input() -> usize {
    OVER_INPUT.with(|c| c.get())
}

/// `f` on `inputs` twice: each held elsewhere too (a new buffer; the inputs checked untouched),
/// and then each the only holder of its values: the same bits, written over one of them.
fn same_bits_over_an_unshared_input(what: &str, inputs: &[&[f32]], f: impl Fn(Vec<T>) -> Vec<T>) {
    let shape = [3, 7, 1100]; // more than one parallel block
    let shared: Vec<T> = inputs.iter().map(|v| primitive(v, shape)).collect();
    let before = over_input();
    let fresh: Vec<Vec<u32>> = f(shared.clone()).into_iter().map(bits).collect();
    assert_eq!(over_input(), before, "{what}: wrote over an input held elsewhere");
    for (input, held) in inputs.iter().zip(shared) {
        assert_eq!(data(Tensor::<Cpu, 3>::from_primitive(TensorPrimitive::Float(held))), input.to_vec(), "{what}");
    }
    let own: Vec<T> = inputs.iter().map(|v| primitive(v, shape)).collect();
    let over: Vec<Vec<u32>> = f(own).into_iter().map(bits).collect();
    assert_eq!(over_input(), before + 1, "{what}: no input written over");
    assert_eq!(over, fresh, "{what}: other bits written over the input");
}

#[test]
fn activations_written_over_an_unshared_input_give_the_bits_of_a_new_buffer() {
    let n = 3 * 7 * 1100;
    let (x, g) = (values(n, 31, 6.0), values(n, 32, 1.0));
    let (x, g) = (x.as_slice(), g.as_slice());
    // `f` takes its inputs by value: a clone of a shared input is still shared, a moved
    // unshared one the only holder.
    let take = |ts: &mut Vec<T>| ts.remove(0);
    same_bits_over_an_unshared_input("gelu", &[x], |mut ts| vec![activation::gelu(take(&mut ts))]);
    same_bits_over_an_unshared_input("relu", &[x], |mut ts| vec![activation::relu(take(&mut ts))]);
    same_bits_over_an_unshared_input("gelu_keeping", &[x], |mut ts| {
        let (y, d) = activation::gelu_keeping(take(&mut ts));
        vec![y, d]
    });
    // The backwards write over the gradient (their second input), never over `x`.
    same_bits_over_an_unshared_input("gelu_backward", &[x, g], |mut ts| {
        vec![activation::gelu_backward(take(&mut ts), take(&mut ts))]
    });
    same_bits_over_an_unshared_input("relu_backward", &[x, g], |mut ts| {
        vec![activation::relu_backward(take(&mut ts), take(&mut ts))]
    });
    same_bits_over_an_unshared_input("gelu_backward_from_derivative", &[x, g], |mut ts| {
        vec![activation::gelu_backward_from_derivative(take(&mut ts), take(&mut ts))]
    });
}

/// Under autodiff, GELU on an intermediate (a linear map's output, held by nothing else)
/// writes its value over it; the gradient is the one the input kept alive would give.
#[test]
fn gelu_under_autodiff_writes_over_an_intermediate_and_keeps_its_gradient() {
    let shape = [2, 5, 900];
    let n = shape.iter().product();
    let (xs, ws) = (values(n, 41, 3.0), values(n, 42, 1.0));
    let device = Default::default();
    let run = |keep_alive: bool| {
        let x = Tensor::<Grad, 3>::from_data(TensorData::new(xs.clone(), shape), &device).require_grad();
        let h = x.clone() * 2.0;
        let kept = keep_alive.then(|| h.clone());
        let before = over_input();
        let y = gelu(h);
        let over = over_input() - before;
        let w = Tensor::<Grad, 3>::from_data(TensorData::new(ws.clone(), shape), &device);
        let grads = (y.clone() * w).sum().backward();
        drop(kept);
        (data(y), data(x.grad(&grads).unwrap()), over)
    };
    let (y_over, g_over, over) = run(false);
    let (y_kept, g_kept, kept_over) = run(true);
    assert_eq!(over, 1, "the intermediate was not written over");
    assert_eq!(kept_over, 0, "an intermediate held elsewhere was written over");
    assert_eq!(y_over, y_kept);
    assert_eq!(g_over, g_kept);
}
