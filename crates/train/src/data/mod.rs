//! Data: generated and named datasets, vocabularies, and batching.

pub mod codec;
pub mod fetch;
pub mod lm_batches;
pub mod lm_dataset;
pub mod markov;
pub mod masking;
pub mod mt_batches;
pub mod mt_dataset;
pub mod synthetic;
pub mod vocab;
