//! The residual sum `x + y` of two tensors of one shape, and the gradient sums that the
//! residual stream's backward needs, on the CPU in parallel passes.
//!
//! burn-ndarray adds on one thread into a new buffer (without its `simd` feature, which this
//! workspace leaves off: Cargo.toml says why). A pre-norm Transformer adds twice a layer
//! forward (`x + Sublayer(LayerNorm(x))`), and twice backward, where the residual stream's
//! gradient meets the LayerNorm's `dx`: 4% of a training step on the loop's thread, the other
//! core idle meanwhile. Here the forward sum is one parallel pass, written over the sub-layer's
//! output where nothing else holds it; the backward sum is folded into the LayerNorm's
//! backward kernel ([`super::FusedOps::fused_layer_norm_backward_adding`]), which adds the
//! gradient already registered for its input as it writes `dx`.
//!
//! Each element is `x + y` (or `dx + pending`) rounded once, as Burn's sum gives it: the same
//! bits.

use burn::tensor::backend::Backend;
use burn::tensor::TensorMetadata;
use burn::tensor::{Tensor, TensorPrimitive};
use burn_ndarray::{NdArray, NdArrayTensor};
use rayon::prelude::*;

use super::cpu::{tensor, values, writable, GRAIN};
use super::dispatch::{is_cpu_backend, on_kernels, same};
use super::unwritten::{assume_init, uninit};
use super::wide::wide;
use super::FusedOps;

type T = burn::tensor::ops::FloatTensor<NdArray<f32>>;

#[cfg(test)]
std::thread_local! {
    /// Sums written over one of their inputs on this thread, for the tests.
    pub(crate) static IN_PLACE: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// `x + y` for tensors of one shape: a parallel kernel on the CPU backend, Burn's sum
/// (which also broadcasts) elsewhere and for tensors of different shapes.
///
/// # Shapes
/// - `x`, `y`: the same; output: that shape
pub fn add<B: Backend, const D: usize>(x: Tensor<B, D>, y: Tensor<B, D>) -> Tensor<B, D> {
    fn on<B: Backend, K: FusedOps, const D: usize>(x: Tensor<B, D>, y: Tensor<B, D>) -> Tensor<B, D> {
        let prim = |t: Tensor<B, D>| same::<Tensor<B, D>, Tensor<K, D>>(t).into_primitive().tensor();
        same(Tensor::<K, D>::from_primitive(TensorPrimitive::Float(K::fused_add(prim(x), prim(y)))))
    }
    if !is_cpu_backend::<B>() || x.dims() != y.dims() {
        return x + y;
    }
    on_kernels!(B, K => on::<B, K, D>(x, y), _ => x + y)
}

/// The CPU kernel: `a + b` over `b`'s buffer where `b` is unshared and contiguous (a
/// sub-layer's output, held by nothing else), over `a`'s where that one is, else into a new
/// buffer.
pub(super) fn cpu(a: T, b: T) -> T {
    assert_eq!(a.shape(), b.shape(), "add: tensors of different shapes");
    let (into, other) = if writable(&b) {
        (b, a)
    } else if writable(&a) {
        (a, b)
    } else {
        return fresh(a, b);
    };
    #[cfg(test)]
    IN_PLACE.with(|c| c.set(c.get() + 1));
    let (_, other) = values(other);
    let mut sum = match into {
        NdArrayTensor::F32(storage) => storage.into_owned(),
        _ => unreachable!("checked writable"),
    };
    let slice = sum.as_slice_mut().expect("checked contiguous and unshared");
    slice.par_chunks_mut(GRAIN).zip(other.par_chunks(GRAIN)).for_each(|(s, o)| {
        wide(
            #[inline(always)]
            || s.iter_mut().zip(o).for_each(|(s, &o)| *s += o),
        )
    });
    NdArrayTensor::from(sum)
}

/// `a + b` into a new buffer.
fn fresh(a: T, b: T) -> T {
    let (shape, a) = values(a);
    let (_, b) = values(b);
    let mut out = uninit(a.len());
    out.par_chunks_mut(GRAIN).zip(a.par_chunks(GRAIN).zip(b.par_chunks(GRAIN))).for_each(|(out, (a, b))| {
        wide(
            #[inline(always)]
            || {
                for ((o, &a), &b) in out.iter_mut().zip(a).zip(b) {
                    o.write(a + b);
                }
            },
        )
    });
    // SAFETY: the chunks cover the buffer, every element written once.
    tensor(unsafe { assume_init(out) }, shape)
}
