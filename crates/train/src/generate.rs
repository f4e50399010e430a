//! `generate`: continue a prompt with a trained language model, sampling with temperature,
//! top-k and top-p from a seed (`attend_model::decode::sample`, key/value-cached; past
//! `block_size` the context window slides as nanoGPT's `generate` crops it).

use std::path::Path;

use attend_model::decode::{sample, SampleOptions};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

use crate::error::{PromptError, TrainError};
use crate::trained::load_lm;

/// How to sample.
#[derive(Clone, Debug)]
pub struct GenerateOptions {
    pub max_tokens: usize,
    pub temperature: f64,
    pub top_k: Option<usize>,
    pub top_p: Option<f64>,
    pub seed: u64,
}

/// The prompt followed by its sampled continuation, as text.
pub fn generate<B: Backend>(
    run: &Path,
    prompt: &str,
    options: &GenerateOptions,
    device: &B::Device,
) -> Result<String, TrainError> {
    let trained = load_lm::<B>(run, device)?;
    let ids = trained
        .codec
        .encode_prompt(prompt)
        .map_err(|s| TrainError::Prompt(PromptError::UnknownSymbol("--prompt", s)))?;
    if ids.is_empty() {
        return Err(TrainError::Prompt(PromptError::Empty("--prompt")));
    }
    let x = Tensor::<B, 2, Int>::from_data(
        TensorData::new(ids.iter().map(|&t| t as i64).collect::<Vec<_>>(), [1, ids.len()]),
        device,
    );
    let sampled = sample(
        &trained.model,
        trained.model.empty_cache(),
        x,
        &SampleOptions {
            max_new_tokens: options.max_tokens,
            temperature: options.temperature,
            top_k: options.top_k,
            top_p: options.top_p,
            seed: options.seed,
            eos: None,
        },
    );
    let mut all = ids;
    all.extend(&sampled[0]);
    Ok(trained.codec.decode(&all))
}
