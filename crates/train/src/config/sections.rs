//! The `[data]`, `[train]`, `[eval]` and `[decode]` sections (`[model]` is
//! `attend_model::ModelConfig`). Field docs give meaning, default and source; the defaults
//! that apply are those of `configs/default.toml`, which spells out every key.

use serde::{Deserialize, Serialize};

/// How text becomes token ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenizerKind {
    /// One token per character, the vocabulary being the sorted characters of the data
    /// (nanoGPT's `shakespeare_char`).
    Char,
    /// Whitespace words with a fixed vocabulary, `<unk>` and one `<eos>` per line (PTB).
    Word,
    /// Byte-level BPE trained on the training split with `attend-bpe` (Multi30k: one joint
    /// source-target vocabulary).
    Bpe,
}

/// `[data]`: what to train on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataConfig {
    /// `synthetic-lm`, `synthetic-mt`, `tiny-shakespeare`, `ptb`, `multi30k`, or a path to a
    /// text file (LM; split 90/10 into train/valid as nanoGPT does).
    pub dataset: String,
    /// Source language of a translation dataset (`de` for Multi30k de→en); empty for LMs.
    pub source: String,
    /// Target language of a translation dataset; empty for LMs.
    pub target: String,
    /// `char`, `word` or `bpe`.
    pub tokenizer: TokenizerKind,
    /// Vocabulary size: the BPE size to train, or the cap on a word vocabulary (most frequent
    /// words kept); 0 takes every symbol the training split has.
    pub vocab_size: usize,
    /// Seed of the generated datasets (`synthetic-*`); independent of `train.seed`.
    pub seed: u64,
    /// Generated datasets: number of distinct words of the source.
    pub synthetic_vocab: usize,
    /// `synthetic-lm`: words of context that determine the next word (the Markov order).
    pub synthetic_order: usize,
    /// `synthetic-lm`: words each context prefers; the rest share `synthetic_epsilon`.
    pub synthetic_branching: usize,
    /// `synthetic-lm`: uniform mixing weight ε of the source.
    pub synthetic_epsilon: f64,
    /// Generated datasets: size of the training split (words for `synthetic-lm`, sentence
    /// pairs for `synthetic-mt`); valid and test get a tenth each.
    pub synthetic_size: usize,
}

/// The optimizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    /// Adam (Kingma & Ba 2015); weight decay added to the gradient (L2).
    Adam,
    /// AdamW (Loshchilov & Hutter 2019): decoupled weight decay (nanoGPT).
    Adamw,
    /// SGD with momentum.
    Sgd,
    /// Averaged SGD: SGD steps, evaluated (and finally saved) as the mean of the iterates
    /// from `asgd_start` on (Polyak & Juditsky 1992).
    Asgd,
}

/// The learning-rate schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleKind {
    /// The paper's: `lr · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)`; `lr` is a
    /// multiplier (1.0 in the paper).
    Noam,
    /// Linear warmup, then cosine decay to `min_lr` at `decay_steps` (nanoGPT).
    Cosine,
    /// Linear warmup, then constant `lr`.
    Constant,
}

/// What a language model learns to predict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Objective {
    /// The next token (causal LM; `model.arch = "lm"`, `"notes"`, and translation).
    Lm,
    /// Masked tokens from both sides (BERT; `model.arch = "encoder"`).
    Mlm,
}

/// The floating-point type a training step computes in (`train.precision`); the master
/// weights and the optimizer state are f32 in every case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Everything in f32.
    F32,
    /// Forward and backward in f16 with dynamic loss scaling (GPU backends whose device has f16).
    F16,
    /// Forward and backward in bf16 with dynamic loss scaling (backends with bf16: CUDA).
    Bf16,
}

/// How language-model batches are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sampling {
    /// Blocks at random offsets, drawn afresh for every step (nanoGPT's `get_batch`).
    Random,
    /// `batch_size` contiguous streams read in order, block after block (the PTB scheme).
    Sequential,
}

/// `[train]`: the optimization.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Seed of initialization, batch order and dropout.
    pub seed: u64,
    /// `lm` (next token) or `mlm` (masked tokens; `model.arch = "encoder"`).
    pub objective: Objective,
    /// MLM: probability that a token is chosen for prediction (BERT: 0.15).
    pub mask_prob: f64,
    /// MLM: probability that a chosen token's input becomes `[MASK]` (BERT: 0.8).
    pub mask_with_mask: f64,
    /// MLM: probability that a chosen token's input becomes a random token (BERT: 0.1); the
    /// rest of the chosen tokens stay as they are.
    pub mask_with_random: f64,
    /// Sequences per batch (LM blocks, or sentence pairs when `batch_tokens` = 0).
    pub batch_size: usize,
    /// Translation: target tokens per batch, padding included (the paper: ~25,000 source +
    /// 25,000 target tokens); 0 batches by `batch_size`.
    pub batch_tokens: usize,
    /// Language models: `random` or `sequential`.
    pub sampling: Sampling,
    /// Optimizer steps to take.
    pub max_steps: u64,
    /// Passes over the training data after which to stop; 0 means no limit.
    pub max_epochs: u64,
    /// `adam`, `adamw`, `sgd` or `asgd`.
    pub optimizer: OptimizerKind,
    /// Peak learning rate (a multiplier for `noam`).
    pub lr: f64,
    /// Adam β₁ (paper: 0.9).
    pub beta1: f64,
    /// Adam β₂ (paper: 0.98; nanoGPT's small runs: 0.99).
    pub beta2: f64,
    /// Adam ε (paper: 1e-9; PyTorch: 1e-8; Burn's default 1e-5 is never used).
    pub eps: f64,
    /// Weight decay (AdamW: decoupled; nanoGPT: 0.1).
    pub weight_decay: f64,
    /// SGD momentum (`sgd` and `asgd`).
    pub momentum: f64,
    /// `asgd`: the first step whose weights enter the mean (counted from 1).
    pub asgd_start: u64,
    /// `noam`, `cosine` or `constant`.
    pub schedule: ScheduleKind,
    /// Warmup steps (paper: 4000).
    pub warmup: u64,
    /// Cosine: the final learning rate.
    pub min_lr: f64,
    /// Cosine: the step at which `min_lr` is reached; 0 means `max_steps`.
    pub decay_steps: u64,
    /// Label smoothing ε_ls (paper: 0.1).
    pub label_smoothing: f64,
    /// Clip the global gradient norm to this (as PyTorch's `clip_grad_norm_`); 0 turns it off.
    pub clip_norm: f64,
    /// Batches whose gradients are summed before one optimizer step.
    pub grad_accum: usize,
    /// `f32`, or `f16`/`bf16`: steps computed in half precision on f32 master weights, with
    /// dynamic loss scaling (`precision.rs`).
    pub precision: Precision,
    /// Read the training loss back from the device and log it every this many steps (and at
    /// the first step of each run or resume, and at evaluation, checkpoint and last steps); the
    /// non-finite-loss check runs then too.
    /// 1 logs every step; a GPU run reads less often to keep the device busy.
    pub log_every: u64,
    /// Evaluate on the validation split every this many steps (and at the end).
    pub eval_every: u64,
    /// Batches per evaluation; 0 evaluates the whole split. Language models only: a translation
    /// run scores its whole validation split, as its BLEU needs.
    pub eval_batches: usize,
    /// Save a checkpoint every this many steps (and at the end).
    pub checkpoint_every: u64,
    /// Checkpoints kept besides `best/` (default 3; docs/architecture.md, The run directory).
    pub keep_checkpoints: usize,
    /// Stop after this many evaluations without improvement; 0 turns early stopping off.
    pub patience: u64,
    /// Average the last this many checkpoints into `averaged/` at the end (paper: 5); 0: no.
    pub average_last: usize,
    /// Fine-tuning: start from the weights of this run directory (those `eval` uses:
    /// `averaged/`, else `best/`, else its last checkpoint) and with its vocabulary; its
    /// parameter shapes must equal this model's. Empty: a fresh initialization.
    pub init_from: String,
    /// Parameter groups kept fixed: parameter paths or their prefixes (`embedding`,
    /// `layers.0`, `layers.1.feed_forward`).
    pub freeze: Vec<String>,
}

/// `[eval]`: evaluation and the notes' dynamic evaluation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalConfig {
    /// Sequences per evaluation batch.
    pub batch_size: usize,
    /// Dynamic evaluation: tokens per segment scored before each update (default 64), at most
    /// `model.block_size` (a longer value takes the block: the model sees no more at once).
    pub dynamic_segment: usize,
    /// Dynamic evaluation: step size η of `θ_l ← θ_l − η∇ℓ(θ_l) + λ(θ_g − θ_l)` (1e-4).
    pub dynamic_lr: f64,
    /// Dynamic evaluation: decay λ back to the global parameters θ_g (0.02).
    pub dynamic_decay: f64,
}

/// `[decode]`: generation and translation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecodeConfig {
    /// Beam width (paper: 4); 1 is greedy.
    pub beam: usize,
    /// GNMT length penalty α: hypotheses ranked by `log P / ((5 + |Y|) / 6)^α` (paper: 0.6).
    pub lenpen: f64,
    /// Translation length limit `a · source_len + b`: the `a` (fairseq's `max_len_a`).
    pub max_len_a: f64,
    /// The `b` of the length limit.
    pub max_len_b: usize,
    /// Sampling temperature; 0 is greedy.
    pub temperature: f64,
    /// Sample only among the k most likely tokens; 0 turns it off.
    pub top_k: usize,
    /// Nucleus sampling: the smallest set of tokens with this much probability; 1 turns it off.
    pub top_p: f64,
    /// Tokens to generate.
    pub max_tokens: usize,
    /// Sampling seed.
    pub seed: u64,
}
