//! One optimizer step's gradients over `train.grad_accum` micro-batches, and a
//! data-parallel peer's weighting of its share of each batch ([`accumulate`]).

use burn::module::AutodiffModule;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;

use crate::error::TrainError;
use crate::parallel::peer::Peer;

/// One optimizer step's gradients over `k` micro-batches drawn by `micro`: each objective (a
/// mean over its positions) is divided by `k` (and multiplied by a half-precision run's
/// `loss_scale`, else 1) before its backward, so the accumulated
/// gradient is the mean of the micro-batches' — that of one batch `k` times as large. Also
/// the summed NLL (on the device), the positions counted and the tokens processed.
///
/// A data-parallel peer's objective is the mean over its own rows: it is weighted by
/// `peers · its positions / all peers' positions` (1 when the rows hold equally many), so
/// that the mean of the peers' gradients is the gradient of the whole batch's mean. The
/// positions counted and the tokens processed are then the whole batch's.
pub(crate) fn accumulate<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: &M,
    k: usize,
    loss_scale: f64,
    peer: &Peer,
    mut micro: impl FnMut() -> crate::objective::Losses<B>,
) -> Result<Accumulated<B, M>, TrainError> {
    let mut accumulator = GradientsAccumulator::<M>::new();
    let (mut nll, mut counted, mut processed) = (None::<Tensor<B::InnerBackend, 1>>, 0.0, 0.0);
    for _ in 0..k {
        let losses = micro();
        let batch_nll = losses.nll_sum.clone().inner();
        nll = Some(nll.map_or(batch_nll.clone(), |sum| sum + batch_nll));
        let mut objective = losses.objective.div_scalar(k as f64);
        if loss_scale != 1.0 {
            objective = objective.mul_scalar(loss_scale);
        }
        let (mut count, mut tokens) = (losses.count, losses.tokens);
        if peer.is_parallel() {
            let device = batch_nll_device(&nll);
            let local = Tensor::<B::InnerBackend, 1>::from_floats([losses.count as f32, losses.tokens as f32], &device);
            let all = peer.sum(local, "the positions' all-reduce")?.into_data().convert::<f64>();
            let all =
                all.as_slice::<f64>().map_err(|e| TrainError::Usage(format!("the positions' all-reduce: {e:?}")))?;
            (count, tokens) = (all[0], all[1]);
            let weight = peer.count as f64 * losses.count / count.max(1.0);
            if weight != 1.0 {
                objective = objective.mul_scalar(weight);
            }
        }
        counted += count;
        processed += tokens;
        // The CPU's weight gradients beside the rest of the pass (`attend_model::fused::backward`).
        let grads = attend_model::fused::backward(objective);
        accumulator.accumulate(model, GradientsParams::from_grads(grads, model));
    }
    Ok((accumulator, nll, counted, processed))
}

/// What [`accumulate`] returns: the gradients, the summed NLL, the positions counted and the
/// tokens processed.
pub(crate) type Accumulated<B, M> =
    (GradientsAccumulator<M>, Option<Tensor<<B as AutodiffBackend>::InnerBackend, 1>>, f64, f64);

fn batch_nll_device<B: burn::tensor::backend::Backend>(nll: &Option<Tensor<B, 1>>) -> B::Device {
    nll.as_ref().expect("set above").device()
}

#[cfg(test)]
mod tests {
    use burn::nn::LinearConfig;
    use burn::tensor::{Distribution, Int, TensorData};

    use super::*;
    use crate::objective::cross_entropy;

    type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;

    /// Two micro-batches of 2 rows with `train.grad_accum = 2` give the gradient of one batch
    /// of the same 4 rows (and so the same update).
    #[test]
    fn two_micro_batches_accumulate_to_the_gradient_of_one_batch_of_both() {
        let device = Default::default();
        let layer = LinearConfig::new(3, 5).init::<B>(&device);
        let x = Tensor::<B, 3>::random([1, 4, 3], Distribution::Default, &device);
        let y = Tensor::<B, 2, Int>::from_data(TensorData::from([[0, 3, 1, 4]]), &device);
        let rows = |r: std::ops::Range<usize>| {
            let logits = layer.forward(x.clone().slice([0..1, r.clone(), 0..3]));
            cross_entropy(logits, y.clone().slice([0..1, r]), None, 0.1)
        };
        let (mut one, ..) = accumulate(&layer, 1, 1.0, &Peer::sole(), || rows(0..4)).unwrap();
        let mut halves = [0..2, 2..4].into_iter();
        let (mut two, _, counted, _) =
            accumulate(&layer, 2, 1.0, &Peer::sole(), || rows(halves.next().unwrap())).unwrap();
        assert_eq!(counted, 4.0);
        let (one, two) = (one.grads(), two.grads());
        let get = |g: &GradientsParams| g.get::<burn_ndarray::NdArray<f32>, 2>(layer.weight.id).unwrap().into_data();
        get(&one).assert_approx_eq::<f32>(&get(&two), burn::tensor::Tolerance::absolute(1e-6));
    }
}
