//! Position-wise linear maps as one matrix product.
//!
//! `xW + b` acts on each position separately, so a `[batch, len, d_in]` input is the same
//! computation as a `[batch·len, d_in]` matrix times `W`. Burn's `Linear` on a 3-D input
//! broadcasts `W` over the batch instead, which burn-ndarray runs as `batch` small matrix
//! products, and whose weight gradient is `batch` products summed afterwards (materialized
//! first: on the Multi30k model, with an 8,000-token output layer, that alone held most of a
//! 10 GB peak). One flattened product is the same arithmetic in larger, faster blocks, without
//! the per-batch copies (docs/benchmarks.md: 1.5x the tokens/s, a tenth of the memory). The
//! product is [`crate::fused::linear`]: on the CPU backend its backward reads the transposed
//! operands through strides instead of copying them.

use burn::nn::Linear;
use burn::tensor::{backend::Backend, Tensor};

use crate::fused::Weight;

/// `layer` applied to every position of `x`.
///
/// # Shapes
/// - `x`: `[batch, len, d_in]`
/// - output: `[batch, len, d_out]`
///
/// Single positions (`len` = 1, each step of cached decoding) are flattened too. (They once went
/// through `Linear` unflattened: a cached step's attention scores came out wrong on burn-wgpu
/// with fusion. The cause was the scaled queries' fused read, not the flattening; see
/// `crate::fused::attention`'s composed form and docs/burn.md.)
pub fn positionwise<B: Backend>(layer: &Linear<B>, x: Tensor<B, 3>) -> Tensor<B, 3> {
    let bias = layer.bias.as_ref().map(|b| b.val());
    crate::fused::linear(x, layer.weight.val(), bias, Weight::InOut)
}

/// `x Mᵀ` for every position of `x`, with `m` stored `[d_out, d_in]` (a tied embedding).
///
/// # Shapes
/// - `x`: `[batch, len, d_in]`
/// - `m`: `[d_out, d_in]`
/// - output: `[batch, len, d_out]`
pub fn positionwise_transposed<B: Backend>(x: Tensor<B, 3>, m: Tensor<B, 2>) -> Tensor<B, 3> {
    crate::fused::linear(x, m, None, Weight::OutIn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_backend::TestBackend;
    use burn::nn::LinearConfig;
    use burn::tensor::Distribution;

    /// Flattening the positions changes nothing but the blocking of the product.
    #[test]
    fn positionwise_equals_linear_on_the_3d_input() {
        let device = Default::default();
        let layer = LinearConfig::new(6, 5).init::<TestBackend>(&device);
        let x = Tensor::<TestBackend, 3>::random([3, 4, 6], Distribution::Default, &device);
        let ours = positionwise(&layer, x.clone()).into_data();
        ours.assert_approx_eq::<f32>(&layer.forward(x.clone()).into_data(), burn::tensor::Tolerance::absolute(1e-6));
        let m = Tensor::<TestBackend, 2>::random([7, 6], Distribution::Default, &device);
        let tied = positionwise_transposed(x.clone(), m.clone()).into_data();
        tied.assert_approx_eq::<f32>(
            &x.matmul(m.transpose().unsqueeze()).into_data(),
            burn::tensor::Tolerance::absolute(1e-6),
        );
    }
}
