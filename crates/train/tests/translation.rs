//! Translation end to end on tiny generated data: the loss falls, translations come back one
//! per source in order, resuming equals never stopping, and unaligned corpora and sentences
//! longer than learned positions are refused naming them.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use attend_train::config::RunConfig;
use attend_train::tasks::train_mt;
use attend_train::translate::{load_mt_run, translate, TranslateOptions};
use attend_train::{Observer, RunOptions};

use crate::common;
use common::{serial, StopAt};

type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;
type I = burn_ndarray::NdArray<f32>;

struct Quiet;
impl Observer for Quiet {}

/// `(event, step, loss, bleu)` of every train and eval line of a run's log.
fn logged(dir: &Path) -> Vec<(String, u64, f64, Option<f64>)> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == "train" || v["event"] == "eval")
        .map(|v| {
            (
                v["event"].as_str().unwrap().to_string(),
                v["step"].as_u64().unwrap(),
                v["loss"].as_f64().unwrap(),
                v["bleu"].as_f64(),
            )
        })
        .collect()
}

fn tiny(max_steps: u64) -> RunConfig {
    let sets: Vec<String> = [
        "data.dataset=synthetic-mt",
        "data.synthetic_vocab=10",
        "data.synthetic_size=400",
        "model.arch=seq2seq",
        "model.d_model=16",
        "model.n_heads=2",
        "model.n_layers=1",
        "model.d_ff=32",
        "model.block_size=32",
        "train.batch_tokens=200",
        "train.lr=0.02",
        "train.schedule=constant",
        "train.warmup=2",
        "train.eval_every=15",
        "train.checkpoint_every=15",
        "decode.beam=2",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("train.max_steps={max_steps}")])
    .collect();
    RunConfig::load(None, &sets).unwrap()
}

#[test]
fn translation_training_lowers_the_loss_and_translates_every_line_in_order() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let opts = RunOptions { run_dir: dir.path().to_path_buf(), data_dir: dir.path().join("x"), resume: false };
    let summary = train_mt::<B>(&tiny(45), &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false)).unwrap();
    let log = std::fs::read_to_string(dir.path().join("metrics.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    let valid_loss = summary.valid.expect("evaluated at the last step").loss;
    assert!(valid_loss < first["loss"].as_f64().unwrap() - 0.3, "{valid_loss} vs {first}");
    assert!(log.contains("\"bleu\""), "evaluations report BLEU");

    let run = load_mt_run::<I>(dir.path(), &Default::default()).unwrap();
    let sources = ["bada bedi", "", "bada bedi bada bedi bada"];
    let options = TranslateOptions { beam: 2, lenpen: 0.6, max_len_a: 1.0, max_len_b: 3 };
    let out = translate(&run.model, &run.tokenizer, &sources, &options, &Default::default()).unwrap();
    assert_eq!(out.len(), sources.len());
    for (src, hyp) in sources.iter().zip(&out) {
        assert!(hyp.split_whitespace().count() <= src.split_whitespace().count() + 1 + 3, "length limit: {hyp:?}");
    }
    // In order: the batch is sorted by length and put back; each line is its translation alone.
    // (With a limit of `b` alone: `a · source_len` counts the batch's longest source, as
    // fairseq's does, so a sentence alone could stop elsewhere.)
    let options = TranslateOptions { max_len_a: 0.0, max_len_b: 12, ..options };
    let out = translate(&run.model, &run.tokenizer, &sources, &options, &Default::default()).unwrap();
    for (src, hyp) in sources.iter().zip(&out) {
        let alone = translate(&run.model, &run.tokenizer, &[*src], &options, &Default::default()).unwrap();
        assert_eq!(&alone[0], hyp, "{src:?}");
    }
    assert!(out.iter().any(|line| line != &out[0]), "the lines differ, so a swap would show: {out:?}");
}

#[test]
fn unaligned_translation_files_are_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("multi30k");
    std::fs::create_dir_all(&m).unwrap();
    let gz = |name: &str, text: &str| {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(std::fs::File::create(m.join(name)).unwrap(), Default::default());
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap();
    };
    gz("train.de.gz", "a\nb\nc\n");
    gz("train.en.gz", "a\nb\n");
    let mut config = tiny(5);
    config.data.dataset = "multi30k".into();
    config.data.source = "de".into();
    config.data.target = "en".into();
    let opts = RunOptions { run_dir: dir.path().join("run"), data_dir: dir.path().to_path_buf(), resume: false };
    let err = train_mt::<B>(&config, &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false))
        .unwrap_err()
        .to_string();
    assert!(err.contains("train.de.gz") && err.contains("train.en.gz") && err.contains("3 and 2 lines"), "{err}");
    assert!(!dir.path().join("run").exists(), "nothing written");
}

#[test]
fn eval_scores_a_split_of_a_translation_run_with_bleu_its_signature_and_the_averaged_weights() {
    let _turn = serial();
    use attend_train::evaluate::Split;
    use attend_train::mt_eval::eval_mt;
    let dir = tempfile::tempdir().unwrap();
    let mut config = tiny(30);
    config.train.average_last = 2;
    let opts = RunOptions { run_dir: dir.path().to_path_buf(), data_dir: dir.path().join("x"), resume: false };
    train_mt::<B>(&config, &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false)).unwrap();
    let steps = std::fs::read_to_string(dir.path().join("averaged/steps.json")).unwrap();
    assert_eq!(steps, "{\"steps\":[15,30]}");
    let report = eval_mt::<I>(dir.path(), &dir.path().join("x"), Split::Test, None, &Default::default()).unwrap();
    assert_eq!(report.split, "test");
    assert!(report.weights.ends_with("averaged"), "{}", report.weights);
    assert_eq!(report.sentences, 40, "a tenth of the 400 training pairs");
    assert!(report.tokens > 0 && report.loss.is_finite() && report.loss > 0.0);
    let s = &report.scores;
    assert!((0.0..=100.0).contains(&s.bleu) && (0.0..=100.0).contains(&s.chrf));
    assert_eq!(s.bleu_lowercase, s.bleu, "the synthetic words are lowercase: lowercasing changes no n-gram");
    assert!(s.signature.starts_with("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp"), "{}", s.signature);
    assert!(s.signature_lowercase.contains("case:lc"), "{}", s.signature_lowercase);
    let valid = eval_mt::<I>(dir.path(), &dir.path().join("x"), Split::Valid, None, &Default::default()).unwrap();
    assert_eq!(valid.split, "valid");
}

#[test]
fn translation_resume_after_a_stop_logs_exactly_what_an_uninterrupted_run_logs() {
    let _turn = serial();
    resume_logs_what_an_uninterrupted_run_logs(tiny(40));
}

/// The paper's optimizer, Adam with β₂ = 0.98 and ε = 1e-9 (`OnePassAdam`: Burn's bits, its
/// state saved in Burn's `AdamState` and read back on resume).
#[test]
fn translation_with_the_papers_adam_resumes_exactly() {
    let _turn = serial();
    let mut config = tiny(40);
    config.train.optimizer = attend_train::config::OptimizerKind::Adam;
    (config.train.beta2, config.train.eps) = (0.98, 1e-9);
    resume_logs_what_an_uninterrupted_run_logs(config);
}

/// `config` (40 steps) stopped at step 20 and resumed logs what it logs uninterrupted, and a
/// finished run resumed again is left alone.
fn resume_logs_what_an_uninterrupted_run_logs(config: RunConfig) {
    let opts = |dir: &Path, resume| RunOptions { run_dir: dir.to_path_buf(), data_dir: dir.join("x"), resume };
    let straight = tempfile::tempdir().unwrap();
    train_mt::<B>(&config, &opts(straight.path(), false), &Default::default(), &mut Quiet, &AtomicBool::new(false))
        .unwrap();

    let stopped = tempfile::tempdir().unwrap();
    let stop = AtomicBool::new(false);
    let first = train_mt::<B>(
        &config,
        &opts(stopped.path(), false),
        &Default::default(),
        &mut StopAt { at: 20, stop: &stop },
        &stop,
    )
    .unwrap();
    assert!(first.interrupted && first.step == 20);
    let resumed =
        train_mt::<B>(&config, &opts(stopped.path(), true), &Default::default(), &mut Quiet, &AtomicBool::new(false))
            .unwrap();
    assert_eq!(resumed.step, 40);
    assert_eq!(logged(stopped.path()), logged(straight.path()), "same losses, same evaluations, same BLEU");

    let log = std::fs::read_to_string(stopped.path().join("metrics.jsonl")).unwrap();
    let again =
        train_mt::<B>(&config, &opts(stopped.path(), true), &Default::default(), &mut Quiet, &AtomicBool::new(false))
            .unwrap();
    assert_eq!(again.already_done, Some("train.max_steps"));
    assert_eq!(
        std::fs::read_to_string(stopped.path().join("metrics.jsonl")).unwrap(),
        log,
        "a finished run is left alone"
    );
}

#[test]
fn sentences_longer_than_learned_positions_are_refused_naming_the_sentence() {
    let _turn = serial();
    let mut config = tiny(5);
    config.model.positions = attend_model::Positions::Learned;
    config.model.block_size = 6; // synthetic-mt sentences have 3 to 10 words
    let dir = tempfile::tempdir().unwrap();
    let opts = RunOptions { run_dir: dir.path().to_path_buf(), data_dir: dir.path().join("x"), resume: false };
    let err = train_mt::<B>(&config, &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("synthetic-mt: training pair (line) "), "{err}");
    assert!(err.contains("more than the model's model.block_size = 6 learned positions"), "{err}");

    config.model.block_size = 12;
    train_mt::<B>(&config, &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false)).unwrap();
    let run = load_mt_run::<I>(dir.path(), &Default::default()).unwrap();
    let options = TranslateOptions { beam: 2, lenpen: 0.6, max_len_a: 1.0, max_len_b: 30 };
    let long = "bada ".repeat(20);
    let err = translate(&run.model, &run.tokenizer, &["bada", long.trim()], &options, &Default::default()).unwrap_err();
    assert!(err.to_string().starts_with("source sentence 2: 21 tokens"), "{err}");
    let out = translate(&run.model, &run.tokenizer, &["bada bedi"], &options, &Default::default()).unwrap();
    assert!(out[0].split_whitespace().count() <= 11, "hypotheses stop at the last learned position: {out:?}");
}
