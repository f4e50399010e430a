//! Data-parallel training on burn-collective (`train --devices N`, and `--nodes` for several
//! machines): one model replica per device, each computing its rows of the global batch
//! (`train.batch_size` stays the global batch), the gradients averaged by one all-reduce per
//! optimizer step, and the same optimizer step taken by every replica. Peer 0 (device 0 of
//! node 0) logs, evaluates, saves checkpoints and averages; the others only train.
//!
//! On one machine each device is a thread (on ndarray N peers share the CPU, each with its
//! share of the cores in its own rayon pool). Across machines, burn-collective's global level
//! joins the nodes through its orchestrator, which node 0 starts in its own process.

pub mod error;
pub mod peer;
mod supervise;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use burn::tensor::backend::{AutodiffBackend, Backend, Device as _, DeviceId, DeviceOps};
use burn_collective::{finish_collective, register, CollectiveConfig, PeerId};

pub use error::ParallelError;
use peer::Signal;
pub use peer::{FaultKind, Peer};
use supervise::{supervise, Event, Forward, Layout};

use crate::config::RunConfig;
use crate::error::TrainError;
use crate::run::{Observer, RunOptions};
use crate::tasks::Trained;

/// Whether burn-collective's global level (several nodes) can run more than one all-reduce.
/// Its 0.21.0 release cannot (docs/parallel.md): every `--nodes` run is refused with
/// [`ParallelError::GlobalLevelBroken`] rather than left to hang at its second operation. The
/// wiring below (addresses, orchestrator, global peer numbering) is what runs once a release
/// fixes it and this turns true; it was checked on loopback up to that second operation.
const GLOBAL_LEVEL_WORKS: bool = false;

/// How a run is spread over devices and machines.
#[derive(Clone, Debug)]
pub struct Parallel {
    /// Devices (peers) on this machine.
    pub devices: usize,
    /// Several machines, or `None` for this one alone.
    pub nodes: Option<Nodes>,
    /// How long peers may take to join, and the longest a collective operation may wait.
    pub timeout: Duration,
    /// Fault injection for the tests.
    #[doc(hidden)]
    pub fault: Option<Fault>,
}

/// A fault injected into one peer, to test what the others and the supervisor do.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    /// The global peer index.
    pub peer: usize,
    pub step: u64,
    pub kind: FaultKind,
}

/// This machine's place among several (burn-collective's global level).
#[derive(Clone, Debug)]
pub struct Nodes {
    /// Machines in the run (`CollectiveConfig::with_num_nodes`).
    pub count: u32,
    /// This machine's rank, 0 ≤ rank < count; rank 0 holds peer 0 and starts the orchestrator.
    pub rank: u32,
    /// The global orchestrator, `ws://HOST:PORT` (`with_global_address`).
    pub orchestrator: String,
    /// How the other nodes reach this one, `ws://HOST:PORT` (`with_node_address`).
    pub address: String,
    /// The port this node serves tensors on (`with_data_service_port`; the port of `address`).
    pub data_port: u16,
}

/// The devices of `backend` for `n` peers: `n` times the CPU when `shared` (ndarray), else the
/// first `n` devices of the default device's kind.
pub fn devices<B: Backend>(n: usize, shared: bool, backend: &str) -> Result<Vec<B::Device>, ParallelError> {
    if n == 0 {
        return Err(ParallelError::NoDevices);
    }
    let first = B::Device::default();
    if shared {
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        if n > cores {
            return Err(ParallelError::TooFewCores { asked: n, cores });
        }
        return Ok(vec![first; n]);
    }
    let type_id = first.id().type_id;
    let found = B::device_count(type_id);
    if n > found {
        return Err(ParallelError::TooManyDevices { asked: n, found, backend: backend.to_string() });
    }
    Ok((0..n).map(|i| B::Device::from_id(DeviceId { type_id, index_id: i as u16 })).collect())
}

/// Trains as `config` says on `devices` (of this node), with the writer's progress passed to
/// `observer`; peer 0's result (`None` on a node other than the first).
pub fn train_parallel<B: AutodiffBackend>(
    config: &RunConfig,
    opts: &RunOptions,
    devices: Vec<B::Device>,
    parallel: &Parallel,
    observer: &mut dyn Observer,
    stop: &AtomicBool,
) -> Result<Option<Trained>, TrainError> {
    let local = devices.len();
    if local == 0 {
        return Err(ParallelError::NoDevices.into());
    }
    let (nodes, rank) = parallel.nodes.as_ref().map_or((1, 0), |n| (n.count, n.rank));
    if rank >= nodes {
        return Err(ParallelError::BadRank { rank, nodes }.into());
    }
    let peers = local * nodes as usize;
    let t = &config.train;
    if t.batch_tokens == 0 && !t.batch_size.is_multiple_of(peers) {
        let (batch, devices, nodes) = (t.batch_size, local, nodes as usize);
        return Err(ParallelError::BatchNotDivisible { batch, peers, devices, nodes }.into());
    }
    let mut collective = CollectiveConfig::default().with_num_devices(local);
    let mut hint = "a peer is still loading its data or building its model".to_string();
    if let Some(n) = &parallel.nodes {
        if !GLOBAL_LEVEL_WORKS {
            return Err(ParallelError::GlobalLevelBroken.into());
        }
        let orchestrator_port = port("--orchestrator", &n.orchestrator)?;
        port("--node-address", &n.address)?;
        collective = collective
            .with_num_nodes(n.count)
            .with_global_address(n.orchestrator.parse().expect("any string is an address"))
            .with_node_address(n.address.parse().expect("any string is an address"))
            .with_data_service_port(n.data_port);
        if n.rank == 0 {
            serve_orchestrator(orchestrator_port)?;
        }
        hint = format!(
            "is `train --nodes {} --node-rank R` running on every node, and can each reach the orchestrator at {} (started by rank 0)?",
            n.count, n.orchestrator
        );
    }

    let (events, received) = mpsc::channel();
    let stop_peers = Arc::new(AtomicBool::new(false));
    let threads = (std::thread::available_parallelism().map_or(1, |n| n.get()) / local).max(1);
    for (i, device) in devices.into_iter().enumerate() {
        let index = rank as usize * local + i;
        let fault = parallel.fault.filter(|f| f.peer == index).map(|f| (f.step, f.kind));
        let notify = {
            let events = events.clone();
            Box::new(move |signal: Signal| {
                let _ = events.send(Event::Peer(signal));
            })
        };
        let peer = Peer::new(index, peers, nodes as usize, notify, fault);
        let (config, opts, collective) = (config.clone(), opts.clone(), collective.clone());
        let (events, stop) = (events.clone(), Arc::clone(&stop_peers));
        let spawned = std::thread::Builder::new().name(format!("peer-{index}")).spawn(move || {
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                run_peer::<B>(&config, &opts, device, collective, &peer, threads, &events, &stop)
            }))
            .unwrap_or_else(|panic| {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "it panicked".into());
                Err(TrainError::Usage(format!("panicked: {message}")))
            });
            let _ = events.send(Event::Done(i, outcome));
        });
        spawned.map_err(|e| TrainError::Usage(format!("could not start the thread of peer {index}: {e}")))?;
    }
    drop(events);
    let layout = Layout { local, rank, peers, hint };
    supervise::<B::InnerBackend>(received, &layout, parallel.timeout, observer, stop, &stop_peers)
}

/// One peer's thread: join the collective, train, leave.
#[allow(clippy::too_many_arguments)]
fn run_peer<B: AutodiffBackend>(
    config: &RunConfig,
    opts: &RunOptions,
    device: B::Device,
    collective: CollectiveConfig,
    peer: &Peer,
    threads: usize,
    events: &mpsc::Sender<Event>,
    stop: &AtomicBool,
) -> Result<Trained, TrainError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |_| "peer-worker".into())
        .build()
        .map_err(|e| TrainError::Usage(format!("peer {}: no thread pool: {e}", peer.index)))?;
    pool.install(|| {
        let id = PeerId::from(peer.index as u32);
        register::<B::InnerBackend>(id, device.clone(), collective).map_err(|e| ParallelError::Collective {
            peer: peer.index,
            what: "joining the collective",
            message: format!("{e:?}"),
        })?;
        let _ = events.send(Event::Joined);
        let mut forward = Forward(events.clone());
        let mut silent = Silent;
        let observer: &mut dyn Observer = if peer.writes() { &mut forward } else { &mut silent };
        let trained = crate::tasks::train_as::<B>(config, opts, &device, observer, stop, peer);
        if trained.is_ok() {
            let _ = finish_collective::<B::InnerBackend>(id);
        }
        trained
    })
}

/// The observer of the peers that do not write.
struct Silent;

impl Observer for Silent {}

/// The port of a `ws://HOST:PORT` address.
fn port(flag: &'static str, value: &str) -> Result<u16, ParallelError> {
    let bad = || ParallelError::BadAddress { flag, value: value.to_string(), expected: "expected ws://HOST:PORT" };
    let rest = value.strip_prefix("ws://").ok_or_else(bad)?;
    rest.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok()).ok_or_else(bad)
}

/// Starts burn-collective's global orchestrator on `port`, in this process, for the run's life.
fn serve_orchestrator(port: u16) -> Result<(), ParallelError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ParallelError::Orchestrator { port, message: e.to_string() })?;
    // Fail early and clearly if the port is taken (the orchestrator itself would only log it).
    std::net::TcpListener::bind(("0.0.0.0", port))
        .map_err(|e| ParallelError::Orchestrator { port, message: e.to_string() })?;
    std::thread::Builder::new()
        .name("orchestrator".into())
        .spawn(move || runtime.block_on(burn_collective::start_global_orchestrator(port)))
        .map_err(|e| ParallelError::Orchestrator { port, message: e.to_string() })?;
    Ok(())
}
