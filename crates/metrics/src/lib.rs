//! attend-metrics: the numbers attend reports, computed exactly and quickly, without Burn.
//!
//! - [`perplexity`]: cross-entropy and perplexity from sufficient statistics (total negative
//!   log-likelihood and counts), in nats and bits per token, per word, per character and byte.
//! - [`bleu`]: corpus and sentence BLEU equal to sacreBLEU 2.x ([`SACREBLEU_VERSION`]) with its
//!   tokenizers ([`Tokenizer`]), smoothing methods ([`Smoothing`]) and signatures.
//! - [`chrf`]: chrF and chrF++ equal to sacreBLEU's.
//! - [`ngram_lm`]: uniform, add-one unigram and interpolated modified Kneser-Ney n-gram
//!   language models, the baselines a trained model is compared with.
//!
//! Every metric accumulates sufficient statistics (n-gram counts, lengths, log-likelihoods)
//! that add across segments and batches, and finalizes once: a corpus score is never a mean
//! of per-sentence scores. `docs/metrics.md` gives the formulas beside the code that
//! implements them.
//!
//! ```
//! use attend_metrics::{corpus_bleu, BleuConfig};
//!
//! let hyps = ["The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."];
//! let refs = [
//!     vec!["The dog bit the man.", "It was not unexpected.", "The man bit him first."],
//!     vec!["The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."],
//! ];
//! let score = corpus_bleu(&hyps, &refs, &BleuConfig::corpus()).unwrap();
//! // sacreBLEU 2.6.0 prints 48.53 for this example (its README's).
//! assert_eq!(format!("{:.2}", score.score), "48.53");
//! ```

pub mod bleu;
pub mod chrf;
mod error;
pub mod lines;
pub mod ngram_lm;
mod ngrams;
pub mod perplexity;
pub mod segments;
pub mod signature;
pub mod smoothing;
pub mod text;
pub mod tokenizers;

pub use bleu::{corpus_bleu, sentence_bleu, BleuConfig, BleuScore, BleuStats};
pub use chrf::{corpus_chrf, sentence_chrf, ChrfConfig, ChrfScore, ChrfStats};
pub use error::MetricsError;
pub use perplexity::{CrossEntropyStats, PerplexityReport, TextCounts};
pub use segments::read_segments;
pub use signature::SACREBLEU_VERSION;
pub use smoothing::Smoothing;
pub use tokenizers::Tokenizer;
