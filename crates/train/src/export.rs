//! `export`: a run's weights as safetensors. A decoder-only LM that GPT-2 can express
//! (pre-norm, learned positions, unscaled embeddings, the `1/√d_k` scale, `d_k = d_v =
//! d_model/h`) becomes a directory HuggingFace `transformers` loads as it is
//! (`GPT2LMHeadModel.from_pretrained`): `config.json`, `model.safetensors` in GPT-2's names
//! and layouts, and `tokenizer.json`. Every other model is written with our own parameter
//! paths (`name_map.json` says what each is), and the reason it is not GPT-2-shaped is
//! returned.
//!
//! GPT-2's layout (`transformers/models/gpt2/modeling_gpt2.py`): `transformer.wte.weight`
//! `[V, d]`, `transformer.wpe.weight` `[n_positions, d]`; per block `i`:
//! `transformer.h.i.ln_1.{weight,bias}`, `attn.c_attn.{weight,bias}` (`Conv1D`, `[d, 3d]`: the
//! query, key and value maps side by side, input-major as Burn's `Linear`),
//! `attn.c_proj`, `ln_2`, `mlp.c_fc` (`[d, d_ff]`), `mlp.c_proj`; then
//! `transformer.ln_f`, and `lm_head.weight` `[V, d]` only when untied. Biases the model does
//! not have are written as zeros; LoRA adapters are folded into their weights.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use attend_model::{Activation, Arch, DecoderOnly, LanguageModel, NormPosition, Positions};
use burn::module::Param;
use burn::nn::Linear;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use safetensors::tensor::{Dtype, TensorView};
use serde_json::json;

use crate::average::load_weights;
use crate::config::RunConfig;
use crate::data::codec::LmCodec;
use crate::data::mt_dataset::MtTokenizer;
use crate::error::{io_err, TrainError};
use crate::finetune::named_values;
use crate::trained::load_lm;

/// A tensor on the host: its shape and values.
pub type HostTensor = (Vec<usize>, Vec<f32>);

/// What `export` wrote.
#[derive(Debug)]
pub struct Exported {
    pub files: Vec<PathBuf>,
    /// Why the model was written with our own names instead of GPT-2's (None: GPT-2).
    pub not_gpt2: Option<String>,
}

/// Why `config` is not GPT-2-shaped, or None if it is.
pub fn why_not_gpt2(config: &RunConfig) -> Option<String> {
    let m = &config.model;
    let reasons = [
        (
            m.arch != Arch::Lm,
            format!("model.arch = {} (GPT-2 is a decoder-only LM, arch = \"lm\")", toml_value(&m.arch)),
        ),
        (m.norm != NormPosition::Pre, "model.norm = \"post\" (GPT-2 is pre-norm)".to_string()),
        (
            m.positions != Positions::Learned,
            format!("model.positions = {} (GPT-2 learns them)", toml_value(&m.positions)),
        ),
        (m.scale_embeddings, "model.scale_embeddings = true (GPT-2 does not scale)".to_string()),
        (!m.attention_scale, "model.attention_scale = false".to_string()),
        (m.d_k() != m.d_head() || m.d_v() != m.d_head(), "model.d_k / d_v differ from d_model / n_heads".to_string()),
    ];
    let why: Vec<String> = reasons.into_iter().filter(|(not, _)| *not).map(|(_, why)| why).collect();
    (!why.is_empty()).then(|| why.join("; "))
}

/// A configuration value as it is written in TOML (`"encoder"`).
fn toml_value<T: serde::Serialize>(value: &T) -> String {
    toml::Value::try_from(value).map_or_else(|_| "?".into(), |v| v.to_string())
}

/// Exports the run in `run` into `out` (created if needed).
pub fn export<B: Backend>(run: &Path, out: &Path, device: &B::Device) -> Result<Exported, TrainError> {
    let config = RunConfig::from_resolved(&run.join("config.toml"))?;
    crate::error::fresh_directory(out, "--out")?;
    std::fs::create_dir_all(out).map_err(io_err(out))?;
    let not_gpt2 = why_not_gpt2(&config);
    let files = match &not_gpt2 {
        None => {
            let trained = load_lm::<B>(run, device)?;
            let DecoderOnly::Gpt(model) = &trained.model else {
                return Err(TrainError::NotLm);
            };
            gpt2(model, &config, &trained.codec, out)?
        }
        Some(_) => own_names::<B>(run, &config, out, device)?,
    };
    Ok(Exported { files, not_gpt2 })
}

/// `[shape], values` of a tensor.
fn host<B: Backend, const D: usize>(t: Tensor<B, D>) -> HostTensor {
    (t.dims().to_vec(), t.into_data().convert::<f32>().to_vec::<f32>().unwrap_or_default())
}

/// A linear map's `[d_in, d_out]` weight with its adapter folded in, and its bias (zeros if none).
fn weight_and_bias<B: Backend>(
    layer: &Linear<B>,
    adapter: Option<&attend_model::lora::Lora<B>>,
) -> (Tensor<B, 2>, Tensor<B, 1>) {
    let w = layer.weight.val();
    let w = adapter.map_or(w.clone(), |a| a.merged(w));
    let d_out = w.dims()[1];
    let b = layer.bias.as_ref().map_or_else(|| Tensor::zeros([d_out], &w.device()), Param::val);
    (w, b)
}

fn gpt2<B: Backend>(
    model: &LanguageModel<B>,
    config: &RunConfig,
    codec: &LmCodec,
    out: &Path,
) -> Result<Vec<PathBuf>, TrainError> {
    let m = &config.model;
    let mut tensors: Vec<(String, HostTensor)> = Vec::new();
    let mut put = |name: String, value: HostTensor| tensors.push((name, value));
    let norm = |n: &attend_model::norm::LayerNorm<B>| {
        let gamma = n.gamma.val();
        let beta = n.beta.as_ref().map_or_else(|| gamma.zeros_like(), Param::val);
        (host(gamma), host(beta))
    };
    put("transformer.wte.weight".into(), host(model.embedding.weight.val()));
    let positions = model.positions.learned.as_ref().ok_or(TrainError::NotLm)?;
    put("transformer.wpe.weight".into(), host(positions.val()));
    for (i, layer) in model.layers.iter().enumerate() {
        let h = format!("transformer.h.{i}");
        let (g, b) = norm(&layer.norm_attention);
        put(format!("{h}.ln_1.weight"), g);
        put(format!("{h}.ln_1.bias"), b);
        let attention = &layer.self_attention;
        let adapters = attention.adapters.as_ref();
        let (wq, bq) = weight_and_bias(&attention.query, adapters.and_then(|a| a.query.as_ref()));
        let (wk, bk) = weight_and_bias(&attention.key, adapters.and_then(|a| a.key.as_ref()));
        let (wv, bv) = weight_and_bias(&attention.value, adapters.and_then(|a| a.value.as_ref()));
        put(format!("{h}.attn.c_attn.weight"), host(Tensor::cat(vec![wq, wk, wv], 1)));
        put(format!("{h}.attn.c_attn.bias"), host(Tensor::cat(vec![bq, bk, bv], 0)));
        let (wo, bo) = weight_and_bias(&attention.output, adapters.and_then(|a| a.output.as_ref()));
        put(format!("{h}.attn.c_proj.weight"), host(wo));
        put(format!("{h}.attn.c_proj.bias"), host(bo));
        let (g, b) = norm(&layer.norm_feed_forward);
        put(format!("{h}.ln_2.weight"), g);
        put(format!("{h}.ln_2.bias"), b);
        let (w1, b1) = weight_and_bias(&layer.feed_forward.w_1, None);
        put(format!("{h}.mlp.c_fc.weight"), host(w1));
        put(format!("{h}.mlp.c_fc.bias"), host(b1));
        let (w2, b2) = weight_and_bias(&layer.feed_forward.w_2, None);
        put(format!("{h}.mlp.c_proj.weight"), host(w2));
        put(format!("{h}.mlp.c_proj.bias"), host(b2));
    }
    let final_norm = model.final_norm.as_ref().ok_or(TrainError::NotLm)?;
    let (g, b) = norm(final_norm);
    put("transformer.ln_f.weight".into(), g);
    put("transformer.ln_f.bias".into(), b);
    if let Some(output) = &model.output {
        // Ours is `[d, V]` (input-major); `lm_head` is a `nn.Linear`, `[V, d]`.
        put("lm_head.weight".into(), host(output.weight.val().transpose()));
    }
    let weights = out.join("model.safetensors");
    write_safetensors(&tensors, Some(HashMap::from([("format".to_string(), "pt".to_string())])), &weights)?;
    let gpt2_config = json!({
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": codec.len(),
        "n_positions": m.block_size,
        "n_ctx": m.block_size,
        "n_embd": m.d_model,
        "n_layer": m.n_layers,
        "n_head": m.n_heads,
        "n_inner": m.d_ff,
        "activation_function": match m.activation {
            Activation::Gelu => "gelu",
            Activation::GeluTanh => "gelu_new",
            Activation::Relu => "relu",
        },
        "layer_norm_epsilon": m.norm_eps,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
        "scale_attn_weights": true,
        "tie_word_embeddings": m.tie_embeddings,
        "bos_token_id": null, "eos_token_id": null,
    });
    let config_path = out.join("config.json");
    let text = serde_json::to_string_pretty(&gpt2_config).expect("JSON");
    crate::whole_file::write_whole(&config_path, text).map_err(io_err(&config_path))?;
    let mut files = vec![config_path, weights];
    files.extend(write_tokenizer(codec, out)?);
    Ok(files)
}

/// Any other model: every parameter under its own path, and `name_map.json` (path → shape).
fn own_names<B: Backend>(
    run: &Path,
    config: &RunConfig,
    out: &Path,
    device: &B::Device,
) -> Result<Vec<PathBuf>, TrainError> {
    let values = load_any::<B>(run, config, device)?;
    let tensors: Vec<(String, HostTensor)> = values
        .into_iter()
        .map(|(path, data)| {
            let shape = data.shape.to_vec();
            (path, (shape, data.convert::<f32>().to_vec::<f32>().unwrap_or_default()))
        })
        .collect();
    let map: serde_json::Map<String, serde_json::Value> =
        tensors.iter().map(|(name, (shape, _))| (name.clone(), json!(shape))).collect();
    let weights = out.join("model.safetensors");
    write_safetensors(&tensors, Some(HashMap::from([("format".to_string(), "attend".to_string())])), &weights)?;
    let map_path = out.join("name_map.json");
    crate::whole_file::write_whole(&map_path, serde_json::to_string_pretty(&map).expect("JSON"))
        .map_err(io_err(&map_path))?;
    Ok(vec![weights, map_path])
}

fn write_safetensors(
    tensors: &[(String, HostTensor)],
    metadata: Option<HashMap<String, String>>,
    path: &Path,
) -> Result<(), TrainError> {
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(name, (shape, values))| {
            (name.clone(), shape.clone(), values.iter().flat_map(|v| v.to_le_bytes()).collect())
        })
        .collect();
    let views: Vec<(String, TensorView)> = bytes
        .iter()
        .map(|(name, shape, data)| {
            (name.clone(), TensorView::new(Dtype::F32, shape.clone(), data).expect("shape and length agree"))
        })
        .collect();
    crate::whole_file::write_whole_with(path, |tmp| {
        safetensors::serialize_to_file(views, metadata, tmp).map_err(|e| std::io::Error::other(e.to_string()))
    })
    .map_err(io_err(path))
}

/// Every parameter of the model in `run`, whatever its architecture, by path.
pub fn load_any<B: Backend>(
    run: &Path,
    config: &RunConfig,
    device: &B::Device,
) -> Result<Vec<(String, burn::tensor::TensorData)>, TrainError> {
    let weights = crate::trained::weights_dir(run)?;
    Ok(match config.model.arch {
        Arch::Lm | Arch::Notes => named_values(&load_lm::<B>(run, device)?.model),
        Arch::Encoder => {
            let vocab = LmCodec::load(run)?.len();
            named_values(&load_weights(config.model.init_lm::<B>(vocab, device), &weights, device)?)
        }
        Arch::Seq2seq => {
            let vocab = MtTokenizer::load(run)
                .map_err(|message| TrainError::Io { path: run.to_path_buf(), source: std::io::Error::other(message) })?
                .vocab_size();
            named_values(&load_weights(config.model.init_seq2seq::<B>(vocab, device), &weights, device)?)
        }
    })
}

/// The run's tokenizer for HuggingFace: byte-level BPE as it is; a character vocabulary as
/// a BPE model without merges or pre-tokenizer (each character is one token, with our id).
/// A word vocabulary is not written: its `<eos>` at every line end has no `tokenizers`
/// equivalent, so no file could give our ids.
fn write_tokenizer(codec: &LmCodec, out: &Path) -> Result<Vec<PathBuf>, TrainError> {
    let path = out.join("tokenizer.json");
    match codec {
        LmCodec::Bpe(t) => t
            .save(&path)
            .map_err(|e| TrainError::Io { path: path.clone(), source: std::io::Error::other(e.to_string()) })?,
        LmCodec::Symbols(v) if v.kind == "char" => {
            let vocab: serde_json::Map<String, serde_json::Value> =
                v.symbols.iter().enumerate().map(|(i, s)| (s.clone(), json!(i))).collect();
            let tokenizer = json!({
                "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
                "normalizer": null, "pre_tokenizer": null, "post_processor": null,
                "decoder": {"type": "Fuse"},
                "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                          "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                          "ignore_merges": false, "vocab": vocab, "merges": []},
            });
            crate::whole_file::write_whole(&path, serde_json::to_string_pretty(&tokenizer).expect("JSON"))
                .map_err(io_err(&path))?;
        }
        LmCodec::Symbols(_) => return Ok(Vec::new()),
    }
    Ok(vec![path])
}
