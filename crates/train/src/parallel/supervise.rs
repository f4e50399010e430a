//! The calling thread's part of a data-parallel run: it passes the writer's progress to the
//! caller's [`Observer`], forwards Ctrl-C to the peers, and turns what goes wrong into one
//! error: a peer that fails (its error, or its panic, naming it; the others are released from
//! the collective and stop), peers that do not join within the timeout, or a run in which no
//! collective operation completes within it (another node gone).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use burn::tensor::backend::Backend;
use burn_collective::reset_collective;

use super::error::ParallelError;
use super::peer::Signal;
use crate::error::TrainError;
use crate::run::Observer;
use crate::tasks::Trained;

/// What a peer thread tells the supervisor.
pub(crate) enum Event {
    /// A local peer registered with the collective (all peers of all nodes did).
    Joined,
    /// A local peer's [`Signal`].
    Peer(Signal),
    Started(u64, u64),
    Step(u64, f64, f64, f64),
    Eval(u64, f64),
    Note(String),
    Busy(Option<String>),
    /// Local peer `.0` ended.
    Done(usize, Result<Trained, TrainError>),
}

/// The writer's observer inside its thread: sends everything to the supervisor.
pub(crate) struct Forward(pub std::sync::mpsc::Sender<Event>);

impl Observer for Forward {
    fn started(&mut self, first: u64, max: u64) {
        let _ = self.0.send(Event::Started(first, max));
    }
    fn step(&mut self, step: u64, loss: f64, lr: f64, tokens_per_s: f64) {
        let _ = self.0.send(Event::Step(step, loss, lr, tokens_per_s));
    }
    fn eval(&mut self, step: u64, loss: f64) {
        let _ = self.0.send(Event::Eval(step, loss));
    }
    fn note(&mut self, message: &str) {
        let _ = self.0.send(Event::Note(message.to_string()));
    }
    fn busy(&mut self, what: Option<&str>) {
        let _ = self.0.send(Event::Busy(what.map(str::to_string)));
    }
}

/// Where this node's peers sit, for the error messages.
pub(crate) struct Layout {
    pub local: usize,
    pub rank: u32,
    pub peers: usize,
    pub hint: String,
}

/// Runs until every local peer has ended (or something went wrong); the writer's result.
pub(crate) fn supervise<B: Backend>(
    events: Receiver<Event>,
    layout: &Layout,
    timeout: Duration,
    observer: &mut dyn Observer,
    stop: &AtomicBool,
    stop_peers: &AtomicBool,
) -> Result<Option<Trained>, TrainError> {
    let started = Instant::now();
    let (mut joined, mut done, mut step_seen) = (0, 0, 0);
    // The stall clock starts at the first completed collective operation (the barrier after
    // the run started): loading data and building the model may take as long as they take.
    let (mut last_beat, mut alone, mut beating) = (Instant::now(), false, false);
    let mut result = None;
    let mut failure: Option<TrainError> = None;
    while done < layout.local {
        if stop.load(Ordering::Relaxed) {
            stop_peers.store(true, Ordering::Relaxed);
        }
        match events.recv_timeout(Duration::from_millis(100)) {
            Ok(Event::Joined) => {
                joined += 1;
                last_beat = Instant::now();
            }
            Ok(Event::Peer(Signal::Beat)) => {
                last_beat = Instant::now();
                beating = true;
            }
            Ok(Event::Peer(Signal::Alone(busy))) => {
                alone = busy;
                last_beat = Instant::now();
            }
            Ok(Event::Started(first, max)) => observer.started(first, max),
            Ok(Event::Step(step, loss, lr, tps)) => {
                step_seen = step;
                observer.step(step, loss, lr, tps);
            }
            Ok(Event::Eval(step, loss)) => observer.eval(step, loss),
            Ok(Event::Note(message)) => observer.note(&message),
            Ok(Event::Busy(what)) => observer.busy(what.as_deref()),
            Ok(Event::Done(local, outcome)) => {
                done += 1;
                match outcome {
                    Ok(trained) if local == 0 && layout.rank == 0 => result = Some(trained),
                    Ok(_) => {}
                    Err(e) if failure.is_none() => {
                        // Release the peers waiting for this one in a collective operation.
                        reset_collective::<B>();
                        failure = Some(if local == 0 && layout.rank == 0 {
                            e
                        } else {
                            let peer = layout.rank as usize * layout.local + local;
                            let message = e.to_string();
                            ParallelError::PeerFailed { peer, node: layout.rank, device: local, message }.into()
                        });
                    }
                    Err(_) => {}
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {
                if failure.is_some() && last_beat.elapsed() > timeout {
                    break;
                }
                if joined < layout.local && started.elapsed() > timeout {
                    let local = format!("{joined} of {} joined", layout.local);
                    let (expected, seconds, hint) = (layout.peers, timeout.as_secs(), layout.hint.clone());
                    return Err(ParallelError::NotJoined { expected, local, seconds, hint }.into());
                }
                if beating && failure.is_none() && !alone && last_beat.elapsed() > timeout {
                    return Err(ParallelError::Stalled { seconds: timeout.as_secs(), step: step_seen }.into());
                }
            }
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(result),
    }
}
