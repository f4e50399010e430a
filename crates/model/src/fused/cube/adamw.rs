//! One AdamW update of a parameter as one CubeCL kernel: each unit reads an element of the
//! parameter, its gradient and its two moments and writes the three updated values, in the
//! composed form's f32 operations and order (`fused/adamw.rs`). Composed, the update is about
//! fifteen tensor operations per parameter; each is a hand-off from the training thread to the
//! device's threads, and nanoGPT's GPU model has 51 parameters (#15: the fixed per-step cost).
//! The step's scalars (learning rate, bias corrections) are run-time arguments, so one
//! compiled kernel serves every step.

use cubecl::prelude::*;

use crate::fused::adamw::{AdamWStep, Coefficients};
use burn::tensor::TensorMetadata;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;

/// `θ ← θ·decay − lr · (m/c₁) / (√(v/c₂) + ε)` after `m ← β₁m + (1 − β₁)g`, `v ← β₂v + (1 − β₂)g²`
/// with `g` the gradient times `scale[0]` where `scaled` (`first`: the moments start at zero
/// and are not read).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
fn adamw_update<F: Float>(
    param: &Tensor<F>,
    grad: &Tensor<F>,
    m: &Tensor<F>,
    v: &Tensor<F>,
    scale: &Tensor<F>,
    param_out: &mut Tensor<F>,
    m_out: &mut Tensor<F>,
    v_out: &mut Tensor<F>,
    b1: f32,
    b2: f32,
    f1: f32,
    f2: f32,
    c1: f32,
    c2: f32,
    eps: f32,
    lr: f32,
    decay: f32,
    #[comptime] first: bool,
    #[comptime] exempt: bool,
    #[comptime] scaled: bool,
    #[define(F)] _dtype: StorageType,
) {
    let i = ABSOLUTE_POS;
    if i >= param.len() {
        terminate!();
    }
    let mut g = f32::cast_from(grad[i]);
    if scaled {
        g *= f32::cast_from(scale[0]);
    }
    let mut m_new = g * f1;
    let mut v_new = g * g * f2;
    if !first {
        m_new = f32::cast_from(m[i]) * b1 + g * f1;
        v_new = f32::cast_from(v[i]) * b2 + g * g * f2;
    }
    let delta = (m_new / c1) / (f32::sqrt(v_new / c2) + eps);
    let mut theta = f32::cast_from(param[i]);
    if !exempt {
        theta *= decay;
    }
    param_out[i] = F::cast_from(theta - delta * lr);
    m_out[i] = F::cast_from(m_new);
    v_out[i] = F::cast_from(v_new);
}

/// The update of contiguous tensors of one float type: `[θ, m, v]` in new buffers.
pub(super) fn launch<R: CubeRuntime>(
    param: CubeTensor<R>,
    grad: CubeTensor<R>,
    moments: Option<[CubeTensor<R>; 2]>,
    scale: Option<CubeTensor<R>>,
    step: AdamWStep,
) -> [CubeTensor<R>; 3] {
    let k = Coefficients::new(&step);
    let shape = param.shape();
    let [param_out, m_out, v_out] = [(); 3].map(|_| super::empty(&param, shape.clone()));
    let (count, dim) = super::element_launch(&param);
    let first = moments.is_none();
    // On the first update the moments are not read: the gradient stands in for them.
    let [m, v] = moments.unwrap_or_else(|| [grad.clone(), grad.clone()]);
    // Without a scale the gradient stands in for it (not read).
    let scaled = scale.is_some();
    let scale = scale.unwrap_or_else(|| grad.clone());
    let dtype = param.dtype.into();
    // SAFETY: units past the last element stop (`terminate!` at `param.len()`), and every tensor
    // but the scale (read at 0, only where `scaled`) has `param`'s length.
    unsafe {
        adamw_update::launch_unchecked::<R>(
            &param.client.clone(),
            count,
            dim,
            param.into_tensor_arg(),
            grad.into_tensor_arg(),
            m.into_tensor_arg(),
            v.into_tensor_arg(),
            scale.into_tensor_arg(),
            param_out.clone().into_tensor_arg(),
            m_out.clone().into_tensor_arg(),
            v_out.clone().into_tensor_arg(),
            k.b1,
            k.b2,
            k.f1,
            k.f2,
            k.c1,
            k.c2,
            k.eps,
            k.lr,
            k.decay,
            first,
            k.exempt,
            scaled,
            dtype,
        );
    }
    [param_out, m_out, v_out]
}
