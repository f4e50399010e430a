//! Training end to end on tiny generated data (seconds, release build): the loss falls,
//! resuming equals never stopping, and bad checkpoints are refused.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use attend_train::config::RunConfig;
use attend_train::tasks::{train_lm, LmValid};
use attend_train::{tfevents, Observer, RunOptions, Summary};
use serde_json::Value;

use crate::common;
use common::{serial, tiny_lm_sets, StopAt};

type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;

fn tiny_config(max_steps: u64) -> RunConfig {
    let sets = tiny_lm_sets(&[
        "model.dropout=0.1",
        "model.activation=relu",
        "train.batch_size=4",
        "train.lr=0.02",
        "train.warmup=2",
        "train.eval_every=5",
        "train.eval_batches=4",
        "train.checkpoint_every=5",
        "decode.max_tokens=5",
        &format!("train.max_steps={max_steps}"),
    ]);
    RunConfig::load(None, &sets).unwrap()
}

struct Quiet;
impl Observer for Quiet {}

fn run(config: &RunConfig, dir: &Path, resume: bool) -> Result<Summary<LmValid>, String> {
    let opts = RunOptions { run_dir: dir.to_path_buf(), data_dir: dir.join("no-data"), resume };
    train_lm::<B>(config, &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false)).map_err(|e| e.to_string())
}

/// A fresh run in `dir`, stopped as Ctrl-C would stop it after `at` steps.
fn stop_at(config: &RunConfig, dir: &Path, at: u64) {
    let stop = AtomicBool::new(false);
    let opts = RunOptions { run_dir: dir.to_path_buf(), data_dir: dir.join("x"), resume: false };
    let first = train_lm::<B>(config, &opts, &Default::default(), &mut StopAt { at, stop: &stop }, &stop).unwrap();
    assert!(first.interrupted && first.step == at);
}

fn events(dir: &Path, kind: &str) -> Vec<(u64, f64)> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] == kind)
        .map(|v| (v["step"].as_u64().unwrap(), v["loss"].as_f64().unwrap()))
        .collect()
}

#[test]
fn training_a_few_steps_makes_the_validation_loss_fall() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let summary = run(&tiny_config(60), dir.path(), false).unwrap();
    let evals = events(dir.path(), "eval");
    assert!(evals.last().unwrap().1 < evals.first().unwrap().1 - 0.05, "{evals:?}");
    assert!(summary.valid.as_ref().unwrap().loss() < 8f64.ln(), "better than uniform over 8 words");
    for file in ["config.toml", "metrics.jsonl", "samples.txt", "vocab.json", "best/state.json"] {
        assert!(dir.path().join(file).exists(), "{file}");
    }
    let summary_line: Value = serde_json::from_str(
        std::fs::read_to_string(dir.path().join("metrics.jsonl")).unwrap().lines().last().unwrap(),
    )
    .unwrap();
    assert_eq!(summary_line["event"], "summary");
    assert!(summary_line["entropy_rate"].as_f64().unwrap() > 0.0);
}

/// Records what the loop says it is busy with outside its steps.
#[derive(Default)]
struct Busy(Vec<Option<String>>);
impl Observer for Busy {
    fn busy(&mut self, what: Option<&str>) {
        self.0.push(what.map(str::to_string));
    }
}

#[test]
fn each_evaluation_and_the_final_validation_and_sample_are_announced_and_ended() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut config = tiny_config(10);
    config.train.average_last = 2;
    let opts = RunOptions { run_dir: dir.path().to_path_buf(), data_dir: dir.path().join("x"), resume: false };
    let mut busy = Busy::default();
    train_lm::<B>(&config, &opts, &Default::default(), &mut busy, &AtomicBool::new(false)).unwrap();
    let said: Vec<Option<&str>> = busy.0.iter().map(Option::as_deref).collect();
    assert_eq!(
        said,
        [
            Some("evaluation at step 5"),
            None,
            Some("evaluation at step 10"),
            None,
            Some("validation of the averaged weights"),
            None,
            Some("the final validation and sample"),
            None
        ]
    );
}

#[test]
fn resume_after_a_stop_logs_exactly_the_losses_of_an_uninterrupted_run() {
    let _turn = serial();
    let config = tiny_config(20);
    let straight = tempfile::tempdir().unwrap();
    run(&config, straight.path(), false).unwrap();

    let stopped = tempfile::tempdir().unwrap();
    stop_at(&config, stopped.path(), 7);
    // As after a SIGKILL: a partial line at the end of the log.
    let log = stopped.path().join("metrics.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str("{\"event\":\"train\",\"lo");
    std::fs::write(&log, text).unwrap();
    // And a torn record at the end of TensorBoard's events file.
    let tb = stopped.path().join(tfevents::FILE_NAME);
    let mut bytes = std::fs::read(&tb).unwrap();
    bytes.extend_from_slice(&[30, 0, 0, 0, 0, 0, 0, 0, 1, 2]);
    std::fs::write(&tb, bytes).unwrap();

    let resumed = run(&config, stopped.path(), true).unwrap();
    assert_eq!(resumed.step, 20);
    assert_eq!(events(stopped.path(), "train"), events(straight.path(), "train"));
    let scalars = |dir: &Path| tfevents::read_scalars(&dir.join(tfevents::FILE_NAME)).unwrap();
    let straight_tb = scalars(straight.path());
    let train_losses = straight_tb.iter().filter(|(_, tag, _)| tag == "train/loss").count();
    assert_eq!(train_losses, 20, "every logged step is in TensorBoard's file");
    let losses =
        |s: Vec<(u64, String, f32)>| s.into_iter().filter(|(_, tag, _)| tag.ends_with("loss")).collect::<Vec<_>>();
    assert_eq!(losses(scalars(stopped.path())), losses(straight_tb), "the resumed events file matches");
    assert_eq!(
        resumed.valid.as_ref().unwrap().loss(),
        run(&config, straight.path(), true).unwrap().valid.as_ref().unwrap().loss()
    );
}

/// The same with GELU: our erf-based GELU is bit-reproducible too (with burn-ndarray's `simd`
/// feature off, see Cargo.toml: its vector kernels made results depend on memory alignment).
#[test]
fn resume_with_gelu_logs_exactly_the_losses_of_an_uninterrupted_run() {
    let _turn = serial();
    let mut config = tiny_config(12);
    config.model.activation = attend_model::Activation::Gelu;
    let straight = tempfile::tempdir().unwrap();
    run(&config, straight.path(), false).unwrap();
    let stopped = tempfile::tempdir().unwrap();
    stop_at(&config, stopped.path(), 5);
    run(&config, stopped.path(), true).unwrap();
    assert_eq!(events(stopped.path(), "train"), events(straight.path(), "train"));
}

/// `train.log_every`: the loss is read back and logged every N steps, and at the first,
/// evaluation, checkpoint and last steps; what is trained does not change.
#[test]
fn log_every_logs_only_its_steps_and_trains_the_same_model() {
    let _turn = serial();
    let (every, sparse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = tiny_config(12); // evaluations and checkpoints at 5 and 10
    run(&config, every.path(), false).unwrap();
    let mut sparse_config = config.clone();
    sparse_config.train.log_every = 4;
    run(&sparse_config, sparse.path(), false).unwrap();
    let (all, logged) = (events(every.path(), "train"), events(sparse.path(), "train"));
    assert_eq!(logged.iter().map(|e| e.0).collect::<Vec<_>>(), [1, 4, 5, 8, 10, 12]);
    for (step, loss) in logged {
        assert_eq!(loss, all[step as usize - 1].1, "step {step}");
    }
    assert_eq!(events(sparse.path(), "eval"), events(every.path(), "eval"));
}

#[test]
fn corrupt_or_missing_checkpoints_are_refused_with_a_clear_error() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let err = run(&tiny_config(5), dir.path(), true).unwrap_err();
    assert!(err.starts_with("no checkpoint to resume in"), "{err}");

    run(&tiny_config(5), dir.path(), false).unwrap();
    let err = run(&tiny_config(5), dir.path(), false).unwrap_err();
    assert!(err.contains("already holds a run"), "{err}");

    let model = dir.path().join("checkpoints/step-0000005/model.mpk");
    let bytes = std::fs::read(&model).unwrap();
    std::fs::write(&model, &bytes[..bytes.len() / 2]).unwrap();
    let err = run(&tiny_config(5), dir.path(), true).unwrap_err();
    assert!(err.contains("model.mpk: corrupt or truncated checkpoint"), "{err}");
    std::fs::write(&model, &bytes).unwrap();

    std::fs::write(dir.path().join("checkpoints/step-0000005/state.json"), "{").unwrap();
    let err = run(&tiny_config(5), dir.path(), true).unwrap_err();
    assert!(err.contains("state.json: corrupt or truncated checkpoint"), "{err}");
}

#[test]
fn resuming_a_finished_run_says_so_and_leaves_its_log_whole() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    run(&tiny_config(5), dir.path(), false).unwrap();
    let log = std::fs::read_to_string(dir.path().join("metrics.jsonl")).unwrap();
    let again = run(&tiny_config(5), dir.path(), true).unwrap();
    assert!(again.already_done.is_some());
    assert_eq!(std::fs::read_to_string(dir.path().join("metrics.jsonl")).unwrap(), log, "summary line kept");

    // train.max_epochs (like early stopping) finishes a run too: resuming it trains nothing.
    let stopped = tempfile::tempdir().unwrap();
    let mut config = tiny_config(500);
    config.train.max_epochs = 1; // 4,000 training tokens at 32 per step: 125 steps
    let first = run(&config, stopped.path(), false).unwrap();
    assert_eq!(first.step, 125);
    let log = std::fs::read_to_string(stopped.path().join("metrics.jsonl")).unwrap();
    assert!(run(&config, stopped.path(), true).unwrap().already_done.is_some());
    assert_eq!(std::fs::read_to_string(stopped.path().join("metrics.jsonl")).unwrap(), log);
}

#[test]
fn a_stop_between_checkpoints_then_resume_leaves_the_evaluations_checkpoints_and_best_of_an_uninterrupted_run() {
    let _turn = serial();
    let mut config = tiny_config(20);
    config.train.keep_checkpoints = 10;
    let straight = tempfile::tempdir().unwrap();
    run(&config, straight.path(), false).unwrap();

    let stopped = tempfile::tempdir().unwrap();
    // Step 7 is neither an evaluation nor a checkpoint step (both every 5).
    stop_at(&config, stopped.path(), 7);
    run(&config, stopped.path(), true).unwrap();

    assert_eq!(events(stopped.path(), "eval"), events(straight.path(), "eval"), "no extra evaluation at the stop");
    let steps =
        |dir: &Path| attend_train::checkpoint::list(&dir.join("checkpoints")).iter().map(|c| c.0).collect::<Vec<_>>();
    assert_eq!(steps(stopped.path()), [5, 10, 15, 20]);
    assert_eq!(steps(stopped.path()), steps(straight.path()));
    let best = |dir: &Path| {
        let s = attend_train::checkpoint::read_state(&dir.join("best")).unwrap();
        (s.step, s.best_valid_loss, s.evals_without_improvement)
    };
    assert_eq!(best(stopped.path()), best(straight.path()));
}

#[test]
fn a_non_finite_loss_stops_the_run_with_an_error_naming_the_step() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut config = tiny_config(50);
    config.train.lr = 1e38; // one Adam step moves every weight by ~1e38: the logits overflow
    config.train.schedule = attend_train::config::ScheduleKind::Constant;
    config.train.checkpoint_every = 1;
    let err = run(&config, dir.path(), false).unwrap_err();
    let step: u64 = err
        .strip_prefix("step ")
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("error does not start with the step: {err}"));
    assert!(err.contains("the loss is") && err.contains("stopped"), "{err}");
    let last = format!("checkpoints/{}", attend_train::checkpoint::step_dir_name(step - 1));
    assert!(err.contains(&last), "names the last good checkpoint {last}: {err}");
    assert!(dir.path().join(last).join("state.json").is_file(), "the last good checkpoint is intact");
}

#[test]
fn sequential_lanes_shorter_than_a_block_are_an_error_naming_the_keys() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut config = tiny_config(5);
    config.train.sampling = attend_train::config::Sampling::Sequential;
    config.data.synthetic_size = 100; // 16 lanes of 6 tokens, blocks of 8
    config.train.batch_size = 16;
    let err = run(&config, dir.path(), false).unwrap_err();
    assert!(err.contains("synthetic-lm: training split") && err.contains("train.batch_size = 16"), "{err}");
}

#[test]
fn averaging_two_checkpoints_gives_their_mean() {
    use attend_train::average::load_model;
    use burn::module::{Module, ModuleVisitor, Param};
    use burn::tensor::Tensor;
    type I = burn_ndarray::NdArray<f32>;

    /// Every float weight, flattened, in visiting order.
    struct Flat(Vec<f32>);
    impl ModuleVisitor<I> for Flat {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<I, D>>) {
            self.0.extend(param.val().into_data().to_vec::<f32>().unwrap());
        }
    }
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut config = tiny_config(10);
    config.train.average_last = 2;
    run(&config, dir.path(), false).unwrap();
    let vocab = config.data.synthetic_vocab;
    let flat = |sub: &str| {
        let model = load_model::<I>(&config.model, vocab, &dir.path().join(sub), &Default::default()).unwrap();
        let mut f = Flat(Vec::new());
        model.visit(&mut f);
        f.0
    };
    let (a, b, mean) = (flat("checkpoints/step-0000005"), flat("checkpoints/step-0000010"), flat("averaged"));
    assert_eq!(a.len(), mean.len());
    assert!(a.iter().zip(&b).any(|(x, y)| x != y), "the two checkpoints differ");
    for ((x, y), m) in a.iter().zip(&b).zip(&mean) {
        assert!((m - (x + y) / 2.0).abs() <= 1e-6 * (1.0 + m.abs()), "{m} vs mean of {x} and {y}");
    }
    let steps = std::fs::read_to_string(dir.path().join("averaged/steps.json")).unwrap();
    assert_eq!(steps, "{\"steps\":[5,10]}");
}

#[test]
fn the_notes_one_layer_model_trains_in_the_same_loop_and_its_loss_falls() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut config = tiny_config(30);
    config.model.arch = attend_model::Arch::Notes;
    config.model.n_heads = 1;
    config.model.dropout = 0.0;
    config.model.positions = attend_model::Positions::Sinusoidal;
    config.validate().unwrap();
    let summary = run(&config, dir.path(), false).unwrap();
    let evals = events(dir.path(), "eval");
    assert!(
        summary.valid.as_ref().unwrap().loss() < evals[0].1 - 0.05,
        "{} after {evals:?}",
        summary.valid.as_ref().unwrap().loss()
    );
    // eval and generate read the run back as the notes' model.
    let trained =
        attend_train::trained::load_lm::<burn_ndarray::NdArray<f32>>(dir.path(), &Default::default()).unwrap();
    assert!(matches!(trained.model, attend_model::DecoderOnly::Notes(_)));
}

#[test]
fn asgd_resume_logs_exactly_the_losses_of_an_uninterrupted_run_and_saves_the_mean() {
    let _turn = serial();
    let mut config = tiny_config(14);
    config.train.optimizer = attend_train::config::OptimizerKind::Asgd;
    config.train.lr = 0.5;
    config.train.momentum = 0.5;
    config.train.asgd_start = 4;
    config.validate().unwrap();
    let straight = tempfile::tempdir().unwrap();
    run(&config, straight.path(), false).unwrap();
    let stopped = tempfile::tempdir().unwrap();
    // Stopped after step 7: the mean of steps 4..=7 must survive in the checkpoint.
    stop_at(&config, stopped.path(), 7);
    run(&config, stopped.path(), true).unwrap();
    assert_eq!(events(stopped.path(), "train"), events(straight.path(), "train"));
    // The stopped run also evaluated when it stopped (step 7); the scheduled ones must agree.
    let scheduled: Vec<_> = events(stopped.path(), "eval").into_iter().filter(|e| e.0 != 7).collect();
    assert_eq!(scheduled, events(straight.path(), "eval"), "evaluations score the same mean");
    let steps = std::fs::read_to_string(straight.path().join("averaged/steps.json")).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&steps).unwrap(), serde_json::json!({"asgd_start": 4, "last_step": 14}));
    // The mean, not the last iterate: `averaged/` differs from the final checkpoint's weights.
    let (last, dir) = attend_train::checkpoint::latest(&straight.path().join("checkpoints")).unwrap();
    assert_eq!(last, 14);
    let weights = |d: &std::path::Path| std::fs::read(d.join("model.mpk")).unwrap();
    assert_ne!(weights(&straight.path().join("averaged")), weights(&dir), "averaged/ holds the last iterate");
}

#[test]
fn asgd_with_checkpoint_averaging_is_a_configuration_error_naming_the_key() {
    let mut config = tiny_config(5);
    config.train.optimizer = attend_train::config::OptimizerKind::Asgd;
    config.train.average_last = 2;
    let err = config.validate().unwrap_err().to_string();
    assert!(err.contains("train.average_last"), "{err}");
}

#[test]
fn a_finished_run_draws_its_losses_into_loss_svg() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    run(&tiny_config(10), dir.path(), false).unwrap();
    let svg = std::fs::read_to_string(dir.path().join("loss.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("validation"));
    assert_eq!(svg.matches("<circle").count(), events(dir.path(), "eval").len());
}
