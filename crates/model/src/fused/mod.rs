//! Fused operations: one pass over the data where the composed form takes several, through
//! Burn's backend-extension mechanism.
//!
//! [`FusedOps`] is a trait over `Backend` with one method per fused operation and one per
//! backward. Its default methods are the **composed** reference (the same formula in Burn's
//! tensor operations), so any backend can implement it by naming itself; the CPU backend
//! (`burn-ndarray`, [`cpu`]) implements the forward and backward as single-pass Rust kernels,
//! parallel over rows with rayon; `Autodiff<B>` ([`autodiff`]) implements each forward with
//! `B`'s kernel and registers a backward that calls `B`'s backward kernel.
//!
//! The model stays generic over `B: Backend` (no bound on every module): the functions below
//! ([`gelu`], [`softmax_last`]) find at run time, by type, whether `B` is one of the backends
//! with kernels (`NdArray<f32>` and `Autodiff<NdArray<f32>>`) and otherwise compute the
//! composed form. Both paths compute the same function; `tests.rs` checks values and gradients
//! of each fused operation against the composed reference.
//!
//! | operation | composed passes (forward + backward) | fused |
//! | --- | --- | --- |
//! | exact GELU `x·Φ(x)` | 5 + 9 (erf, its derivative, products) | 1 + 1 |
//! | softmax over the last axis | 5 + 4 (max, exp, sum, divide; products, row sums) | 1 + 1 |

mod autodiff;
mod cpu;
#[cfg(test)]
mod tests;

use core::any::Any;

use burn::backend::Autodiff;
use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorMetadata, TensorPrimitive};
use burn_ndarray::NdArray;

/// Backends with fused operations. Every method has a composed default.
pub trait FusedOps: Backend {
    /// Exact GELU `x·Φ(x)`, element-wise.
    fn fused_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        flat::<Self>(x, |x| Gelu::composed(x))
    }

    /// `grad · d GELU(x)/dx = grad · (Φ(x) + x·φ(x))`, element-wise.
    fn fused_gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        let shape = x.shape();
        let (x, grad) =
            (as_rank::<Self, 1>(x, [shape.num_elements()]), as_rank::<Self, 1>(grad, [shape.num_elements()]));
        let cdf = x.clone().mul_scalar(core::f64::consts::FRAC_1_SQRT_2).erf().add_scalar(1.0).mul_scalar(0.5);
        let pdf = x.clone().powi_scalar(2).mul_scalar(-0.5).exp().mul_scalar(INV_SQRT_2PI);
        Self::float_reshape((grad * (cdf + x * pdf)).into_primitive().tensor(), shape)
    }

    /// Softmax over the last axis.
    fn fused_softmax_last(x: FloatTensor<Self>) -> FloatTensor<Self> {
        rows::<Self>(x, |x| softmax(x, 1))
    }

    /// The softmax's backward from its output `y`: `y ⊙ (grad − Σ_last grad ⊙ y)`.
    fn fused_softmax_last_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        let shape = y.shape();
        let last = shape[shape.num_dims() - 1];
        let dims = [shape.num_elements() / last, last];
        let (y, grad) = (as_rank::<Self, 2>(y, dims), as_rank::<Self, 2>(grad, dims));
        let dot = (grad.clone() * y.clone()).sum_dim(1);
        Self::float_reshape((y * (grad - dot)).into_primitive().tensor(), shape)
    }
}

/// `1/√(2π)`, the standard normal density at 0.
pub(crate) const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

/// The backends whose fused operations are kernels (the rest use the composed defaults).
impl FusedOps for NdArray<f32> {
    fn fused_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        cpu::gelu(x)
    }
    fn fused_gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        cpu::gelu_backward(x, grad)
    }
    fn fused_softmax_last(x: FloatTensor<Self>) -> FloatTensor<Self> {
        cpu::softmax_last(x)
    }
    fn fused_softmax_last_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        cpu::softmax_last_backward(y, grad)
    }
}

/// Exact GELU, `GELU(x) = x·Φ(x) = x·½(1 + erf(x/√2))`, fused where the backend has a kernel.
///
/// # Shapes
/// - `x`: any; output: the same
pub fn gelu<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    dispatch::<Gelu, B, D>(x)
}

/// Softmax over the last axis, fused where the backend has a kernel.
///
/// # Shapes
/// - `x`: any with at least one axis; output: the same
pub fn softmax_last<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    dispatch::<SoftmaxLast, B, D>(x)
}

/// A fused unary operation: its [`FusedOps`] method and its composed form.
trait Unary {
    fn fused<F: FusedOps>(x: FloatTensor<F>) -> FloatTensor<F>;
    fn composed<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D>;
}

struct Gelu;

impl Unary for Gelu {
    fn fused<F: FusedOps>(x: FloatTensor<F>) -> FloatTensor<F> {
        F::fused_gelu(x)
    }
    fn composed<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
        let cdf = x.clone().mul_scalar(core::f64::consts::FRAC_1_SQRT_2).erf().add_scalar(1.0).mul_scalar(0.5);
        x * cdf
    }
}

struct SoftmaxLast;

impl Unary for SoftmaxLast {
    fn fused<F: FusedOps>(x: FloatTensor<F>) -> FloatTensor<F> {
        F::fused_softmax_last(x)
    }
    fn composed<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
        softmax(x, D - 1)
    }
}

/// `O` on `x`: the kernel where `B` has one, else the composed form.
fn dispatch<O: Unary, B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    let x = match on::<O, B, Autodiff<NdArray<f32>>, D>(x) {
        Ok(y) => return y,
        Err(x) => x,
    };
    let x = match on::<O, B, NdArray<f32>, D>(x) {
        Ok(y) => return y,
        Err(x) => x,
    };
    O::composed(x)
}

/// `O`'s kernel on `x` if `B` is `F`; `x` back otherwise.
fn on<O: Unary, B: Backend, F: FusedOps, const D: usize>(x: Tensor<B, D>) -> Result<Tensor<B, D>, Tensor<B, D>> {
    let x = cast::<Tensor<B, D>, Tensor<F, D>>(x)?;
    let y = Tensor::<F, D>::from_primitive(TensorPrimitive::Float(O::fused::<F>(x.into_primitive().tensor())));
    Ok(cast::<Tensor<F, D>, Tensor<B, D>>(y).unwrap_or_else(|_| unreachable!("B is F")))
}

/// `value` as a `T` if `A` and `T` are the same type.
fn cast<A: 'static, T: 'static>(value: A) -> Result<T, A> {
    let mut slot = Some(value);
    match (&mut slot as &mut dyn Any).downcast_mut::<Option<T>>() {
        Some(same) => Ok(same.take().expect("just filled")),
        None => Err(slot.expect("untouched")),
    }
}

/// `f` on `x` flattened to one axis, reshaped back.
fn flat<B: Backend>(x: FloatTensor<B>, f: impl FnOnce(Tensor<B, 1>) -> Tensor<B, 1>) -> FloatTensor<B> {
    let shape = x.shape();
    let t = as_rank::<B, 1>(x, [shape.num_elements()]);
    B::float_reshape(f(t).into_primitive().tensor(), shape)
}

/// `f` on `x` as rows of its last axis, reshaped back.
fn rows<B: Backend>(x: FloatTensor<B>, f: impl FnOnce(Tensor<B, 2>) -> Tensor<B, 2>) -> FloatTensor<B> {
    let shape = x.shape();
    let last = shape[shape.num_dims() - 1];
    let t = as_rank::<B, 2>(x, [shape.num_elements() / last, last]);
    B::float_reshape(f(t).into_primitive().tensor(), shape)
}

/// The primitive `x` reshaped to `dims`, as a tensor of rank `D`.
fn as_rank<B: Backend, const D: usize>(x: FloatTensor<B>, dims: [usize; D]) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(B::float_reshape(x, dims.into())))
}
