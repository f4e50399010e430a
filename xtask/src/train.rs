//! `cargo xtask train`: resolve the configuration, run the task's training loop on the chosen
//! backend with a progress bar, print the summary (docs/commands.md; the run directory:
//! docs/architecture.md).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use attend_train::config::{default_run_dir, RunConfig};
use attend_train::parallel::{self, Fault, FaultKind, Nodes, Parallel};
use attend_train::tasks::{LmValid, MlmValid, MtValid};
use attend_train::{RunOptions, Summary, Trained};
use burn::tensor::backend::AutodiffBackend;
use clap::Args;

use crate::backend::{run_on, Backend, OnBackend};
use crate::progress::{self, Bar};

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
    #[command(flatten)]
    parallel: ParallelArgs,
}

/// Data parallel on burn-collective (docs/parallel.md).
#[derive(Args)]
pub struct ParallelArgs {
    /// Devices (peers) on this machine: GPUs with wgpu/cuda, CPU peers sharing the cores with
    /// ndarray. train.batch_size stays the global batch, split evenly over all peers.
    #[arg(long, default_value_t = 1)]
    devices: usize,
    /// Machines in the run (burn-collective's num_nodes); each runs this command with its own
    /// --node-rank. Needs --orchestrator and --node-address.
    #[arg(long, requires_all = ["node_rank", "orchestrator", "node_address"])]
    nodes: Option<u32>,
    /// This machine's rank, 0..nodes; rank 0 writes the run and starts the orchestrator.
    #[arg(long, requires = "nodes")]
    node_rank: Option<u32>,
    /// The global orchestrator, ws://HOST:PORT (served by rank 0 on PORT).
    #[arg(long, value_name = "ws://HOST:PORT", requires = "nodes")]
    orchestrator: Option<String>,
    /// How the other machines reach this one, ws://HOST:PORT; PORT is this node's data-service port.
    #[arg(long, value_name = "ws://HOST:PORT", requires = "nodes")]
    node_address: Option<String>,
    /// Seconds peers may take to join, and the longest any collective operation may wait
    /// (another node's evaluation included) before the run stops with an error (default 600;
    /// data-parallel runs only).
    #[arg(long)]
    peer_timeout: Option<u64>,
    /// Fault injection for the tests: PEER:STEP makes that peer panic at that step.
    #[arg(long, hide = true, value_parser = parse_fail)]
    fail_peer: Option<(usize, u64)>,
}

fn parse_fail(s: &str) -> Result<(usize, u64), String> {
    let (peer, step) = s.split_once(':').ok_or("expected PEER:STEP")?;
    Ok((peer.parse().map_err(|_| "PEER: a number")?, step.parse().map_err(|_| "STEP: a number")?))
}

impl ParallelArgs {
    /// The data-parallel layout, or `None` for the plain one-device loop.
    fn layout(&self) -> Result<Option<Parallel>> {
        let nodes = match (self.nodes, self.node_rank, &self.orchestrator, &self.node_address) {
            (Some(count), Some(rank), Some(orchestrator), Some(address)) => {
                let port = address.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok());
                let data_port = port.with_context(|| format!("--node-address {address:?}: expected ws://HOST:PORT"))?;
                let (orchestrator, address) = (orchestrator.clone(), address.clone());
                Some(Nodes { count, rank, orchestrator, address, data_port })
            }
            _ => None,
        };
        if self.devices == 1 && nodes.is_none() {
            if self.peer_timeout.is_some() || self.fail_peer.is_some() {
                anyhow::bail!("--peer-timeout and --fail-peer apply to data-parallel runs (--devices above 1, or --nodes): this run has one device");
            }
            return Ok(None);
        }
        let timeout = std::time::Duration::from_secs(self.peer_timeout.unwrap_or(600));
        let fault = self.fail_peer.map(|(peer, step)| Fault { peer, step, kind: FaultKind::Panic });
        Ok(Some(Parallel { devices: self.devices, nodes, timeout, fault }))
    }
}

pub fn run(args: TrainArgs) -> Result<()> {
    let run_dir = args.run.clone().unwrap_or_else(|| default_run_dir(args.config.as_deref()));
    let config = RunConfig::for_train(args.config.as_deref(), &args.sets, &run_dir, args.resume)?;
    let opts = RunOptions { run_dir, data_dir: args.data_dir, resume: args.resume };
    let parallel = args.parallel.layout()?;
    run_on(args.backend, Train { config, opts, parallel, backend: args.backend })
}

struct Train {
    config: RunConfig,
    opts: RunOptions,
    parallel: Option<Parallel>,
    backend: Backend,
}

impl OnBackend for Train {
    type Output = ();

    fn run<B: AutodiffBackend>(self, device: &B::Device) -> Result<()> {
        let mut bar = Bar::new();
        let stop = stop_on_ctrl_c()?;
        let run_dir = &self.opts.run_dir;
        let trained = match &self.parallel {
            None => Some(attend_train::train::<B>(&self.config, &self.opts, device, &mut bar, &stop)),
            Some(parallel) => {
                let shared = self.backend == Backend::Ndarray;
                let devices = parallel::devices::<B>(parallel.devices, shared, self.backend.name())?;
                parallel::train_parallel::<B>(&self.config, &self.opts, devices, parallel, &mut bar, &stop).transpose()
            }
        };
        let Some(trained) = trained else {
            bar.bar.finish_and_clear();
            println!("this node's peers finished; node 0 (peer 0) writes the run and its summary");
            return Ok(());
        };
        let trained = trained.with_context(|| format!("training in {}", run_dir.display()))?;
        bar.bar.finish_and_clear();
        match trained {
            Trained::Lm(s) => print_summary(&s, run_dir, "tokens", print_lm),
            Trained::Mlm(s) => print_summary(&s, run_dir, "tokens", print_mlm),
            Trained::Mt(s) => print_summary(&s, run_dir, "target tokens", print_mt),
        }
        if let Some(startup) = bar.startup() {
            println!("start-up       {}", progress::describe(&startup));
        }
        Ok(())
    }
}

/// Ctrl-C: finish the current step, save a checkpoint, exit cleanly. A second Ctrl-C exits at
/// once (the checkpoints already written are complete: renamed into place).
pub(crate) fn stop_on_ctrl_c() -> Result<Arc<AtomicBool>> {
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
    Ok(stop)
}

/// The lines every task prints, then the task's own (`valid`) if the run has a validation.
fn print_summary<V>(s: &Summary<V>, run_dir: &Path, tokens: &str, valid: fn(&V, Option<&str>)) {
    if let Some(reason) = s.already_done {
        println!("nothing to do: the run already finished at step {} ({reason})", s.step);
    }
    if s.interrupted {
        println!("stopped at step {}; continue with --resume", s.step);
    }
    if s.early_stopped {
        println!("early stop at step {} (no improvement for train.patience evaluations)", s.step);
    }
    println!("run            {}", run_dir.display());
    println!("steps          {} ({} {tokens}, {:.1} s)", s.step, s.tokens, s.wall_s);
    println!("parameters     {}", s.params);
    if s.trainable_params != s.total_params {
        println!(
            "trainable      {} of {} (frozen: train.freeze, or all but LoRA adapters)",
            s.trainable_params, s.total_params
        );
    }
    println!("training cost  {:.3e} FLOPs (3 x forward FLOPs per token x tokens)", s.train_flops);
    match &s.valid {
        Some(v) => valid(v, s.sample.as_deref()),
        None if s.already_done.is_some() => println!(
            "valid          in {}; `cargo xtask eval --run {}` scores it again",
            run_dir.join("metrics.jsonl").display(),
            run_dir.display()
        ),
        None => println!("valid          not evaluated yet (the first evaluation is at step train.eval_every)"),
    }
}

fn print_lm(v: &LmValid, sample: Option<&str>) {
    let loss = v.loss();
    println!(
        "valid loss     {loss:.4} nats/token ({:.4} bits/token) over {} tokens",
        loss / std::f64::consts::LN_2,
        v.scored.tokens
    );
    println!("valid ppl      {:.3}", loss.exp());
    crate::eval::print_source(v.entropy_rate, v.source_loss, loss, |label| format!("{label:<15}"));
    if let Some(sample) = sample {
        println!("sample         {}", sample.replace('\n', " / "));
    }
}

fn print_mlm(v: &MlmValid, sample: Option<&str>) {
    let s = &v.score;
    println!(
        "masked loss    {:.4} nats/token over {} masked positions (ppl {:.3})",
        s.loss(),
        s.predicted,
        s.loss().exp()
    );
    println!(
        "masked acc.    {:.2}% (always the most frequent training token: {:.2}%)",
        100.0 * s.accuracy(),
        100.0 * s.baseline_accuracy()
    );
    if let Some(sample) = sample {
        for line in sample.lines() {
            println!("sample         {line}");
        }
    }
}

fn print_mt(v: &MtValid, _sample: Option<&str>) {
    println!("valid loss     {:.4} nats/token, ppl {:.3}", v.loss, v.loss.exp());
    println!("valid BLEU     {:.2} ({})", v.bleu, v.signature);
    println!("source         {}", v.sample.0);
    println!("reference      {}", v.sample.1);
    println!("hypothesis     {}", v.sample.2);
}
