//! `import`: a tiny random GPT-2 made by HuggingFace `transformers` (`fixtures/gpt2-tiny/`,
//! with the script that made it) becomes a run whose tokenizer gives `tokenizers`' ids and
//! whose logits are `transformers`' to 1e-5; export then import again changes no logit.

use std::path::Path;

use attend_train::export::export;
use attend_train::import::import_gpt2;
use attend_train::trained::load_lm;
use burn::tensor::{Int, Tensor, TensorData};

type I = burn_ndarray::NdArray<f32>;

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpt2-tiny")
}

fn logits(run: &Path, ids: &[u32]) -> Vec<f32> {
    let trained = load_lm::<I>(run, &Default::default()).unwrap();
    let x = TensorData::new(ids.iter().map(|&i| i as i64).collect::<Vec<_>>(), [1, ids.len()]);
    trained.model.forward(Tensor::<I, 2, Int>::from_data(x, &Default::default())).into_data().to_vec::<f32>().unwrap()
}

#[test]
fn an_imported_gpt2_gives_transformers_ids_and_logits_survives_a_round_trip_and_is_never_written_over() {
    // Model initialization draws from Burn's one global generator: take turns with the
    // tests that train (`common::serial`).
    let _turn = crate::common::serial();
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture().join("expected.json")).unwrap()).unwrap();
    let ids: Vec<u32> = expected["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
    let want: Vec<f32> = expected["logits"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap().clone())
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();

    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("imported");
    let config = import_gpt2::<I>(&fixture(), &run, &Default::default()).unwrap();
    assert_eq!((config.model.d_model, config.model.n_layers, config.model.block_size), (8, 2, 32));
    // GPT-2's `gelu_new` is the tanh form; the fixture's small activations could not tell it
    // from the exact one by the logits alone.
    assert_eq!(config.model.activation, attend_model::Activation::GeluTanh);
    let trained = load_lm::<I>(&run, &Default::default()).unwrap();
    let text = expected["text"].as_str().unwrap();
    assert_eq!(&trained.codec.encode(text).unwrap()[..ids.len()], ids.as_slice(), "tokenizers' ids");

    let ours = logits(&run, &ids);
    assert_eq!(ours.len(), want.len());
    let worst = ours.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(worst < 1e-5, "largest logit difference {worst}");

    let exported = dir.path().join("exported");
    assert!(export::<I>(&run, &exported, &Default::default()).unwrap().not_gpt2.is_none());
    let again = dir.path().join("again");
    import_gpt2::<I>(&exported, &again, &Default::default()).unwrap();
    assert_eq!(logits(&again, &ids), ours, "identical logits after export and import");
    assert!(import_gpt2::<I>(&fixture(), &run, &Default::default())
        .unwrap_err()
        .to_string()
        .contains("already holds a run"));

    // A fresh `train` into the imported run would write over its config, tokenizer and
    // `best/` (it has no log or checkpoints): refused, the weights as they were.
    let best = std::fs::read(run.join("best/model.mpk")).unwrap();
    let sets = ["model.d_model=8", "model.n_heads=2", "model.n_layers=1", "model.d_ff=16", "train.max_steps=2"];
    let config = attend_train::config::RunConfig::load(None, &sets.map(String::from)).unwrap();
    let opts = attend_train::RunOptions { run_dir: run.clone(), data_dir: dir.path().to_path_buf(), resume: false };
    let stop = std::sync::atomic::AtomicBool::new(false);
    type B = burn::backend::Autodiff<I>;
    let err = attend_train::tasks::train_lm::<B>(&config, &opts, &Default::default(), &mut Quiet, &stop).unwrap_err();
    assert!(err.to_string().contains("already holds a run"), "{err}");
    assert_eq!(std::fs::read(run.join("best/model.mpk")).unwrap(), best, "the imported weights");
    // Nor is the GPT-2 directory itself a place for the run: its files stay its own.
    let copy = dir.path().join("hf");
    std::fs::create_dir_all(&copy).unwrap();
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(fixture().join(file), copy.join(file)).unwrap();
    }
    let err = import_gpt2::<I>(&copy, &copy, &Default::default()).unwrap_err().to_string();
    assert!(err.contains("already holds files"), "{err}");
    assert_eq!(
        std::fs::read(copy.join("tokenizer.json")).unwrap(),
        std::fs::read(fixture().join("tokenizer.json")).unwrap()
    );
}

struct Quiet;
impl attend_train::Observer for Quiet {}

/// A `config.json` key of the wrong type is an error naming it, not transformers' default.
#[test]
fn a_config_key_of_the_wrong_type_is_refused_naming_it_instead_of_taking_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture().join("config.json")).unwrap();
    for (key, from, to) in [
        ("layer_norm_epsilon", "\"layer_norm_epsilon\": 1e-05", "\"layer_norm_epsilon\": \"1e-5\""),
        ("tie_word_embeddings", "\"tie_word_embeddings\": true", "\"tie_word_embeddings\": \"yes\""),
        ("activation_function", "\"activation_function\": \"gelu_new\"", "\"activation_function\": 3"),
        ("n_inner", "\"n_inner\": null", "\"n_inner\": -4"),
    ] {
        let hf = dir.path().join(key);
        std::fs::create_dir_all(&hf).unwrap();
        for file in ["model.safetensors", "tokenizer.json"] {
            std::fs::copy(fixture().join(file), hf.join(file)).unwrap();
        }
        assert!(text.contains(from), "{from}");
        std::fs::write(hf.join("config.json"), text.replace(from, to)).unwrap();
        let err = import_gpt2::<I>(&hf, &dir.path().join(format!("run-{key}")), &Default::default()).unwrap_err();
        let err = err.to_string();
        assert!(err.contains(&format!("{key} = ")) && err.contains("expected"), "{key}: {err}");
    }
}
