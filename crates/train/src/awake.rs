//! Keeping the CPU backend's idle worker threads awake through a loop of steps (training's,
//! `translate`'s batches).
//!
//! A training step on the CPU is a few hundred parallel regions (each matrix product, each
//! element-wise kernel) with short serial stretches between them (the autodiff graph's
//! bookkeeping, allocation). rayon puts a worker that finds no job to sleep after about 32
//! rounds of `sched_yield` (tens of microseconds), and the next region wakes it with a futex
//! call; on a virtual machine each sleep and wake is a trip through the hypervisor, and a
//! `perf` profile of nanoGPT's CPU configuration put about a tenth of the samples in the
//! kernel's scheduler (`try_to_wake_up`, `finish_task_switch`). OpenMP runtimes, and so
//! PyTorch, keep their idle threads spinning for a while instead (`KMP_BLOCKTIME`,
//! `GOMP_SPINCOUNT`).
//!
//! [`Awake`] does that within rayon's own pool: on each step it hands every other worker a
//! job ([`rayon::spawn_broadcast`]) that keeps looking for work ([`rayon::yield_now`], which
//! runs what it finds, stolen halves of `join`s included) until the loop ends or it has found
//! nothing for [`IDLE`]. The loop's own thread gets its copy too and returns at once. Nothing
//! computed changes: the same jobs run, in rayon's order of stealing, on the same threads.
//!
//! A spinner gives way to anything else that wants its core: where a `sched_yield` comes back
//! late (after [`CROWDED`]: another task ran meanwhile, in this process or another), it stops
//! and lets rayon put it to sleep; and a pool with more threads than the machine has cores
//! never spins.
//!
//! `ATTEND_CPU_WORKERS=sleep` leaves rayon's workers to sleep as they otherwise would (for a
//! shared machine, or to measure the difference); `spin` (the default, or unset) keeps them
//! awake.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a spinning worker looks for work in vain before it goes back to rayon's sleep
/// (and waits for the next step's [`Awake::arm`]): longer than the serial stretches inside a
/// step, short enough that an evaluation or a checkpoint between steps does not hold the
/// cores for nothing.
pub const IDLE: Duration = Duration::from_millis(2);

/// A `sched_yield` that takes longer than this gave the core to another task: the machine is
/// busy with other work, which a spinner would only slow down.
pub const CROWDED: Duration = Duration::from_micros(500);

/// What `ATTEND_CPU_WORKERS` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workers {
    /// Idle workers keep looking for work through the loop (the default).
    Spin,
    /// Idle workers sleep as rayon lets them.
    Sleep,
}

const EXPECTED: &str = "\"spin\" (the default) or \"sleep\"";

/// `ATTEND_CPU_WORKERS` read from the environment: [`Workers::Spin`] where unset or empty.
pub fn workers_from_env() -> Result<Workers, String> {
    match std::env::var("ATTEND_CPU_WORKERS") {
        Err(std::env::VarError::NotPresent) => Ok(Workers::Spin),
        Ok(value) => parse_workers(&value),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("ATTEND_CPU_WORKERS is not UTF-8: expected {EXPECTED}")),
    }
}

/// A value of `ATTEND_CPU_WORKERS` (trimmed; empty means the default).
pub fn parse_workers(value: &str) -> Result<Workers, String> {
    match value.trim() {
        "" | "spin" => Ok(Workers::Spin),
        "sleep" => Ok(Workers::Sleep),
        other => Err(format!("ATTEND_CPU_WORKERS = {other:?}: expected {EXPECTED}")),
    }
}

/// How many times a loop in this process has set workers spinning (for tests and diagnostics).
static STARTS: AtomicUsize = AtomicUsize::new(0);

/// How many times a loop in this process has set workers spinning ([`Awake::arm`] that found
/// none spinning).
pub fn starts() -> usize {
    STARTS.load(Ordering::Relaxed)
}

/// The spinning workers of one loop; they stop when it is dropped.
pub struct Awake {
    shared: Option<Arc<Shared>>,
    idle: Duration,
    crowded: Duration,
    /// Made on the loop's thread and dropped there (it clears that thread's [`LOOP`]).
    _thread: std::marker::PhantomData<*const ()>,
}

std::thread_local! {
    /// Whether this thread runs a loop that sets workers spinning: a loop inside it (the
    /// validation's `translate` inside training) leaves the spinning to the outer one.
    static LOOP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

struct Shared {
    stop: AtomicBool,
    /// Workers in [`spin`] now.
    spinning: AtomicUsize,
}

impl Awake {
    /// Spinning workers where `wanted` (the CPU backend, one device, `Workers::Spin`); none
    /// otherwise, and [`Awake::arm`] then does nothing.
    pub fn new(wanted: bool) -> Self {
        Self::with_limits(wanted, IDLE, CROWDED)
    }

    /// For a loop of steps on backend `B` (training; `translate`'s batches): spinning workers
    /// on the CPU backend, on one device (a data-parallel run's peers share the pool), where the
    /// pool has no more threads than the machine has cores, unless `ATTEND_CPU_WORKERS` says
    /// `sleep`; an error naming the variable where it holds something else.
    pub fn for_loop<B: 'static>(parallel: bool) -> Result<Self, String> {
        let spin = workers_from_env()? == Workers::Spin;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let fits = rayon::current_num_threads() <= cores;
        Ok(Self::new(spin && fits && !parallel && attend_model::fused::is_cpu_backend::<B>()))
    }

    fn with_limits(wanted: bool, idle: Duration, crowded: Duration) -> Self {
        let outer = LOOP.with(|l| l.get());
        let shared = (wanted && !outer).then(|| {
            LOOP.with(|l| l.set(true));
            Arc::new(Shared { stop: AtomicBool::new(false), spinning: AtomicUsize::new(0) })
        });
        Self { shared, idle, crowded, _thread: std::marker::PhantomData }
    }

    /// Sets the pool's other workers spinning unless they still are. Only from one of rayon's
    /// workers (the runner's loop runs on one): from another thread, the workers would spin
    /// beside a thread that is not theirs, one more thread than cores. One loop to a pool: a
    /// second loop's thread would run this one's spinner inside its own waits, and stall there
    /// while this loop keeps the spinner busy.
    pub fn arm(&self) {
        let Some(shared) = &self.shared else { return };
        let Some(me) = rayon::current_thread_index() else { return };
        let others = rayon::current_num_threads().saturating_sub(1);
        if others == 0 || shared.spinning.load(Ordering::Acquire) > 0 {
            return;
        }
        shared.spinning.fetch_add(others, Ordering::AcqRel);
        STARTS.fetch_add(1, Ordering::Relaxed);
        let (shared, idle, crowded) = (Arc::clone(shared), self.idle, self.crowded);
        rayon::spawn_broadcast(move |context| {
            if context.index() != me {
                spin(&shared.stop, idle, crowded);
                shared.spinning.fetch_sub(1, Ordering::AcqRel);
            }
        });
    }

    /// How many workers are spinning now.
    pub fn spinning(&self) -> usize {
        self.shared.as_ref().map_or(0, |s| s.spinning.load(Ordering::Acquire))
    }
}

impl Drop for Awake {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared.stop.store(true, Ordering::Release);
            LOOP.with(|l| l.set(false));
        }
    }
}

/// Runs the pool's pending jobs on this worker as they come, until `stop`, until none has
/// come for `idle`, or until a `sched_yield` takes longer than `crowded` (another task was
/// waiting for this core).
fn spin(stop: &AtomicBool, idle: Duration, crowded: Duration) {
    let mut last_work = Instant::now();
    while !stop.load(Ordering::Acquire) {
        match rayon::yield_now() {
            Some(rayon::Yield::Executed) => last_work = Instant::now(),
            Some(rayon::Yield::Idle) if last_work.elapsed() < idle => {
                let before = Instant::now();
                std::thread::yield_now();
                if before.elapsed() > crowded {
                    break;
                }
            }
            _ => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap()
    }

    /// Never crowded out: these tests share the machine with every other test.
    const PATIENT: Duration = Duration::from_secs(60);

    /// Waits up to a few seconds for `done`.
    fn eventually(done: impl Fn() -> bool) -> bool {
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        done()
    }

    #[test]
    fn arm_sets_every_other_worker_spinning_and_drop_stops_them() {
        pool(3).install(|| {
            // Idle for a minute at most: only the drop can end them within the test's wait.
            let awake = Awake::with_limits(true, PATIENT, PATIENT);
            awake.arm();
            assert_eq!(awake.spinning(), 2);
            std::thread::sleep(Duration::from_millis(20));
            assert_eq!(awake.spinning(), 2, "a spinner left before its idle time");
            let shared = Arc::clone(awake.shared.as_ref().unwrap());
            drop(awake);
            assert!(eventually(|| shared.spinning.load(Ordering::Acquire) == 0), "spinners outlived the loop");
        });
    }

    #[test]
    fn spinners_go_back_to_sleep_after_finding_no_work_for_the_idle_time() {
        pool(2).install(|| {
            let awake = Awake::with_limits(true, Duration::from_millis(200), PATIENT);
            let started = Instant::now();
            awake.arm();
            std::thread::sleep(Duration::from_millis(50));
            assert_eq!(awake.spinning(), 1, "the spinner left before its idle time");
            // Held, but given no work: the spinner leaves by itself, and the next arm restarts it.
            assert!(eventually(|| awake.spinning() == 0), "a spinner with nothing to do kept spinning");
            assert!(started.elapsed() >= Duration::from_millis(200));
            let before = starts();
            awake.arm();
            assert!(starts() > before, "the second arm started no spinner");
            assert!(eventually(|| awake.spinning() == 0));
        });
    }

    #[test]
    fn a_crowded_spinner_gives_way_at_once() {
        pool(2).install(|| {
            // Every `sched_yield` counts as crowded: the spinner leaves long before its idle time.
            let awake = Awake::with_limits(true, PATIENT, Duration::ZERO);
            awake.arm();
            assert!(eventually(|| awake.spinning() == 0), "a crowded spinner kept spinning");
        });
    }

    #[test]
    fn nested_parallel_work_completes_with_the_same_results_while_workers_spin() {
        fn sum(values: &[u64]) -> u64 {
            if values.len() <= 64 {
                return values.iter().sum();
            }
            let (a, b) = values.split_at(values.len() / 2);
            let (x, y) = rayon::join(|| sum(a), || sum(b));
            x + y
        }
        let (done, finished) = mpsc::channel();
        std::thread::spawn(move || {
            let values: Vec<u64> = (0..100_000).collect();
            let before = starts();
            pool(2).install(|| {
                let awake = Awake::with_limits(true, IDLE, PATIENT);
                for _ in 0..50 {
                    awake.arm();
                    assert_eq!(sum(&values), 100_000 * 99_999 / 2);
                }
            });
            done.send(starts() > before).unwrap();
        });
        let armed = finished.recv_timeout(Duration::from_secs(60)).expect("the sums did not finish: a deadlock");
        assert!(armed, "no spinner was started");
    }

    #[test]
    fn a_loop_inside_a_loop_leaves_the_spinning_to_the_outer_one() {
        pool(2).install(|| {
            let outer = Awake::with_limits(true, PATIENT, PATIENT);
            let inner = Awake::with_limits(true, PATIENT, PATIENT);
            inner.arm();
            assert_eq!(inner.spinning(), 0, "the inner loop set workers spinning beside the outer one's");
            drop(inner);
            outer.arm();
            assert_eq!(outer.spinning(), 1);
            drop(outer);
            // Both gone: the next loop on this thread spins again.
            let next = Awake::with_limits(true, IDLE, PATIENT);
            next.arm();
            assert_eq!(next.spinning(), 1);
        });
    }

    #[test]
    fn nothing_spins_when_not_wanted_or_off_the_pool() {
        pool(2).install(|| {
            let off = Awake::new(false);
            off.arm();
            assert_eq!(off.spinning(), 0);
        });
        // This test's own thread is none of rayon's workers.
        let outside = Awake::new(true);
        outside.arm();
        assert_eq!(outside.spinning(), 0);
    }

    #[test]
    fn the_switch_takes_spin_or_sleep_and_names_itself_otherwise() {
        assert_eq!(parse_workers(""), Ok(Workers::Spin));
        assert_eq!(parse_workers(" spin "), Ok(Workers::Spin));
        assert_eq!(parse_workers("sleep"), Ok(Workers::Sleep));
        let err = parse_workers("busy").unwrap_err();
        assert!(err.contains("ATTEND_CPU_WORKERS") && err.contains("\"sleep\""), "{err}");
    }
}
