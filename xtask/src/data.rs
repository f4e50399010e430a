//! `cargo xtask data fetch NAME`: download a named public dataset into the data directory and
//! check the sha256 of every file (`attend_train::data::fetch`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use attend_train::data::fetch::{fetch, named, FileOutcome, Source};
use clap::{Args, Subcommand};

#[derive(Args)]
pub struct DataArgs {
    #[command(subcommand)]
    command: DataCommand,
}

#[derive(Subcommand)]
enum DataCommand {
    /// Download a named dataset (tiny-shakespeare, ptb, multi30k) and verify every sha256.
    Fetch {
        /// The dataset.
        name: String,
        /// Directory holding the named datasets (default: $ATTEND_DATA_DIR, else data/).
        #[arg(long, env = "ATTEND_DATA_DIR", default_value = "data")]
        data_dir: PathBuf,
        /// Fetch the same relative paths from this base URL (http://, https:// or file://)
        /// instead of the source repositories.
        #[arg(long)]
        mirror: Option<String>,
    },
}

pub fn run(args: DataArgs) -> Result<()> {
    match args.command {
        DataCommand::Fetch { name, data_dir, mirror } => {
            let dataset = named(&name)?;
            let source = mirror.map_or(Source::Origin, Source::Mirror);
            let outcomes = fetch(&dataset, &data_dir, &source, &mut |line| eprintln!("{line}"))
                .with_context(|| format!("fetching {name} into {}", data_dir.display()))?;
            let downloaded = outcomes.iter().filter(|(_, o)| matches!(o, FileOutcome::Downloaded { .. })).count();
            println!(
                "{name}: {} files in {}, {downloaded} downloaded, all sha256 verified",
                outcomes.len(),
                data_dir.display()
            );
            println!("source and license: {}", dataset.about);
            Ok(())
        }
    }
}
