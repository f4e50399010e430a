//! LayerNorm composed of the backend's own operations, with a backward of its own that keeps
//! `x̂` and `1/σ` from the forward: the GPU backends' form under burn-fusion, where kernels of
//! our own break the fusion stream's blocks (`ATTEND_GPU_KERNELS=auto`, [`super::dispatch`]).
//!
//! Burn's autodiff of the composed forward (`mean`, centre, square, `mean`, root, divide,
//! scale, shift) takes a backward step per operation: each `mean_dim`'s backward sums its
//! already reduced gradient once more (a reduction over an axis of size one), and `dγ`, `dβ`
//! come from sums over one broadcast axis at a time, each a reduction run alone. Here the
//! backward is the closed form,
//!
//! `g = grad ⊙ γ`, `dx = r·(g − mean(g) − x̂·mean(g ⊙ x̂))`, `dγ = Σ_rows grad ⊙ x̂`,
//! `dβ = Σ_rows grad`,
//!
//! with `x̂ = (x − μ)/√(σ² + ε)` and `r = 1/√(σ² + ε)` kept from the forward (recomputed, the
//! statistics are a block burn-fusion runs un-fused), and the column sums over the rows of
//! `[rows, d]` in two reductions where the rows are many ([`super::column_sums`]). The
//! forward's values are those of Burn's `layer_norm`, bit for bit (the same operations in the
//! same order).

use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Shape, TensorMetadata};

/// `[y, x̂, r]` over the last axis of `x` (any rank): `y = x̂·γ + β`, `r` with that axis of size one.
pub(super) fn forward<B: Backend>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    beta: Option<FloatTensor<B>>,
    epsilon: f64,
) -> [FloatTensor<B>; 3] {
    let shape = x.shape();
    let last = shape.num_dims() - 1;
    let mean = B::float_mean_dim(x.clone(), last);
    let centered = B::float_sub(x, mean);
    let var = B::float_mean_dim(B::float_mul(centered.clone(), centered.clone()), last);
    let denom = B::float_sqrt(B::float_add_scalar(var, epsilon.into()));
    // `1/σ` is asked for before `x̂`, not after `y`: so it joins the statistics' fused block.
    // Asked for last, it stood alone in the fusion stream as a block still open to fusion,
    // which kept burn-fusion's search going past the block of `y`, closed at the linear
    // map's reshape: every operation that followed, up to the next block (GELU's five
    // between the MLP's two products among them), joined that closed block and ran un-fused,
    // one kernel each (docs/benchmarks.md, "LayerNorm's `1/σ`, GELU's fusion and column
    // sums").
    let rstd = B::float_recip(denom.clone());
    let normalized = B::float_div(centered, denom);
    let scaled = B::float_mul(normalized.clone(), B::float_reshape(gamma, wide(&shape)));
    let y = match beta {
        Some(beta) => B::float_add(scaled, B::float_reshape(beta, wide(&shape))),
        None => scaled,
    };
    [y, normalized, rstd]
}

/// `[dx, dγ, dβ]` from `x̂`, `r`, `γ` and the output's gradient; `dβ` only `with_beta`.
pub(super) fn backward<B: Backend>(
    normalized: FloatTensor<B>,
    rstd: FloatTensor<B>,
    gamma: FloatTensor<B>,
    grad: FloatTensor<B>,
    with_beta: bool,
) -> (FloatTensor<B>, FloatTensor<B>, Option<FloatTensor<B>>) {
    let shape = normalized.shape();
    let last = shape.num_dims() - 1;
    let g = B::float_mul(grad.clone(), B::float_reshape(gamma, wide(&shape)));
    let mean_g = B::float_mean_dim(g.clone(), last);
    let mean_gx = B::float_mean_dim(B::float_mul(g.clone(), normalized.clone()), last);
    let centered = B::float_sub(B::float_sub(g, mean_g), B::float_mul(normalized.clone(), mean_gx));
    let dx = B::float_mul(centered, rstd);
    let dgamma = column_sums::<B>(B::float_mul(grad.clone(), normalized), &shape);
    let dbeta = with_beta.then(|| column_sums::<B>(grad, &shape));
    (dx, dgamma, dbeta)
}

/// `[1, …, 1, d]` for a tensor of `shape` (`[…, d]`): a vector over the last axis, broadcast.
pub(super) fn wide(shape: &Shape) -> Shape {
    let rank = shape.num_dims();
    Shape::from((0..rank).map(|i| if i + 1 == rank { shape[i] } else { 1 }).collect::<Vec<_>>())
}

/// The sums over all but the last axis of `t` (of `shape`, `[…, d]`), as `[d]`: the column
/// sums of `t` viewed as `[rows, d]` ([`super::column_sums`]: two reductions where the rows
/// are many).
fn column_sums<B: Backend>(t: FloatTensor<B>, shape: &Shape) -> FloatTensor<B> {
    let d = shape[shape.num_dims() - 1];
    let rows = shape.num_elements() / d.max(1);
    super::column_sums::column_sums::<B>(B::float_reshape(t, Shape::new([rows, d])))
}

#[cfg(test)]
mod tests {
    use burn::backend::Autodiff;
    use burn::tensor::{Tensor, TensorPrimitive};
    use burn_ndarray::NdArray;

    use super::super::tests::{burns_layer_norm, close, layer_norm_f64, layer_norm_grads, layer_norm_inputs};
    use super::super::FusedOps;

    /// A backend without kernels, as in `fused::tests`.
    type Plain = Autodiff<NdArray<f32, i32>>;

    #[test]
    fn composed_layer_norm_keeps_burns_values_bit_for_bit_and_has_the_exact_gradients_with_and_without_beta() {
        let shape = [3, 7, 40];
        let (n, d) = (shape.iter().product::<usize>(), shape[2]);
        let inputs = layer_norm_inputs(n, d);
        let truth = layer_norm_f64(&inputs[0], &inputs[1], &inputs[2], &inputs[3], d);
        for bias in [true, false] {
            let ours = layer_norm_grads::<Plain>(shape, bias, |x, g, b| {
                let b = b.map(|b| b.into_primitive().tensor());
                let y = Plain::composed_layer_norm(x.into_primitive().tensor(), g.into_primitive().tensor(), b, 1e-5);
                Tensor::from_primitive(TensorPrimitive::Float(y))
            });
            let burns = layer_norm_grads::<Plain>(shape, bias, burns_layer_norm);
            assert_eq!(ours.len(), if bias { 4 } else { 3 }, "a gradient for each input");
            assert_eq!(ours[0], burns[0], "the forward is Burn's, bit for bit");
            for (i, what) in ["dx", "dgamma", "dbeta"].iter().enumerate().take(ours.len() - 1) {
                close(&ours[i + 1], &truth[i + 1], 2e-5, what);
            }
        }
    }
}
