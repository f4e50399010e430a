//! What can go wrong in a data-parallel run, each naming the peer, node or flag concerned.

/// A data-parallel run's failure.
#[derive(Debug, thiserror::Error)]
pub enum ParallelError {
    #[error("--devices {asked}: the {backend} backend found {found} device(s)")]
    TooManyDevices { asked: usize, found: usize, backend: String },
    #[error("--devices must be at least 1")]
    NoDevices,
    #[error("train.batch_size = {batch} is the global batch: {peers} peers ({devices} device(s) × {nodes} node(s)) do not divide it evenly; choose a multiple of {peers}")]
    BatchNotDivisible { batch: usize, peers: usize, devices: usize, nodes: usize },
    #[error("--node-rank {rank} is not below --nodes {nodes}")]
    BadRank { rank: u32, nodes: u32 },
    #[error("{flag} {value:?}: {expected}")]
    BadAddress { flag: &'static str, value: String, expected: &'static str },
    #[error("the run's {expected} peers did not all join within {seconds} s (this node's: {local}); {hint}")]
    NotJoined { expected: usize, local: String, seconds: u64, hint: String },
    #[error("peer {peer} (node {node}, device {device}) failed: {message}")]
    PeerFailed { peer: usize, node: u32, device: usize, message: String },
    #[error("no peer of this node finished a collective operation for {seconds} s (last step seen: {step}): another node stopped answering, or --peer-timeout is shorter than a step")]
    Stalled { seconds: u64, step: u64 },
    #[error("step {step}: the replicas' weights differ (peer {peer} holds other weights than peer {other}); the data-parallel run cannot go on")]
    Diverged { step: u64, peer: usize, other: usize },
    #[error("--devices {asked}: ndarray peers each need a CPU core, and this machine has {cores}")]
    TooFewCores { asked: usize, cores: usize },
    #[error("peer {peer}: {what} failed: {message}")]
    Collective { peer: usize, what: &'static str, message: String },
    #[error("--nodes: runs across machines are blocked: burn-collective 0.21.0's global level completes one all-reduce and hangs in the second (SyncService::sync clears a copy of its list of synced nodes, src/global/node/sync.rs, so no later sync ever completes; measured on loopback, docs/parallel.md). Use --devices on one machine until a burn-collective release fixes it")]
    GlobalLevelBroken,
    #[error("the global orchestrator on port {port}: {message}")]
    Orchestrator { port: u16, message: String },
}
