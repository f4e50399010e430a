//! Fused operations: one pass over the data where the composed form takes several, through
//! Burn's backend-extension mechanism.
//!
//! [`FusedOps`] is a trait over `Backend` with one method per fused operation and one per
//! backward. Its default methods are the **composed** reference (the same formula in Burn's
//! tensor operations), so any backend can implement it by naming itself; the CPU backend
//! (`burn-ndarray`: `cpu.rs`, `activation.rs`, `layer_norm_cpu.rs` and the operations' own files) implements the forward and backward as single-pass Rust kernels,
//! parallel over rows with rayon; CubeCL's backends (burn-wgpu, burn-cuda, with or without
//! burn-fusion; features `wgpu`, `cuda`; `cube`) implement the row operations and GELU as
//! CubeCL kernels; `Autodiff<B>` ([`autodiff`]) implements each forward with `B`'s kernel and
//! registers a backward that calls `B`'s backward kernel.
//!
//! The model stays generic over `B: Backend` (no bound on every module): the functions below
//! ([`gelu`], [`softmax_last`], [`layer_norm`], [`attention`], [`linear`], [`cross_entropy`],
//! [`reshape`]) find at run time, by type ([`Kernels::of`], [`on_kernels!`]), whether `B` is
//! one of the backends with kernels (`NdArray<f32>`, the GPU backends the build has, and
//! their `Autodiff`) and otherwise compute the composed form. Both paths compute the same function; `tests.rs` checks values and gradients
//! of each fused operation against the composed reference.
//!
//! A third path serves the GPU backends under burn-fusion, where our kernels are off by
//! default (their custom operations cut fusion's blocks): the composed forms ([`composed`],
//! [`composed_norm`]) as one autodiff step each with a backward of their own
//! ([`Kernels::tracked`]), instead of Burn's autodiff of every operation in them. Each hands
//! the fusion stream fewer operations (a LayerNorm's backward in closed form from `x̂` and
//! `1/σ` kept by the forward; attention's, the softmax's and the cross-entropy's as in the
//! kernels; no bias gradient for a map without bias; a linear map's input kept as the matrix
//! of its rows): on nanoGPT's GPU configuration 517 → ~360 executions a step
//! (docs/benchmarks.md).
//!
//! | operation | composed passes (forward + backward) | fused |
//! | --- | --- | --- |
//! | exact GELU `x·Φ(x)` | 5 + 9 (erf, its derivative, products) | 1 + 1 (on the CPU the forward also writes the derivative, the backward one product) |
//! | softmax over the last axis | 5 + 4 (max, exp, sum, divide; products, row sums) | 1 + 1 |
//! | LayerNorm over the last axis | 8 + ~20 (mean, centre, square, mean, root, divide, scale, shift) | 1 + 1 |
//! | attention `softmax(s·QKᵀ + mask)·V` per head | 6 + ~10 (scale, transposed copy, product, mask, softmax, product) | 1 + 1, products through strides |
//! | self-attention over one product's packed `Q|K|V` rows ([`attention_packed`]) | 3 slices + attention; each slice's backward a zero-filled copy and a sum | attention's kernel reading the rows in place; one gradient in their layout |
//! | linear map over rows `x·W + b` | 1-2 + 3-5 (transposed copies of `x`, `W` for the backward) | 1 + 3 products, no copies; in training on the CPU `dW` beside the rest of the backward pass ([`backward`]) |
//! | softmax + cross-entropy over the vocabulary | 6 + ~10, keeping `log p` (`[rows, V]`) | 1 + 1, keeping the logits |
//! | AdamW update of a parameter ([`adamw`]) | ~15 (moments, bias correction, root, decay, step) | 1, in place |
//! | AdamW updates of many parameters ([`adamw_many`]) | one operation per parameter | one operation under burn-fusion |
//! | squared norm of many tensors ([`squared_norm`]) | 3 per tensor (square, sum, running total) | 1 |
//! | reshape of a tensor in standard layout ([`reshape`]) | 1 copy + 1 copy of the gradient | no copy |
//! | token lookup's gradient on the GPU ([`embedding`]) | `select_add`: `d` threads, each over all rows | a one-hot product |

mod activation;
pub mod adam;
pub mod adamw;
mod add;
pub use adamw::adamw;
pub mod adamw_many;
mod attention;
pub mod attention_packed;
mod attention_products;
mod attention_weights;
mod autodiff;
mod column_sums;
mod composed;
mod composed_norm;
mod concat;
mod cpu;
mod cross_entropy;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod cube;
#[cfg(feature = "kernel-source")]
pub use cube::product_source::{product_cuda_source, ProductLayout};
#[cfg(feature = "kernel-source")]
pub use cube::row_source::attention_weights_cuda_source;
mod dispatch;
mod dropout;
mod embedding;
mod erf;
mod exp;
mod heads;
mod joined;
mod layer_norm_cpu;
mod linear;
mod linear_autodiff;
mod ndarray;
pub(crate) mod norm;
mod ops;
mod overlap;
mod product_autodiff;
mod product_form;
mod product_ops;
mod product_shape;
mod product_tile;
mod products;
mod reshape;
mod score_mask;
#[cfg(test)]
mod tests;
mod unary;
mod unwritten;
mod wide;

use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorMetadata, TensorPrimitive};

/// `1/√(2π)`, the standard normal density at 0.
pub(crate) const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

pub use add::add;
pub use attention::attention;
pub use attention_packed::{attention_packed, Packing};
pub use attention_products::{attention_context, attention_scores, product_shaped};
pub use attention_weights::attention_weights;
pub use concat::{cat_columns, cat_pair};
pub use cross_entropy::{cross_entropy, log_sum_exp_f64};
pub use dispatch::is_cpu_backend;
pub use dispatch::{gpu_kernels_from_env, gpu_switches_from_env, parse_gpu_kernels, GpuKernels};
use dispatch::{is, on_kernels, same};
pub use dropout::dropout;
pub use embedding::embedding;
pub use joined::linear_joined;
pub use linear::{linear, Weight};
pub use norm::squared_norm;
pub use ops::FusedOps;
pub use overlap::backward;
pub use product_form::{
    parse_product_addresses, parse_product_fma, parse_product_lanes, parse_product_stores, product_form,
    product_form_from_env, with_product_form, ProductForm,
};
pub use product_ops::FusedProducts;
pub use product_shape::{ProductShape, Triangle};
pub use product_tile::{
    parse_product_tile, product_tile, product_tile_from_env, with_product_tile, ProductTile, TileChoice,
};
pub use products::{
    gpu_products_from_env, linear_product, matmul, parse_gpu_products, with_gpu_products, GpuProducts, LinearProduct,
};
pub use reshape::reshape;
pub use unary::{gelu, relu, softmax_last};
#[cfg(test)]
use unary::{Gelu, SoftmaxLast, Unary};
#[cfg(test)]
pub(crate) use {add::IN_PLACE as ADDS_IN_PLACE, layer_norm_cpu::ADDED_PENDING};

/// LayerNorm over the last axis, `(x − μ)/√(σ² + ε) · γ + β`, fused where the backend has a
/// kernel.
///
/// # Shapes
/// - `x`: `[..., d]`; `gamma`, `beta`: `[d]`; output: the shape of `x`
pub fn layer_norm<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    gamma: Tensor<B, 1>,
    beta: Option<Tensor<B, 1>>,
    epsilon: f64,
) -> Tensor<B, D> {
    /// `F`'s kernel, or (`composed`) its composed LayerNorm with its own backward.
    fn on<B: Backend, F: FusedOps, const D: usize>(
        x: Tensor<B, D>,
        gamma: Tensor<B, 1>,
        beta: Option<Tensor<B, 1>>,
        epsilon: f64,
        composed: bool,
    ) -> Tensor<B, D> {
        let prim = |t: Tensor<B, 1>| same::<Tensor<B, 1>, Tensor<F, 1>>(t).into_primitive().tensor();
        let x = same::<Tensor<B, D>, Tensor<F, D>>(x).into_primitive().tensor();
        let norm = if composed { F::composed_layer_norm } else { F::fused_layer_norm };
        let y = norm(x, prim(gamma), beta.map(prim), epsilon);
        same::<Tensor<F, D>, Tensor<B, D>>(Tensor::from_primitive(TensorPrimitive::Float(y)))
    }
    on_kernels!(norm B, K => on::<B, K, D>(x, gamma, beta, epsilon, false), _ => {
        on_kernels!(tracked B, K => on::<B, K, D>(x, gamma, beta, epsilon, true), _ => {
            let beta = beta.map(|b| b.into_primitive().tensor());
            let y = B::layer_norm(x.into_primitive().tensor(), gamma.into_primitive().tensor(), beta, epsilon);
            Tensor::from_primitive(TensorPrimitive::Float(y))
        })
    })
}

/// `x` as the matrix of its rows over the last axis.
fn matrix<B: Backend>(x: FloatTensor<B>) -> Tensor<B, 2> {
    let shape = x.shape();
    let last = shape[shape.num_dims() - 1];
    as_rank::<B, 2>(x, [shape.num_elements() / last.max(1), last])
}

/// The primitive `x` reshaped to `dims`, as a tensor of rank `D`.
fn as_rank<B: Backend, const D: usize>(x: FloatTensor<B>, dims: [usize; D]) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(reshaped::<B>(x, dims.into())))
}

/// `x` in `shape`; no operation where it has that shape already (under burn-fusion a reshape
/// is an operation handed to the stream, even to the same shape).
fn reshaped<B: Backend>(x: FloatTensor<B>, shape: burn::tensor::Shape) -> FloatTensor<B> {
    if x.shape() == shape {
        x
    } else {
        B::float_reshape(x, shape)
    }
}
