//! Language models on byte-level BPE (`data.tokenizer = "bpe"`): the run trains its tokenizer
//! on the training split, keeps it as `tokenizer.json`, and `eval` and `generate` use it;
//! `eval` reports bits per character and per byte, so that codings compare on one scale.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use attend_train::config::RunConfig;
use attend_train::data::codec::LmCodec;
use attend_train::evaluate::{eval_lm, Split};
use attend_train::generate::{generate, GenerateOptions};
use attend_train::tasks::train_lm;
use attend_train::RunOptions;

use crate::common;
use common::serial;

type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;

struct Quiet;
impl attend_train::Observer for Quiet {}

/// A text with repeated words and some variety: BPE finds merges in it.
fn corpus() -> String {
    let words = ["the king", "my lord", "speak", "hear me", "good night", "sweet prince", "to be", "or not"];
    let mut state = 7u64;
    let mut text = String::new();
    for line in 0..1500 {
        for _ in 0..6 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            text.push_str(words[(state >> 33) as usize % words.len()]);
            text.push(' ');
        }
        text.push_str(if line % 5 == 0 { "—ünd.\n\n" } else { "\n" });
    }
    text
}

fn config(data: &Path, tokenizer: &str, vocab: usize) -> RunConfig {
    let sets = [
        format!("data.dataset={:?}", data.display().to_string()),
        format!("data.tokenizer={tokenizer}"),
        format!("data.vocab_size={vocab}"),
        "model.d_model=32".into(),
        "model.n_heads=2".into(),
        "model.n_layers=1".into(),
        "model.d_ff=64".into(),
        "model.block_size=16".into(),
        "train.batch_size=8".into(),
        "train.max_steps=40".into(),
        "train.eval_every=40".into(),
        "train.eval_batches=4".into(),
        "train.checkpoint_every=40".into(),
        "decode.max_tokens=4".into(),
    ];
    RunConfig::load(None, &sets).unwrap()
}

#[test]
fn a_bpe_language_model_keeps_its_tokenizer_and_eval_reports_bits_per_byte() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("corpus.txt");
    let text = corpus();
    std::fs::write(&data, &text).unwrap();
    let run = dir.path().join("run");
    let opts = RunOptions { run_dir: run.clone(), data_dir: dir.path().to_path_buf(), resume: false };
    train_lm::<B>(&config(&data, "bpe", 300), &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false)).unwrap();

    assert!(run.join("tokenizer.json").is_file() && !run.join("vocab.json").exists());
    let codec = LmCodec::load(&run).unwrap();
    assert_eq!(codec.kind(), "bpe");
    assert!(codec.len() > 256 && codec.len() <= 300, "{}", codec.len());
    let valid = &text[text.char_indices().nth(text.chars().count() * 9 / 10).unwrap().0..];
    let ids = codec.encode(valid).unwrap();
    assert_eq!(codec.decode(&ids), valid, "byte-level BPE is lossless");
    assert!(ids.len() * 2 < valid.len(), "the learned merges shorten the text");

    let report = eval_lm::<B>(&run, dir.path(), Split::Valid, None, false, 0, &Default::default()).unwrap().report;
    // Every token but the first is scored; bits per byte is the total NLL over the bytes.
    assert_eq!(report.tokens as usize, ids.len() - 1);
    let bytes = valid.len() as f64 * report.tokens as f64 / ids.len() as f64;
    let expected = report.nats_per_token * report.tokens as f64 / (bytes.round() * std::f64::consts::LN_2);
    let bits_per_byte = report.bits_per_byte.unwrap();
    assert!((bits_per_byte - expected).abs() < 1e-9, "{bits_per_byte} vs {expected}");
    // The text has multi-byte characters: more bits per character than per byte.
    assert!(report.bits_per_char.unwrap() > bits_per_byte);

    let options = GenerateOptions { max_tokens: 5, temperature: 1.0, top_k: None, top_p: None, seed: 1 };
    let out = generate::<burn_ndarray::NdArray<f32>>(&run, "the king — «new»", &options, &Default::default()).unwrap();
    assert!(out.starts_with("the king — «new»"), "{out}");
}

#[test]
fn a_bpe_vocabulary_smaller_than_the_bytes_is_an_error_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("corpus.txt");
    std::fs::write(&data, corpus()).unwrap();
    let opts = RunOptions { run_dir: dir.path().join("run"), data_dir: dir.path().to_path_buf(), resume: false };
    let err =
        train_lm::<B>(&config(&data, "bpe", 100), &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false))
            .err()
            .unwrap()
            .to_string();
    assert!(err.contains("data.vocab_size = 100") && err.contains("256"), "{err}");
}

/// A resumed run codes its data afresh: where that gives another vocabulary than the run's
/// (here a word renamed, the same size), ids would mean other words than they were trained on.
#[test]
fn resuming_on_data_whose_vocabulary_changed_is_refused_naming_the_runs_vocabulary() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("corpus.txt");
    std::fs::write(&data, corpus()).unwrap();
    let run = dir.path().join("run");
    let mut opts = RunOptions { run_dir: run.clone(), data_dir: dir.path().to_path_buf(), resume: false };
    let config = config(&data, "word", 0);
    // Stopped at once, as by Ctrl-C: the first step is checkpointed.
    let stopped = AtomicBool::new(true);
    train_lm::<B>(&config, &opts, &Default::default(), &mut Quiet, &stopped).unwrap();
    opts.resume = true;
    std::fs::write(&data, corpus().replace("king", "queen")).unwrap();
    let err = train_lm::<B>(&config, &opts, &Default::default(), &mut Quiet, &stopped).err().unwrap().to_string();
    assert!(err.starts_with(&format!("{}: the vocabulary", run.join("vocab.json").display())), "{err}");
    std::fs::write(&data, corpus()).unwrap();
    train_lm::<B>(&config, &opts, &Default::default(), &mut Quiet, &stopped).unwrap();
}
