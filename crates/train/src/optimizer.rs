//! The optimizer from `[train]`: Burn's Adam, AdamW or SGD with every hyperparameter set
//! from the configuration (never Burn's defaults: its Adam ε is 1e-5, its AdamW decay 1e-4,
//! its momentum dampening 0.1), plus what Burn lacks (docs/burn.md):
//!
//! - clipping by the **global** gradient norm ([`crate::clip`]), as PyTorch's `clip_grad_norm_`:
//!   `g ← g · min(1, c / (‖g‖₂ + 1e-6))` with `‖g‖₂` over all parameters together; AdamW
//!   multiplies the factor into its one pass over each parameter;
//! - AdamW **decay groups** as nanoGPT: decoupled decay `θ ← θ(1 − lr·λ)` on parameters of
//!   two or more dimensions (matrices, embeddings) only; biases and LayerNorm gains are exempt.
//!   [`GroupedAdamW`] is that AdamW, each parameter's update one pass
//!   ([`attend_model::fused::adamw`]) with Burn's `AdamWState` as its saved state; on the GPU
//!   backends all parameters' updates are one operation ([`crate::batched_adamw`]);
//! - Adam's update of each parameter one pass on the CPU ([`OnePassAdam`]), with Burn's bits
//!   and Burn's `AdamState` as its saved state;
//! - **averaged SGD** ([`crate::asgd`]): SGD steps plus the running mean of the iterates.

use attend_model::fused;
use burn::module::AutodiffModule;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{GradientsParams, Optimizer, Sgd, SgdConfig};
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder, Recorder, RecorderError};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;

use crate::asgd::IterateMean;
use crate::clip::scale_gradients;
use crate::config::{OptimizerKind, TrainConfig};
pub use crate::grouped_adamw::{GradScale, GroupedAdamW};
pub use crate::one_pass_adam::OnePassAdam;

/// One of the optimizers, chosen by `train.optimizer`.
pub enum Optim<B: AutodiffBackend, M: AutodiffModule<B>> {
    /// Burn's Adam, each update one pass on the CPU (its bits and its state).
    Adam(OptimizerAdaptor<OnePassAdam, M, B>),
    /// AdamW, and the cell through which a step hands it clipping's factor.
    AdamW(OptimizerAdaptor<GroupedAdamW<B::InnerBackend>, M, B>, GradScale<B::InnerBackend>),
    Sgd(OptimizerAdaptor<Sgd<B::InnerBackend>, M, B>),
    /// SGD steps, and the mean of the iterates from `train.asgd_start` on.
    Asgd(OptimizerAdaptor<Sgd<B::InnerBackend>, M, B>, IterateMean<M::InnerModule>),
}

impl<B: AutodiffBackend, M: AutodiffModule<B>> Optim<B, M> {
    pub fn new(c: &TrainConfig) -> Self {
        let decay = (c.weight_decay > 0.0).then(|| WeightDecayConfig::new(c.weight_decay as f32));
        match c.optimizer {
            OptimizerKind::Adam => Optim::Adam(OptimizerAdaptor::from(OnePassAdam::new(
                c.beta1 as f32,
                c.beta2 as f32,
                c.eps as f32,
                decay.as_ref(),
            ))),
            OptimizerKind::Adamw => {
                let grad_scale = GradScale::default();
                let adamw = GroupedAdamW {
                    beta_1: c.beta1 as f32,
                    beta_2: c.beta2 as f32,
                    epsilon: c.eps as f32,
                    weight_decay: c.weight_decay,
                    grad_scale: grad_scale.clone(),
                };
                Optim::AdamW(OptimizerAdaptor::from(adamw), grad_scale)
            }
            OptimizerKind::Sgd => Optim::Sgd(sgd(c, decay)),
            OptimizerKind::Asgd => Optim::Asgd(sgd(c, decay), IterateMean::new(c.asgd_start)),
        }
    }

    /// Update number `step` with learning rate `lr`, the gradients first multiplied by
    /// `factor` (`[1]`, on the device: clipping's and the loss scale's, [`crate::clip`]) where
    /// there is one. AdamW multiplies it into its update of each parameter; the others take the
    /// gradients scaled first.
    pub fn step(
        &mut self,
        step: u64,
        lr: f64,
        module: M,
        mut grads: GradientsParams,
        factor: Option<Tensor<B::InnerBackend, 1>>,
    ) -> M {
        if let (Some(factor), false) = (&factor, matches!(self, Optim::AdamW(..))) {
            scale_gradients(&module, &mut grads, factor.clone());
        }
        match self {
            Optim::Adam(o) => o.step(lr, module, grads),
            Optim::AdamW(o, _) if fused::adamw_many::batches_updates::<B::InnerBackend>() => {
                crate::batched_adamw::step(o, lr, module, grads, factor)
            }
            Optim::AdamW(o, grad_scale) => {
                grad_scale.set(factor);
                let module = o.step(lr, module, grads);
                grad_scale.set(None);
                module
            }
            Optim::Sgd(o) => o.step(lr, module, grads),
            Optim::Asgd(o, mean) => {
                let module = o.step(lr, module, grads);
                mean.update(step, &module.valid());
                module
            }
        }
    }

    /// The weights to evaluate: the ASGD mean once it exists, else the model's own.
    pub fn eval_weights(&self, model: &M) -> M::InnerModule {
        match self {
            Optim::Asgd(_, IterateMean { mean: Some(mean), .. }) => mean.clone(),
            _ => model.valid(),
        }
    }

    /// The ASGD mean and the first step it covers, if the optimizer keeps one and it exists.
    pub fn iterate_mean(&self) -> Option<(&M::InnerModule, u64)> {
        match self {
            Optim::Asgd(_, IterateMean { mean: Some(mean), start }) => Some((mean, *start)),
            _ => None,
        }
    }

    /// Saves the optimizer state (moments, step counts) to `path` (`.mpk` added).
    pub fn save(&self, path: &std::path::Path) -> Result<(), RecorderError> {
        let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
        match self {
            Optim::Adam(o) => Recorder::<B>::record(&recorder, o.to_record(), path.into()),
            Optim::AdamW(o, _) => Recorder::<B>::record(&recorder, o.to_record(), path.into()),
            Optim::Sgd(o) => Recorder::<B>::record(&recorder, o.to_record(), path.into()),
            Optim::Asgd(o, mean) => {
                Recorder::<B>::record(&recorder, o.to_record(), path.into())?;
                mean.save::<B::InnerBackend>(&average_path(path)).map_err(RecorderError::Unknown)
            }
        }
    }

    /// Loads the state saved by [`Optim::save`] at the end of step `step`; `model` (the
    /// restored model) is the template the ASGD mean is loaded into.
    pub fn load(self, path: &std::path::Path, step: u64, model: &M, device: &B::Device) -> Result<Self, RecorderError> {
        let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
        Ok(match self {
            Optim::Adam(o) => Optim::Adam(o.load_record(Recorder::<B>::load(&recorder, path.into(), device)?)),
            Optim::AdamW(o, grad_scale) => {
                Optim::AdamW(o.load_record(Recorder::<B>::load(&recorder, path.into(), device)?), grad_scale)
            }
            Optim::Sgd(o) => Optim::Sgd(o.load_record(Recorder::<B>::load(&recorder, path.into(), device)?)),
            Optim::Asgd(o, mean) => {
                let o = o.load_record(Recorder::<B>::load(&recorder, path.into(), device)?);
                let mean = mean
                    .load::<B::InnerBackend>(&average_path(path), step, model.valid(), device)
                    .map_err(RecorderError::Unknown)?;
                Optim::Asgd(o, mean)
            }
        })
    }
}

/// Where the ASGD mean is saved beside the optimizer state at `path`.
fn average_path(path: &std::path::Path) -> std::path::PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push("-mean");
    path.with_file_name(name)
}

fn sgd<B: AutodiffBackend, M: AutodiffModule<B>>(
    c: &TrainConfig,
    decay: Option<WeightDecayConfig>,
) -> OptimizerAdaptor<Sgd<B::InnerBackend>, M, B> {
    SgdConfig::new()
        .with_weight_decay(decay)
        .with_momentum((c.momentum > 0.0).then_some(MomentumConfig {
            momentum: c.momentum,
            dampening: 0.0,
            nesterov: false,
        }))
        .init()
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::module::Param;
    use burn::nn::{Linear, LinearConfig};

    type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;

    /// Step `step` of `optim` on the loss ½(layer(2))².
    fn descend(layer: Linear<B>, optim: &mut Optim<B, Linear<B>>, step: u64, lr: f64) -> Linear<B> {
        let x = Tensor::<B, 2>::from_data([[2.0f32]], &layer.weight.device());
        let loss = layer.forward(x).powi_scalar(2).sum().div_scalar(2.0);
        let grads = GradientsParams::from_grads(loss.backward(), &layer);
        optim.step(step, lr, layer, grads, None)
    }

    /// Two steps of `optimizer` on one weight w₀ = 0.5 with loss ½(2w)², whose gradient is 4w.
    fn two_steps(sets: &[&str]) -> [f32; 2] {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).chain(["train.weight_decay=0".into()]).collect();
        let config = crate::config::RunConfig::load(None, &sets).unwrap();
        let device = Default::default();
        let mut layer = LinearConfig::new(1, 1).with_bias(false).init::<B>(&device);
        layer.weight = Param::from_tensor(Tensor::from_data([[0.5f32]], &device));
        let mut optim = Optim::new(&config.train);
        let mut out = [0.0; 2];
        for step in 1..=2 {
            layer = descend(layer, &mut optim, step, config.train.lr);
            out[step as usize - 1] = layer.weight.val().into_scalar();
        }
        out
    }

    /// Adam (β₁ 0.9, β₂ 0.999, ε 1e-8, lr 0.1), by hand: g₁ = 2, m₁ = 0.2, v₁ = 0.004, bias-corrected
    /// 2 and 4, so w₁ = 0.5 − 0.1·2/(2 + ε) ≈ 0.4; g₂ = 1.6, m₂ = 0.34, v₂ = 0.006556, corrected
    /// 1.789474 and 3.279640, so w₂ = 0.4 − 0.1·1.789474/1.810978 = 0.3011874.
    #[test]
    fn adam_takes_the_hand_derived_bias_corrected_steps() {
        let sets = ["train.optimizer=adam", "train.lr=0.1", "train.beta1=0.9", "train.beta2=0.999", "train.eps=1e-8"];
        let [w1, w2] = two_steps(&sets);
        assert!((w1 - 0.4).abs() < 1e-6 && (w2 - 0.301_187_4).abs() < 1e-6, "{w1} {w2}");
    }

    /// Two AdamW steps (lr 0.1, β₁ 0.9, β₂ 0.999, ε 1e-8, decay λ 0.1) on y = 2w + b with
    /// w₀ = b₀ = 0.5 and loss ½y², by hand (PyTorch's order: decay `θ(1 − lr·λ)`, then the
    /// bias-corrected step): y₁ = 1.5, g_w = 3, g_b = 1.5; the first step moves each by lr, so
    /// w₁ = 0.5·0.99 − 0.1 = 0.395 and b₁ = 0.4 (biases are not decayed). y₂ = 1.19, g_w = 2.38,
    /// g_b = 1.19; m_w = 0.508, v_w = 0.0146554, corrected 2.673684 and 7.331366, so
    /// w₂ = 0.395·0.99 − 0.1·2.673684/2.707650 = 0.2923044; m_b = 0.254, v_b = 0.00366385,
    /// corrected 1.336842 and 1.832841, so b₂ = 0.4 − 0.1·0.987455 = 0.3012544.
    #[test]
    fn adamw_decays_matrices_but_not_biases_and_takes_the_hand_derived_steps() {
        let sets = ["train.optimizer=adamw", "train.lr=0.1", "train.beta1=0.9", "train.beta2=0.999", "train.eps=1e-8"];
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).chain(["train.weight_decay=0.1".into()]).collect();
        let config = crate::config::RunConfig::load(None, &sets).unwrap();
        let device = Default::default();
        let mut layer = LinearConfig::new(1, 1).init::<B>(&device);
        layer.weight = Param::from_tensor(Tensor::from_data([[0.5f32]], &device));
        layer.bias = Some(Param::from_tensor(Tensor::from_data([0.5f32], &device)));
        let mut optim = Optim::new(&config.train);
        let mut got = Vec::new();
        for step in 1..=2 {
            layer = descend(layer, &mut optim, step, config.train.lr);
            let bias: f32 = layer.bias.as_ref().unwrap().val().into_scalar();
            got.push((layer.weight.val().into_scalar(), bias));
        }
        let want = [(0.395f32, 0.4f32), (0.292_304_4, 0.301_254_4)];
        for ((w, b), (ww, wb)) in got.iter().zip(want) {
            assert!((w - ww).abs() < 1e-6 && (b - wb).abs() < 1e-6, "{got:?} vs {want:?}");
        }
    }

    /// ASGD (lr 0.1, no momentum, averaging from step 2) on w₀ = 0.5 with gradient 4w: the
    /// iterates are 0.3, 0.18, 0.108; evaluation takes the model until step 2, then the mean of
    /// the iterates from step 2 on (0.144 after step 3), which is saved beside the optimizer
    /// state (`<path>-mean.mpk`) and loaded back.
    #[test]
    fn asgd_evaluates_the_mean_of_the_iterates_from_its_start_and_saves_it_beside_the_state() {
        let sets = ["train.optimizer=asgd", "train.lr=0.1", "train.momentum=0", "train.asgd_start=2"];
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).chain(["train.weight_decay=0".into()]).collect();
        let config = crate::config::RunConfig::load(None, &sets).unwrap();
        let device = Default::default();
        let mut layer = LinearConfig::new(1, 1).with_bias(false).init::<B>(&device);
        layer.weight = Param::from_tensor(Tensor::from_data([[0.5f32]], &device));
        let mut optim = Optim::new(&config.train);
        let value = |m: &Linear<burn_ndarray::NdArray<f32>>| m.weight.val().into_scalar();
        for step in 1..=3 {
            layer = descend(layer, &mut optim, step, config.train.lr);
            if step == 1 {
                assert!(optim.iterate_mean().is_none());
                assert!((value(&optim.eval_weights(&layer)) - 0.3).abs() < 1e-6, "the model itself");
            }
        }
        assert!((value(&layer.valid()) - 0.108).abs() < 1e-6, "training goes on from the iterate");
        assert!((value(&optim.eval_weights(&layer)) - 0.144).abs() < 1e-6, "the mean of 0.18 and 0.108");
        let (mean, start) = optim.iterate_mean().expect("a mean from step 2 on");
        assert!((value(mean) - 0.144).abs() < 1e-6 && start == 2);
        let dir = tempfile::tempdir().unwrap();
        optim.save(&dir.path().join("optimizer")).unwrap();
        assert!(dir.path().join("optimizer.mpk").is_file() && dir.path().join("optimizer-mean.mpk").is_file());
        let back =
            Optim::<B, Linear<B>>::new(&config.train).load(&dir.path().join("optimizer"), 3, &layer, &device).unwrap();
        assert!((value(&back.eval_weights(&layer)) - 0.144).abs() < 1e-6, "the mean loads back");
    }

    /// `Optim::step` with clipping's factor takes the same step, bit for bit, as clipping the
    /// gradients first and stepping without: AdamW multiplies the factor into its update, the
    /// others scale the gradients. The norm is small enough that clipping changes the step.
    #[test]
    fn stepping_with_a_clip_norm_equals_clipping_first_bit_for_bit_for_every_optimizer() {
        let device = Default::default();
        for optimizer in ["adamw", "adam", "sgd"] {
            let sets = [format!("train.optimizer={optimizer}"), "train.lr=0.1".into(), "train.weight_decay=0.1".into()];
            let config = crate::config::RunConfig::load(None, &sets).unwrap();
            // Weights from data: a freshly initialized layer's clones would each draw their own.
            let mut start = LinearConfig::new(3, 2).init::<B>(&device);
            start.weight = Param::from_tensor(Tensor::from_data([[0.5f32, -0.2], [0.1, 0.3], [-0.4, 0.25]], &device));
            start.bias = Some(Param::from_tensor(Tensor::from_data([0.05f32, -0.1], &device)));
            let grads_of = |layer: &Linear<B>| {
                let x = Tensor::<B, 2>::from_data([[2.0f32, -1.0, 0.5], [0.3, 0.7, -2.0]], &device);
                GradientsParams::from_grads(layer.forward(x).powi_scalar(2).sum().backward(), layer)
            };
            let weights = |layer: &Linear<B>| -> Vec<f32> {
                let bias = layer.bias.as_ref().unwrap().val().into_data().to_vec::<f32>().unwrap();
                layer.weight.val().into_data().to_vec::<f32>().unwrap().into_iter().chain(bias).collect()
            };
            let (mut inside, mut first) = (start.clone(), start.clone());
            let (mut optim_inside, mut optim_first) = (Optim::new(&config.train), Optim::new(&config.train));
            let mut unclipped = (start, Optim::new(&config.train));
            for step in 1..=3 {
                let grads = grads_of(&inside);
                let factor = crate::clip::clip_factor(&inside, &grads, 0.01);
                inside = optim_inside.step(step, 0.1, inside.clone(), grads, factor);
                let mut grads = grads_of(&first);
                crate::clip::clip_global_norm(&first, &mut grads, 0.01);
                first = optim_first.step(step, 0.1, first.clone(), grads, None);
                unclipped.0 = unclipped.1.step(step, 0.1, unclipped.0.clone(), grads_of(&unclipped.0), None);
            }
            assert_eq!(weights(&inside), weights(&first), "{optimizer}");
            assert_ne!(weights(&inside), weights(&unclipped.0), "{optimizer}: clipping changed nothing");
        }
    }

    /// SGD with momentum 0.9 (PyTorch's: no dampening), lr 0.1, by hand: g₁ = 2, buffer 2,
    /// w₁ = 0.3; g₂ = 1.2, buffer 0.9·2 + 1.2 = 3, w₂ = 0. Without momentum w₂ = 0.3 − 0.12.
    #[test]
    fn sgd_with_and_without_momentum_takes_the_hand_derived_steps() {
        let [w1, w2] = two_steps(&["train.optimizer=sgd", "train.lr=0.1", "train.momentum=0.9"]);
        assert!((w1 - 0.3).abs() < 1e-6 && w2.abs() < 1e-6, "{w1} {w2}");
        let [w1, w2] = two_steps(&["train.optimizer=sgd", "train.lr=0.1", "train.momentum=0"]);
        assert!((w1 - 0.3).abs() < 1e-6 && (w2 - 0.18).abs() < 1e-6, "{w1} {w2}");
    }
}
