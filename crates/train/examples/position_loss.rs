//! A language model's loss by position in its window, the same targets scored at each position.
//!
//! ```text
//! cargo run --release -p attend-train --example position_loss -- \
//!     RUN DATA_DIR valid|test|train TARGETS P1,P2,... [TO=FROM]
//! ```
//!
//! `TARGETS` target tokens (a multiple of 64) are drawn from the split (a fixed seed); each is
//! predicted at every position `p` asked, at the last position of a window of the `p + 1` tokens
//! before it, so from exactly `p + 1` tokens of context. The same targets at every position
//! make the differences between positions paired: the standard errors of the differences are
//! far smaller than those of the losses. Differences are to the last position listed; errors
//! are over groups of 64 targets. With learned positions, each position's
//! embedding is printed beside its loss: its norm and its cosine with the position before it;
//! `TO=FROM` (e.g. `63=62`) first overwrites the embedding of position `TO` with that of `FROM`,
//! a probe of how much a position's loss owes to its own row of the table.
//! `eval --context-window N` scores every token
//! at positions `N − 1` and later; this says what each of those positions is worth
//! (docs/benchmarks.md, "Penn Treebank", "Each position's loss").

use std::path::Path;
use std::process::ExitCode;

use attend_model::DecoderOnly;
use attend_train::data::lm_dataset::load_lm as load_dataset;
use attend_train::lm_eval::{score, Window};
use attend_train::rng::Rng;
use attend_train::trained::load_lm;
use burn::module::{AutodiffModule, Param};
use burn::tensor::Tensor;

type Inner = burn_ndarray::NdArray<f32>;
type B = burn::backend::Autodiff<Inner>;

const USAGE: &str =
    "usage: position_loss RUN DATA_DIR valid|test|train TARGETS P1,P2,... [TO=FROM] (positions below the run's block_size)";
const GROUP: usize = 64;

fn main() -> ExitCode {
    match run(&std::env::args().skip(1).collect::<Vec<_>>()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("position_loss: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let (run, data_dir, split, targets, positions, copy) = match args {
        [run, data_dir, split, targets, positions] => (run, data_dir, split, targets, positions, None),
        [run, data_dir, split, targets, positions, copy] => (run, data_dir, split, targets, positions, Some(copy)),
        _ => return Err(USAGE.into()),
    };
    let k: usize = targets.parse().map_err(|_| format!("TARGETS {targets:?}: expected a count of tokens; {USAGE}"))?;
    if !k.is_multiple_of(GROUP) || k < 2 * GROUP {
        return Err(format!("TARGETS {k}: expected a multiple of {GROUP}, at least {}", 2 * GROUP));
    }
    let positions: Vec<usize> = positions
        .split(',')
        .map(|p| p.parse().map_err(|_| format!("position {p:?}: expected a number; {USAGE}")))
        .collect::<Result<_, _>>()?;
    let device = Default::default();
    let trained = load_lm::<B>(Path::new(run), &device).map_err(|e| format!("{run}: {e}"))?;
    let block = trained.config.model.block_size;
    if let Some(p) = positions.iter().find(|&&p| p >= block) {
        return Err(format!("position {p}: the run's block_size is {block}, so positions are 0..{}", block - 1));
    }
    let data = load_dataset(&trained.config.data, Path::new(data_dir)).map_err(|e| e.to_string())?;
    let stream = match split.as_str() {
        "train" => data.train,
        "valid" => data.valid,
        "test" if data.has_test => data.test,
        "test" => return Err(format!("split test: dataset {} has no test split", trained.config.data.dataset)),
        other => return Err(format!("split {other:?}: expected valid, test or train")),
    };
    if stream.len() <= block || k > stream.len() {
        return Err(format!(
            "{split} has {} tokens: needs more than block_size ({block}), and at least TARGETS ({k})",
            stream.len()
        ));
    }
    let mut model = trained.model.valid();
    if let Some(copy) = copy {
        let pair = copy.split_once('=').and_then(|(to, from)| Some((to.parse().ok()?, from.parse().ok()?)));
        let (to, from) = pair.ok_or_else(|| format!("{copy:?}: expected TO=FROM, two positions; {USAGE}"))?;
        copy_position_row(&mut model, to, from)?;
    }
    let embedding = learned_positions(&mut model);
    // Targets with a full block before them, so every position has its whole context.
    let mut rng = Rng::derive(7, "position-loss", 0);
    let targets: Vec<usize> = (0..k).map(|_| block + rng.below((stream.len() - block) as u64) as usize).collect();

    // Mean loss of each group of targets, at each position.
    let mut by_position: Vec<Vec<f64>> = Vec::new();
    for &p in &positions {
        let len = p + 1;
        let groups: Vec<f64> = targets
            .chunks(GROUP)
            .map(|group| {
                let windows: Vec<Window> =
                    group.iter().map(|&t| Window { start: t - len, len, skip: len - 1 }).collect();
                score(&model, &stream, &windows, GROUP, 0, 0, &device).loss()
            })
            .collect();
        let mean = groups.iter().sum::<f64>() / groups.len() as f64;
        let shape = embedding.as_ref().map_or(String::new(), |rows| {
            let cosine = p.checked_sub(1).map_or("-".into(), |q| format!("{:.3}", cosine(&rows[p], &rows[q])));
            format!("; embedding norm {:.4}, cosine with the one before {cosine}", norm(&rows[p]))
        });
        println!("position {p:3} (context {len:3}): loss {mean:.5}, ppl {:.3}{shape}", mean.exp());
        by_position.push(groups);
    }
    let (last, reference) = (by_position.len() - 1, positions[positions.len() - 1]);
    for (groups, p) in by_position.iter().zip(&positions).take(last) {
        let d: Vec<f64> = groups.iter().zip(&by_position[last]).map(|(a, b)| a - b).collect();
        let n = d.len() as f64;
        let mean = d.iter().sum::<f64>() / n;
        let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        println!("position {p:3} − position {reference}: {mean:+.5} ± {:.5} nats (standard error)", (var / n).sqrt());
    }
    Ok(())
}

/// A model's learned position table (`None` inside for fixed positions).
fn position_table(model: &mut DecoderOnly<Inner>) -> &mut Option<Param<Tensor<Inner, 2>>> {
    match model {
        DecoderOnly::Gpt(lm) => &mut lm.positions.learned,
        DecoderOnly::Notes(notes) => &mut notes.positions.learned,
    }
}

/// Overwrites row `to` of a model's learned position table with row `from`.
fn copy_position_row(model: &mut DecoderOnly<Inner>, to: usize, from: usize) -> Result<(), String> {
    let learned = position_table(model);
    let table = learned.as_ref().ok_or("TO=FROM: the run has no learned position table")?.val();
    let [rows, d] = table.dims();
    if to.max(from) >= rows {
        return Err(format!("TO=FROM: positions are 0..{}", rows - 1));
    }
    let row = table.clone().slice([from..from + 1, 0..d]);
    *learned = Some(Param::from_tensor(table.slice_assign([to..to + 1, 0..d], row)));
    Ok(())
}

/// The rows of a model's learned position embedding; `None` for fixed positions.
fn learned_positions(model: &mut DecoderOnly<Inner>) -> Option<Vec<Vec<f32>>> {
    let table = position_table(model).as_ref()?.val();
    let [_, d] = table.dims();
    let values = table.into_data().to_vec::<f32>().ok()?;
    Some(values.chunks(d).map(<[f32]>::to_vec).collect())
}

fn norm(v: &[f32]) -> f64 {
    v.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum::<f64>() / (norm(a) * norm(b))
}
