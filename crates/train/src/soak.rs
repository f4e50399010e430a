//! `soak`: real crashes. A small training run is started as its own process (the `train`
//! command of `exe`), SIGKILLed at chosen moments — during a step, while a checkpoint is being
//! written, during an evaluation, during the final averaging — and resumed with `--resume`,
//! again and again; when it has finished, every logged loss and evaluation is compared with
//! an uninterrupted run of the same configuration. A kill is survived when the run resumed
//! after it and the finished log equals the uninterrupted one exactly.
//!
//! The moments are recognized from outside, as a user would see them: a checkpoint write by
//! the temporary directory it fills (`checkpoints/.step-….tmp-PID`, `.best.tmp-PID`), an
//! evaluation by a logged training step on the evaluation schedule whose evaluation is not
//! logged yet, averaging by the last step's checkpoint standing without `averaged/`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::config::RunConfig;
use crate::rng::Rng;

/// The small built-in runs a soak drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoakTask {
    /// The default GPT-style LM on generated text, shrunk; averages its last 3 checkpoints.
    Lm,
    /// `configs/mt-synthetic.toml`'s encoder-decoder, shrunk; averages its last 3 checkpoints.
    Mt,
}

const MT_TOML: &str = include_str!("../../../configs/mt-synthetic.toml");

impl SoakTask {
    pub fn name(self) -> &'static str {
        match self {
            SoakTask::Lm => "lm",
            SoakTask::Mt => "mt",
        }
    }

    /// The run's configuration (a few seconds of training on 2 cores, a checkpoint every 10
    /// steps, an evaluation every 20, the last 3 checkpoints averaged).
    pub fn config(self, dir: &Path) -> Result<RunConfig, String> {
        let common =
            ["train.checkpoint_every=10", "train.eval_every=20", "train.average_last=3", "train.keep_checkpoints=3"];
        let (file, sets): (Option<PathBuf>, Vec<&str>) = match self {
            SoakTask::Lm => (None, vec!["data.synthetic_size=20000", "model.d_model=32", "train.max_steps=80"]),
            SoakTask::Mt => {
                let path = dir.join("mt-synthetic.toml");
                std::fs::write(&path, MT_TOML).map_err(|e| format!("{}: {e}", path.display()))?;
                let sets = ["data.synthetic_size=2000", "model.d_model=32", "model.n_layers=1", "model.d_ff=64"];
                (Some(path), [&sets[..], &["train.batch_tokens=400", "train.max_steps=60", "decode.beam=1"]].concat())
            }
        };
        let sets: Vec<String> = common.iter().chain(&sets).map(|s| s.to_string()).collect();
        RunConfig::load(file.as_deref(), &sets).map_err(|e| e.to_string())
    }
}

/// When a kill comes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moment {
    Step,
    CheckpointWrite,
    Evaluation,
    Averaging,
}

impl Moment {
    const ALL: [Moment; 4] = [Moment::Step, Moment::CheckpointWrite, Moment::Evaluation, Moment::Averaging];

    pub fn describe(self) -> &'static str {
        match self {
            Moment::Step => "at a random time",
            Moment::CheckpointWrite => "while a checkpoint was being written",
            Moment::Evaluation => "during an evaluation",
            Moment::Averaging => "during the final averaging",
        }
    }
}

/// One kill and what became of it.
#[derive(Clone, Debug)]
pub struct Kill {
    pub task: SoakTask,
    pub moment: Moment,
    /// The last step logged before the kill.
    pub logged_step: u64,
    pub survived: bool,
}

/// What the soak asks for.
pub struct SoakOptions {
    /// The `xtask` binary whose `train` is soaked.
    pub exe: PathBuf,
    /// Where the runs go (each task's uninterrupted run and its killed rounds).
    pub dir: PathBuf,
    /// Kills in all, shared among the tasks (the first tasks take the remainder).
    pub kills: usize,
    pub seed: u64,
    pub tasks: Vec<SoakTask>,
}

/// The log entries a crash must leave unchanged: every loss, evaluation and the summary's
/// validation loss (not times or throughput).
pub fn comparable_log(run: &Path) -> Result<Vec<String>, String> {
    let path = run.join("metrics.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).map_err(|e| format!("{}: {e}: {l}", path.display()))?;
            Ok(format!("{} {} {} {} {} {}", v["event"], v["step"], v["split"], v["loss"], v["bleu"], v["valid_loss"]))
        })
        .collect()
}

fn spawn(exe: &Path, config: &Path, run: &Path, resume: bool, log: &Path) -> Result<Child, String> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.args(["train", "--config"]).arg(config).arg("--run").arg(run);
    if resume {
        cmd.arg("--resume");
    }
    cmd.stdin(Stdio::null()).stdout(out).stderr(err).spawn().map_err(|e| format!("{}: {e}", exe.display()))
}

fn last_logged(run: &Path) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(run.join("metrics.jsonl")).ok()?;
    text.lines().rev().find_map(|l| serde_json::from_str(l).ok())
}

/// Whether process `pid` is filling a temporary checkpoint directory in `dir` (a directory:
/// the files written whole, `crate::whole_file`, take the same kind of name).
fn writing(dir: &Path, pid: u32) -> bool {
    let suffix = format!(".tmp-{pid}");
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            e.file_type().is_ok_and(|t| t.is_dir())
                && e.file_name().to_str().is_some_and(|n| n.starts_with('.') && n.ends_with(&suffix))
        })
    })
}

/// The process being watched: its id, when it started, the step it resumed from.
struct Watched {
    pid: u32,
    started: Instant,
    started_at: std::time::SystemTime,
    from_step: u64,
}

/// Whether `moment` has come for process `p` training in `run`.
fn reached(moment: Moment, run: &Path, config: &RunConfig, p: &Watched, delay: Duration) -> bool {
    match moment {
        Moment::Step => p.started.elapsed() >= delay,
        Moment::CheckpointWrite => writing(&run.join("checkpoints"), p.pid) || writing(run, p.pid),
        // A step on the evaluation schedule, logged by this process, whose evaluation is not.
        Moment::Evaluation => last_logged(run).is_some_and(|v| {
            v["event"] == "train"
                && v["step"].as_u64().is_some_and(|s| s > p.from_step && s % config.train.eval_every == 0)
        }),
        // The last step's checkpoint, written by this process, and no average yet.
        Moment::Averaging => {
            let last = run.join("checkpoints").join(crate::checkpoint::step_dir_name(config.train.max_steps));
            let fresh =
                std::fs::metadata(last.join("state.json")).and_then(|m| m.modified()).is_ok_and(|t| t >= p.started_at);
            fresh && !run.join("averaged").join("state.json").is_file()
        }
    }
}

/// Runs the soak; `report` hears of each kill as it is judged. Returns every kill.
pub fn soak(opts: &SoakOptions, report: &mut dyn FnMut(&Kill)) -> Result<Vec<Kill>, String> {
    std::fs::create_dir_all(&opts.dir).map_err(|e| format!("{}: {e}", opts.dir.display()))?;
    let mut all = Vec::new();
    for (i, &task) in opts.tasks.iter().enumerate() {
        let share = opts.kills / opts.tasks.len() + usize::from(i < opts.kills % opts.tasks.len());
        let config = task.config(&opts.dir)?;
        let config_path = opts.dir.join(format!("{}.toml", task.name()));
        std::fs::write(&config_path, config.to_toml()).map_err(|e| format!("{}: {e}", config_path.display()))?;
        // The uninterrupted run.
        let reference = opts.dir.join(format!("{}-uninterrupted", task.name()));
        let _ = std::fs::remove_dir_all(&reference);
        let started = Instant::now();
        let log = opts.dir.join(format!("{}-uninterrupted.log", task.name()));
        let status = spawn(&opts.exe, &config_path, &reference, false, &log)?.wait().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("the uninterrupted {} run failed ({status}); see {}", task.name(), log.display()));
        }
        let duration = started.elapsed();
        let expected = comparable_log(&reference)?;
        let mut rng = Rng::derive(opts.seed, task.name(), 0);
        let mut kills: Vec<Kill> = Vec::new();
        let mut round = 0;
        while kills.len() < share {
            round += 1;
            let run = opts.dir.join(format!("{}-round-{round}", task.name()));
            let log = opts.dir.join(format!("{}-round-{round}.log", task.name()));
            let _ = std::fs::remove_dir_all(&run);
            let first_kill = kills.len();
            loop {
                // A process killed before its first checkpoint left nothing to resume: start over.
                let from = crate::checkpoint::latest(&run.join("checkpoints")).map(|c| c.0);
                if from.is_none() {
                    let _ = std::fs::remove_dir_all(&run);
                }
                let (started, started_at) = (Instant::now(), std::time::SystemTime::now());
                let mut child = spawn(&opts.exe, &config_path, &run, from.is_some(), &log)?;
                let watched = Watched { pid: child.id(), started, started_at, from_step: from.unwrap_or(0) };
                let moment = Moment::ALL[(rng.next_u64() % 4) as usize];
                let delay = duration.mul_f64(rng.next_f64());
                let wants_kill = kills.len() < share;
                let exited = loop {
                    if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                        break Some(status);
                    }
                    if wants_kill && reached(moment, &run, &config, &watched, delay) {
                        break None;
                    }
                    std::thread::sleep(Duration::from_micros(500));
                };
                match exited {
                    None => {
                        child.kill().map_err(|e| e.to_string())?;
                        child.wait().map_err(|e| e.to_string())?;
                        let logged_step = last_logged(&run).and_then(|v| v["step"].as_u64()).unwrap_or(0);
                        kills.push(Kill { task, moment, logged_step, survived: false });
                    }
                    Some(status) if status.success() => break,
                    Some(status) => {
                        // The resume after a kill failed: that kill was not survived.
                        for kill in &kills[first_kill..] {
                            report(kill);
                        }
                        all.extend(kills);
                        return Err(format!(
                            "{} round {round}: training exited with {status} after a kill; see {}",
                            task.name(),
                            log.display()
                        ));
                    }
                }
            }
            let same = comparable_log(&run)? == expected;
            for kill in &mut kills[first_kill..] {
                kill.survived = same;
                report(kill);
            }
            if same {
                let _ = std::fs::remove_dir_all(&run);
            }
        }
        all.extend(kills);
    }
    Ok(all)
}
