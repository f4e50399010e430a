//! `train.init_from`: the run a fine-tuning run starts from. Its weights are those `eval`
//! would use (`averaged/`, else `best/`, else the last checkpoint), its vocabulary codes the
//! new data (as HuggingFace fine-tuning keeps the pretrained tokenizer), and every parameter
//! shape must equal the new model's; keys that change no shape (dropout, `lora_*`, the
//! optimizer, the schedule, the dataset) may differ.

use std::path::PathBuf;

use crate::average::load_weights;
use crate::config::RunConfig;
use crate::error::TrainError;
use crate::finetune::copy_weights;
use crate::run::RunOptions;
use crate::task::Task;
use crate::trained::weights_dir;

/// The run named by `train.init_from`.
pub struct BaseRun {
    pub dir: PathBuf,
    pub config: RunConfig,
    /// The weights directory the new run starts from.
    pub weights: PathBuf,
}

impl BaseRun {
    /// The base run of `config`, if it names one; checks that it is a run with weights and the
    /// same kind of vocabulary.
    pub fn of(config: &RunConfig) -> Result<Option<BaseRun>, TrainError> {
        if config.train.init_from.is_empty() {
            return Ok(None);
        }
        let dir = PathBuf::from(&config.train.init_from);
        let fail = |message: String| TrainError::InitFrom { run: dir.clone(), message };
        let path = dir.join("config.toml");
        if !path.is_file() {
            return Err(fail("no config.toml there: not a run directory".into()));
        }
        let base = RunConfig::from_resolved(&path).map_err(|e| fail(e.to_string()))?;
        if base.data.tokenizer != config.data.tokenizer {
            return Err(fail(format!(
                "data.tokenizer = {:?} there and {:?} here: a fine-tuned run codes its text with its base run's vocabulary",
                base.data.tokenizer, config.data.tokenizer
            )));
        }
        let weights = weights_dir(&dir).map_err(|e| fail(e.to_string()))?;
        Ok(Some(BaseRun { dir, config: base, weights }))
    }
}

/// Where a run's vocabulary comes from instead of its data: a fine-tuned run's own directory
/// when it resumes (the base run may be gone by then), else its base run's (checked first).
pub fn vocabulary_dir(config: &RunConfig, opts: &RunOptions) -> Result<Option<PathBuf>, TrainError> {
    if config.train.init_from.is_empty() {
        return Ok(None);
    }
    if opts.resume {
        return Ok(Some(opts.run_dir.clone()));
    }
    Ok(BaseRun::of(config)?.map(|base| base.dir))
}

/// `model` (just built for this run) with `base`'s weights copied in, parameter by parameter;
/// the new model's LoRA adapters keep their fresh values.
pub fn start_from<B: burn::tensor::backend::AutodiffBackend, T: Task<B>>(
    task: &T,
    base: &BaseRun,
    config: &RunConfig,
    model: T::Model,
    device: &B::Device,
) -> Result<T::Model, TrainError> {
    let fail = |message: String| TrainError::InitFrom { run: base.dir.clone(), message };
    let source = task.init_like(&base.config.model, device).ok_or_else(|| {
        fail(format!("model.arch = {:?} there and {:?} here", base.config.model.arch, config.model.arch))
    })?;
    let source = load_weights(source, &base.weights, device)?;
    copy_weights(&source, model).map_err(|errors| {
        let keys = shape_keys_that_differ(&base.config, config);
        let keys = if keys.is_empty() { String::new() } else { format!("; [model] differs in {keys}") };
        fail(format!("{} ({} parameters differ{keys})", errors[0], errors.len()))
    })
}

/// The `[model]` keys (other than dropout and LoRA's) whose values differ, `key = there vs here`.
fn shape_keys_that_differ(base: &RunConfig, ours: &RunConfig) -> String {
    let table = |c: &RunConfig| toml::Value::try_from(&c.model).ok().and_then(|v| v.as_table().cloned());
    let (Some(theirs), Some(mine)) = (table(base), table(ours)) else { return String::new() };
    let free = |k: &str| k.contains("dropout") || k.starts_with("lora_");
    let differ: Vec<String> = theirs
        .iter()
        .filter(|(k, v)| !free(k) && mine.get(*k) != Some(v))
        .map(|(k, v)| format!("model.{k} = {v} vs {}", mine.get(k).map_or("nothing".into(), ToString::to_string)))
        .collect();
    differ.join(", ")
}
