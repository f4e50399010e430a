//! Averaged SGD (Polyak & Juditsky 1992; the notes weigh it against Adam; Merity et al. 2018
//! train their PTB language models with it). Training takes plain SGD steps (with
//! `train.momentum` if set); from step `t₀` = `train.asgd_start` on, the running mean of the
//! iterates is kept beside them:
//!
//! ```text
//! θ̄ₙ = θ̄ₙ₋₁ + (θₙ − θ̄ₙ₋₁) / (n − t₀ + 1)      (θ̄ₜ₀ = θₜ₀)
//! ```
//!
//! so that after step n, θ̄ is the plain mean of θₜ₀ … θₙ. Evaluation scores the mean (once it
//! exists), training continues from the iterate, checkpoints hold both (exact resume), and
//! the mean of the last step is written to `averaged/` at the end, where `eval`, `generate`
//! and `translate` look first.

use std::collections::HashMap;
use std::path::Path;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorPrimitive};

type Recorder = NamedMpkFileRecorder<FullPrecisionSettings>;

/// The running mean of the iterates from step `start` on.
#[derive(Clone, Debug)]
pub struct IterateMean<M> {
    /// The first step whose iterate is averaged (`train.asgd_start`, ≥ 1).
    pub start: u64,
    /// The mean, once step `start` has been taken.
    pub mean: Option<M>,
}

impl<M> IterateMean<M> {
    pub fn new(start: u64) -> Self {
        IterateMean { start: start.max(1), mean: None }
    }

    /// Takes the iterate `current` of step `step` into the mean.
    pub fn update<B: Backend>(&mut self, step: u64, current: &M)
    where
        M: Module<B>,
    {
        if step < self.start {
            return;
        }
        let n = (step - self.start + 1) as f64;
        self.mean = Some(match self.mean.take() {
            None => current.clone(),
            Some(mean) => {
                let mut values = Values::<B>::default();
                current.visit(&mut values);
                mean.map(&mut Toward { values: &values, weight: 1.0 / n })
            }
        });
    }

    /// Writes the mean (if any) to `path` (`.mpk` added).
    pub fn save<B: Backend>(&self, path: &Path) -> Result<(), String>
    where
        M: Module<B>,
    {
        match &self.mean {
            Some(mean) => mean.clone().save_file(path, &Recorder::new()).map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    /// Restores the mean saved by [`IterateMean::save`] at the end of step `step`, loading it
    /// into `template` (a model of the same architecture); a checkpoint taken before `start`
    /// has none.
    pub fn load<B: Backend>(mut self, path: &Path, step: u64, template: M, device: &B::Device) -> Result<Self, String>
    where
        M: Module<B>,
    {
        self.mean = if step >= self.start {
            Some(template.load_file(path, &Recorder::new(), device).map_err(|e| format!("the ASGD mean: {e}"))?)
        } else {
            None
        };
        Ok(self)
    }
}

/// Every float parameter's value, by parameter id.
#[derive(Default)]
struct Values<B: Backend> {
    tensors: HashMap<ParamId, TensorPrimitive<B>>,
}

impl<B: Backend> ModuleVisitor<B> for Values<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        self.tensors.insert(param.id, param.val().into_primitive());
    }
}

/// `θ̄ ← θ̄ + w (θ − θ̄)` for each parameter.
struct Toward<'a, B: Backend> {
    values: &'a Values<B>,
    weight: f64,
}

impl<B: Backend> ModuleMapper<B> for Toward<'_, B> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, mean, mapper) = param.consume();
        let mean = match self.values.tensors.get(&id) {
            Some(t) => {
                let current = Tensor::<B, D>::from_primitive(t.clone());
                mean.clone() + (current - mean).mul_scalar(self.weight)
            }
            None => mean,
        };
        Param::from_mapped_value(id, mean, mapper)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::{Linear, LinearConfig};
    use burn_ndarray::NdArray;

    type B = NdArray<f32>;

    fn weights(m: &Linear<B>) -> Vec<f32> {
        m.weight.val().into_data().to_vec().unwrap()
    }

    fn with_weight(m: &Linear<B>, value: f32) -> Linear<B> {
        let mut m = m.clone();
        let shape = m.weight.val().dims();
        m.weight = m.weight.map(|_| Tensor::<B, 2>::full(shape, value, &Default::default()));
        m
    }

    #[test]
    fn mean_is_the_plain_average_of_the_iterates_from_the_start_step_on() {
        let device = Default::default();
        let base = LinearConfig::new(3, 2).init::<B>(&device);
        let mut avg = IterateMean::new(3);
        // Steps 1 and 2 are before the start: ignored. Steps 3 to 6 carry 1, 2, 6, 3: mean 3
        // (and every running mean on the way differs from a wrong weight's or difference's).
        for (step, value) in [(1, 100.0), (2, 50.0), (3, 1.0), (4, 2.0), (5, 6.0), (6, 3.0)] {
            avg.update(step, &with_weight(&base, value));
        }
        let mean = avg.mean.expect("started");
        for w in weights(&mean) {
            assert!((w - 3.0).abs() < 1e-6, "{w}");
        }
    }

    #[test]
    fn no_mean_exists_before_the_start_step() {
        let base = LinearConfig::new(3, 2).init::<B>(&Default::default());
        let mut avg = IterateMean::new(5);
        avg.update(4, &base);
        assert!(avg.mean.is_none());
    }

    #[test]
    fn saved_mean_loads_back_identically() {
        let device = Default::default();
        let dir = tempfile::tempdir().unwrap();
        let base = LinearConfig::new(3, 2).init::<B>(&device);
        let mut avg = IterateMean::new(1);
        avg.update(1, &with_weight(&base, 0.5));
        avg.update(2, &with_weight(&base, 1.5));
        avg.save::<B>(&dir.path().join("mean")).unwrap();
        let template = LinearConfig::new(3, 2).init::<B>(&device);
        let back = IterateMean::new(1).load::<B>(&dir.path().join("mean"), 2, template, &device).unwrap();
        assert_eq!(weights(back.mean.as_ref().unwrap()), weights(avg.mean.as_ref().unwrap()));
        let missing = IterateMean::new(1).load::<B>(&dir.path().join("absent"), 2, base, &device);
        assert!(missing.is_err());
    }
}
