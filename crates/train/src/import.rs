//! `import`: a HuggingFace GPT-2 directory (`config.json`, `model.safetensors`,
//! `tokenizer.json`, as `save_pretrained` writes it or the Hub serves it) turned into a run
//! directory that `eval`, `generate` and fine-tuning (`train.init_from`) use: `config.toml`
//! (a pre-norm LM with learned positions, biases, GPT-2's GELU, unscaled embeddings),
//! `tokenizer.json` (byte-level BPE; or `vocab.json` for the character tokenizer `export`
//! writes), and the weights as the run's `best/` checkpoint.
//!
//! Tensor names are GPT-2's, with or without the `transformer.` prefix (the Hub's `gpt2`
//! files have none); the attention mask buffers (`attn.bias`, `attn.masked_bias`) are skipped.
//! `c_attn` is split into the query, key and value maps. f32, f16 and bf16 are read.

use std::collections::HashMap;
use std::path::Path;

use attend_model::{Activation, DecoderOnly};
use burn::module::Module;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::backend::Backend;
use burn::tensor::TensorData;
use safetensors::tensor::Dtype;
use safetensors::SafeTensors;
use serde_json::Value;

use crate::checkpoint::{self, TrainState};
use crate::config::RunConfig;
use crate::data::codec::LmCodec;
use crate::data::vocab::Vocab;
use crate::error::{io_err, TrainError};
use crate::export::HostTensor;
use crate::finetune::set_weights;

/// A GPT-2 directory that cannot be imported; names the file and what is wrong.
fn bad(path: &Path, message: impl Into<String>) -> TrainError {
    TrainError::Io { path: path.to_path_buf(), source: std::io::Error::other(message.into()) }
}

/// Imports the GPT-2 directory `hf` as the new run `run`; returns the resolved configuration.
pub fn import_gpt2<B: Backend>(hf: &Path, run: &Path, device: &B::Device) -> Result<RunConfig, TrainError> {
    if run.join("config.toml").exists() {
        return Err(TrainError::RunExists(run.to_path_buf()));
    }
    // Not the GPT-2 directory itself, nor any other that holds files.
    crate::error::fresh_directory(run, "--run")?;
    let config_path = hf.join("config.json");
    let text = std::fs::read_to_string(&config_path).map_err(io_err(&config_path))?;
    let gpt2: Value = serde_json::from_str(&text).map_err(|e| bad(&config_path, e.to_string()))?;
    if gpt2["model_type"] != "gpt2" {
        return Err(bad(
            &config_path,
            format!("model_type = {}: only GPT-2 (\"gpt2\") is imported", gpt2["model_type"]),
        ));
    }
    let codec = tokenizer(&hf.join("tokenizer.json"))?;
    let size = |key: &str| {
        gpt2[key].as_u64().map(|v| v as usize).ok_or_else(|| bad(&config_path, format!("{key}: expected a number")))
    };
    let (d, vocab) = (size("n_embd")?, size("vocab_size")?);
    if codec.len() != vocab {
        let message = format!("vocab_size = {vocab}, but tokenizer.json has {} tokens: they must agree", codec.len());
        return Err(bad(&config_path, message));
    }
    // A key left out (or null) takes transformers' default; one of another type is an error.
    let typed = |key: &str, expected: &str, ok: fn(&Value) -> bool| -> Result<Option<&Value>, TrainError> {
        match &gpt2[key] {
            Value::Null => Ok(None),
            value if ok(value) => Ok(Some(value)),
            value => Err(bad(&config_path, format!("{key} = {value}: expected {expected}"))),
        }
    };
    let function = typed("activation_function", "a string", Value::is_string)?;
    let activation = match function.and_then(Value::as_str).unwrap_or("gelu_new") {
        "gelu" => Activation::Gelu,
        "gelu_new" | "gelu_pytorch_tanh" => Activation::GeluTanh,
        "relu" => Activation::Relu,
        other => {
            return Err(bad(&config_path, format!("activation_function = {other:?}: expected gelu, gelu_new or relu")))
        }
    };
    for (key, wanted) in
        [("scale_attn_weights", true), ("scale_attn_by_inverse_layer_idx", false), ("add_cross_attention", false)]
    {
        if typed(key, "true or false", Value::is_boolean)?.and_then(Value::as_bool).is_some_and(|v| v != wanted) {
            return Err(bad(&config_path, format!("{key} = {}: not supported", !wanted)));
        }
    }
    let activation = toml::Value::try_from(activation).map_err(|e| bad(&config_path, e.to_string()))?;
    let eps = typed("layer_norm_epsilon", "a number", Value::is_number)?.and_then(Value::as_f64).unwrap_or(1e-5);
    let tie =
        typed("tie_word_embeddings", "true or false", Value::is_boolean)?.and_then(Value::as_bool).unwrap_or(true);
    let d_ff = typed("n_inner", "a whole number or null", Value::is_u64)?
        .and_then(Value::as_u64)
        .map_or(4 * d, |v| v as usize);
    let sets = [
        "data.dataset=\"\"".to_string(),
        format!("data.tokenizer={:?}", codec.kind()),
        format!("data.vocab_size={vocab}"),
        "model.arch=\"lm\"".into(),
        format!("model.d_model={d}"),
        format!("model.n_heads={}", size("n_head")?),
        format!("model.n_layers={}", size("n_layer")?),
        format!("model.d_ff={d_ff}"),
        format!("model.block_size={}", size("n_positions")?),
        "model.dropout=0.0".into(),
        "model.norm=\"pre\"".into(),
        format!("model.norm_eps={eps:e}"),
        "model.positions=\"learned\"".into(),
        format!("model.activation={activation}"),
        "model.bias=true".into(),
        format!("model.tie_embeddings={tie}"),
        "model.scale_embeddings=false".into(),
        "model.init=\"gpt2\"".into(),
    ];
    let config = RunConfig::load(None, &sets).map_err(|e| bad(&config_path, e.to_string()))?;
    let model = config.model.init_decoder_only::<B>(vocab, device).ok_or(TrainError::NotLm)?;
    let weights = hf.join("model.safetensors");
    let values = ours_from_gpt2(&weights, config.model.n_layers, d, vocab)?;
    let model = set_weights(model, values).map_err(|errors| {
        let first = errors.first().map(ToString::to_string).unwrap_or_default();
        bad(&weights, format!("{first} ({} mismatches)", errors.len()))
    })?;
    write_run(run, &config, &codec, &model)?;
    Ok(config)
}

/// `tokenizer.json` as our coding: byte-level BPE, or the character tokenizer of `export`.
fn tokenizer(path: &Path) -> Result<LmCodec, TrainError> {
    match attend_bpe::Tokenizer::load(path) {
        Ok(t) => Ok(LmCodec::Bpe(t)),
        Err(bpe_error) => {
            let text = std::fs::read_to_string(path).map_err(io_err(path))?;
            let json: Value = serde_json::from_str(&text).map_err(|e| bad(path, e.to_string()))?;
            let model = &json["model"];
            let chars = model["type"] == "BPE"
                && model["merges"].as_array().is_some_and(Vec::is_empty)
                && json["pre_tokenizer"].is_null();
            let Some(vocab) = model["vocab"].as_object().filter(|_| chars) else {
                return Err(bad(path, bpe_error.to_string()));
            };
            let mut symbols = vec![String::new(); vocab.len()];
            for (symbol, id) in vocab {
                let slot = id.as_u64().and_then(|i| symbols.get_mut(i as usize));
                let slot = slot.ok_or_else(|| {
                    bad(path, format!("model.vocab[{symbol:?}] = {id}: not an id below {}", vocab.len()))
                })?;
                *slot = symbol.clone();
            }
            Ok(LmCodec::Symbols(Vocab::from_symbols("char", symbols)))
        }
    }
}

/// The GPT-2 tensors of `path` under our parameter paths (`c_attn` split in three).
fn ours_from_gpt2(
    path: &Path,
    n_layers: usize,
    d: usize,
    vocab: usize,
) -> Result<HashMap<String, TensorData>, TrainError> {
    let bytes = std::fs::read(path).map_err(io_err(path))?;
    let st = SafeTensors::deserialize(&bytes).map_err(|e| bad(path, e.to_string()))?;
    let get = |name: &str| -> Result<Option<HostTensor>, TrainError> {
        let view = match st.tensor(&format!("transformer.{name}")).or_else(|_| st.tensor(name)) {
            Ok(view) => view,
            Err(_) => return Ok(None),
        };
        let data = view.data();
        let values: Vec<f32> = match view.dtype() {
            Dtype::F32 => data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
            Dtype::F16 => {
                data.chunks_exact(2).map(|b| burn::tensor::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect()
            }
            Dtype::BF16 => {
                data.chunks_exact(2).map(|b| burn::tensor::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect()
            }
            other => return Err(bad(path, format!("{name}: dtype {other:?}; expected F32, F16 or BF16"))),
        };
        Ok(Some((view.shape().to_vec(), values)))
    };
    let need = |name: &str| get(name)?.ok_or_else(|| bad(path, format!("no tensor {name} (nor transformer.{name})")));
    let data = |(shape, values): HostTensor| TensorData::new(values, shape);
    let mut out = HashMap::new();
    out.insert("embedding.weight".to_string(), data(need("wte.weight")?));
    out.insert("positions.learned".to_string(), data(need("wpe.weight")?));
    out.insert("final_norm.gamma".to_string(), data(need("ln_f.weight")?));
    out.insert("final_norm.beta".to_string(), data(need("ln_f.bias")?));
    if let Some((shape, values)) = get("lm_head.weight")? {
        // `nn.Linear`'s `[V, d]` to our input-major `[d, V]`, unless it is the tied copy.
        let tied = get("wte.weight")?.is_some_and(|w| w.1 == values);
        if !tied {
            if shape != [vocab, d] {
                let message =
                    format!("lm_head.weight has shape {shape:?}: expected [vocab_size, n_embd] = [{vocab}, {d}]");
                return Err(bad(path, message));
            }
            let (v, dm) = (shape[0], shape[1]);
            let t: Vec<f32> =
                (0..dm).flat_map(|i| (0..v).map(move |j| (i, j))).map(|(i, j)| values[j * dm + i]).collect();
            out.insert("output.weight".to_string(), TensorData::new(t, [dm, v]));
        }
    }
    for i in 0..n_layers {
        let (h, ours) = (format!("h.{i}"), format!("layers.{i}"));
        for (theirs, mine) in [("ln_1", "norm_attention"), ("ln_2", "norm_feed_forward")] {
            out.insert(format!("{ours}.{mine}.gamma"), data(need(&format!("{h}.{theirs}.weight"))?));
            out.insert(format!("{ours}.{mine}.beta"), data(need(&format!("{h}.{theirs}.bias"))?));
        }
        for (theirs, mine) in [
            ("attn.c_proj", "self_attention.output"),
            ("mlp.c_fc", "feed_forward.w_1"),
            ("mlp.c_proj", "feed_forward.w_2"),
        ] {
            out.insert(format!("{ours}.{mine}.weight"), data(need(&format!("{h}.{theirs}.weight"))?));
            out.insert(format!("{ours}.{mine}.bias"), data(need(&format!("{h}.{theirs}.bias"))?));
        }
        let (shape, w) = need(&format!("{h}.attn.c_attn.weight"))?;
        let (_, b) = need(&format!("{h}.attn.c_attn.bias"))?;
        if shape != [d, 3 * d] || b.len() != 3 * d {
            return Err(bad(path, format!("{h}.attn.c_attn: {shape:?}; expected [{d}, {}]", 3 * d)));
        }
        for (part, name) in ["query", "key", "value"].iter().enumerate() {
            let cols: Vec<f32> =
                (0..d).flat_map(|r| w[r * 3 * d + part * d..r * 3 * d + (part + 1) * d].to_vec()).collect();
            out.insert(format!("{ours}.self_attention.{name}.weight"), TensorData::new(cols, [d, d]));
            out.insert(
                format!("{ours}.self_attention.{name}.bias"),
                TensorData::new(b[part * d..(part + 1) * d].to_vec(), [d]),
            );
        }
    }
    Ok(out)
}

/// `config.toml`, the coding and `best/` (weights and a step-0 state) of the new run.
fn write_run<B: Backend>(
    run: &Path,
    config: &RunConfig,
    codec: &LmCodec,
    model: &DecoderOnly<B>,
) -> Result<(), TrainError> {
    std::fs::create_dir_all(run).map_err(io_err(run))?;
    let path = run.join("config.toml");
    crate::whole_file::write_whole(&path, config.to_toml()).map_err(io_err(&path))?;
    codec.save(run).map_err(io_err(run))?;
    let state = TrainState::fresh(config.train.seed);
    checkpoint::write_atomically(&run.join("best"), &state, |tmp| {
        let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
        model.clone().save_file(tmp.join("model"), &recorder).map_err(|e| e.to_string())
    })?;
    Ok(())
}
