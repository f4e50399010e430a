//! The trait of the fused operations, [`FusedOps`]: one method per operation and one per
//! backward, each with its composed form (Burn's tensor operations) as the default, so that a
//! backend implements it by naming itself and overrides what it has kernels for
//! (`ndarray.rs`, `cube/`, `autodiff.rs`).

use burn::tensor::ops::{BoolTensor, FloatTensor, IntTensor};
use burn::tensor::{Tensor, TensorMetadata, TensorPrimitive};

use super::product_ops::FusedProducts;
use super::{
    adamw, adamw_many, attention_packed, attention_weights, composed, embedding, linear, matrix, norm, products,
    reshaped, Packing, Weight,
};

/// Backends with fused operations. Every method has a composed default; the matrix products
/// are the supertrait's, [`FusedProducts`].
pub trait FusedOps: FusedProducts {
    /// Exact GELU `x·Φ(x)`, element-wise.
    fn fused_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        composed::gelu::<Self>(x)
    }

    /// `grad · d GELU(x)/dx = grad · (Φ(x) + x·φ(x))`, element-wise.
    fn fused_gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        composed::gelu_backward::<Self>(x, grad)
    }

    /// [`FusedOps::fused_gelu`] and what its backward reads: where this backend's backward
    /// reads it, the derivative `Φ(x) + x·φ(x)` for
    /// [`FusedOps::fused_gelu_backward_from_derivative`] (`Ok`: the backward then one product
    /// instead of `erf` and `exp` again, and the kernel may write over `x`, which it was given
    /// alone); by default `x` itself (`Err`), from which the backward recomputes it.
    fn fused_gelu_keeping(x: FloatTensor<Self>) -> (FloatTensor<Self>, Result<FloatTensor<Self>, FloatTensor<Self>>) {
        (Self::fused_gelu(x.clone()), Err(x))
    }

    /// `grad · derivative`, element-wise, from the derivative
    /// [`FusedOps::fused_gelu_keeping`] kept.
    fn fused_gelu_backward_from_derivative(
        derivative: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        Self::float_mul(grad, derivative)
    }

    /// `max(x, 0)`, element-wise (−0 and NaN as they are): Burn's `relu` by default.
    fn fused_relu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::relu(x)
    }

    /// ReLU's backward from its output `y`: `grad` where `y > 0` (or NaN), else 0: Burn's
    /// `relu_backward` by default.
    fn fused_relu_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::relu_backward(y, grad)
    }

    /// Softmax over the last axis.
    fn fused_softmax_last(x: FloatTensor<Self>) -> FloatTensor<Self> {
        composed::softmax_last::<Self>(x)
    }

    /// The softmax's backward from its output `y`: `y ⊙ (grad − Σ_last grad ⊙ y)`.
    fn fused_softmax_last_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        composed::softmax_last_backward::<Self>(y, grad)
    }

    /// LayerNorm over the last axis, `(x − μ)/√(σ² + ε) · γ + β` (`σ²` biased): Burn's own
    /// `layer_norm` by default.
    fn fused_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        Self::layer_norm(x, gamma, beta, epsilon)
    }

    /// The LayerNorm's backward from its input (mean and deviation are recomputed, not kept):
    /// with `x̂ = (x − μ)·r`, `r = 1/√(σ² + ε)`, `g = grad ⊙ γ` per row,
    /// `dx = r·(g − mean(g) − x̂·mean(g ⊙ x̂))`, `dγ = Σ_rows grad ⊙ x̂`, `dβ = Σ_rows grad`.
    fn fused_layer_norm_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        epsilon: f64,
    ) -> [FloatTensor<Self>; 3] {
        composed::layer_norm_backward::<Self>(x, gamma, grad, epsilon)
    }

    /// [`FusedOps::fused_layer_norm_backward`] with `pending` (the gradient the input already
    /// has from its other uses: the residual stream's, in a pre-norm layer) added to `dx`, as
    /// autodiff would add the two. By default exactly that; the CPU kernel adds it as it
    /// writes `dx` ([`add`]).
    fn fused_layer_norm_backward_adding(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        epsilon: f64,
        pending: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3] {
        let [dx, dgamma, dbeta] = Self::fused_layer_norm_backward(x, gamma, grad, epsilon);
        [Self::float_add(dx, pending), dgamma, dbeta]
    }

    /// [`FusedOps::fused_layer_norm`] and, where this backend's backward reads them, each
    /// row's mean and `1/√(σ² + ε)` (a `[rows, 2]` tensor) for
    /// [`FusedOps::fused_layer_norm_backward_kept`]: none by default.
    fn fused_layer_norm_keeping(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, Option<FloatTensor<Self>>) {
        (Self::fused_layer_norm(x, gamma, beta, epsilon), None)
    }

    /// The LayerNorm's backward with the moments [`FusedOps::fused_layer_norm_keeping`] kept,
    /// and `pending` added to `dx` where given: by default the moments are not read, and it is
    /// [`FusedOps::fused_layer_norm_backward`] or [`FusedOps::fused_layer_norm_backward_adding`].
    fn fused_layer_norm_backward_kept(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        moments: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        epsilon: f64,
        pending: Option<FloatTensor<Self>>,
    ) -> [FloatTensor<Self>; 3] {
        drop(moments);
        match pending {
            Some(pending) => Self::fused_layer_norm_backward_adding(x, gamma, grad, epsilon, pending),
            None => Self::fused_layer_norm_backward(x, gamma, grad, epsilon),
        }
    }

    /// `a + b` of one shape ([`add`]): Burn's sum by default.
    fn fused_add(a: FloatTensor<Self>, b: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::float_add(a, b)
    }

    /// LayerNorm composed of this backend's operations (Burn's `layer_norm`, the same values);
    /// under autodiff with a backward of its own from `x̂` and `1/σ` kept by the forward
    /// ([`composed_norm`]) instead of Burn's backward of each operation: the form of the GPU
    /// backends under burn-fusion with `ATTEND_GPU_KERNELS=auto`.
    fn composed_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        Self::layer_norm(x, gamma, beta, epsilon)
    }

    /// Scaled dot-product attention per (batch, head): `[O, P]` with `P = softmax(s·QKᵀ
    /// masked)`, `O = PV` ([`attention`] has the formulas); only `O` is differentiable.
    fn fused_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: Option<BoolTensor<Self>>,
        scale: f64,
    ) -> [FloatTensor<Self>; 2] {
        composed::attention::<Self>(q, k, v, mask, scale)
    }

    /// `[dQ, dK, dV]` of [`FusedOps::fused_attention`] from `P` and the gradient of `O`.
    fn fused_attention_backward(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        scale: f64,
    ) -> [FloatTensor<Self>; 3] {
        composed::attention_backward::<Self>(q, k, v, weights, grad, scale)
    }

    /// Self-attention of packed queries, keys and values (`[batch, len, Q|K|V]`,
    /// [`attention_packed`]): `[O, P]` as [`FusedOps::fused_attention`] gives them.
    fn fused_attention_packed(
        qkv: FloatTensor<Self>,
        packing: Packing,
        mask: Option<BoolTensor<Self>>,
        scale: f64,
    ) -> [FloatTensor<Self>; 2] {
        attention_packed::composed::<Self>(qkv, packing, mask, scale)
    }

    /// The gradient of [`FusedOps::fused_attention_packed`]'s input, in its packed layout.
    fn fused_attention_packed_backward(
        qkv: FloatTensor<Self>,
        packing: Packing,
        weights: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        scale: f64,
    ) -> FloatTensor<Self> {
        attention_packed::composed_backward::<Self>(qkv, packing, weights, grad, scale)
    }

    /// Attention's weights `[P, P̃]` from the raw scores `QKᵀ` ([`attention_weights`]; `key`,
    /// two integers from the backend's generator, keys the kernels' draw). By default
    /// composed, with Burn's draw.
    fn fused_attention_weights(
        scores: FloatTensor<Self>,
        mask: Option<BoolTensor<Self>>,
        _key: IntTensor<Self>,
        scale: f64,
        keep: f64,
    ) -> [FloatTensor<Self>; 2] {
        attention_weights::default_forward::<Self>(scores, mask, scale, keep)
    }

    /// The raw scores' gradient from `P`, `P̃` and the gradient of `P̃` ([`attention_weights`]).
    fn fused_attention_weights_backward(
        weights: FloatTensor<Self>,
        dropped: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        mask: Option<BoolTensor<Self>>,
        scale: f64,
        keep: f64,
    ) -> FloatTensor<Self> {
        attention_weights::default_backward::<Self>(weights, dropped, grad, mask, scale, keep)
    }

    /// `x·W + b` over rows (`W` stored as `layout` says; [`linear`] has the formulas).
    fn fused_linear(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        layout: Weight,
    ) -> FloatTensor<Self> {
        let shape = x.shape();
        let bias = bias.map(|b| Tensor::<Self, 1>::from_primitive(TensorPrimitive::Float(b)));
        let w = Tensor::<Self, 2>::from_primitive(TensorPrimitive::Float(weight));
        let y = linear::composed(matrix::<Self>(x), w, bias, layout);
        let mut out = shape;
        let last = out.num_dims() - 1;
        out[last] = y.dims()[1];
        reshaped::<Self>(y.into_primitive().tensor(), out)
    }

    /// The input of a linear map as its backward reads it: the matrix of its rows for the
    /// composed form (kept from the forward, so that the backward reshapes it no more); the
    /// CPU kernels read any rank as it is.
    fn linear_rows(x: FloatTensor<Self>) -> FloatTensor<Self> {
        matrix::<Self>(x).into_primitive().tensor()
    }

    /// `(dx, dW, db)` of [`FusedOps::fused_linear`] from the output's gradient (`dx` in `x`'s
    /// shape; `db` only for a map `with_bias`).
    fn fused_linear_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        layout: Weight,
        with_bias: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, Option<FloatTensor<Self>>) {
        let shape = x.shape();
        let w = Tensor::<Self, 2>::from_primitive(TensorPrimitive::Float(weight));
        let (dx, dw, db) = linear::composed_backward(matrix::<Self>(x), w, matrix::<Self>(grad), layout, with_bias);
        let db = db.map(|db| {
            let d_out = db.dims()[1];
            db.reshape([d_out]).into_primitive().tensor()
        });
        (reshaped::<Self>(dx.into_primitive().tensor(), shape), dw.into_primitive().tensor(), db)
    }

    /// `x` in `shape` (as many elements); the CPU backend does it without a copy where the
    /// layout allows ([`reshape`]).
    fn fused_reshape(x: FloatTensor<Self>, shape: burn::tensor::Shape) -> FloatTensor<Self> {
        Self::float_reshape(x, shape)
    }

    /// Softmax + cross-entropy per row of `logits` (`[rows, V]`) against `targets` (`[rows]`):
    /// `[nll, smoothed]` as `[rows, 2]` ([`cross_entropy`] has the formulas).
    fn fused_cross_entropy(logits: FloatTensor<Self>, targets: IntTensor<Self>, smoothing: f64) -> FloatTensor<Self> {
        composed::cross_entropy::<Self>(logits, targets, smoothing)
    }

    /// The gradient of [`FusedOps::fused_cross_entropy`] with respect to the logits, from the
    /// output's gradient `grad` (`[rows, 2]`).
    fn fused_cross_entropy_backward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        grad: FloatTensor<Self>,
        smoothing: f64,
    ) -> FloatTensor<Self> {
        composed::cross_entropy_backward::<Self>(logits, targets, grad, smoothing)
    }

    /// Whether a linear map's backward inside [`backward`] leaves the weight's gradient to a
    /// job beside the rest of the pass ([`overlap`]): where two threads share a backward's
    /// products (the CPU), not where a device runs them in order.
    fn defers_weight_gradients() -> bool {
        false
    }

    /// `dx` of [`FusedOps::fused_linear`] alone: in the input's shape, or as the matrix of its
    /// rows `[rows, d_in]` (the autodiff step reshapes it).
    fn fused_linear_input_backward(
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        layout: Weight,
    ) -> FloatTensor<Self> {
        let w = Tensor::<Self, 2>::from_primitive(TensorPrimitive::Float(weight));
        let grad = matrix::<Self>(grad);
        let dx = match layout {
            Weight::InOut => products::product(grad, w.transpose()),
            Weight::OutIn => products::product(grad, w),
        };
        dx.into_primitive().tensor()
    }

    /// `dW` (in the weight's layout) and, `with_bias`, `db` of [`FusedOps::fused_linear`]
    /// alone.
    fn fused_linear_weight_backward(
        x: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        layout: Weight,
        with_bias: bool,
    ) -> (FloatTensor<Self>, Option<FloatTensor<Self>>) {
        let (x, grad) = (matrix::<Self>(x), matrix::<Self>(grad));
        let db = with_bias.then(|| super::column_sums::column_sums::<Self>(grad.clone().into_primitive().tensor()));
        let dw = match layout {
            Weight::InOut => products::rows_product(x, grad),
            Weight::OutIn => products::rows_product(grad, x),
        };
        (dw.into_primitive().tensor(), db)
    }

    /// [`FusedOps::fused_cross_entropy`] and, where this backend's backward reads them, each
    /// row's `ln Σ e^z` (`[rows]`) for [`FusedOps::fused_cross_entropy_backward_from`]: none
    /// by default.
    fn fused_cross_entropy_keeping(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        smoothing: f64,
    ) -> (FloatTensor<Self>, Option<FloatTensor<Self>>) {
        (Self::fused_cross_entropy(logits, targets, smoothing), None)
    }

    /// [`FusedOps::fused_cross_entropy_backward`] with the rows' `ln Σ e^z` the forward kept
    /// (where it kept them): by default they are not read.
    fn fused_cross_entropy_backward_from(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        log_normalizers: Option<FloatTensor<Self>>,
        grad: FloatTensor<Self>,
        smoothing: f64,
    ) -> FloatTensor<Self> {
        let _ = log_normalizers;
        Self::fused_cross_entropy_backward(logits, targets, grad, smoothing)
    }

    /// `E[indices]`: the rows of `weight` (`[V, d]`) at `indices` (`[batch, len]`), as
    /// `[batch, len, d]` (Burn's lookup).
    fn fused_embedding(weight: FloatTensor<Self>, indices: IntTensor<Self>) -> FloatTensor<Self> {
        Self::embedding(weight, indices)
    }

    /// `dE` (`[vocab, d]`) of [`FusedOps::fused_embedding`] from the output's gradient: the
    /// one-hot matrix of the indices, transposed, times it, for a small vocabulary; Burn's
    /// `select_add` for a large one ([`embedding`] says why).
    fn fused_embedding_backward(vocab: usize, indices: IntTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        embedding::backward::<Self>(vocab, indices, grad)
    }

    /// `Σₜ Σᵢ tᵢ²` over `tensors` (any shapes, at least one), `[1]` ([`squared_norm`]).
    fn fused_squared_norm(tensors: Vec<FloatTensor<Self>>) -> FloatTensor<Self> {
        norm::composed::<Self>(tensors)
    }

    /// One AdamW update of a parameter ([`adamw`]): `[θ, m, v]` after it, from the parameter,
    /// its gradient and its moments (`None` on the first update), all of one shape, with the
    /// gradient multiplied by `scale` (`[1]`) first where there is one.
    fn fused_adamw(
        param: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        moments: Option<[FloatTensor<Self>; 2]>,
        scale: Option<FloatTensor<Self>>,
        step: adamw::AdamWStep,
    ) -> [FloatTensor<Self>; 3] {
        adamw_many::composed::<Self>(param, grad, moments, scale, step)
    }

    /// The AdamW updates of many parameters ([`adamw_many::adamw_many`]): by default each
    /// through [`FusedOps::fused_adamw`], in order; under burn-fusion as one operation.
    fn fused_adamw_many(
        updates: Vec<adamw_many::Update<Self>>,
        scale: Option<FloatTensor<Self>>,
    ) -> Vec<[FloatTensor<Self>; 3]> {
        updates.into_iter().map(|u| Self::fused_adamw(u.param, u.grad, u.moments, scale.clone(), u.step)).collect()
    }
}
