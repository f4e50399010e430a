//! The activations' CPU kernels for `burn-ndarray` (f32): exact GELU and ReLU, forward and
//! backward, parallel over blocks of [`GRAIN`] elements.
//!
//! Where the tensor a kernel would otherwise copy from is its own (unshared and contiguous,
//! [`writable`]), the result is written over it: the input of a forward (GELU's under autodiff
//! too, whose backward reads the derivative kept beside the output, not `x`) and the incoming
//! gradient of a backward (where it has the shape of what it is the gradient of). A new buffer is one more stream through memory (its pages written and later
//! freed) for kernels that do one multiply per element; the values are the same bits either way.

use burn::tensor::TensorMetadata;
use burn_ndarray::{NdArrayTensor, SharedArray};
use rayon::prelude::*;

use super::cpu::{tensor, values, writable, GRAIN, T};
use super::exp::exp_nonpositive;
use super::unwritten::{assume_init, uninit};
use super::wide::wide;
use super::INV_SQRT_2PI;

#[cfg(test)]
std::thread_local! {
    /// GELU backwards that read the derivative kept by the forward, on this thread.
    pub(super) static DERIVATIVE_READ: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
    /// Activations (forward or backward) written over their input, on this thread.
    pub(super) static OVER_INPUT: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// `t`'s own buffer, to be written over, where it is [`writable`]; else `t` back.
fn own(t: T) -> Result<SharedArray<f32>, T> {
    if !writable(&t) {
        return Err(t);
    }
    #[cfg(test)]
    {
        OVER_INPUT.with(|c| c.set(c.get() + 1));
        // A tensor read, as `values` counts them.
        super::cpu::CALLS.with(|c| c.set(c.get() + 1));
    }
    match t {
        NdArrayTensor::F32(storage) => Ok(storage.into_owned()),
        _ => unreachable!("checked writable"),
    }
}

/// The elements of an array [`own`] gave.
fn slice(array: &mut SharedArray<f32>) -> &mut [f32] {
    array.as_slice_mut().expect("checked contiguous and unshared")
}

/// `f(x)` element-wise, over `x`'s buffer where it is [`writable`], else into a new one.
#[inline(always)]
fn map(x: T, f: impl Fn(f32) -> f32 + Sync) -> T {
    match own(x) {
        Ok(mut array) => {
            slice(&mut array).par_chunks_mut(GRAIN).for_each(|xs| {
                wide(
                    #[inline(always)]
                    || xs.iter_mut().for_each(|v| *v = f(*v)),
                )
            });
            NdArrayTensor::from(array)
        }
        Err(x) => {
            let (shape, x) = values(x);
            let mut out = uninit(x.len());
            out.par_chunks_mut(GRAIN).zip(x.par_chunks(GRAIN)).for_each(|(out, x)| {
                wide(
                    #[inline(always)]
                    || out.iter_mut().zip(x).for_each(|(o, &v)| _ = o.write(f(v))),
                )
            });
            // SAFETY: the chunks cover the buffer, every element written once.
            tensor(unsafe { assume_init(out) }, shape)
        }
    }
}

/// `f(a, g)` element-wise over a gradient `g` of `a`'s size, in `a`'s shape: over `g`'s buffer
/// where it is [`writable`] and of that shape, else into a new one.
#[inline(always)]
fn backward(a: T, grad: T, what: &str, f: impl Fn(f32, f32) -> f32 + Sync) -> T {
    let sizes = [a.shape().num_elements(), grad.shape().num_elements()];
    assert_eq!(sizes[0], sizes[1], "{what}: a gradient of another size");
    let same_shape = a.shape() == grad.shape();
    let (shape, a) = values(a);
    // A gradient of another shape (the same count) is not written over: the result has `a`'s.
    match if same_shape { own(grad) } else { Err(grad) } {
        Ok(mut array) => {
            slice(&mut array).par_chunks_mut(GRAIN).zip(a.par_chunks(GRAIN)).for_each(|(gs, a)| {
                wide(
                    #[inline(always)]
                    || gs.iter_mut().zip(a).for_each(|(g, &a)| *g = f(a, *g)),
                )
            });
            NdArrayTensor::from(array)
        }
        Err(grad) => {
            let (_, grad) = values(grad);
            let mut out = uninit(a.len());
            out.par_chunks_mut(GRAIN).zip(a.par_chunks(GRAIN).zip(grad.par_chunks(GRAIN))).for_each(|(out, (a, g))| {
                wide(
                    #[inline(always)]
                    || out.iter_mut().zip(a).zip(g).for_each(|((o, &a), &g)| _ = o.write(f(a, g))),
                )
            });
            // SAFETY: the chunks cover the buffer, every element written once.
            tensor(unsafe { assume_init(out) }, shape)
        }
    }
}

/// `x·Φ(x)`, `Φ(x) = ½(1 + erf(x/√2))`.
pub fn gelu(x: T) -> T {
    map(
        x,
        #[inline(always)]
        |v| v * cdf(v),
    )
}

/// `grad · (Φ(x) + x·φ(x))`, `φ(x) = e^{-x²/2}/√(2π)`.
pub fn gelu_backward(x: T, grad: T) -> T {
    backward(
        x,
        grad,
        "gelu_backward",
        #[inline(always)]
        |v, g| g * derivative(v),
    )
}

/// `x·Φ(x)` and its derivative `Φ(x) + x·φ(x)` in one pass: the forward under autodiff,
/// whose backward is then [`gelu_backward_from_derivative`]. Each value has the bits of
/// [`gelu`]'s and of the factor in [`gelu_backward`] (the same expressions). The output is
/// written over `x` where `x` is [`writable`].
pub fn gelu_keeping(x: T) -> (T, T) {
    let shape = x.shape();
    let mut kept = uninit(shape.num_elements());
    let out = match own(x) {
        Ok(mut array) => {
            slice(&mut array).par_chunks_mut(GRAIN).zip(kept.par_chunks_mut(GRAIN)).for_each(|(xs, kept)| {
                wide(
                    #[inline(always)]
                    || {
                        for (v, d) in xs.iter_mut().zip(kept) {
                            let (y, dy) = value_and_derivative(*v);
                            *v = y;
                            d.write(dy);
                        }
                    },
                )
            });
            NdArrayTensor::from(array)
        }
        Err(x) => {
            let (_, x) = values(x);
            let mut out = uninit(x.len());
            let chunks = out.par_chunks_mut(GRAIN).zip(kept.par_chunks_mut(GRAIN));
            chunks.zip(x.par_chunks(GRAIN)).for_each(|((out, kept), x)| {
                wide(
                    #[inline(always)]
                    || {
                        for ((o, d), &v) in out.iter_mut().zip(kept).zip(x) {
                            let (y, dy) = value_and_derivative(v);
                            o.write(y);
                            d.write(dy);
                        }
                    },
                )
            });
            // SAFETY: the chunks cover the buffer, every element written once.
            tensor(unsafe { assume_init(out) }, shape.clone())
        }
    };
    // SAFETY: the chunks above cover `kept`, every element written once.
    (out, tensor(unsafe { assume_init(kept) }, shape))
}

/// `grad · derivative`, element-wise: GELU's backward from the derivative [`gelu_keeping`]
/// kept, with [`gelu_backward`]'s bits.
pub fn gelu_backward_from_derivative(derivative: T, grad: T) -> T {
    #[cfg(test)]
    DERIVATIVE_READ.with(|c| c.set(c.get() + 1));
    backward(
        derivative,
        grad,
        "gelu_backward_from_derivative",
        #[inline(always)]
        |d, g| g * d,
    )
}

/// `max(x, 0)` as burn-ndarray's `relu` gives it (`clamp_min`): 0 where `x < 0`, else `x`
/// (−0 and NaN stay as they are).
pub fn relu(x: T) -> T {
    map(
        x,
        #[inline(always)]
        |v| if v < 0.0 { 0.0 } else { v },
    )
}

/// ReLU's backward from its output `y`, as Burn's `relu_backward`: 0 where `y ≤ 0`, else
/// `grad`.
pub fn relu_backward(y: T, grad: T) -> T {
    backward(
        y,
        grad,
        "relu_backward",
        #[inline(always)]
        |y, g| if y <= 0.0 { 0.0 } else { g },
    )
}

/// `(x·Φ(x), Φ(x) + x·φ(x))`.
#[inline(always)]
fn value_and_derivative(x: f32) -> (f32, f32) {
    let cdf = cdf(x);
    let pdf = exp_nonpositive(-0.5 * x * x) * INV_SQRT_2PI as f32;
    (x * cdf, cdf + x * pdf)
}

/// `Φ(x) + x·φ(x)`, [`value_and_derivative`]'s second value (the first, unused, is dropped
/// by the compiler: both are always inlined).
#[inline(always)]
fn derivative(x: f32) -> f32 {
    value_and_derivative(x).1
}

/// `Φ(x) = ½(1 + erf(x/√2))`. Always inlined into the `wide` loops, so that `erf`'s fused
/// multiply-adds are compiled with FMA (a call compiled for the baseline would make each a
/// call to libm's `fmaf`).
#[inline(always)]
fn cdf(x: f32) -> f32 {
    0.5 * (1.0 + super::erf::erf(x * core::f32::consts::FRAC_1_SQRT_2))
}
