//! Translation end to end on tiny generated data: the loss falls, translations come back one
//! per source in order, and unaligned corpora are refused naming the files.

use std::sync::atomic::AtomicBool;

use attend_train::config::RunConfig;
use attend_train::lm_loop::{Observer, RunOptions};
use attend_train::mt_loop::train_mt;
use attend_train::translate::{load_mt_run, translate, TranslateOptions};

type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;
type I = burn_ndarray::NdArray<f32>;

struct Quiet;
impl Observer for Quiet {}

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
    let dir = tempfile::tempdir().unwrap();
    let opts = RunOptions { run_dir: dir.path().to_path_buf(), data_dir: dir.path().join("x"), resume: false };
    let summary = train_mt::<B>(&tiny(45), &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false)).unwrap();
    let log = std::fs::read_to_string(dir.path().join("metrics.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert!(summary.valid_loss < first["loss"].as_f64().unwrap() - 0.3, "{} vs {first}", summary.valid_loss);
    assert!(log.contains("\"bleu\""), "evaluations report BLEU");

    let run = load_mt_run::<I>(dir.path(), &Default::default()).unwrap();
    let sources = ["bada bedi", "", "bada bedi bada bedi bada"];
    let options = TranslateOptions { beam: 2, lenpen: 0.6, max_len_a: 1.0, max_len_b: 3 };
    let out = translate(&run.model, &run.tokenizer, &sources, &options, &Default::default());
    assert_eq!(out.len(), sources.len());
    for (src, hyp) in sources.iter().zip(&out) {
        assert!(hyp.split_whitespace().count() <= src.split_whitespace().count() + 1 + 3, "length limit: {hyp:?}");
    }
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
    let err = train_mt::<B>(&config, &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false)).unwrap_err().to_string();
    assert!(err.contains("train.de.gz") && err.contains("train.en.gz") && err.contains("3 and 2 lines"), "{err}");
    assert!(!dir.path().join("run").exists(), "nothing written");
}

#[test]
fn eval_scores_a_split_of_a_translation_run_with_bleu_its_signature_and_the_averaged_weights() {
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
    assert!(s.bleu_lowercase >= s.bleu - 1e-9, "synthetic words are lowercase: {} vs {}", s.bleu_lowercase, s.bleu);
    assert!(s.signature.starts_with("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp"), "{}", s.signature);
    assert!(s.signature_lowercase.contains("case:lc"), "{}", s.signature_lowercase);
    let valid = eval_mt::<I>(dir.path(), &dir.path().join("x"), Split::Valid, None, &Default::default()).unwrap();
    assert_eq!(valid.split, "valid");
}
