//! Our BLEU, chrF and tokenizers against sacreBLEU 2.6.0 itself.
//!
//! The expected values in `fixtures/sacrebleu_fixtures.json` were produced by sacreBLEU
//! (`fixtures/make_sacrebleu_fixtures.py`, which documents how to re-run it). Each test walks
//! one table of cases and reports every case that differs, by name. Scores must agree to
//! 1e-9 (the contract is the hundredth; the floating-point operations are sacreBLEU's, in its
//! order, and on the machine the fixtures were made on every score, precision and brevity
//! penalty is bit-identical), and the printed line must be identical.

use std::sync::OnceLock;

use attend_metrics::{
    corpus_bleu, corpus_chrf, sentence_bleu, sentence_chrf, BleuConfig, ChrfConfig, Smoothing, Tokenizer,
    SACREBLEU_VERSION,
};
use serde_json::Value;

fn fixtures() -> &'static Value {
    static FIXTURES: OnceLock<Value> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sacrebleu_fixtures.json");
        let text = std::fs::read_to_string(path).expect("fixture file is committed beside this test");
        serde_json::from_str(&text).expect("fixture file is JSON")
    })
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

/// The hypotheses and reference streams a case names.
fn inputs(case: &Value) -> (Vec<String>, Vec<Vec<String>>) {
    let input = &fixtures()["inputs"][case["input"].as_str().unwrap()];
    let refs = input["refs"].as_array().unwrap().iter().map(strings).collect();
    (strings(&input["hyps"]), refs)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * (1.0 + b.abs())
}

/// Checks all cases of a table; panics listing every failing case.
fn check_all(table: &str, check: impl Fn(&Value) -> Result<(), String>) {
    let cases = fixtures()[table].as_array().unwrap();
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| check(case).err().map(|e| format!("{}: {e}", case["name"].as_str().unwrap_or("?"))))
        .collect();
    assert!(cases.len() > 100, "the {table} table should have many cases");
    assert!(
        failures.is_empty(),
        "{} of {} {table} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn fixtures_were_made_by_the_sacrebleu_version_our_signatures_name() {
    assert_eq!(fixtures()["sacrebleu_version"], SACREBLEU_VERSION);
}

#[test]
fn tokenizers_equal_sacrebleu_tokenizers() {
    check_all("tokenizers", |case| {
        let tok: Tokenizer = case["tokenize"].as_str().unwrap().parse().unwrap();
        let input = case["input"].as_str().unwrap();
        let ours = tok.tokenize(input);
        let theirs = case["output"].as_str().unwrap();
        (ours == theirs).then_some(()).ok_or_else(|| format!("{tok} on {input:?}: ours {ours:?}, sacreBLEU {theirs:?}"))
    });
}

fn bleu_config(case: &Value) -> BleuConfig {
    BleuConfig {
        tokenizer: case["tokenize"].as_str().unwrap().parse().unwrap(),
        smoothing: Smoothing::from_name(case["smooth_method"].as_str().unwrap(), case["smooth_value"].as_f64())
            .unwrap(),
        lowercase: case["lowercase"].as_bool().unwrap(),
        effective_order: case["effective_order"].as_bool().unwrap(),
    }
}

#[test]
fn bleu_equals_sacrebleu_on_every_case() {
    check_all("bleu", |case| {
        let (hyps, refs) = inputs(case);
        let config = bleu_config(case);
        let score = if case["mode"] == "sentence" {
            let segment_refs: Vec<&str> = refs.iter().map(|s| s[0].as_str()).collect();
            sentence_bleu(&hyps[0], &segment_refs, &config)
        } else {
            corpus_bleu(&hyps, &refs, &config)
        }
        .map_err(|e| e.to_string())?;
        let want = |key: &str| case[key].as_f64().unwrap();
        let mut diffs = Vec::new();
        if !close(score.score, want("score")) {
            diffs.push(format!("score {} vs {}", score.score, want("score")));
        }
        if !close(score.bp, want("bp")) {
            diffs.push(format!("bp {} vs {}", score.bp, want("bp")));
        }
        for (n, (&p, q)) in score.precisions.iter().zip(case["precisions"].as_array().unwrap()).enumerate() {
            if !close(p, q.as_f64().unwrap()) {
                diffs.push(format!("p{} {p} vs {q}", n + 1));
            }
        }
        let counts = |v: &Value| v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect::<Vec<_>>();
        if score.counts.to_vec() != counts(&case["counts"]) || score.totals.to_vec() != counts(&case["totals"]) {
            diffs
                .push(format!("counts {:?}/{:?} vs {}/{}", score.counts, score.totals, case["counts"], case["totals"]));
        }
        if (score.sys_len, score.ref_len) != (case["sys_len"].as_u64().unwrap(), case["ref_len"].as_u64().unwrap()) {
            diffs.push(format!("lengths {}/{}", score.sys_len, score.ref_len));
        }
        let signature = config.signature(refs.len());
        let text = score.format(&signature);
        if text != case["text"].as_str().unwrap() {
            diffs.push(format!("text {text:?} vs {}", case["text"]));
        }
        let ours = serde_json::to_value(score.to_json(&signature)).unwrap();
        for (key, theirs) in case["json"].as_object().unwrap() {
            let same = if key == "score" {
                format!("{:.2}", ours["score"].as_f64().unwrap()).parse::<f64>().unwrap() == theirs.as_f64().unwrap()
            } else {
                &ours[key] == theirs
            };
            if !same {
                diffs.push(format!("json {key}: {} vs {theirs}", ours[key]));
            }
        }
        diffs.is_empty().then_some(()).ok_or_else(|| diffs.join("; "))
    });
}

fn chrf_config(case: &Value) -> ChrfConfig {
    ChrfConfig {
        char_order: case["char_order"].as_u64().unwrap() as usize,
        word_order: case["word_order"].as_u64().unwrap() as usize,
        beta: case["beta"].as_u64().unwrap() as u32,
        lowercase: case["lowercase"].as_bool().unwrap(),
        whitespace: case["whitespace"].as_bool().unwrap(),
        eps_smoothing: case["eps_smoothing"].as_bool().unwrap(),
    }
}

#[test]
fn chrf_equals_sacrebleu_on_every_case() {
    check_all("chrf", |case| {
        let (hyps, refs) = inputs(case);
        let config = chrf_config(case);
        let score = if case["mode"] == "sentence" {
            let segment_refs: Vec<&str> = refs.iter().map(|s| s[0].as_str()).collect();
            sentence_chrf(&hyps[0], &segment_refs, &config)
        } else {
            corpus_chrf(&hyps, &refs, &config)
        }
        .map_err(|e| e.to_string())?;
        let mut diffs = Vec::new();
        let want = case["score"].as_f64().unwrap();
        if !close(score.score, want) {
            diffs.push(format!("score {} vs {want}", score.score));
        }
        let flat: Vec<u64> = score.stats.orders.iter().flat_map(|m| [m.hyp, m.reference, m.matched]).collect();
        let theirs: Vec<u64> = case["stats"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        if flat != theirs {
            diffs.push(format!("stats {flat:?} vs {theirs:?}"));
        }
        let signature = config.signature(refs.len());
        let text = score.format(&signature);
        if text != case["text"].as_str().unwrap() {
            diffs.push(format!("text {text:?} vs {}", case["text"]));
        }
        let ours = serde_json::to_value(score.to_json(&signature)).unwrap();
        for (key, theirs) in case["json"].as_object().unwrap() {
            if key != "score" && &ours[key] != theirs {
                diffs.push(format!("json {key}: {} vs {theirs}", ours[key]));
            }
        }
        diffs.is_empty().then_some(()).ok_or_else(|| diffs.join("; "))
    });
}

#[test]
fn real_data_case_multi30k_first_500_lines_matches_to_the_hundredth() {
    // The case built from ../shared/data/multi30k/test_2016_flickr.en.gz (first 500 lines
    // against a seeded perturbation of them); its inputs are stored in the fixture.
    let case = fixtures()["bleu"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "multi30k_test2016_first500/13a")
        .expect("fixture has the real-data case");
    let (hyps, refs) = inputs(case);
    assert_eq!(hyps.len(), 500);
    let score = corpus_bleu(&hyps, &refs, &BleuConfig::corpus()).unwrap();
    assert_eq!(format!("{:.2}", score.score), format!("{:.2}", case["score"].as_f64().unwrap()));
}
