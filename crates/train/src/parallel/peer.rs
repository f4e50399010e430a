//! One replica's side of a data-parallel run: which rows of each batch it computes, and the
//! collective operations it joins (through burn-collective): the mean of the gradients once
//! per optimizer step, sums of a few scalars (positions counted, the logged loss, stop flags),
//! and a barrier. [`Peer::sole`] is the one-device run, for which every operation is free.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{ElementConversion, Tensor, TensorPrimitive};
use burn_collective::{all_reduce, PeerId, ReduceOperation};

use super::error::ParallelError;
use crate::task::Shard;

/// A fault a test injects into one peer ([`super::Fault`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The peer's thread panics inside the step's gradient all-reduce (a peer that dies).
    Panic,
    /// The peer's averaged gradients are shifted: its weights drift from the others'.
    Drift,
}

/// Burn's random generators are process-wide: peers that share a process seed and draw under
/// this lock (model initialization, dropout), so that every draw is a function of the seed.
static RANDOM: Mutex<()> = Mutex::new(());

/// What a peer tells the run's supervisor between collective operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// A collective operation completed: the peer is alive.
    Beat,
    /// The writer starts (true) or ends (false) work the others wait for.
    Alone(bool),
}

/// Where a peer's [`Signal`]s go (the supervisor's channel, in a data-parallel run).
pub type Notify = Box<dyn Fn(Signal) + Send + Sync>;

/// This replica's place among all peers of a run (numbered across nodes).
pub struct Peer {
    /// Global index: `node rank × devices per node + local index`; peer 0 writes the run.
    pub index: usize,
    /// Peers in all.
    pub count: usize,
    nodes: usize,
    /// Peers in this process (they share Burn's random generator).
    local: usize,
    notify: Option<Notify>,
    /// Fault injection for the tests: what goes wrong on this peer at which step.
    fault: Option<(u64, FaultKind)>,
    /// Seconds (as f64 bits) spent in collective operations since [`Peer::take_collective_seconds`].
    collective_s: AtomicU64,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("index", &self.index)
            .field("count", &self.count)
            .field("nodes", &self.nodes)
            .finish()
    }
}

impl Peer {
    /// The run on one device.
    pub fn sole() -> Peer {
        Peer { index: 0, count: 1, nodes: 1, local: 1, notify: None, fault: None, collective_s: AtomicU64::new(0) }
    }

    pub(crate) fn new(
        index: usize,
        count: usize,
        nodes: usize,
        notify: Notify,
        fault: Option<(u64, FaultKind)>,
    ) -> Self {
        Peer { index, count, nodes, local: count / nodes, notify: Some(notify), fault, collective_s: AtomicU64::new(0) }
    }

    /// Whether this peer logs, evaluates and saves (peer 0).
    pub fn writes(&self) -> bool {
        self.index == 0
    }

    pub fn is_parallel(&self) -> bool {
        self.count > 1
    }

    /// The rows of each batch this peer computes.
    pub fn shard(&self) -> Shard {
        Shard { index: self.index, count: self.count }
    }

    /// Held while drawing from Burn's random generator when other peers share the process.
    pub fn random_lock(&self) -> Option<MutexGuard<'static, ()>> {
        (self.local > 1).then(|| RANDOM.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// Seconds this peer spent in collective operations (transfers, and waiting for the
    /// others) since the last call.
    pub fn take_collective_seconds(&self) -> f64 {
        f64::from_bits(self.collective_s.swap(0, Ordering::Relaxed))
    }

    /// Tells the supervisor this peer is alive (after every collective operation).
    fn beat(&self) {
        if let Some(notify) = &self.notify {
            notify(Signal::Beat);
        }
    }

    /// Tells the supervisor that this peer works alone for a while (the writer evaluating or
    /// saving) and the others' waiting is no stall.
    pub fn alone(&self, busy: bool) {
        if let Some(notify) = &self.notify {
            notify(Signal::Alone(busy));
        }
    }

    /// The element-wise sum of `values` over all peers (`values` unchanged on one device).
    pub fn sum<B: Backend>(&self, values: Tensor<B, 1>, what: &'static str) -> Result<Tensor<B, 1>, ParallelError> {
        if !self.is_parallel() {
            return Ok(values);
        }
        let n = values.dims()[0];
        // burn-collective's ring among nodes splits a tensor into one slice per node.
        let width = n.max(self.nodes);
        let padded = if width > n {
            Tensor::cat(vec![values.clone(), Tensor::zeros([width - n], &values.device())], 0)
        } else {
            values
        };
        let summed = self.reduce(padded, ReduceOperation::Sum, what)?;
        Ok(summed.slice(0..n))
    }

    /// Whether `flag` holds on any peer.
    pub fn any<B: Backend>(&self, flag: bool, device: &B::Device, what: &'static str) -> Result<bool, ParallelError> {
        if !self.is_parallel() {
            return Ok(flag);
        }
        let value = Tensor::<B, 1>::from_floats([if flag { 1.0 } else { 0.0 }], device);
        Ok(self.sum(value, what)?.into_scalar().elem::<f64>() > 0.0)
    }

    /// The step's one exchange of scalars: the summed NLL `nll` (shape `[1]`), whether any
    /// peer was asked to stop, and a check that all replicas hold the same weights (each
    /// peer's [`fingerprint`] of `model`, compared exactly). Returns the whole batch's NLL and
    /// the stop decision.
    pub fn exchange<B: AutodiffBackend, M: AutodiffModule<B>>(
        &self,
        model: &M,
        nll: Tensor<B::InnerBackend, 1>,
        stop: bool,
        step: u64,
    ) -> Result<(Tensor<B::InnerBackend, 1>, bool), ParallelError> {
        let device = nll.device();
        let flag = Tensor::from_floats([if stop { 1.0 } else { 0.0 }], &device);
        let mut parts = vec![nll, flag];
        for peer in 0..self.count {
            parts.push(if peer == self.index { fingerprint::<B, M>(model) } else { Tensor::zeros([2], &device) });
        }
        let all = self.sum(Tensor::cat(parts, 0), "the step's all-reduce (loss, stop flags, weight checks)")?;
        let values = all.clone().slice(1..2 + 2 * self.count).into_data().convert::<f64>();
        let values = values.as_slice::<f64>().expect("converted to f64");
        let prints: Vec<&[f64]> = values[1..].chunks(2).collect();
        if let Some(other) = prints.iter().position(|p| p != &prints[self.index]) {
            return Err(ParallelError::Diverged { step, peer: self.index, other });
        }
        Ok((all.slice(0..1), values[0] > 0.0))
    }

    /// Returns once every peer has reached its own call.
    pub fn barrier<B: Backend>(&self, device: &B::Device, what: &'static str) -> Result<(), ParallelError> {
        self.any::<B>(false, device, what).map(|_| ())
    }

    /// Replaces every gradient in `grads` by its mean over all peers: one all-reduce of all
    /// gradients flattened into one vector, in the module's visiting order (the same on every
    /// replica, unlike parameter ids).
    pub fn mean_gradients<B: AutodiffBackend, M: AutodiffModule<B>>(
        &self,
        model: &M,
        grads: &mut GradientsParams,
        step: u64,
    ) -> Result<(), ParallelError> {
        if !self.is_parallel() {
            return Ok(());
        }
        if self.fault == Some((step, FaultKind::Panic)) {
            panic!("peer {} fails at step {step} (fault injected by a test)", self.index);
        }
        let mut flat = Flatten::<B::InnerBackend> { grads, parts: Vec::new(), ids: Vec::new() };
        model.visit(&mut flat);
        let Flatten { parts, ids, .. } = flat;
        if parts.is_empty() {
            return Ok(());
        }
        let sizes: Vec<usize> = parts.iter().map(|p| p.dims()[0]).collect();
        let mut mean = self.reduce(Tensor::cat(parts, 0), ReduceOperation::Mean, "the gradients' all-reduce")?;
        if self.fault == Some((step, FaultKind::Drift)) {
            mean = mean.add_scalar(1e-3);
        }
        let mut offset = 0;
        let pieces = sizes
            .into_iter()
            .map(|n| {
                offset += n;
                mean.clone().slice(offset - n..offset)
            })
            .collect();
        model.visit(&mut Restore::<B::InnerBackend> { grads, pieces, ids, next: 0 });
        Ok(())
    }

    fn reduce<B: Backend>(
        &self,
        tensor: Tensor<B, 1>,
        op: ReduceOperation,
        what: &'static str,
    ) -> Result<Tensor<B, 1>, ParallelError> {
        let started = Instant::now();
        let primitive = tensor.into_primitive().tensor();
        let out = all_reduce::<B>(PeerId::from(self.index as u32), primitive, op)
            .map_err(|e| ParallelError::Collective { peer: self.index, what, message: format!("{e:?}") })?;
        let total = f64::from_bits(self.collective_s.load(Ordering::Relaxed)) + started.elapsed().as_secs_f64();
        self.collective_s.store(total.to_bits(), Ordering::Relaxed);
        self.beat();
        Ok(Tensor::from_primitive(TensorPrimitive::Float(out)))
    }
}

/// The sum and the sum of squares of all of `model`'s weights (equal on replicas that hold
/// equal weights: they compute it by the same operations).
fn fingerprint<B: AutodiffBackend, M: AutodiffModule<B>>(model: &M) -> Tensor<B::InnerBackend, 1> {
    let mut sums = Fingerprint::<B::InnerBackend> { total: None };
    model.visit(&mut sums);
    sums.total.expect("a model has weights")
}

struct Fingerprint<B: Backend> {
    total: Option<Tensor<B, 1>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Fingerprint<B::InnerBackend> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let w = param.val().inner();
        let n = w.shape().num_elements();
        let w = w.reshape([n]);
        let both = Tensor::cat(vec![w.clone().sum(), w.powi_scalar(2).sum()], 0);
        self.total = Some(match self.total.take() {
            Some(t) => t + both,
            None => both,
        });
    }
}

/// Takes every gradient out of `grads`, flattened, in visiting order.
struct Flatten<'a, B: Backend> {
    grads: &'a mut GradientsParams,
    parts: Vec<Tensor<B, 1>>,
    ids: Vec<burn::module::ParamId>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Flatten<'_, B::InnerBackend> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.remove::<B::InnerBackend, D>(param.id) {
            let n = g.shape().num_elements();
            self.parts.push(g.reshape([n]));
            self.ids.push(param.id);
        }
    }
}

/// Puts the reduced pieces back, shaped as their parameters.
struct Restore<'a, B: Backend> {
    grads: &'a mut GradientsParams,
    pieces: Vec<Tensor<B, 1>>,
    ids: Vec<burn::module::ParamId>,
    next: usize,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Restore<'_, B::InnerBackend> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if self.ids.get(self.next) == Some(&param.id) {
            let shape = param.val().shape();
            let piece = self.pieces[self.next].clone().reshape(shape);
            self.grads.register::<B::InnerBackend, D>(param.id, piece);
            self.next += 1;
        }
    }
}
