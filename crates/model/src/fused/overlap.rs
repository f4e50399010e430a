//! Weight gradients computed beside the rest of the backward pass, on the CPU.
//!
//! A linear map's backward is two products of one size: `dx = dy·Wᵀ`, which the rest of the
//! backward pass waits for, and `dW = xᵀ·dy`, which nothing reads until the optimizer's step.
//! Run side by side (one on each of a 2-core machine's threads) the weight's half takes
//! longer (a product reduced over all the rows, ~1.3x in training on nanoGPT's CPU model),
//! and the other thread waits: a `perf` profile put 10% of the helper thread's time there
//! (docs/benchmarks.md). Inside [`backward`] the step computes `dx` at once (on every
//! thread that is free) and hands `dW` (and `db`) to rayon as a job of its own
//! ([`defer`]); the pass goes on, any idle thread takes the waiting jobs, and [`backward`]
//! waits for them at the end and registers their gradients.
//!
//! Nothing computed changes: each gradient is the same product of the same operands, and a
//! deferred gradient is registered after the pass where it would have been registered
//! during it. A weight whose gradient is summed from two uses (one weight for two maps) gets
//! the same sum (`a + b` is `b + a` in floats); from three or more, a fixed order with the
//! deferred ones last, which may round differently from `Tensor::backward`'s. An embedding
//! used as the output layer (`Weight::OutIn`), whose gradient is summed with its lookups'
//! (three uses in a translation model that ties both embeddings to it), is not deferred.
//! Only a leaf's gradient is deferred (a parameter's: nothing in the pass reads it), and
//! only where the backend says it pays ([`super::FusedOps::defers_weight_gradients`]: the
//! CPU's).
//!
//! Outside [`backward`] (`Tensor::backward` itself) nothing is deferred.

use std::cell::RefCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use burn::backend::autodiff::grads::Gradients;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;

/// What a finished job hands back: the registration of its gradients.
type Delivery = Box<dyn FnOnce(&mut Gradients) + Send>;

/// A finished job's delivery, or its panic's payload.
type Outcome = Result<Delivery, Box<dyn std::any::Any + Send>>;

/// The jobs handed out by one [`backward`]: how many are still running, and what the
/// finished ones delivered (in the order they were handed out).
#[derive(Default)]
struct Pass {
    running: AtomicUsize,
    done: Mutex<Vec<(usize, Outcome)>>,
}

thread_local! {
    /// The pass [`backward`] runs on this thread, and how many jobs it has handed out.
    static OPEN: RefCell<Option<(Arc<Pass>, usize)>> = const { RefCell::new(None) };
}

/// Whether a backward step on this thread may leave its weights' gradients to a job: it runs
/// inside [`backward`], and of `weights` (each `None` where untracked, else whether its node
/// is a leaf) at least one is tracked and every tracked one is a leaf (a parameter: no step
/// of the pass reads its gradient).
pub(super) fn may_defer(weights: impl IntoIterator<Item = Option<bool>>) -> bool {
    let (mut tracked, mut leaves) = (false, true);
    for weight in weights {
        tracked |= weight.is_some();
        leaves &= weight.unwrap_or(true);
    }
    tracked && leaves && OPEN.with(|open| open.borrow().is_some())
}

/// Runs `job` on rayon's threads beside the rest of the pass; what it returns registers its
/// gradients when [`backward`] has waited for every job. Only inside [`backward`]: callers
/// check [`may_defer`] first (outside, there would be no pass to register the gradients in).
pub(super) fn defer(job: impl FnOnce() -> Delivery + Send + 'static) {
    let handed = OPEN.with(|open| {
        open.borrow_mut().as_mut().map(|(pass, count)| {
            *count += 1;
            (pass.clone(), *count - 1)
        })
    });
    let (pass, index) = handed.expect("overlap::defer outside fused::backward (callers check `may_defer` first)");
    #[cfg(test)]
    DEFERRED.with(|c| c.set(c.get() + 1));
    pass.running.fetch_add(1, Ordering::AcqRel);
    rayon::spawn(move || {
        let outcome = catch_unwind(AssertUnwindSafe(job));
        pass.done.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push((index, outcome));
        pass.running.fetch_sub(1, Ordering::AcqRel);
    });
}

/// `loss.backward()`, with the CPU's weight gradients computed beside the rest of the pass
/// (this module's documentation): the same gradients, registered by the time it returns.
/// A panic in a deferred job is raised here.
pub fn backward<B: AutodiffBackend>(loss: Tensor<B, 1>) -> B::Gradients {
    struct Close(Option<(Arc<Pass>, usize)>);
    impl Drop for Close {
        fn drop(&mut self) {
            // Back to the pass this one replaced (none, unless a backward runs inside one).
            OPEN.with(|open| *open.borrow_mut() = self.0.take());
        }
    }
    let pass = Arc::new(Pass::default());
    let close = Close(OPEN.with(|open| open.borrow_mut().replace((pass.clone(), 0))));
    let mut grads = loss.backward();
    drop(close);
    // Wait for the jobs, running what rayon has waiting meanwhile (they may be here).
    while pass.running.load(Ordering::Acquire) > 0 {
        if rayon::yield_now().is_none_or(|done| done == rayon::Yield::Idle) {
            std::thread::yield_now();
        }
    }
    let mut done = std::mem::take(&mut *pass.done.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
    if done.is_empty() {
        return grads;
    }
    done.sort_by_key(|(index, _)| *index);
    let grads_any: &mut dyn std::any::Any = &mut grads;
    let Some(into) = grads_any.downcast_mut::<Gradients>() else {
        unreachable!("weight gradients are deferred only by Autodiff's steps, whose gradients are `Gradients`")
    };
    for (_, outcome) in done {
        match outcome {
            Ok(deliver) => deliver(into),
            Err(panic) => resume_unwind(panic),
        }
    }
    grads
}

#[cfg(test)]
thread_local! {
    /// Jobs handed out by steps on this thread, for the tests.
    pub(crate) static DEFERRED: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

#[cfg(test)]
mod tests {
    use burn::backend::Autodiff;
    use burn::tensor::{Int, Tensor, TensorData};
    use burn_ndarray::NdArray;

    use super::*;
    use crate::fused::tests::values;
    use crate::fused::{embedding, linear, Weight};

    type B = Autodiff<NdArray<f32>>;

    fn param(shape: [usize; 2], seed: u64) -> Tensor<B, 2> {
        let n = shape[0] * shape[1];
        Tensor::from_data(TensorData::new(values(n, seed, 0.5), shape), &Default::default()).require_grad()
    }

    /// Every gradient of a small network, as bits: linear maps with and without bias, one
    /// weight used by three maps (whose three deferred gradients add up to the same bits only
    /// in the order `Tensor::backward` adds them: the order the jobs were handed out), an embedding tied to the output layer (`OutIn`), and a
    /// weight computed from a parameter (not a leaf, so never deferred).
    fn gradients(overlapped: bool) -> (Vec<Vec<u32>>, usize) {
        let device = Default::default();
        let (vocab, d, hidden) = (11, 16, 40);
        let table = param([vocab, d], 1);
        let w1 = param([d, hidden], 2);
        let b1: Tensor<B, 1> = param([1, hidden], 3).reshape([hidden]).detach().require_grad();
        let shared = param([hidden, hidden], 4);
        let scaled = param([hidden, d], 5);
        let tokens = Tensor::<B, 2, Int>::from_data(TensorData::new(vec![1i64, 4, 7, 2, 10, 0, 3, 3], [2, 4]), &device);
        let x = embedding(table.clone(), tokens);
        let h = linear(x, w1.clone(), Some(b1.clone()), Weight::InOut).tanh();
        let h = linear(h, shared.clone(), None, Weight::InOut).tanh();
        let h = linear(h, shared.clone(), None, Weight::InOut).tanh();
        let h = linear(h, shared.clone(), None, Weight::InOut).tanh();
        let h = linear(h, scaled.clone().mul_scalar(0.5), None, Weight::InOut);
        let logits = linear(h, table.clone(), None, Weight::OutIn);
        let loss = logits.powi_scalar(2).mean();
        DEFERRED.with(|c| c.set(0));
        let grads = if overlapped { backward(loss) } else { loss.backward() };
        let bits = |g: Option<Tensor<NdArray<f32>, 2>>| {
            let g = g.expect("a gradient for every parameter").into_data();
            g.to_vec::<f32>().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        let all = vec![
            bits(table.grad(&grads)),
            bits(w1.grad(&grads)),
            bits(b1.grad(&grads).map(|g| g.reshape([1, hidden]))),
            bits(shared.grad(&grads)),
            bits(scaled.grad(&grads)),
        ];
        (all, DEFERRED.with(|c| c.get()))
    }

    /// Inside `fused::backward` the CPU's linear maps leave their parameters' gradients to
    /// jobs beside the pass, and every gradient comes out with the bits of `Tensor::backward`
    /// (which defers none), a weight used three times and a tied embedding included.
    #[test]
    fn deferred_weight_gradients_equal_backwards_bit_for_bit() {
        let (plain, none) = gradients(false);
        let (overlapped, deferred) = gradients(true);
        assert_eq!(none, 0, "Tensor::backward deferred a gradient");
        // w1 (with its bias) and the shared weight three times; not the tied output layer
        // (`OutIn`), nor the map whose weight is computed.
        assert_eq!(deferred, 4, "the linear maps with parameters for weights defer theirs");
        for (i, (a, b)) in plain.iter().zip(&overlapped).enumerate() {
            assert!(a.iter().any(|&v| v != 0), "gradient {i} is all zero");
            assert_eq!(a, b, "gradient {i} differs");
        }
    }
}
