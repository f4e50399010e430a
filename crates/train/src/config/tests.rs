//! The configuration rules of docs/commands.md (Configuration).

use super::*;

fn write(dir: &tempfile::TempDir, text: &str) -> PathBuf {
    let path = dir.path().join("exp.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn load_text(text: &str) -> Result<RunConfig, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    RunConfig::load(Some(&write(&dir, text)), &[])
}

#[test]
fn every_key_of_every_section_is_spelled_out_in_the_defaults() {
    let defaults: Table = DEFAULT_TOML.parse().unwrap();
    let resolved: Table = RunConfig::load(None, &[]).unwrap().to_toml().parse().unwrap();
    for (section, keys) in &resolved {
        let want: Vec<&String> = keys.as_table().unwrap().keys().collect();
        let have: Vec<&String> = defaults[section].as_table().unwrap().keys().collect();
        assert_eq!(want, have, "section [{section}]");
    }
}

#[test]
fn every_committed_config_loads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            // An ablation file (configs/table3.toml): every row must resolve.
            if std::fs::read_to_string(&path).unwrap().contains("[[row]]") {
                let rows = crate::ablate::Ablation::load(&path, &[]).unwrap_or_else(|e| panic!("{e}")).rows;
                assert!(rows.len() > 1, "{}", path.display());
            } else {
                RunConfig::load(Some(&path), &[]).unwrap_or_else(|e| panic!("{e}"));
            }
            n += 1;
        }
    }
    assert!(n >= 1);
}

#[test]
fn a_file_names_only_what_it_changes() {
    let config = load_text("[model]\nn_layers = 3\n").unwrap();
    let defaults = RunConfig::load(None, &[]).unwrap();
    assert_eq!(config.model.n_layers, 3);
    assert_eq!(config.model.d_model, defaults.model.d_model);
    assert_eq!(config.train, defaults.train);
}

#[test]
fn unknown_keys_and_sections_are_errors_naming_them() {
    let err = load_text("[model]\nflux_capacitor = 1\n").unwrap_err();
    assert!(err.to_string().ends_with("unknown key model.flux_capacitor"), "{err}");
    let err = load_text("[optimiser]\nlr = 1\n").unwrap_err();
    assert!(err.to_string().ends_with("unknown section [optimiser]"), "{err}");
    let err = RunConfig::load(None, &["train.learning_rate=0.1".into()]).unwrap_err();
    assert_eq!(err.to_string(), "--set: unknown key train.learning_rate");
}

#[test]
fn wrong_types_name_the_key_and_the_expectation() {
    let err = load_text("[model]\nn_heads = \"four\"\n").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("model.n_heads") && msg.contains("four"), "{msg}");
    let err = load_text("[model]\nnorm = \"sideways\"\n").unwrap_err();
    assert!(err.to_string().contains("model.norm"), "{err}");
    let err = load_text("[model\n").unwrap_err();
    assert!(matches!(err, ConfigError::Syntax { .. }), "{err}");
}

#[test]
fn invalid_combinations_name_the_keys() {
    let err = load_text("[model]\nd_model = 100\nn_heads = 3\n").unwrap_err();
    assert_eq!(err.to_string(), "model.n_heads = 3 must divide model.d_model = 100 (or set model.d_k and model.d_v)");
    let err = load_text("[model]\narch = \"encoder\"\n").unwrap_err();
    assert!(err.to_string().starts_with("train.objective = lm with model.arch = encoder"), "{err}");
    let err = load_text("[train]\nmask_with_mask = 0.9\nmask_with_random = 0.2\n").unwrap_err();
    assert!(err.to_string().contains("train.mask_with_mask / train.mask_with_random"), "{err}");
    let err = load_text("[model]\nlora_rank = 4\nlora_targets = [\"query\", \"ffn\"]\n").unwrap_err();
    assert!(err.to_string().starts_with("model.lora_targets"), "{err}");
    let err = load_text("[model]\ndropout = 1.0\n").unwrap_err();
    assert!(err.to_string().starts_with("model.dropout = 1"), "{err}");
    let err = load_text("[train]\nlr = -1\n").unwrap_err();
    assert!(err.to_string().starts_with("train.lr = -1"), "{err}");
}

#[test]
fn generated_data_settings_that_cannot_make_a_source_name_the_key() {
    for (set, key) in [
        ("data.synthetic_vocab=0", "data.synthetic_vocab = 0"),
        ("data.synthetic_size=0", "data.synthetic_size = 0"),
        ("data.synthetic_epsilon=1.5", "data.synthetic_epsilon = 1.5"),
        ("data.synthetic_order=40", "data.synthetic_order = 40"),
        ("eval.dynamic_lr=-1", "eval.dynamic_lr = -1"),
        ("decode.lenpen=nan", "decode.lenpen = NaN"),
    ] {
        let err = RunConfig::load(None, &[set.into()]).unwrap_err().to_string();
        assert!(err.starts_with(key), "{set}: {err}");
    }
    let mut sets = vec!["data.synthetic_branching=0".to_string()];
    assert!(RunConfig::load(None, &sets).unwrap_err().to_string().starts_with("data.synthetic_branching = 0"));
    sets.push("data.synthetic_epsilon=1".into());
    RunConfig::load(None, &sets).expect("a uniform source needs no preferred words");
}

/// A window (the block, or dynamic evaluation's segment) shorter than the generated source's
/// order would have no position with its whole context, and score nothing (a loss of 0).
#[test]
fn a_window_shorter_than_the_generated_sources_order_is_refused_naming_both_keys() {
    for (set, key) in [
        ("model.block_size=1", "model.block_size = 1 (data.synthetic_order = 2)"),
        ("eval.dynamic_segment=1", "eval.dynamic_segment = 1 (data.synthetic_order = 2)"),
    ] {
        let sets = ["data.dataset=\"synthetic-lm\"".to_string(), "data.synthetic_order=2".into(), set.into()];
        let err = RunConfig::load(None, &sets).unwrap_err().to_string();
        assert!(err.starts_with(key), "{set}: {err}");
    }
    let sets =
        ["data.dataset=\"synthetic-lm\"", "data.synthetic_order=2", "model.block_size=2", "eval.dynamic_segment=2"];
    RunConfig::load(None, &sets.map(String::from)).expect("windows as long as the order score their last token");
}

#[test]
fn an_infinite_epsilon_or_minimum_rate_is_refused() {
    for (set, key) in [("train.eps=inf", "train.eps = inf"), ("train.min_lr=inf", "train.min_lr = inf")] {
        let err = RunConfig::load(None, &[set.to_string()]).unwrap_err().to_string();
        assert!(err.starts_with(key), "{set}: {err}");
    }
}

#[test]
fn set_overrides_apply_after_the_file_with_the_same_rules() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "[train]\nlr = 0.5\nmax_steps = 7\n");
    let sets = ["train.lr=0.25".to_string(), "data.dataset=ptb".into(), "model.bias=false".into()];
    let config = RunConfig::load(Some(&path), &sets).unwrap();
    assert_eq!(config.train.lr, 0.25);
    assert_eq!(config.train.max_steps, 7);
    assert_eq!(config.data.dataset, "ptb");
    assert!(!config.model.bias);
    let err = RunConfig::load(None, &["model.n_layers".into()]).unwrap_err();
    assert!(matches!(err, ConfigError::BadSet { .. }), "{err}");
    let err = RunConfig::load(None, &["model.n_layers=0".into()]).unwrap_err();
    assert_eq!(err.to_string(), "model.n_layers = 0 must be at least 1");
}

#[test]
fn resolved_config_round_trips_through_toml() {
    let config = load_text("[model]\nn_layers = 3\n[train]\nlr = 0.01\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, config.to_toml()).unwrap();
    assert_eq!(RunConfig::from_resolved(&path).unwrap(), config);
}

#[test]
fn a_runs_config_that_is_empty_or_cut_is_an_error_never_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, "").unwrap();
    let err = RunConfig::from_resolved(&path).unwrap_err().to_string();
    assert!(err.contains("config.toml: a run's config.toml names every key, but this one has no data."), "{err}");
    let full = RunConfig::load(None, &[]).unwrap().to_toml();
    let cut: String = full.lines().filter(|l| !l.starts_with("grad_accum")).map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, cut).unwrap();
    let err = RunConfig::from_resolved(&path).unwrap_err().to_string();
    assert!(err.contains("has no train.grad_accum"), "{err}");
}

#[test]
fn every_size_like_value_has_an_upper_bound_naming_the_key() {
    for (set, key) in [
        ("train.grad_accum=2147483648", "train.grad_accum = 2147483648: at most 4096"),
        ("data.synthetic_size=4294967296", "data.synthetic_size = 4294967296: at most 100000000"),
        ("data.vocab_size=100000000", "data.vocab_size = 100000000: at most 1048576"),
        ("model.n_layers=5000", "model.n_layers = 5000: at most 1024"),
        ("train.batch_size=1000000", "train.batch_size = 1000000: at most 65536"),
        ("decode.beam=100000", "decode.beam = 100000: at most 1024"),
        ("data.synthetic_order=4294967296", "data.synthetic_order = 4294967296: at most 64"),
    ] {
        let err = RunConfig::load(None, &[set.to_string()]).unwrap_err().to_string();
        assert!(err.starts_with(key), "{set}: {err}");
    }
    // Each size within its bound, their product not.
    let sets = ["model.d_model=65536", "model.n_heads=1", "model.d_ff=262144", "model.n_layers=64"].map(String::from);
    let err = RunConfig::load(None, &sets).unwrap_err().to_string();
    assert!(err.starts_with("model (d_model, d_ff, n_heads, d_k, d_v, n_layers, block_size) = about"), "{err}");
}

fn set_err(sets: &[&str]) -> String {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    RunConfig::load(None, &sets).unwrap_err().to_string()
}

#[test]
fn keys_wrong_only_together_are_errors_naming_the_key() {
    let noam = set_err(&["train.schedule=\"noam\"", "train.warmup=0"]);
    assert!(noam.starts_with("train.warmup = 0"), "{noam}");
    let decay = set_err(&["train.warmup=100", "train.decay_steps=50"]);
    assert!(decay.starts_with("train.decay_steps = 50"), "{decay}");
    let kept = set_err(&["train.keep_checkpoints=0"]);
    assert!(kept.starts_with("train.keep_checkpoints = 0"), "{kept}");
    let lm = ["data.dataset=\"ptb\"", "data.tokenizer=\"word\"", "data.vocab_size=2"];
    assert!(set_err(&lm).starts_with("data.vocab_size = 2"), "{}", set_err(&lm));
    let mt = ["data.dataset=\"multi30k\"", "data.source=\"de\"", "data.target=\"en\"", "model.arch=\"seq2seq\""];
    let mt4: Vec<&str> = mt.iter().copied().chain(["data.tokenizer=\"word\"", "data.vocab_size=4"]).collect();
    assert!(set_err(&mt4).starts_with("data.vocab_size = 4"), "{}", set_err(&mt4));
    let mt5: Vec<String> =
        mt.iter().copied().chain(["data.tokenizer=\"word\"", "data.vocab_size=5"]).map(String::from).collect();
    RunConfig::load(None, &mt5).unwrap();
    let no_source =
        set_err(&["data.dataset=\"multi30k\"", "data.source=\"\"", "data.target=\"en\"", "model.arch=\"seq2seq\""]);
    assert!(no_source.starts_with("data.source / data.target"), "{no_source}");
}

#[test]
fn generated_sources_too_large_for_memory_or_their_vocabulary_are_refused() {
    let mt = set_err(&["data.dataset=\"synthetic-mt\"", "model.arch=\"seq2seq\"", "data.synthetic_vocab=65536"]);
    assert!(mt.starts_with("data.synthetic_vocab = 65536"), "{mt}");
    let branching = set_err(&["data.dataset=\"synthetic-lm\"", "data.synthetic_vocab=4", "data.synthetic_branching=5"]);
    assert!(branching.starts_with("data.synthetic_branching = 5"), "{branching}");
}

#[test]
fn a_number_that_is_not_finite_is_refused_even_in_a_key_the_run_does_not_read() {
    let err = set_err(&["model.lora_rank=0", "model.lora_alpha=nan"]);
    assert!(err.starts_with("model.lora_alpha = NaN: expected a finite number"), "{err}");
    let err = set_err(&["data.dataset=\"ptb\"", "data.synthetic_epsilon=inf"]);
    assert!(err.starts_with("data.synthetic_epsilon = inf"), "{err}");
}

#[test]
fn a_value_of_the_wrong_type_is_blamed_on_the_set_that_gave_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(&dir, "[train]\nlr = 0.5\n");
    let err = RunConfig::load(Some(&file), &["train.lr=\"abc\"".to_string()]).unwrap_err().to_string();
    assert!(err.starts_with("--set: train.lr"), "{err}");
    let err = load_text("[train]\nlr = \"abc\"\n").unwrap_err().to_string();
    assert!(err.contains("exp.toml: train.lr"), "{err}");
}

#[test]
fn a_stored_config_out_of_range_is_an_error_naming_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let text = RunConfig::load(None, &[]).unwrap().to_toml().replace("lr = 0.01", "lr = -1.0");
    assert!(text.contains("lr = -1.0"));
    std::fs::write(&path, text).unwrap();
    let err = RunConfig::from_resolved(&path).unwrap_err().to_string();
    assert!(err.starts_with(&format!("{}: train.lr = -1", path.display())), "{err}");
}
