//! `export`: a GPT-2-shaped run in GPT-2's names and layouts (query, key and value side by
//! side in `c_attn`, zero biases where the model has none, LoRA adapters folded in), with a
//! character tokenizer that keeps our ids; any other model under its own names, saying why.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use attend_train::config::RunConfig;
use attend_train::export::{export, load_any};
use attend_train::tasks::train_lm;
use attend_train::RunOptions;
use safetensors::SafeTensors;

use crate::common;
use common::serial;

type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;
type I = burn_ndarray::NdArray<f32>;

struct Quiet;
impl attend_train::Observer for Quiet {}

fn gpt_config(dataset: &Path, extra: &[&str]) -> RunConfig {
    let mut sets: Vec<String> = [
        "data.tokenizer=char",
        "model.norm=pre",
        "model.positions=learned",
        "model.scale_embeddings=false",
        "model.bias=false",
        "model.d_model=16",
        "model.n_heads=2",
        "model.n_layers=2",
        "model.d_ff=32",
        "model.block_size=8",
        "train.batch_size=4",
        "train.max_steps=6",
        "train.eval_every=6",
        "train.eval_batches=2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    sets.push(format!("data.dataset={:?}", dataset.display().to_string()));
    sets.extend(extra.iter().map(|s| s.to_string()));
    RunConfig::load(None, &sets).unwrap()
}

fn train(config: &RunConfig, dir: &Path) {
    let opts = RunOptions { run_dir: dir.to_path_buf(), data_dir: dir.to_path_buf(), resume: false };
    train_lm::<B>(config, &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false)).unwrap();
}

fn floats(st: &SafeTensors, name: &str) -> (Vec<usize>, Vec<f32>) {
    let t = st.tensor(name).unwrap_or_else(|_| panic!("{name} missing"));
    let values = t.data().chunks(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    (t.shape().to_vec(), values)
}

#[test]
fn a_gpt2_shaped_run_exports_gpt2_names_and_layouts_with_lora_folded_in() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("text.txt");
    std::fs::write(&text, "to be or not to be, that is the question.\n".repeat(40)).unwrap();
    let base = dir.path().join("base");
    train(&gpt_config(&text, &[]), &base);
    let lora = dir.path().join("lora");
    let init = format!("train.init_from={:?}", base.display().to_string());
    train(&gpt_config(&text, &[&init, "model.lora_rank=2", "train.lr=0.05"]), &lora);

    let out = dir.path().join("out");
    let exported = export::<I>(&lora, &out, &Default::default()).unwrap();
    assert!(exported.not_gpt2.is_none());
    let bytes = std::fs::read(out.join("model.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(
        (config["n_embd"].as_u64(), config["n_layer"].as_u64(), config["n_inner"].as_u64()),
        (Some(16), Some(2), Some(32))
    );
    assert_eq!(config["activation_function"], "gelu", "the default activation: exact GELU");
    let vocab = config["vocab_size"].as_u64().unwrap() as usize;
    assert_eq!(floats(&st, "transformer.wte.weight").0, [vocab, 16]);
    assert_eq!(floats(&st, "transformer.wpe.weight").0, [8, 16]);
    assert!(st.tensor("lm_head.weight").is_err(), "tied: GPT-2 reuses wte");
    let (shape, bias) = floats(&st, "transformer.h.1.attn.c_attn.bias");
    assert_eq!(shape, [48]);
    assert!(bias.iter().all(|&b| b == 0.0), "bias = false: zeros");

    // c_attn = [W_q + (α/r)·a_q·b_q | W_k + … | W_v + …], input-major.
    let ours: std::collections::HashMap<String, Vec<f32>> =
        load_any::<I>(&lora, &RunConfig::from_resolved(&lora.join("config.toml")).unwrap(), &Default::default())
            .unwrap()
            .into_iter()
            .map(|(p, d)| (p, d.to_vec::<f32>().unwrap()))
            .collect();
    let (shape, c_attn) = floats(&st, "transformer.h.0.attn.c_attn.weight");
    assert_eq!(shape, [16, 48]);
    let scale = 8.0 / 2.0;
    for (part, name) in ["query", "key", "value"].iter().enumerate() {
        let p = "layers.0.self_attention";
        let w = &ours[&format!("{p}.{name}.weight")];
        let (a, b) = (&ours[&format!("{p}.adapters.{name}.a")], &ours[&format!("{p}.adapters.{name}.b")]);
        assert!(b.iter().any(|&x| x != 0.0), "the adapter trained");
        for i in 0..16 {
            for j in 0..16 {
                let delta: f32 = (0..2).map(|k| a[i * 2 + k] * b[k * 16 + j]).sum();
                let (want, got) = (w[i * 16 + j] + scale * delta, c_attn[i * 48 + part * 16 + j]);
                assert!((want - got).abs() < 1e-5, "{name}[{i}][{j}]: {got} vs {want}");
            }
        }
    }

    // The character tokenizer: a BPE model without merges whose vocabulary is ours.
    let tokenizer: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("tokenizer.json")).unwrap()).unwrap();
    let chars: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(lora.join("vocab.json")).unwrap()).unwrap();
    for (id, symbol) in chars["symbols"].as_array().unwrap().iter().enumerate() {
        assert_eq!(tokenizer["model"]["vocab"][symbol.as_str().unwrap()], id);
    }
    assert_eq!(tokenizer["model"]["merges"].as_array().unwrap().len(), 0);
    assert!(tokenizer["pre_tokenizer"].is_null());
}

#[test]
fn another_shape_keeps_our_names_says_why_it_is_not_gpt2_and_replaces_no_file() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("text.txt");
    std::fs::write(&text, "a b c d e f g\n".repeat(60)).unwrap();
    let run = dir.path().join("run");
    let config = gpt_config(&text, &["model.norm=post", "model.positions=sinusoidal"]);
    train(&config, &run);
    let out = dir.path().join("out");
    let exported = export::<I>(&run, &out, &Default::default()).unwrap();
    // A second export into the same directory (or into the run itself) replaces nothing.
    let weights = std::fs::read(out.join("model.safetensors")).unwrap();
    for taken in [&out, &run] {
        let err = export::<I>(&run, taken, &Default::default()).unwrap_err().to_string();
        assert!(err.contains("already holds files") && err.contains("--out"), "{err}");
    }
    assert_eq!(std::fs::read(out.join("model.safetensors")).unwrap(), weights, "the first export's weights");
    assert!(!run.join("model.safetensors").exists(), "nothing written into the run");
    let why = exported.not_gpt2.unwrap();
    assert!(why.contains("model.norm") && why.contains("model.positions = \"sinusoidal\""), "{why}");
    let bytes = std::fs::read(out.join("model.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let map: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("name_map.json")).unwrap()).unwrap();
    for (path, data) in load_any::<I>(&run, &config, &Default::default()).unwrap() {
        assert_eq!(floats(&st, &path).1, data.to_vec::<f32>().unwrap(), "{path}");
        assert_eq!(map[&path], serde_json::json!(data.shape.to_vec()));
    }
}
