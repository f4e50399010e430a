//! A reshape that does not copy: on burn-ndarray 0.21 every `reshape` copies, even of a
//! tensor already in standard (row-major) layout (it borrows a view in the new shape and turns
//! the view into a new array). Attention reshapes four `[batch, len, d_model]` tensors per
//! layer on the way in and out of its heads, and their gradients on the way back: eight
//! copies per layer and step that carry no information.
//!
//! On the CPU backend a tensor in standard layout gets the new shape over the same buffer;
//! any other layout takes Burn's copy. The backward reshapes the gradient back the same way.

use burn::tensor::backend::Backend;
use burn::tensor::ops::{FloatTensor, FloatTensorOps};
use burn::tensor::{Shape, Tensor, TensorPrimitive};
use burn_ndarray::{NdArray, NdArrayTensor};

use super::{is, same, FusedOps};

type F = FloatTensor<NdArray<f32>>;

/// The kernel: the same buffer under `shape` where the layout allows, else Burn's copy.
pub(super) fn cpu(x: F, shape: Shape) -> F {
    match x {
        NdArrayTensor::F32(storage) if storage.view().is_standard_layout() => {
            let array = storage.into_owned();
            let reshaped = array.into_shape_with_order(ndarray::IxDyn(shape.as_slice()));
            NdArrayTensor::from(reshaped.expect("a standard layout takes any shape of as many elements"))
        }
        other => NdArray::<f32>::float_reshape(other, shape),
    }
}

/// `x` in the shape `dims` (as many elements), without a copy on the CPU backend when `x` is
/// in standard layout.
pub fn reshape<B: Backend, const D1: usize, const D2: usize>(x: Tensor<B, D1>, dims: [usize; D2]) -> Tensor<B, D2> {
    fn on<B: Backend, K: FusedOps, const D1: usize, const D2: usize>(
        x: Tensor<B, D1>,
        dims: [usize; D2],
    ) -> Tensor<B, D2> {
        let x = same::<Tensor<B, D1>, Tensor<K, D1>>(x).into_primitive().tensor();
        same(Tensor::<K, D2>::from_primitive(TensorPrimitive::Float(K::fused_reshape(x, Shape::from(dims)))))
    }
    if is::<B, burn::backend::Autodiff<NdArray<f32>>>() {
        on::<B, burn::backend::Autodiff<NdArray<f32>>, D1, D2>(x, dims)
    } else if is::<B, NdArray<f32>>() {
        on::<B, NdArray<f32>, D1, D2>(x, dims)
    } else {
        x.reshape(dims)
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::Autodiff;
    use burn::tensor::{Tensor, TensorData};

    use super::*;

    type Cpu = NdArray<f32>;

    fn address(t: &Tensor<Cpu, 3>) -> *const f32 {
        match t.clone().into_primitive().tensor() {
            NdArrayTensor::F32(storage) => storage.view().as_ptr(),
            _ => unreachable!("f32"),
        }
    }

    /// A tensor in standard layout is reshaped over its own buffer; a transposed one is
    /// copied into the new shape; both hold Burn's values.
    #[test]
    fn reshape_shares_the_buffer_of_a_standard_layout_and_copies_any_other() {
        let device = Default::default();
        let x = Tensor::<Cpu, 3>::from_data(TensorData::new((0..24).map(|v| v as f32).collect(), [2, 3, 4]), &device);
        let y: Tensor<Cpu, 3> = reshape(x.clone(), [2, 4, 3]);
        assert_eq!(address(&y), address(&x), "no copy of a standard layout");
        assert_eq!(y.into_data(), x.clone().reshape([2, 4, 3]).into_data());
        let t = x.clone().swap_dims(1, 2);
        let y: Tensor<Cpu, 3> = reshape(t.clone(), [2, 3, 4]);
        assert_eq!(y.into_data(), t.reshape([2, 3, 4]).into_data(), "a permuted layout: Burn's values");
    }

    /// Under autodiff the gradient comes back in the input's shape, with the values flowing
    /// through the reshape unchanged.
    #[test]
    fn reshape_gradient_returns_in_the_inputs_shape() {
        type Grad = Autodiff<Cpu>;
        let device = Default::default();
        let x = Tensor::<Grad, 3>::from_data(TensorData::new((0..24).map(|v| v as f32).collect(), [2, 3, 4]), &device)
            .require_grad();
        let weights = Tensor::<Grad, 4>::from_data(
            TensorData::new((0..24).map(|v| (v * 7 % 5) as f32).collect(), [2, 3, 2, 2]),
            &device,
        );
        let y: Tensor<Grad, 4> = reshape(x.clone(), [2, 3, 2, 2]);
        let grads = (y * weights.clone()).sum().backward();
        let grad = x.grad(&grads).expect("x is tracked");
        assert_eq!(grad.dims(), [2, 3, 4]);
        assert_eq!(grad.into_data(), weights.inner().reshape([2, 3, 4]).into_data());
    }
}
