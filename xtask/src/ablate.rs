//! `cargo xtask ablate`: the rows of the paper's Table 3 (`attend_train::ablate`), trained one
//! after another into `--run DIR/<row>/`; one JSON line per row on stdout as each finishes,
//! then the Markdown table (also written to `DIR/table3.md`). Running the same command again
//! continues a stopped ablation.

use std::path::PathBuf;

use anyhow::{Context, Result};
use attend_train::ablate::{ablate, markdown, write_markdown, Ablation};
use burn::tensor::backend::AutodiffBackend;
use clap::Args;

use crate::backend::{run_on, Backend, OnBackend};
use crate::progress::Bar;
use crate::train::stop_on_ctrl_c;

#[derive(Args)]
pub struct AblateArgs {
    /// The ablation file: a base configuration and its rows (configs/table3.toml).
    #[arg(long)]
    config: PathBuf,
    /// Directory holding the named datasets (default: $ATTEND_DATA_DIR, else data/).
    #[arg(long, env = "ATTEND_DATA_DIR", default_value = "data")]
    data_dir: PathBuf,
    /// Directory of the sub-runs (default: runs/<ablation file stem>).
    #[arg(long)]
    run: Option<PathBuf>,
    /// Compute backend.
    #[arg(long, value_enum, default_value_t = Backend::Ndarray)]
    backend: Backend,
    /// Override one key of the base and of every row: --set section.key=value (repeatable).
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    sets: Vec<String>,
}

pub fn run(args: AblateArgs) -> Result<()> {
    let ablation = Ablation::load(&args.config, &args.sets)?;
    let run_dir = args.run.clone().unwrap_or_else(|| attend_train::config::default_run_dir(Some(&args.config)));
    run_on(args.backend, Ablate { ablation, run_dir, data_dir: args.data_dir })
}

struct Ablate {
    ablation: Ablation,
    run_dir: PathBuf,
    data_dir: PathBuf,
}

impl OnBackend for Ablate {
    type Output = ();

    fn run<B: AutodiffBackend>(self, device: &B::Device) -> Result<()> {
        let stop = stop_on_ctrl_c()?;
        let mut bar = Bar::new();
        let mut print = |row: &attend_train::ablate::RowResult| println!("{}", row.to_json());
        let results = ablate::<B>(&self.ablation, &self.run_dir, &self.data_dir, device, &mut bar, &stop, &mut print)
            .with_context(|| format!("ablation in {}", self.run_dir.display()))?;
        bar.bar.finish_and_clear();
        let path = write_markdown(&self.run_dir, &results)?;
        print!("{}", markdown(&results));
        let total = self.ablation.rows.len();
        if results.len() < total {
            println!("stopped after {} of {total} rows; the same command continues", results.len());
        } else {
            println!("{total} rows; table in {}", path.display());
        }
        Ok(())
    }
}
