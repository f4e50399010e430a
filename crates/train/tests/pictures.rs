//! `attention` and `positions`: one SVG per layer with every head's weights on the text's
//! tokens (causal: nothing above the diagonal), and the sinusoids as the paper defines them.

use std::sync::atomic::AtomicBool;

use attend_train::config::RunConfig;
use attend_train::pictures::{attention, learned_panel, sinusoid_panel};
use attend_train::tasks::train_lm;
use attend_train::RunOptions;

use crate::common;
use common::serial;

type B = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;
type I = burn_ndarray::NdArray<f32>;

struct Quiet;
impl attend_train::Observer for Quiet {}

#[test]
fn attention_draws_every_head_of_every_layer_a_causal_model_never_looks_ahead_and_a_text_past_the_block_is_refused() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let sets: Vec<String> = [
        "data.synthetic_size=2000",
        "data.synthetic_vocab=8",
        "model.d_model=16",
        "model.n_heads=2",
        "model.n_layers=2",
        "model.d_ff=32",
        "model.block_size=8",
        "train.max_steps=4",
        "train.batch_size=4",
        "train.eval_every=4",
        "train.eval_batches=1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let config = RunConfig::load(None, &sets).unwrap();
    let run = dir.path().join("run");
    let opts = RunOptions { run_dir: run.clone(), data_dir: dir.path().to_path_buf(), resume: false };
    train_lm::<B>(&config, &opts, &Default::default(), &mut Quiet, &AtomicBool::new(false)).unwrap();
    let vocab: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("vocab.json")).unwrap()).unwrap();
    let words: Vec<&str> = vocab["symbols"].as_array().unwrap().iter().take(5).map(|s| s.as_str().unwrap()).collect();

    let out = dir.path().join("pictures");
    let files = attention::<I>(&run, &words.join(" "), None, &out, &Default::default()).unwrap();
    assert_eq!(files.len(), 2, "one file per layer");
    for file in files {
        let svg = std::fs::read_to_string(file).unwrap();
        let cells = cells(&svg);
        assert_eq!(cells.len(), 2 * 5 * 5, "2 heads of 5 x 5 tokens");
        let mut xs: Vec<i64> = cells.iter().map(|c| c.0).collect();
        let mut ys: Vec<i64> = cells.iter().map(|c| c.1).collect();
        xs.sort();
        xs.dedup();
        ys.sort();
        ys.dedup();
        assert_eq!((xs.len(), ys.len()), (2 * 5, 5), "a grid of 5 rows and 2 x 5 columns");
        for (x, y, fill) in &cells {
            let (col, row) = (xs.iter().position(|v| v == x).unwrap() % 5, ys.iter().position(|v| v == y).unwrap());
            if col > row {
                assert_eq!(fill, "#FFFFFF", "{} looks ahead at {} (weight above 0)", words[row], words[col]);
            }
        }
        for word in &words {
            assert!(svg.contains(&format!("\n{word}\n</text>")), "token {word} labelled");
        }
    }
    // Nine tokens for a block of eight: an error naming the flag and the limit, no pictures.
    let long: Vec<&str> = words.iter().cycle().take(9).copied().collect();
    let refused = dir.path().join("refused");
    let err = attention::<I>(&run, &long.join(" "), None, &refused, &Default::default()).unwrap_err().to_string();
    assert!(err.contains("--text is 9 tokens long") && err.contains("at most 8 (model.block_size)"), "{err}");
    assert!(!refused.join("layer-1.svg").exists(), "a picture of a refused text");
    // The run's learned positions: the whole table by default, and no more than it has.
    let table = learned_panel::<I>(&run, None, &Default::default()).unwrap();
    assert_eq!((table.rows.len(), table.cols.len()), (8, 16), "block_size x d_model");
    assert_eq!(learned_panel::<I>(&run, Some(3), &Default::default()).unwrap().rows.len(), 3);
    let err = learned_panel::<I>(&run, Some(9), &Default::default()).unwrap_err().to_string();
    assert!(err.contains("--len 9") && err.contains("has 8 positions"), "{err}");
}

/// The heat-map cells of an attention SVG (14-pixel squares): `(x, y, fill)`.
fn cells(svg: &str) -> Vec<(i64, i64, String)> {
    let attr = |line: &str, name: &str| {
        let start = line.find(&format!(" {name}=\"")).map(|i| i + name.len() + 3)?;
        Some(line[start..].split('"').next()?.to_string())
    };
    svg.lines()
        .filter(|l| l.starts_with("<rect") && l.contains(r#"width="14" height="14""#))
        .map(|l| {
            let num = |name| attr(l, name).and_then(|v| v.parse().ok()).unwrap();
            (num("x"), num("y"), attr(l, "fill").unwrap())
        })
        .collect()
}

#[test]
fn the_sinusoid_panel_is_the_paper_s_formula() {
    let panel = sinusoid_panel(16, 10);
    let at = |t: usize, i: usize| panel.values[t * 16 + i];
    for (t, i) in [(3usize, 4usize), (9, 7)] {
        let angle = t as f64 / 10000f64.powf((i - i % 2) as f64 / 16.0);
        let want = if i % 2 == 0 { angle.sin() } else { angle.cos() };
        assert!((at(t, i) as f64 - want).abs() < 1e-5, "P[{t}, {i}]");
    }
}
