//! The linear map's kernel ([`super::super::linear`]) against its composed form, values and
//! gradients, for both weight layouts and for a 3-d input.

use burn::backend::Autodiff;
use burn::tensor::{Tensor, TensorData};
use burn_ndarray::NdArray;

use super::super::*;
use super::{close, data, values, Grad};

/// Output and the gradients `[y, dx, dW, db]` of a linear map `f(x, W, b)` on `B` (the loss
/// weights every output differently).
pub(in crate::fused) fn linear_grads<B: burn::tensor::backend::AutodiffBackend>(
    [rows, d_in, d_out]: [usize; 3],
    layout: Weight,
    f: impl Fn(Tensor<B, 2>, Tensor<B, 2>, Option<Tensor<B, 1>>) -> Tensor<B, 2>,
) -> Vec<Vec<f32>> {
    let device = Default::default();
    let tensor = |v: Vec<f32>, dims: Vec<usize>| TensorData::new(v, dims).convert::<B::FloatElem>();
    let w_dims = if layout == Weight::InOut { vec![d_in, d_out] } else { vec![d_out, d_in] };
    let x = Tensor::<B, 2>::from_data(tensor(values(rows * d_in, 14, 2.0), vec![rows, d_in]), &device).require_grad();
    let w = Tensor::<B, 2>::from_data(tensor(values(d_in * d_out, 15, 0.5), w_dims), &device).require_grad();
    let b = Tensor::<B, 1>::from_data(tensor(values(d_out, 16, 1.0), vec![d_out]), &device).require_grad();
    let loss_weights = tensor(values(rows * d_out, 17, 1.0), vec![rows, d_out]);
    let y = f(x.clone(), w.clone(), Some(b.clone()));
    let grads = (y.clone() * Tensor::<B, 2>::from_data(loss_weights, &device)).sum().backward();
    vec![data(y), data(x.grad(&grads).unwrap()), data(w.grad(&grads).unwrap()), data(b.grad(&grads).unwrap())]
}

#[test]
fn fused_linear_matches_the_composed_form_in_value_and_gradients_for_both_weight_layouts() {
    for layout in [Weight::InOut, Weight::OutIn] {
        for dims in [[300, 70, 90], [3, 5, 2]] {
            let fused = linear_grads::<Grad>(dims, layout, |x, w, b| linear(x, w, b, layout));
            let composed =
                linear_grads::<Grad>(dims, layout, |x, w, b| super::super::linear::composed(x, w, b, layout));
            for (what, (a, b)) in ["value", "dx", "dW", "db"].iter().zip(fused.iter().zip(&composed)) {
                close(a, b, 2e-5, what);
            }
        }
    }
}

/// A `[batch, len, d_in]` input is its `[batch·len, d_in]` rows: the same values and gradients,
/// in the input's shape, from the kernel (which reads the rows without a reshape) and from
/// the trait's composed default.
#[test]
fn fused_linear_of_a_3d_input_equals_the_map_over_its_flattened_rows() {
    fn both<B: burn::tensor::backend::AutodiffBackend>(layout: Weight, direct: bool) -> Vec<Vec<f32>> {
        linear_grads::<B>([12, 5, 7], layout, |x, w, b| {
            if direct {
                let y = linear(x.reshape([3, 4, 5]), w, b, layout);
                assert_eq!(y.dims(), [3, 4, 7]);
                y.reshape([12, 7])
            } else {
                linear(x, w, b, layout)
            }
        })
    }
    type Plain = Autodiff<NdArray<f32, i32>>;
    for layout in [Weight::InOut, Weight::OutIn] {
        let reference = both::<Grad>(layout, false);
        for (what, (a, b)) in ["value", "dx", "dW", "db"].iter().zip(both::<Grad>(layout, true).iter().zip(&reference))
        {
            close(a, b, 1e-6, what);
        }
        for (what, (a, b)) in ["value", "dx", "dW", "db"].iter().zip(both::<Plain>(layout, true).iter().zip(&reference))
        {
            close(a, b, 2e-5, what);
        }
    }
}

#[test]
fn composed_linear_backward_matches_autodiff_of_the_composed_form() {
    type Plain = Autodiff<NdArray<f32, i32>>;
    for layout in [Weight::InOut, Weight::OutIn] {
        let prim = |t: Tensor<Plain, 2>| t.into_primitive().tensor();
        let via_trait = linear_grads::<Plain>([7, 4, 3], layout, |x, w, b| {
            let y = Plain::fused_linear(prim(x), prim(w), b.map(|b| b.into_primitive().tensor()), layout);
            Tensor::from_primitive(TensorPrimitive::Float(y))
        });
        let composed =
            linear_grads::<Plain>([7, 4, 3], layout, |x, w, b| super::super::linear::composed(x, w, b, layout));
        for (what, (a, b)) in ["value", "dx", "dW", "db"].iter().zip(via_trait.iter().zip(&composed)) {
            close(a, b, 2e-5, what);
        }
    }
}
