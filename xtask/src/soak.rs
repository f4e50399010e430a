//! `cargo xtask soak --kills N [--run DIR] [--seed S] [--task lm|mt|both]`: real crashes
//! (`attend_train::soak`). Starts small training runs as processes of this same binary,
//! SIGKILLs them at chosen moments, resumes them, and compares each finished log with an
//! uninterrupted run. Exits non-zero unless every kill was survived exactly; the last line of
//! stdout says `K/K kills survived`.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use attend_train::soak::{soak, SoakOptions, SoakTask};
use clap::{Args, ValueEnum};

#[derive(Clone, Copy, ValueEnum)]
enum Which {
    Lm,
    Mt,
    Both,
}

#[derive(Args)]
pub struct SoakArgs {
    /// Kills in all (with both tasks, the language model takes the odd one).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    kills: usize,
    /// Where the runs go (removed and rewritten; kept for a look afterwards).
    #[arg(long, default_value = "runs/soak")]
    run: PathBuf,
    /// Seeds the kill moments and delays.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The language model, the translation model, or both in turn.
    #[arg(long, value_enum, default_value = "both")]
    task: Which,
}

pub fn run(args: SoakArgs) -> Result<()> {
    let tasks = match args.task {
        Which::Lm => vec![SoakTask::Lm],
        Which::Mt => vec![SoakTask::Mt],
        Which::Both => vec![SoakTask::Lm, SoakTask::Mt],
    };
    let exe = std::env::current_exe().context("finding this program to start training with")?;
    let opts = SoakOptions { exe, dir: args.run.clone(), kills: args.kills, seed: args.seed, tasks };
    let mut count = 0;
    let kills = soak(&opts, &mut |kill| {
        count += 1;
        let verdict = if kill.survived {
            "survived"
        } else {
            "NOT survived: the finished log differs from the uninterrupted run's"
        };
        println!(
            "kill {count} ({}): {} (last logged step {}): {verdict}",
            kill.task.name(),
            kill.moment.describe(),
            kill.logged_step
        );
    })
    .map_err(anyhow::Error::msg)
    .with_context(|| format!("soaking in {}", args.run.display()))?;
    let survived = kills.iter().filter(|k| k.survived).count();
    println!("{survived}/{} kills survived", kills.len());
    if survived != kills.len() {
        bail!(
            "{} of {} kills were not survived (runs kept in {})",
            kills.len() - survived,
            kills.len(),
            args.run.display()
        );
    }
    Ok(())
}
