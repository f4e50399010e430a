//! The AdamW updates of many parameters as one operation ([`adamw_many`]).
//!
//! Each parameter's update is [`super::adamw`]'s one pass; on the GPU backends each is also
//! one custom operation of burn-fusion's stream, and each operation is a hand-off from the
//! training thread to the device's threads (about 50 µs of host work on an H100's machine,
//! docs/benchmarks.md). Here the updates of all parameters travel as one operation: under
//! burn-fusion one custom operation that launches the same kernel once per parameter, so the
//! kernels and their bits are those of the updates one by one, and the hand-offs are one
//! instead of one per parameter. The CPU keeps its per-parameter kernel ([`batches_updates`]
//! is false there): it updates in place only a parameter nothing else holds, which a list
//! of all parameters taken from the model would not be.

use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorMetadata};

use super::adamw::{self, AdamWStep};
use super::dispatch::{on_kernels, same, Kernels};
use super::{as_rank, FusedOps};

/// One parameter's update: the parameter, its gradient and its moments (`None` on its first
/// update), all of one shape, and the step's scalars.
pub struct Update<B: Backend> {
    pub param: FloatTensor<B>,
    pub grad: FloatTensor<B>,
    pub moments: Option<[FloatTensor<B>; 2]>,
    pub step: AdamWStep,
}

/// Whether [`adamw_many`] is fewer operations than the updates one by one on `B`: the GPU
/// backends that take the update's kernel (`ATTEND_GPU_KERNELS`, [`super::GpuKernels`]).
pub fn batches_updates<B: Backend>() -> bool {
    !matches!(Kernels::for_updates::<B>(), Kernels::None | Kernels::Cpu | Kernels::CpuAutodiff)
}

/// The AdamW updates of `updates` (formulas in [`adamw`]), each gradient multiplied by `scale`
/// (`[1]`, clipping's factor) first where there is one: `[θ, m, v]` of each, in order. The
/// same bits as [`super::adamw`] on each; one operation where [`batches_updates`].
pub fn adamw_many<B: Backend>(updates: Vec<Update<B>>, scale: Option<Tensor<B, 1>>) -> Vec<[FloatTensor<B>; 3]> {
    fn on<B: Backend, F: FusedOps>(updates: Vec<Update<B>>, scale: Option<Tensor<B, 1>>) -> Vec<[FloatTensor<B>; 3]> {
        let raw = same::<FloatTensor<B>, FloatTensor<F>>;
        let updates = updates
            .into_iter()
            .map(|u| Update::<F> {
                param: raw(u.param),
                grad: raw(u.grad),
                moments: u.moments.map(|m| m.map(raw)),
                step: u.step,
            })
            .collect();
        let scale = scale.map(|s| same::<Tensor<B, 1>, Tensor<F, 1>>(s).into_primitive().tensor());
        F::fused_adamw_many(updates, scale).into_iter().map(|out| out.map(same)).collect()
    }
    on_kernels!(updates B, K => on::<B, K>(updates, scale), _ => {
        let scale = scale.map(|s| s.into_primitive().tensor());
        updates.into_iter().map(|u| composed::<B>(u.param, u.grad, u.moments, scale.clone(), u.step)).collect()
    })
}

/// One update in the composed form ([`adamw::composed`]) on rank-free tensors, flattened to
/// one axis and reshaped back (the update is element-wise).
pub(crate) fn composed<B: Backend>(
    param: FloatTensor<B>,
    grad: FloatTensor<B>,
    moments: Option<[FloatTensor<B>; 2]>,
    scale: Option<FloatTensor<B>>,
    step: AdamWStep,
) -> [FloatTensor<B>; 3] {
    let shape = param.shape();
    let flat = |t| as_rank::<B, 1>(t, [shape.num_elements()]);
    let scale = scale.map(|s| as_rank::<B, 1>(s, [1]));
    let out = adamw::composed(flat(param), flat(grad), moments.map(|[m, v]| (flat(m), flat(v))), scale, step);
    out.map(|t| B::float_reshape(t.into_primitive().tensor(), shape.clone()))
}

#[cfg(test)]
mod tests {
    use burn::tensor::ops::FloatTensorOps;
    use burn::tensor::{Shape, Tensor, TensorData, TensorPrimitive};
    use burn_ndarray::NdArray;

    use super::super::tests::values;
    use super::*;

    type Cpu = NdArray<f32>;

    /// A tensor of `shape` with values from `seed` (made positive where `positive`).
    fn t(shape: &[usize], seed: u64, positive: bool) -> FloatTensor<Cpu> {
        let n = shape.iter().product();
        let x = Tensor::<Cpu, 1>::from_data(TensorData::new(values(n, seed, 1.0), [n]), &Default::default());
        let x = if positive { x.abs() } else { x };
        Cpu::float_reshape(x.into_primitive().tensor(), Shape::from(shape.to_vec()))
    }

    fn flat(x: FloatTensor<Cpu>) -> (Vec<usize>, Vec<f32>) {
        let dims = x.shape().to_vec();
        let n = x.shape().num_elements();
        let x = Tensor::<Cpu, 1>::from_primitive(TensorPrimitive::Float(Cpu::float_reshape(x, Shape::from(vec![n]))));
        (dims, x.into_data().to_vec::<f32>().unwrap())
    }

    /// Updates of a matrix on its first step (no moments) and of a vector later, with and
    /// without a gradient scale: each gives the bits of its update alone, in its own shape.
    #[test]
    fn adamw_many_gives_each_parameter_the_bits_of_its_update_alone() {
        let step = |time| AdamWStep { lr: 0.01, beta_1: 0.9, beta_2: 0.95, epsilon: 1e-8, decay: 0.999, time };
        let updates = || {
            vec![
                Update::<Cpu> { param: t(&[3, 4], 1, false), grad: t(&[3, 4], 2, false), moments: None, step: step(1) },
                Update::<Cpu> {
                    param: t(&[5], 3, false),
                    grad: t(&[5], 4, false),
                    moments: Some([t(&[5], 5, false), t(&[5], 6, true)]),
                    step: step(3),
                },
            ]
        };
        for scale in [None, Some(0.4f32)] {
            let scale = scale.map(|s| Tensor::<Cpu, 1>::from_data([s], &Default::default()));
            let many = adamw_many::<Cpu>(updates(), scale.clone());
            let raw_scale = scale.map(|s| s.into_primitive().tensor());
            let alone =
                updates().into_iter().map(|u| composed::<Cpu>(u.param, u.grad, u.moments, raw_scale.clone(), u.step));
            assert_eq!(many.len(), 2);
            for (got, want) in many.into_iter().zip(alone) {
                for (g, w) in got.into_iter().zip(want) {
                    assert_eq!(flat(g), flat(w));
                }
            }
        }
    }
}
