//! The fused operations under burn-fusion (`Fusion<B>`, what `burn_wgpu::Wgpu` and
//! `burn_cuda::Cuda` are): each is registered with the fusion stream as one custom operation
//! (`OperationIr::Custom`) that, when the stream runs it, calls `B`'s kernel on the tensors'
//! handles. A custom operation ends the element-wise block being fused before it and starts a
//! new one after it (burn-cubecl-fusion fuses no custom operation), so Burn still fuses the
//! element-wise work around our kernels.
//!
//! GELU stays composed here: it is element-wise, which is what burn-fusion fuses itself (and
//! with its neighbours, such as the bias before it); a custom operation would cut that block
//! in two. The row operations (softmax, LayerNorm, attention's softmax, cross-entropy) are what
//! fusion cannot do in one pass.
//!
//! Under `ATTEND_GPU_KERNELS=auto` (the default) the row operations run composed of Burn's
//! operations instead ([`composed`]): the dispatch reaches them here only through `Autodiff`,
//! so that each keeps one backward step of its own ([`crate::fused::dispatch`]). Our row
//! kernels run here under `all`; attention's weights with dropout under `auto` and
//! `attention` too, LayerNorm (and its backward that adds the residual stream's gradient)
//! under `norm` too, the squared norm and the AdamW updates under every setting but `off`
//! (`Kernels::for_updates`), and our products ([`FusedProducts`]) wherever
//! `ATTEND_GPU_MATMUL` takes them.

use burn::tensor::ops::{BoolTensor, FloatTensor, IntTensor};
use burn::tensor::{Shape, TensorMetadata};
use burn_fusion::{Fusion, FusionBackend};

use super::custom_op::{like, next, register, register_vec, Arg, Kind};

use crate::fused::dispatch::{attention_kernels_under_fusion, kernels_under_fusion};
use crate::fused::{composed, FusedOps, FusedProducts};

impl<B: FusionBackend + FusedOps> FusedProducts for Fusion<B> {
    fn fused_product_shaped(
        a: FloatTensor<Self>,
        b: FloatTensor<Self>,
        product: crate::fused::ProductShape,
    ) -> FloatTensor<Self> {
        let (sa, sb) = (a.shape(), b.shape());
        let rank = sa.num_dims();
        let mut shape = sa.clone();
        shape[rank - 1] = sb[rank - 1];
        for i in 0..rank - 2 {
            shape[i] = sa[i].max(sb[i]);
        }
        let dtype = a.dtype;
        let inputs = vec![(a, Kind::Float), (b, Kind::Float)];
        // The operation runs when burn-fusion flushes: under the tile and form in force now.
        let (tile, form) = (crate::fused::product_tile(), crate::fused::product_form());
        let id =
            if product == crate::fused::ProductShape::PLAIN { "attend::product" } else { "attend::product_shaped" };
        let [c] = register::<B, 1>(id, inputs, [(shape, dtype)], move |args| {
            let mut args = args.into_iter();
            crate::fused::with_product_tile(tile, || {
                crate::fused::with_product_form(form, || {
                    [B::fused_product_shaped(next(&mut args).float(), next(&mut args).float(), product)]
                })
            })
        });
        c
    }
}

impl<B: FusionBackend + FusedOps> FusedOps for Fusion<B> {
    fn fused_softmax_last(x: FloatTensor<Self>) -> FloatTensor<Self> {
        if !kernels_under_fusion() {
            return composed::softmax_last::<Self>(x);
        }
        let out = like(&x);
        let [y] = register::<B, 1>("attend::softmax_last", vec![(x, Kind::Float)], [out], |args| {
            let mut args = args.into_iter();
            [B::fused_softmax_last(next(&mut args).float())]
        });
        y
    }

    fn fused_softmax_last_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        if !kernels_under_fusion() {
            return composed::softmax_last_backward::<Self>(y, grad);
        }
        let out = like(&y);
        let inputs = vec![(y, Kind::Float), (grad, Kind::Float)];
        let [dx] = register::<B, 1>("attend::softmax_last_backward", inputs, [out], |args| {
            let mut args = args.into_iter();
            let (y, grad) = (next(&mut args).float(), next(&mut args).float());
            [B::fused_softmax_last_backward(y, grad)]
        });
        dx
    }

    fn fused_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        let out = like(&x);
        let has_beta = beta.is_some();
        let mut inputs = vec![(x, Kind::Float), (gamma, Kind::Float)];
        inputs.extend(beta.map(|b| (b, Kind::Float)));
        let [y] = register::<B, 1>("attend::layer_norm", inputs, [out], move |args| {
            let mut args = args.into_iter();
            let (x, gamma) = (next(&mut args).float(), next(&mut args).float());
            let beta = has_beta.then(|| next(&mut args).float());
            [B::fused_layer_norm(x, gamma, beta, epsilon)]
        });
        y
    }

    fn fused_layer_norm_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        epsilon: f64,
    ) -> [FloatTensor<Self>; 3] {
        layer_norm_backward::<B>(x, gamma, grad, None, epsilon)
    }

    fn fused_layer_norm_backward_adding(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        epsilon: f64,
        pending: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3] {
        layer_norm_backward::<B>(x, gamma, grad, Some(pending), epsilon)
    }

    fn fused_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: Option<BoolTensor<Self>>,
        scale: f64,
    ) -> [FloatTensor<Self>; 2] {
        if !attention_kernels_under_fusion() {
            return composed::attention::<Self>(q, k, v, mask, scale);
        }
        let [batch, heads, queries, _] = q.shape().dims::<4>();
        let (keys, d_v) = (k.shape()[2], v.shape()[3]);
        let outputs =
            [(Shape::new([batch, heads, queries, d_v]), q.dtype), (Shape::new([batch, heads, queries, keys]), q.dtype)];
        let has_mask = mask.is_some();
        let mut inputs = vec![(q, Kind::Float), (k, Kind::Float), (v, Kind::Float)];
        inputs.extend(mask.map(|m| (m, Kind::Bool)));
        register::<B, 2>("attend::attention", inputs, outputs, move |args| {
            let mut args = args.into_iter();
            let (q, k, v) = (next(&mut args).float(), next(&mut args).float(), next(&mut args).float());
            let mask = has_mask.then(|| next(&mut args).bool());
            B::fused_attention(q, k, v, mask, scale)
        })
    }

    fn fused_attention_backward(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        scale: f64,
    ) -> [FloatTensor<Self>; 3] {
        if !attention_kernels_under_fusion() {
            return composed::attention_backward::<Self>(q, k, v, weights, grad, scale);
        }
        let outputs = [like(&q), like(&k), like(&v)];
        let inputs =
            vec![(q, Kind::Float), (k, Kind::Float), (v, Kind::Float), (weights, Kind::Float), (grad, Kind::Float)];
        register::<B, 3>("attend::attention_backward", inputs, outputs, move |args| {
            let mut args = args.into_iter().map(Arg::float);
            let mut take = || args.next().expect("five inputs");
            let (q, k, v, weights, grad) = (take(), take(), take(), take(), take());
            B::fused_attention_backward(q, k, v, weights, grad, scale)
        })
    }

    fn fused_attention_weights(
        scores: FloatTensor<Self>,
        mask: Option<BoolTensor<Self>>,
        key: IntTensor<Self>,
        scale: f64,
        keep: f64,
    ) -> [FloatTensor<Self>; 2] {
        // The dispatch (`Kernels::for_attention_weights`) reaches this only for the kernels.
        let outputs = [like(&scores), like(&scores)];
        let has_mask = mask.is_some();
        let mut inputs = vec![(scores, Kind::Float), (key, Kind::Int)];
        inputs.extend(mask.map(|m| (m, Kind::Bool)));
        register::<B, 2>("attend::attention_weights", inputs, outputs, move |args| {
            let mut args = args.into_iter();
            let (scores, key) = (next(&mut args).float(), next(&mut args).int());
            let mask = has_mask.then(|| next(&mut args).bool());
            B::fused_attention_weights(scores, mask, key, scale, keep)
        })
    }

    fn fused_attention_weights_backward(
        weights: FloatTensor<Self>,
        dropped: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        mask: Option<BoolTensor<Self>>,
        scale: f64,
        keep: f64,
    ) -> FloatTensor<Self> {
        let out = like(&weights);
        let has_mask = mask.is_some();
        let mut inputs = vec![(weights, Kind::Float), (dropped, Kind::Float), (grad, Kind::Float)];
        inputs.extend(mask.map(|m| (m, Kind::Bool)));
        let [dx] = register::<B, 1>("attend::attention_weights_backward", inputs, [out], move |args| {
            let mut args = args.into_iter();
            let (weights, dropped, grad) = (next(&mut args).float(), next(&mut args).float(), next(&mut args).float());
            let mask = has_mask.then(|| next(&mut args).bool());
            [B::fused_attention_weights_backward(weights, dropped, grad, mask, scale, keep)]
        });
        dx
    }

    fn fused_cross_entropy(logits: FloatTensor<Self>, targets: IntTensor<Self>, smoothing: f64) -> FloatTensor<Self> {
        if !kernels_under_fusion() {
            return composed::cross_entropy::<Self>(logits, targets, smoothing);
        }
        let out = (Shape::new([logits.shape()[0], 2]), logits.dtype);
        let inputs = vec![(logits, Kind::Float), (targets, Kind::Int)];
        let [nll] = register::<B, 1>("attend::cross_entropy", inputs, [out], move |args| {
            let mut args = args.into_iter();
            let (z, t) = (next(&mut args).float(), next(&mut args).int());
            [B::fused_cross_entropy(z, t, smoothing)]
        });
        nll
    }

    fn fused_cross_entropy_backward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        grad: FloatTensor<Self>,
        smoothing: f64,
    ) -> FloatTensor<Self> {
        if !kernels_under_fusion() {
            return composed::cross_entropy_backward::<Self>(logits, targets, grad, smoothing);
        }
        let out = like(&logits);
        let inputs = vec![(logits, Kind::Float), (targets, Kind::Int), (grad, Kind::Float)];
        let [dz] = register::<B, 1>("attend::cross_entropy_backward", inputs, [out], move |args| {
            let mut args = args.into_iter();
            let (z, t, grad) = (next(&mut args).float(), next(&mut args).int(), next(&mut args).float());
            [B::fused_cross_entropy_backward(z, t, grad, smoothing)]
        });
        dz
    }

    fn fused_squared_norm(tensors: Vec<FloatTensor<Self>>) -> FloatTensor<Self> {
        let out = (Shape::new([1]), tensors[0].dtype);
        let inputs = tensors.into_iter().map(|t| (t, Kind::Float)).collect();
        let [total] = register::<B, 1>("attend::squared_norm", inputs, [out], |args| {
            [B::fused_squared_norm(args.into_iter().map(Arg::float).collect())]
        });
        total
    }

    fn fused_adamw(
        param: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        moments: Option<[FloatTensor<Self>; 2]>,
        scale: Option<FloatTensor<Self>>,
        step: crate::fused::adamw::AdamWStep,
    ) -> [FloatTensor<Self>; 3] {
        let out = like(&param);
        let (first, scaled) = (moments.is_none(), scale.is_some());
        let mut inputs = vec![(param, Kind::Float), (grad, Kind::Float)];
        inputs.extend(moments.into_iter().flatten().map(|t| (t, Kind::Float)));
        inputs.extend(scale.map(|t| (t, Kind::Float)));
        // The step's scalars travel in the closure: each step registers its own operation.
        register::<B, 3>("attend::adamw", inputs, [out.clone(), out.clone(), out], move |args| {
            let mut args = args.into_iter().map(Arg::float);
            let (param, grad) = (args.next().expect("parameter"), args.next().expect("gradient"));
            let moments = (!first).then(|| [args.next().expect("first moment"), args.next().expect("second moment")]);
            let scale = scaled.then(|| args.next().expect("gradient scale"));
            B::fused_adamw(param, grad, moments, scale, step)
        })
    }

    fn fused_adamw_many(
        updates: Vec<crate::fused::adamw_many::Update<Self>>,
        scale: Option<FloatTensor<Self>>,
    ) -> Vec<[FloatTensor<Self>; 3]> {
        // What each update brings: whether it has moments, and its scalars (in the closure).
        let layout: Vec<_> = updates.iter().map(|u| (u.moments.is_some(), u.step)).collect();
        let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
        for u in updates {
            let out = like(&u.param);
            outputs.extend([out.clone(), out.clone(), out]);
            inputs.extend([(u.param, Kind::Float), (u.grad, Kind::Float)]);
            inputs.extend(u.moments.into_iter().flatten().map(|t| (t, Kind::Float)));
        }
        let scaled = scale.is_some();
        inputs.extend(scale.map(|t| (t, Kind::Float)));
        let count = layout.len();
        let outputs = register_vec::<B>("attend::adamw_many", inputs, outputs, move |args| {
            let mut args: Vec<_> = args.into_iter().map(Arg::float).collect();
            let scale = if scaled { args.pop() } else { None };
            let mut args = args.into_iter();
            let mut take = || args.next().expect("the inputs registered for each update");
            let updates = layout
                .iter()
                .map(|&(has_moments, step)| crate::fused::adamw_many::Update {
                    param: take(),
                    grad: take(),
                    moments: has_moments.then(|| [take(), take()]),
                    step,
                })
                .collect();
            B::fused_adamw_many(updates, scale).into_iter().flatten().collect()
        });
        let mut outputs = outputs.into_iter();
        let mut next = || outputs.next().expect("three outputs an update");
        (0..count).map(|_| [next(), next(), next()]).collect()
    }
}

/// LayerNorm's backward as one custom operation: `B`'s kernel, with `pending` (the residual
/// stream's gradient) added to `dx` where given.
fn layer_norm_backward<B: FusionBackend + FusedOps>(
    x: FloatTensor<Fusion<B>>,
    gamma: FloatTensor<Fusion<B>>,
    grad: FloatTensor<Fusion<B>>,
    pending: Option<FloatTensor<Fusion<B>>>,
    epsilon: f64,
) -> [FloatTensor<Fusion<B>>; 3] {
    // `dx` in x's type, `dγ` and `dβ` in γ's (the CubeCL backend casts them back).
    let outputs = [like(&x), like(&gamma), like(&gamma)];
    let adding = pending.is_some();
    let id = if adding { "attend::layer_norm_backward_adding" } else { "attend::layer_norm_backward" };
    let mut inputs = vec![(x, Kind::Float), (gamma, Kind::Float), (grad, Kind::Float)];
    inputs.extend(pending.map(|p| (p, Kind::Float)));
    register::<B, 3>(id, inputs, outputs, move |args| {
        let mut args = args.into_iter();
        let (x, gamma, grad) = (next(&mut args).float(), next(&mut args).float(), next(&mut args).float());
        match adding.then(|| next(&mut args).float()) {
            Some(pending) => B::fused_layer_norm_backward_adding(x, gamma, grad, epsilon, pending),
            None => B::fused_layer_norm_backward(x, gamma, grad, epsilon),
        }
    })
}
