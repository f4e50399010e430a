//! `cargo xtask train`: resolve the configuration, pick the backend, run the loop with a
//! progress bar, print the summary (DESIGN.md sections 4 and 5).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use attend_train::config::RunConfig;
use attend_train::lm_loop::{train_lm, LmSummary, Observer, RunOptions};
use attend_train::mt_loop::{train_mt, MtSummary};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Args)]
pub struct TrainArgs {
    /// Experiment file laid over the built-in defaults (configs/default.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Directory holding the named datasets (default: $ATTEND_DATA_DIR, else data/).
    #[arg(long, env = "ATTEND_DATA_DIR", default_value = "data")]
    data_dir: PathBuf,
    /// Run directory (default: runs/<config file stem>, runs/default without --config).
    #[arg(long)]
    run: Option<PathBuf>,
    /// Compute backend.
    #[arg(long, value_enum, default_value_t = Backend::Ndarray)]
    backend: Backend,
    /// Continue the run in --run from its last checkpoint, with its own config.toml.
    #[arg(long)]
    resume: bool,
    /// Override one key: --set section.key=value (repeatable; same rules as files).
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    sets: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// CPU, burn-ndarray.
    Ndarray,
    /// GPU, burn-wgpu (needs a build with the `wgpu` feature).
    Wgpu,
}

pub fn run(args: TrainArgs) -> Result<()> {
    let run_dir = args.run.clone().unwrap_or_else(|| {
        let stem = args.config.as_ref().and_then(|c| c.file_stem()).map_or("default".into(), |s| s.to_string_lossy().into_owned());
        PathBuf::from("runs").join(stem)
    });
    let config = if args.resume {
        if !args.sets.is_empty() {
            bail!("--resume takes the configuration from {}/config.toml; drop --set", run_dir.display());
        }
        let path = run_dir.join("config.toml");
        if !path.is_file() {
            bail!("no checkpoint to resume in {}", run_dir.display());
        }
        let stored = RunConfig::from_resolved(&path)?;
        // `--config` with `--resume` (the command that started the run, repeated) only names
        // the run directory; it must describe the run being continued.
        if let Some(file) = &args.config {
            if let Some(diff) = RunConfig::load(Some(file), &[])?.first_difference(&stored) {
                bail!(
                    "--config {} differs from {} ({diff}): --resume continues with the run's own \
                     configuration; drop --config, or start a new --run",
                    file.display(),
                    path.display()
                );
            }
        }
        stored
    } else {
        RunConfig::load(args.config.as_deref(), &args.sets)?
    };
    match args.backend {
        Backend::Ndarray => train_on::<burn::backend::Autodiff<burn_ndarray::NdArray<f32>>>(&config, args, run_dir),
        #[cfg(feature = "wgpu")]
        Backend::Wgpu => train_on::<burn::backend::Autodiff<burn_wgpu::Wgpu>>(&config, args, run_dir),
        #[cfg(not(feature = "wgpu"))]
        Backend::Wgpu => bail!(
            "--backend wgpu: this build has no wgpu backend; build xtask with `--features wgpu` \
             (cargo run --release -p xtask --features wgpu -- train ...), or use --backend ndarray"
        ),
    }
}

/// Train on backend `B`, on its default device.
fn train_on<B: burn::tensor::backend::AutodiffBackend>(config: &RunConfig, args: TrainArgs, run_dir: PathBuf) -> Result<()> {
    let device = B::Device::default();
    let opts = RunOptions { run_dir: run_dir.clone(), data_dir: args.data_dir, resume: args.resume };
    let mut bar = Bar::new();
    // Ctrl-C: finish the current step, save a checkpoint, exit cleanly. A second Ctrl-C exits
    // at once (the checkpoints already written are complete: they are renamed into place).
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::Relaxed) {
            eprintln!("second Ctrl-C: exiting without a new checkpoint");
            std::process::exit(130);
        }
        eprintln!("Ctrl-C: saving a checkpoint after this step (Ctrl-C again to exit at once)");
    })
    .context("installing the Ctrl-C handler")?;
    if config.model.arch == attend_model::Arch::Seq2seq {
        let summary = train_mt::<B>(config, &opts, &device, &mut bar, &stop)
            .with_context(|| format!("training in {}", run_dir.display()))?;
        bar.bar.finish_and_clear();
        print_mt_summary(&summary, &run_dir);
        return Ok(());
    }
    let summary = train_lm::<B>(config, &opts, &device, &mut bar, &stop)
        .with_context(|| format!("training in {}", run_dir.display()))?;
    bar.bar.finish_and_clear();
    print_summary(&summary, &run_dir);
    Ok(())
}

/// The progress bar: step, loss, learning rate, tokens/s, ETA.
struct Bar {
    bar: ProgressBar,
}

impl Bar {
    fn new() -> Self {
        Bar { bar: ProgressBar::hidden() }
    }
}

impl Observer for Bar {
    fn started(&mut self, first_step: u64, max_steps: u64) {
        self.bar = ProgressBar::new(max_steps);
        self.bar.set_position(first_step - 1);
        self.bar.set_style(
            ProgressStyle::with_template("{bar:30} step {pos}/{len} {msg} eta {eta}").expect("valid template"),
        );
    }

    fn step(&mut self, step: u64, loss: f64, lr: f64, tokens_per_s: f64) {
        self.bar.set_position(step);
        self.bar.set_message(format!("loss {loss:.4} lr {lr:.2e} {tokens_per_s:.0} tok/s"));
    }

    fn eval(&mut self, step: u64, loss: f64) {
        self.note(&format!("step {step}: valid loss {loss:.4} (ppl {:.2})", loss.exp()));
    }

    /// Above the bar on a terminal; a plain stderr line otherwise (before the bar starts, or
    /// when stderr is a file, where indicatif draws nothing and would drop the line).
    fn note(&mut self, message: &str) {
        if self.bar.is_hidden() {
            eprintln!("{message}");
        } else {
            self.bar.println(message);
        }
    }
}

fn print_summary(s: &LmSummary, run_dir: &std::path::Path) {
    let loss = s.valid.loss();
    if s.already_done {
        println!("nothing to do: the run is already at its last step ({})", s.step);
    }
    if s.interrupted {
        println!("stopped at step {}; continue with --resume", s.step);
    }
    if s.early_stopped {
        println!("early stop at step {} (no improvement for train.patience evaluations)", s.step);
    }
    println!("run            {}", run_dir.display());
    println!("steps          {} ({} tokens, {:.1} s)", s.step, s.tokens, s.wall_s);
    println!("parameters     {}", s.params);
    println!("training cost  {:.3e} FLOPs (3 x forward FLOPs per token x tokens)", s.train_flops);
    println!("valid loss     {loss:.4} nats/token ({:.4} bits/token) over {} tokens", loss / std::f64::consts::LN_2, s.valid.tokens);
    println!("valid ppl      {:.3}", loss.exp());
    if let Some(h) = s.entropy_rate {
        println!(
            "entropy rate   {h:.4} nats/token (the source's; ppl {:.3}): the model is {:.1}% above it",
            h.exp(),
            100.0 * (loss - h) / h
        );
    }
    println!("sample         {}", s.sample.replace('\n', " / "));
}

fn print_mt_summary(s: &MtSummary, run_dir: &std::path::Path) {
    if let Some(reason) = s.already_done {
        println!("nothing to do: the run already finished at step {} ({reason}); its scores are in", s.step);
        println!("{}, and `cargo xtask eval --run {}` scores it again", run_dir.join("metrics.jsonl").display(), run_dir.display());
        return;
    }
    if s.interrupted {
        println!("stopped at step {}; continue with --resume", s.step);
    }
    if s.early_stopped {
        println!("early stop at step {} (no improvement for train.patience evaluations)", s.step);
    }
    println!("run            {}", run_dir.display());
    println!("steps          {} ({} target tokens, {:.1} s)", s.step, s.tokens, s.wall_s);
    println!("parameters     {}", s.params);
    println!("training cost  {:.3e} FLOPs (3 x forward FLOPs per token x tokens)", s.train_flops);
    let Some(v) = &s.valid else {
        println!("valid          not evaluated yet (the first evaluation is at step train.eval_every)");
        return;
    };
    println!("valid loss     {:.4} nats/token, ppl {:.3}", v.loss, v.loss.exp());
    println!("valid BLEU     {:.2} ({})", v.bleu, v.signature);
    println!("source         {}", v.sample.0);
    println!("reference      {}", v.sample.1);
    println!("hypothesis     {}", v.sample.2);
}
