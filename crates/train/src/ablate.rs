//! The paper's Table 3 (model variations) as one command: a base configuration and rows that
//! each change a few keys, trained one after another into sub-runs of one directory, and
//! reported as the paper reports them (parameters, steps, validation loss and perplexity, BLEU).
//!
//! The ablation file (`configs/table3.toml`):
//!
//! ```toml
//! base = "mt-synthetic.toml"          # a run configuration, relative to this file
//! set = ["train.max_steps=600"]       # laid over the base, for the base row and every row
//!
//! [[row]]
//! name = "A1"                         # the paper's sub-row label
//! set = ["model.n_heads=1", "model.d_k=64", "model.d_v=64"]
//! ```
//!
//! Each row's configuration is the base file, then the file's `set`, then the command's
//! `--set`, then the row's own `set` (so a row always shows its change). The `base` row is
//! trained first. A row whose sub-run finished is read back from its `metrics.jsonl`; a row
//! that was stopped resumes from its last checkpoint: running the same command again continues
//! a stopped ablation where it stopped.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use burn::tensor::backend::AutodiffBackend;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::config::{parse_set, ConfigError, RunConfig};
use crate::error::{io_err, TrainError};
use crate::run::{Observer, RunOptions};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AblationFile {
    base: String,
    #[serde(default)]
    set: Vec<String>,
    row: Vec<RowSpec>,
}

/// One row: its label and the keys it changes.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RowSpec {
    pub name: String,
    pub set: Vec<String>,
}

/// A loaded ablation: every row's resolved configuration, checked before anything trains.
#[derive(Debug)]
pub struct Ablation {
    /// `base` first, then the file's rows in order.
    pub rows: Vec<(RowSpec, RunConfig)>,
}

impl Ablation {
    /// Reads `path` and resolves every row with `cli_sets` (errors name the file and row).
    pub fn load(path: &Path, cli_sets: &[String]) -> Result<Self, ConfigError> {
        let origin = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Io { path: path.to_path_buf(), source })?;
        let file: AblationFile = toml::from_str(&text)
            .map_err(|e| ConfigError::Syntax { origin: origin.clone(), message: e.message().to_string() })?;
        let base_file = path.parent().unwrap_or(Path::new(".")).join(&file.base);
        let mut rows = vec![RowSpec { name: "base".into(), set: Vec::new() }];
        rows.extend(file.row);
        let mut resolved = Vec::with_capacity(rows.len());
        for (i, row) in rows.into_iter().enumerate() {
            let bad_name = row.name.is_empty() || row.name.contains(['/', '\\']) || row.name.starts_with('.');
            if bad_name || resolved.iter().any(|(r, _): &(RowSpec, RunConfig)| r.name == row.name) {
                return Err(ConfigError::BadValue {
                    origin,
                    key: format!("row {} name", i),
                    message: format!(
                        "{:?}: expected a distinct label usable as a directory name (A1, B2, ...)",
                        row.name
                    ),
                });
            }
            let sets: Vec<String> = file.set.iter().chain(cli_sets).chain(&row.set).cloned().collect();
            let config = RunConfig::load(Some(&base_file), &sets).map_err(|e| ConfigError::BadValue {
                origin: origin.clone(),
                key: format!("row {}", row.name),
                message: e.to_string(),
            })?;
            resolved.push((row, config));
        }
        Ok(Ablation { rows: resolved })
    }
}

/// One row's outcome, as a line of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct RowResult {
    pub row: String,
    /// The row's own `set`, as key → value.
    pub changed: Map<String, Value>,
    pub params: u64,
    pub steps: u64,
    pub valid_loss: f64,
    pub valid_ppl: f64,
    /// Translation rows: validation BLEU.
    pub bleu: Option<f64>,
    pub wall_s: f64,
}

impl RowResult {
    /// The row's JSON line.
    pub fn to_json(&self) -> Value {
        json!({"row": self.row, "changed": self.changed, "params": self.params, "steps": self.steps,
               "valid_loss": self.valid_loss, "valid_ppl": self.valid_ppl, "bleu": self.bleu, "wall_s": self.wall_s})
    }
}

/// The rows as a Markdown table in the paper's layout.
pub fn markdown(results: &[RowResult]) -> String {
    let mut out = String::from(
        "| row | changed | params | steps | valid loss | valid PPL | BLEU | time (s) |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        let changed: Vec<String> = r.changed.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        let bleu = r.bleu.map_or("-".into(), |b| format!("{b:.2}"));
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.4} | {:.3} | {bleu} | {:.1} |\n",
            r.row,
            changed.join(", "),
            r.params,
            r.steps,
            r.valid_loss,
            r.valid_ppl,
            r.wall_s
        ));
    }
    out
}

/// Trains (or reads back) every row into `run/<row>/`, calling `on_row` as each is done.
/// Returns the finished rows; fewer than all when `stop` was raised (Ctrl-C).
pub fn ablate<B: AutodiffBackend>(
    ablation: &Ablation,
    run: &Path,
    data_dir: &Path,
    device: &B::Device,
    observer: &mut dyn Observer,
    stop: &AtomicBool,
    on_row: &mut dyn FnMut(&RowResult),
) -> Result<Vec<RowResult>, TrainError> {
    let mut results = Vec::with_capacity(ablation.rows.len());
    for (row, config) in &ablation.rows {
        let dir = run.join(&row.name);
        let result = match finished(&dir, row, config)? {
            Some(result) => result,
            None => {
                let resume = dir.join("checkpoints").is_dir();
                observer.note(&format!(
                    "row {}: {} in {}",
                    row.name,
                    if resume { "resuming" } else { "training" },
                    dir.display()
                ));
                let opts = RunOptions { run_dir: dir.clone(), data_dir: data_dir.to_path_buf(), resume };
                crate::tasks::train::<B>(config, &opts, device, observer, stop)?;
                if stop.load(Ordering::Relaxed) {
                    return Ok(results);
                }
                finished(&dir, row, config)?.ok_or_else(|| TrainError::Io {
                    path: dir.join("metrics.jsonl"),
                    source: std::io::Error::other("the row's run ended without a summary"),
                })?
            }
        };
        on_row(&result);
        results.push(result);
    }
    Ok(results)
}

/// The result of a row whose sub-run finished (its summary event), after checking that the
/// sub-run was made with this row's configuration.
fn finished(dir: &Path, row: &RowSpec, config: &RunConfig) -> Result<Option<RowResult>, TrainError> {
    let stored = dir.join("config.toml");
    if !stored.is_file() {
        return Ok(None);
    }
    if let Some(difference) = RunConfig::from_resolved(&stored)?.first_difference(config) {
        return Err(TrainError::Io {
            path: stored,
            source: std::io::Error::other(format!(
                "row {} was trained with another configuration ({difference}); remove {} or use another --run",
                row.name,
                dir.display()
            )),
        });
    }
    let log = dir.join("metrics.jsonl");
    let text = match std::fs::read_to_string(&log) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(&log)(e)),
    };
    let Some(summary) =
        text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).find(|v| v["event"] == "summary")
    else {
        return Ok(None);
    };
    let mut changed = Map::new();
    for arg in &row.set {
        let (key, value) = parse_set(arg)?;
        changed.insert(key, serde_json::to_value(value).unwrap_or(Value::Null));
    }
    let number = |key: &str| summary[key].as_f64();
    let missing = |key: &str| TrainError::Io {
        path: log.clone(),
        source: std::io::Error::other(format!("the summary event has no {key}")),
    };
    Ok(Some(RowResult {
        row: row.name.clone(),
        changed,
        params: summary["total_params"].as_u64().ok_or_else(|| missing("total_params"))?,
        steps: summary["step"].as_u64().ok_or_else(|| missing("step"))?,
        valid_loss: number("valid_loss").ok_or_else(|| missing("valid_loss"))?,
        valid_ppl: number("valid_ppl").ok_or_else(|| missing("valid_ppl"))?,
        bleu: number("valid_bleu"),
        wall_s: number("wall_s").unwrap_or(0.0),
    }))
}

/// Writes the table to `run/table3.md`.
pub fn write_markdown(run: &Path, results: &[RowResult]) -> Result<PathBuf, TrainError> {
    let path = run.join("table3.md");
    std::fs::create_dir_all(run).map_err(io_err(run))?;
    crate::whole_file::write_whole(&path, markdown(results)).map_err(io_err(&path))?;
    Ok(path)
}
