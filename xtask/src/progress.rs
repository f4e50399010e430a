//! What a training run shows while it runs: the progress bar (step, loss, learning rate,
//! tokens/s, ETA), notes above it, and the start-up: the time from launch to the end of the
//! first step, which on a GPU is mostly compiling and tuning kernels. On a GPU backend the bar
//! says where the kernel caches are and how full, and while the first step, an evaluation or
//! the final validation and sample run (each meets new shapes, so new kernels) it prints a
//! line every 15 s, so that a cold machine's run is never silent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use attend_train::Observer;
use indicatif::{ProgressBar, ProgressStyle};

use crate::kernel_cache::{self, KernelCache};

static LAUNCHED: OnceLock<Instant> = OnceLock::new();

/// Marks the process's launch: `main` calls it first.
pub(crate) fn mark_launch() {
    LAUNCHED.get_or_init(Instant::now);
}

/// How often a GPU run's first step reports that it is still running.
const HEARTBEAT: Duration = Duration::from_secs(15);

pub(crate) struct Bar {
    pub(crate) bar: ProgressBar,
    /// When the loop started (data loaded, model built), and the heartbeat's stop flag.
    waiting: Option<(Instant, Arc<AtomicBool>)>,
    startup: Option<StartUp>,
    /// The heartbeat's stop flag while the loop is busy outside its steps.
    busy: Option<Arc<AtomicBool>>,
}

/// Seconds from launch to the loop's start (data, model, checkpoint) and in the first step.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StartUp {
    pub(crate) preparing_s: f64,
    pub(crate) first_step_s: f64,
}

impl StartUp {
    pub(crate) fn total_s(&self) -> f64 {
        self.preparing_s + self.first_step_s
    }
}

impl Bar {
    pub(crate) fn new() -> Self {
        Bar { bar: ProgressBar::hidden(), waiting: None, startup: None, busy: None }
    }

    /// The start-up of this process's run, once its first step has ended.
    pub(crate) fn startup(&self) -> Option<StartUp> {
        self.startup
    }
}

impl Observer for Bar {
    fn started(&mut self, first_step: u64, max_steps: u64) {
        self.bar = ProgressBar::new(max_steps);
        self.bar.set_position(first_step - 1);
        self.bar.set_style(
            ProgressStyle::with_template("{bar:30} step {pos}/{len} {msg} eta {eta}").expect("valid template"),
        );
        if let Some((_, earlier)) = self.waiting.take() {
            earlier.store(true, Ordering::Relaxed);
        }
        if self.startup.is_some() {
            return; // one start-up per process: later runs (ablate's rows) are past it
        }
        let stop = Arc::new(AtomicBool::new(false));
        if let Some(cache) = kernel_cache::configured() {
            self.note(&cache_note(cache));
            announce(&self.bar, &stop, |s| {
                format!("first step still running after {s} s: compiling and tuning GPU kernels")
            });
        }
        self.waiting = Some((Instant::now(), stop));
    }

    fn step(&mut self, step: u64, loss: f64, lr: f64, tokens_per_s: f64) {
        if let Some((ready, stop)) = self.waiting.take() {
            stop.store(true, Ordering::Relaxed);
            let launched = *LAUNCHED.get_or_init(|| ready);
            let startup = StartUp {
                preparing_s: ready.duration_since(launched).as_secs_f64(),
                first_step_s: ready.elapsed().as_secs_f64(),
            };
            if kernel_cache::configured().is_some() {
                self.note(&format!("start-up: {}", describe(&startup)));
            }
            self.startup = Some(startup);
        }
        self.bar.set_position(step);
        self.bar.set_message(format!("loss {loss:.4} lr {lr:.2e} {tokens_per_s:.0} tok/s"));
    }

    fn eval(&mut self, step: u64, loss: f64) {
        self.note(&format!("step {step}: valid loss {loss:.4} (ppl {:.2})", loss.exp()));
    }

    /// Above the bar on a terminal; a plain stderr line otherwise (before the bar starts, or
    /// when stderr is a file, where indicatif draws nothing and would drop the line).
    fn note(&mut self, message: &str) {
        print_above(&self.bar, message);
    }

    /// On a GPU backend, a line every 15 s while the loop is busy outside its steps.
    fn busy(&mut self, what: Option<&str>) {
        if let Some(earlier) = self.busy.take() {
            earlier.store(true, Ordering::Relaxed);
        }
        let (Some(what), Some(_)) = (what, kernel_cache::configured()) else { return };
        let (what, stop) = (what.to_string(), Arc::new(AtomicBool::new(false)));
        announce(&self.bar, &stop, move |s| {
            format!("{what} still running after {s} s: new shapes' GPU kernels are compiled and tuned on first use")
        });
        self.busy = Some(stop);
    }
}

fn print_above(bar: &ProgressBar, message: &str) {
    if bar.is_hidden() {
        eprintln!("{message}");
    } else {
        bar.println(message);
    }
}

/// `12.3 s to the end of the first step (0.8 s loading data and building the model, 11.5 s in the first step)`.
pub(crate) fn describe(s: &StartUp) -> String {
    format!(
        "{:.1} s to the end of the first step ({:.1} s loading data and building the model, {:.1} s in the first step)",
        s.total_s(),
        s.preparing_s,
        s.first_step_s
    )
}

fn cache_note(cache: &KernelCache) -> String {
    let first_use = "kernels not cached are compiled (and matrix products autotuned) when a step first meets them";
    match cache {
        KernelCache::Directory { dir, files_before: 0, .. } => format!(
            "GPU kernel cache {} is empty: {first_use}; on a fresh machine the first step can take minutes",
            dir.display()
        ),
        KernelCache::Directory { dir, files_before, .. } => {
            format!("GPU kernel cache {}: {files_before} files from earlier runs; {first_use}", dir.display())
        }
        KernelCache::UserFile(file) => {
            format!("GPU kernel caches as {} configures CubeCL; {first_use}", file.display())
        }
    }
}

/// On its own thread, prints `line(seconds)` above `bar` every `HEARTBEAT` until `stop`.
fn announce(bar: &ProgressBar, stop: &Arc<AtomicBool>, line: impl Fn(u64) -> String + Send + 'static) {
    let (bar, stop) = (bar.clone(), Arc::clone(stop));
    std::thread::spawn(move || heartbeat(HEARTBEAT, &stop, |after| print_above(&bar, &line(after.as_secs()))));
}

/// Calls `say(elapsed)` every `every` until `stop` (checked at least five times an interval
/// and every 200 ms), never after it: what is still running says so.
fn heartbeat(every: Duration, stop: &AtomicBool, mut say: impl FnMut(Duration)) {
    let started = Instant::now();
    let mut next = every;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep((every / 5).min(Duration::from_millis(200)));
        if started.elapsed() >= next && !stop.load(Ordering::Relaxed) {
            say(next);
            next += every;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_speaks_each_interval_until_stopped_and_never_after() {
        // The third line stops it; a fourth would panic the heartbeat's thread.
        let stop = Arc::new(AtomicBool::new(false));
        let said = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (flag, stopper, log) = (Arc::clone(&stop), Arc::clone(&stop), Arc::clone(&said));
        let every = Duration::from_millis(10);
        let beat = std::thread::spawn(move || {
            heartbeat(every, &flag, |after| {
                let mut log = log.lock().unwrap();
                log.push(after);
                assert!(log.len() <= 3, "spoke after the stop: {log:?}");
                if log.len() == 3 {
                    stopper.store(true, Ordering::Relaxed);
                }
            })
        });
        beat.join().expect("the heartbeat ends at the stop, silently");
        assert_eq!(*said.lock().unwrap(), [every, every * 2, every * 3]);
    }

    #[test]
    fn first_logged_step_ends_the_start_up_and_later_steps_and_runs_leave_it() {
        let mut bar = Bar::new();
        bar.started(1, 10);
        assert!(bar.startup().is_none());
        std::thread::sleep(Duration::from_millis(20));
        bar.step(1, 2.0, 1e-3, 100.0);
        let first = bar.startup().expect("ended by the first step");
        assert!(first.first_step_s >= 0.02, "{first:?}");
        std::thread::sleep(Duration::from_millis(20));
        bar.step(2, 2.0, 1e-3, 100.0);
        assert_eq!(bar.startup().unwrap().first_step_s, first.first_step_s);
        // A second run on the same bar (ablate's rows) is past the process's start-up.
        bar.started(1, 10);
        std::thread::sleep(Duration::from_millis(20));
        bar.step(1, 2.0, 1e-3, 100.0);
        assert_eq!(bar.startup().unwrap().first_step_s, first.first_step_s);
    }
}
