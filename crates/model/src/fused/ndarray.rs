//! Which kernels back [`FusedOps`] on the CPU backend: `NdArray<f32>` names its kernels
//! (`cpu.rs`, `activation.rs`, `layer_norm_cpu.rs`, `linear.rs`, `attention.rs`, `attention_packed.rs`,
//! `cross_entropy.rs`, `reshape.rs`); every other backend keeps the
//! composed defaults.

use burn::tensor::ops::{BoolTensor, FloatTensor, IntTensor};
use burn_ndarray::NdArray;

use super::{
    activation, attention, attention_packed, cpu, cross_entropy, layer_norm_cpu, linear, norm, reshape, FusedOps,
    FusedProducts, Packing, Weight,
};

/// burn-ndarray's products are Burn's (`matmul`), the composed defaults.
impl FusedProducts for NdArray<f32> {}

/// The backends whose fused operations are kernels (the rest use the composed defaults).
impl FusedOps for NdArray<f32> {
    fn fused_reshape(x: FloatTensor<Self>, shape: burn::tensor::Shape) -> FloatTensor<Self> {
        reshape::cpu(x, shape)
    }
    fn fused_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        activation::gelu(x)
    }
    fn fused_gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        activation::gelu_backward(x, grad)
    }
    fn fused_gelu_keeping(x: FloatTensor<Self>) -> (FloatTensor<Self>, Result<FloatTensor<Self>, FloatTensor<Self>>) {
        let (y, derivative) = activation::gelu_keeping(x);
        (y, Ok(derivative))
    }
    fn fused_gelu_backward_from_derivative(
        derivative: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        activation::gelu_backward_from_derivative(derivative, grad)
    }
    fn fused_relu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        activation::relu(x)
    }
    fn fused_relu_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        activation::relu_backward(y, grad)
    }
    fn fused_softmax_last(x: FloatTensor<Self>) -> FloatTensor<Self> {
        cpu::softmax_last(x)
    }
    fn fused_softmax_last_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        cpu::softmax_last_backward(y, grad)
    }
    fn fused_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        layer_norm_cpu::layer_norm(x, gamma, beta, epsilon)
    }
    fn fused_layer_norm_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        epsilon: f64,
    ) -> [FloatTensor<Self>; 3] {
        layer_norm_cpu::layer_norm_backward(x, gamma, grad, epsilon, None, None)
    }
    fn fused_layer_norm_backward_adding(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        epsilon: f64,
        pending: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3] {
        layer_norm_cpu::layer_norm_backward(x, gamma, grad, epsilon, None, Some(pending))
    }
    fn fused_layer_norm_keeping(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, Option<FloatTensor<Self>>) {
        let (out, moments) = layer_norm_cpu::layer_norm_keeping(x, gamma, beta, epsilon);
        (out, Some(moments))
    }
    fn fused_layer_norm_backward_kept(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        moments: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        epsilon: f64,
        pending: Option<FloatTensor<Self>>,
    ) -> [FloatTensor<Self>; 3] {
        layer_norm_cpu::layer_norm_backward(x, gamma, grad, epsilon, Some(moments), pending)
    }
    fn fused_add(a: FloatTensor<Self>, b: FloatTensor<Self>) -> FloatTensor<Self> {
        super::add::cpu(a, b)
    }
    fn fused_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: Option<BoolTensor<Self>>,
        scale: f64,
    ) -> [FloatTensor<Self>; 2] {
        attention::cpu(q, k, v, mask, scale)
    }
    fn fused_attention_backward(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        scale: f64,
    ) -> [FloatTensor<Self>; 3] {
        attention::cpu_backward(q, k, v, weights, grad, scale)
    }
    fn fused_attention_packed(
        qkv: FloatTensor<Self>,
        packing: Packing,
        mask: Option<BoolTensor<Self>>,
        scale: f64,
    ) -> [FloatTensor<Self>; 2] {
        attention_packed::cpu(qkv, packing, mask, scale)
    }
    fn fused_attention_packed_backward(
        qkv: FloatTensor<Self>,
        packing: Packing,
        weights: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        scale: f64,
    ) -> FloatTensor<Self> {
        attention_packed::cpu_backward(qkv, packing, weights, grad, scale)
    }
    fn fused_linear(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        layout: Weight,
    ) -> FloatTensor<Self> {
        linear::cpu(x, weight, bias, layout)
    }
    fn linear_rows(x: FloatTensor<Self>) -> FloatTensor<Self> {
        x
    }
    fn fused_linear_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        layout: Weight,
        with_bias: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, Option<FloatTensor<Self>>) {
        linear::cpu_backward(x, weight, grad, layout, with_bias)
    }
    fn defers_weight_gradients() -> bool {
        true
    }
    fn fused_linear_input_backward(
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        layout: Weight,
    ) -> FloatTensor<Self> {
        linear::cpu_input_backward(weight, grad, layout)
    }
    fn fused_linear_weight_backward(
        x: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        layout: Weight,
        with_bias: bool,
    ) -> (FloatTensor<Self>, Option<FloatTensor<Self>>) {
        // One thread: the job runs beside the rest of the pass, which has the others.
        linear::cpu_weight_backward(x, grad, layout, with_bias, 1)
    }
    fn fused_squared_norm(tensors: Vec<FloatTensor<Self>>) -> FloatTensor<Self> {
        norm::cpu(tensors)
    }
    fn fused_cross_entropy(logits: FloatTensor<Self>, targets: IntTensor<Self>, smoothing: f64) -> FloatTensor<Self> {
        cross_entropy::cpu(logits, targets, smoothing).0
    }
    fn fused_cross_entropy_keeping(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        smoothing: f64,
    ) -> (FloatTensor<Self>, Option<FloatTensor<Self>>) {
        let (out, log_normalizers) = cross_entropy::cpu(logits, targets, smoothing);
        (out, Some(log_normalizers))
    }
    fn fused_cross_entropy_backward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        grad: FloatTensor<Self>,
        smoothing: f64,
    ) -> FloatTensor<Self> {
        cross_entropy::cpu_backward(logits, targets, None, grad, smoothing)
    }
    fn fused_cross_entropy_backward_from(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        log_normalizers: Option<FloatTensor<Self>>,
        grad: FloatTensor<Self>,
        smoothing: f64,
    ) -> FloatTensor<Self> {
        cross_entropy::cpu_backward(logits, targets, log_normalizers, grad, smoothing)
    }
}
