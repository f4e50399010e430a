//! The tasks of the one training loop ([`crate::fit`]), and [`train`], which picks the task
//! a configuration describes.

pub mod lm;
pub mod mlm;
pub mod mt;

use std::sync::atomic::AtomicBool;

use burn::tensor::backend::AutodiffBackend;

use crate::config::RunConfig;
use crate::error::TrainError;
use crate::fit::fit_as;
use crate::parallel::peer::Peer;
use crate::run::{Observer, RunOptions, Summary};

pub use lm::{train_lm, LmTask, LmValid};
pub use mlm::{train_mlm, MlmTask, MlmValid};
pub use mt::{train_mt, MtTask, MtValid};

/// The summary of a run of either task.
#[derive(Clone, Debug)]
pub enum Trained {
    Lm(Summary<LmValid>),
    Mlm(Summary<MlmValid>),
    Mt(Summary<MtValid>),
}

/// Trains (or continues) the task `config.model.arch` names: translation for `seq2seq`,
/// masked language modeling for `encoder`, language modeling otherwise.
pub fn train<B: AutodiffBackend>(
    config: &RunConfig,
    opts: &RunOptions,
    device: &B::Device,
    observer: &mut dyn Observer,
    stop: &AtomicBool,
) -> Result<Trained, TrainError> {
    train_as::<B>(config, opts, device, observer, stop, &Peer::sole())
}

/// [`train`] as `peer` of a data-parallel run ([`crate::parallel`]).
pub(crate) fn train_as<B: AutodiffBackend>(
    config: &RunConfig,
    opts: &RunOptions,
    device: &B::Device,
    observer: &mut dyn Observer,
    stop: &AtomicBool,
    peer: &Peer,
) -> Result<Trained, TrainError> {
    Ok(match config.model.arch {
        attend_model::Arch::Seq2seq => {
            let mut task = MtTask::new(config, opts)?;
            task.check_shards(peer.count)?;
            Trained::Mt(fit_as::<B, _>(task, config, opts, device, observer, stop, peer)?)
        }
        attend_model::Arch::Encoder => {
            Trained::Mlm(fit_as::<B, _>(MlmTask::new(config, opts)?, config, opts, device, observer, stop, peer)?)
        }
        _ => Trained::Lm(fit_as::<B, _>(LmTask::new(config, opts)?, config, opts, device, observer, stop, peer)?),
    })
}
