//! Tests of [`ModelConfig`]'s validation and TOML form.

use super::*;

#[test]
fn presets_are_valid() {
    for config in [ModelConfig::base(), ModelConfig::big(), ModelConfig::notes(), ModelConfig::nanogpt_cpu()] {
        assert_eq!(config.validate(), Ok(()), "{config:?}");
    }
}

#[test]
fn heads_must_divide_width_and_the_error_names_both_keys() {
    let config = ModelConfig { d_model: 100, n_heads: 3, ..ModelConfig::base() };
    let err = config.validate().unwrap_err();
    assert_eq!(err.to_string(), "model.n_heads = 3 must divide model.d_model = 100 (or set model.d_k and model.d_v)");
    let apart = ModelConfig { d_k: 16, d_v: 20, ..config };
    assert_eq!(apart.validate(), Ok(()));
    assert_eq!((apart.d_k(), apart.d_v()), (16, 20));
}

#[test]
fn zero_layers_is_an_error_naming_the_key() {
    let config = ModelConfig { n_layers: 0, ..ModelConfig::base() };
    assert_eq!(config.validate(), Err(ConfigError::Zero { key: "model.n_layers" }));
    assert_eq!(ModelConfig::validate_vocab(0).unwrap_err().to_string(), "data.vocab_size = 0 must be at least 1");
}

#[test]
fn dropout_outside_unit_interval_is_an_error() {
    for bad in [1.0, 1.5, -0.1, f64::NAN] {
        let config = ModelConfig { dropout: bad, ..ModelConfig::base() };
        let err = config.validate().unwrap_err();
        assert!(err.to_string().starts_with("model.dropout = "), "{err}");
    }
    let config = ModelConfig { attention_dropout: 1.0, ..ModelConfig::base() };
    assert!(config.validate().unwrap_err().to_string().contains("model.attention_dropout"));
}

#[test]
fn notes_arch_requires_one_head_and_one_layer() {
    let config = ModelConfig { n_heads: 2, d_model: 64, ..ModelConfig::notes() };
    assert!(config.validate().unwrap_err().to_string().starts_with("model.n_heads = 2"));
}

#[test]
fn toml_section_defaults_to_base_and_rejects_unknown_keys() {
    let config: ModelConfig = toml::from_str("arch = \"lm\"\nd_model = 256\nnorm = \"pre\"").unwrap();
    assert_eq!(config, ModelConfig { arch: Arch::Lm, d_model: 256, norm: NormPosition::Pre, ..ModelConfig::base() });
    let err = toml::from_str::<ModelConfig>("flux_capacitor = 1").unwrap_err();
    assert!(err.to_string().contains("flux_capacitor"), "{err}");
    let err = toml::from_str::<ModelConfig>("positions = \"rotary\"").unwrap_err();
    assert!(err.to_string().contains("rotary"), "{err}");
}

/// Only `d_k` and `d_v` together free `n_heads` from dividing `d_model`.
#[test]
fn d_k_or_d_v_alone_does_not_excuse_heads_that_do_not_divide() {
    let config = ModelConfig { d_model: 100, n_heads: 3, ..ModelConfig::base() };
    for one in [ModelConfig { d_k: 16, ..config.clone() }, ModelConfig { d_v: 16, ..config }] {
        assert_eq!(one.validate(), Err(ConfigError::HeadsDoNotDivide { n_heads: 3, d_model: 100 }), "{one:?}");
    }
}

#[test]
fn norm_eps_must_be_positive_and_finite() {
    for bad in [0.0, -1e-5, f64::INFINITY, f64::NAN] {
        let err = ModelConfig { norm_eps: bad, ..ModelConfig::base() }.validate().unwrap_err();
        assert!(err.to_string().starts_with("model.norm_eps = "), "{bad}: {err}");
    }
    assert_eq!(ModelConfig { norm_eps: 1e-12, ..ModelConfig::base() }.validate(), Ok(()));
}

/// The notes' model has one head of width `d_model` and no adapters: `d_k`, `d_v` and
/// `lora_rank` set are errors naming the key.
#[test]
fn notes_arch_rejects_each_of_d_k_d_v_and_lora_rank_by_name() {
    for (key, config) in [
        ("model.d_k", ModelConfig { d_k: 8, ..ModelConfig::notes() }),
        ("model.d_v", ModelConfig { d_v: 8, ..ModelConfig::notes() }),
        ("model.lora_rank", ModelConfig { lora_rank: 2, ..ModelConfig::notes() }),
    ] {
        let err = config.validate().unwrap_err();
        assert!(err.to_string().starts_with(&format!("{key} = set")), "{key}: {err}");
    }
}

/// With adapters on, `lora_alpha` must be a positive finite number; with `lora_rank = 0`
/// neither it nor the targets are looked at.
#[test]
fn lora_alpha_must_be_positive_and_finite_only_when_adapters_are_on() {
    let lora = ModelConfig { lora_rank: 4, ..ModelConfig::base() };
    assert_eq!(lora.validate(), Ok(()));
    for bad in [0.0, -8.0, f64::INFINITY, f64::NAN] {
        let err = ModelConfig { lora_alpha: bad, ..lora.clone() }.validate().unwrap_err();
        assert!(err.to_string().starts_with("model.lora_alpha = "), "{bad}: {err}");
    }
    let off = ModelConfig { lora_rank: 0, lora_alpha: -1.0, lora_targets: Vec::new(), ..ModelConfig::base() };
    assert_eq!(off.validate(), Ok(()));
}

#[test]
fn lora_targets_must_be_a_non_empty_list_of_distinct_known_projections() {
    let with = |targets: &[&str]| ModelConfig {
        lora_rank: 4,
        lora_targets: targets.iter().map(|t| t.to_string()).collect(),
        ..ModelConfig::base()
    };
    for bad in [&[][..], &["query", "query"], &["query", "ffn"], &["value", "key", "value"]] {
        let err = with(bad).validate().unwrap_err();
        assert!(err.to_string().starts_with("model.lora_targets = "), "{bad:?}: {err}");
    }
    for good in [&["query"][..], &["value", "query"], &["query", "key", "value", "output"]] {
        assert_eq!(with(good).validate(), Ok(()), "{good:?}");
    }
}
