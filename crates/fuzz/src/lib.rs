//! The fuzz targets' bodies: each feeds arbitrary bytes to a loader of a file that a user or
//! a crash could have damaged, and must return (an `Ok` or a clear `Err`) without panicking,
//! hanging or allocating without bound. Each says whether the input was accepted (the smoke
//! test checks that every seed is, so that mutations start deep inside the parsers). `fuzz/` runs them under libFuzzer (`cargo fuzz`,
//! docs/reliability.md); `tests/smoke.rs` runs each over its seeds and a few thousand
//! deterministic mutations in the ordinary test suite.

use std::path::Path;
use std::sync::OnceLock;

use attend_train::config::RunConfig;
use attend_train::optimizer::Optim;

type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;

/// A target: arbitrary bytes in, whether they were accepted out.
pub type Target = fn(&[u8]) -> bool;

/// Every target, by name (the names of `fuzz/fuzz_targets/*.rs`).
pub const TARGETS: [(&str, Target); 8] = [
    ("tokenizer_json", tokenizer_json),
    ("checkpoint", checkpoint),
    ("config", config),
    ("metrics_log", metrics_log),
    ("corpus", corpus),
    ("bleu_chrf", bleu_chrf),
    ("pairs", pairs),
    ("state_json", state_json),
];

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

/// Splits `data` at the first `0xff` (never in UTF-8): two inputs from one.
fn halves(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == 0xff) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// A HuggingFace `tokenizer.json`; if it loads, encoding and decoding a text must not panic.
pub fn tokenizer_json(data: &[u8]) -> bool {
    let (json, text) = halves(data);
    let Ok(json) = std::str::from_utf8(json) else { return false };
    let Ok(tokenizer) = attend_bpe::Tokenizer::from_json_str(json, Path::new("tokenizer.json")) else { return false };
    let text = String::from_utf8_lossy(text);
    let ids = tokenizer.encode(&text);
    tokenizer.decode(&ids).is_ok()
}

/// The configuration of the template run: a tiny LM.
fn tiny() -> RunConfig {
    let sets = [
        "data.synthetic_size=2000",
        "data.synthetic_vocab=8",
        "model.d_model=8",
        "model.n_heads=2",
        "model.n_layers=1",
        "model.d_ff=16",
        "model.block_size=8",
        "train.batch_size=2",
        "train.max_steps=2",
        "train.eval_every=2",
        "train.eval_batches=1",
        "train.checkpoint_every=2",
        "decode.max_tokens=2",
    ];
    RunConfig::load(None, &sets.map(String::from)).expect("the tiny config loads")
}

/// The seeds' checkpoint (step 2 of the tiny run, `fuzz/seeds/make.sh`), built in: each seed
/// is one of its files after a byte that picks the file.
const TEMPLATE: [(&str, &[u8]); 4] = [
    ("model.mpk", include_bytes!("../../../fuzz/seeds/checkpoint/model.mpk")),
    ("optimizer.mpk", include_bytes!("../../../fuzz/seeds/checkpoint/optimizer.mpk")),
    ("state.json", include_bytes!("../../../fuzz/seeds/checkpoint/state.json")),
    ("manifest.json", include_bytes!("../../../fuzz/seeds/checkpoint/manifest.json")),
];

/// The template's vocabulary size (its embedding's rows).
fn template_vocab() -> usize {
    static VOCAB: OnceLock<usize> = OnceLock::new();
    *VOCAB.get_or_init(|| {
        let tensors = attend_train::checkpoint::records::scan(&TEMPLATE[0].1[1..]).expect("the template's model");
        tensors.iter().find(|t| t.path == "embedding.weight").expect("an embedding").shape[0]
    })
}

/// A checkpoint directory with one file replaced by `data[1..]`: `data[0]` picks the file
/// (model, optimizer, state, manifest) and whether the manifest is rewritten to match (so
/// the damage reaches the parsers behind the hash check). Resuming from it, and loading its
/// weights for evaluation, must not panic.
pub fn checkpoint(data: &[u8]) -> bool {
    let Some((&choice, body)) = data.split_first() else { return false };
    let dir = scratch();
    let ckpt = dir.path().join("step-0000002");
    std::fs::create_dir_all(&ckpt).expect("a directory");
    for (name, bytes) in TEMPLATE {
        std::fs::write(ckpt.join(name), &bytes[1..]).expect("writing the template");
    }
    let target = TEMPLATE[(choice % 4) as usize].0;
    std::fs::write(ckpt.join(target), body).expect("writing the input");
    if choice & 4 == 0 && target != "manifest.json" {
        attend_train::checkpoint::manifest::write(&ckpt).expect("a manifest");
    }
    let config = tiny();
    let device = Default::default();
    let vocab = template_vocab();
    let model = config.model.init_decoder_only::<B>(vocab, &device).expect("a decoder-only LM");
    let resumed = attend_train::run::load_checkpoint(&ckpt, 2, model, Optim::new(&config.train), &device).is_ok();
    let inner = config.model.init_decoder_only::<burn_ndarray::NdArray<f32>>(vocab, &device).expect("an LM");
    attend_train::average::load_weights(inner, &ckpt, &device).is_ok() && resumed
}

/// A `config.toml` (then each of its lines as a `--set`), and a run's own config.
pub fn config(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else { return false };
    let dir = scratch();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, text).expect("writing the input");
    let loaded = RunConfig::load(Some(&path), &[]).is_ok();
    let _ = RunConfig::from_resolved(&path);
    let sets: Vec<String> = text.lines().take(64).map(String::from).collect();
    let _ = RunConfig::load(None, &sets);
    loaded
}

/// `metrics.jsonl` and the TensorBoard events file of a resumed run: cut back, then read.
pub fn metrics_log(data: &[u8]) -> bool {
    let (jsonl, events) = halves(data);
    let dir = scratch();
    let log = attend_train::metrics_log::MetricsLog::new(dir.path().join("metrics.jsonl"));
    let events_path = dir.path().join(attend_train::tfevents::FILE_NAME);
    std::fs::write(log.path(), jsonl).expect("writing the input");
    std::fs::write(&events_path, events).expect("writing the input");
    let summary = log.has_summary();
    let scalars = attend_train::tfevents::read_scalars(&events_path).is_ok_and(|s| !s.is_empty());
    let step = jsonl.first().map_or(3, |&b| b as u64);
    let _ = log.cut_to_step(step);
    let _ = log.read();
    let _ = attend_train::tfevents::read_scalars(&events_path);
    let _ = log.append(&serde_json::json!({"event": "train", "step": step + 1, "loss": 1.0}));
    summary && scalars
}

/// A text corpus (any bytes: invalid UTF-8, empty, one long line) as a character LM's data.
pub fn corpus(data: &[u8]) -> bool {
    let dir = scratch();
    let path = dir.path().join("corpus.txt");
    std::fs::write(&path, data).expect("writing the input");
    let mut config = tiny();
    config.data.dataset = path.display().to_string();
    config.data.tokenizer = attend_train::config::TokenizerKind::Char;
    attend_train::data::lm_dataset::load_lm(&config.data, dir.path()).is_ok()
}

/// Hypotheses and references for BLEU and chrF, through the files the commands read.
pub fn bleu_chrf(data: &[u8]) -> bool {
    let (hyps, refs) = halves(data);
    let dir = scratch();
    let path = dir.path().join("ref.txt");
    std::fs::write(&path, refs).expect("writing the input");
    let Ok((hyps, refs)) = attend_metrics::read_segments(hyps, &[path]) else { return false };
    let bleu = attend_metrics::corpus_bleu(&hyps, &refs, &attend_metrics::BleuConfig::corpus()).is_ok();
    bleu && attend_metrics::corpus_chrf(&hyps, &refs, &attend_metrics::ChrfConfig::chrf_plus_plus()).is_ok()
}

/// A Multi30k-style pair of line-aligned files.
pub fn pairs(data: &[u8]) -> bool {
    let (source, target) = halves(data);
    let dir = scratch();
    let (s, t) = (dir.path().join("train.de"), dir.path().join("train.en"));
    std::fs::write(&s, source).expect("writing the input");
    std::fs::write(&t, target).expect("writing the input");
    attend_train::data::mt_dataset::read_pairs(&s, &t).is_ok()
}

/// A checkpoint's `state.json` alone (with a matching manifest), as resume reads it.
pub fn state_json(data: &[u8]) -> bool {
    let dir = scratch();
    std::fs::write(dir.path().join("state.json"), data).expect("writing the input");
    attend_train::checkpoint::manifest::write(dir.path()).expect("a manifest");
    attend_train::checkpoint::read_state(dir.path()).is_ok()
}
