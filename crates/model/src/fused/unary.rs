//! The fused element-wise and row operations of one input, GELU and the softmax: each runs
//! `B`'s kernel where the backend has one, else its composed form (as one autodiff step of
//! its own where [`Unary::TRACKED`] says so and [`super::dispatch::Kernels::tracked`] names
//! the backend).

use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorPrimitive};

use super::dispatch::{on_kernels, same};
use super::FusedOps;

/// Exact GELU, `GELU(x) = x·Φ(x) = x·½(1 + erf(x/√2))`, fused where the backend has a kernel.
///
/// # Shapes
/// - `x`: any; output: the same
pub fn gelu<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    unary::<Gelu, B, D>(x)
}

/// `max(x, 0)`, Burn's `relu` in values and gradients: the CPU kernels (one parallel pass each
/// way; Burn's are one thread, and its backward a comparison then a masked fill) on the CPU
/// backend, Burn's `relu` elsewhere.
///
/// # Shapes
/// - `x`: any; output: the same
pub fn relu<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    if !super::dispatch::is_cpu_backend::<B>() {
        return burn::tensor::activation::relu(x);
    }
    unary::<Relu, B, D>(x)
}

/// Softmax over the last axis, fused where the backend has a kernel.
///
/// # Shapes
/// - `x`: any with at least one axis; output: the same
pub fn softmax_last<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    unary::<SoftmaxLast, B, D>(x)
}

/// A fused unary operation: its [`FusedOps`] method and its composed form.
pub(crate) trait Unary {
    /// Whether, where `B` has no kernel for it, the operation runs as one step of autodiff
    /// with its own backward on the backends [`dispatch::Kernels::tracked`] names (the
    /// softmax: fewer operations for burn-fusion) or as Burn's autodiff of the composed form
    /// (GELU: element-wise, which burn-fusion fuses as well either way; counted, no gain).
    const TRACKED: bool;
    fn fused<F: FusedOps>(x: FloatTensor<F>) -> FloatTensor<F>;
    fn composed<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D>;
}

pub(crate) struct Gelu;

impl Unary for Gelu {
    const TRACKED: bool = false;
    fn fused<F: FusedOps>(x: FloatTensor<F>) -> FloatTensor<F> {
        F::fused_gelu(x)
    }
    fn composed<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
        let cdf = x.clone().mul_scalar(core::f64::consts::FRAC_1_SQRT_2).erf().add_scalar(1.0).mul_scalar(0.5);
        x * cdf
    }
}

pub(crate) struct Relu;

impl Unary for Relu {
    const TRACKED: bool = false;
    fn fused<F: FusedOps>(x: FloatTensor<F>) -> FloatTensor<F> {
        F::fused_relu(x)
    }
    fn composed<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
        burn::tensor::activation::relu(x)
    }
}

pub(crate) struct SoftmaxLast;

impl Unary for SoftmaxLast {
    const TRACKED: bool = true;
    fn fused<F: FusedOps>(x: FloatTensor<F>) -> FloatTensor<F> {
        F::fused_softmax_last(x)
    }
    fn composed<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
        softmax(x, D - 1)
    }
}

/// `O` on `x`: the kernel where `B` has one, else the composed form.
fn unary<O: Unary, B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    fn on<O: Unary, B: Backend, F: FusedOps, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
        let x = same::<Tensor<B, D>, Tensor<F, D>>(x).into_primitive().tensor();
        same(Tensor::<F, D>::from_primitive(TensorPrimitive::Float(O::fused::<F>(x))))
    }
    on_kernels!(B, K => on::<O, B, K, D>(x), _ => {
        if O::TRACKED {
            on_kernels!(tracked B, K => on::<O, B, K, D>(x), _ => O::composed(x))
        } else {
            O::composed(x)
        }
    })
}
