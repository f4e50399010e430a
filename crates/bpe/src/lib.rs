//! # attend-bpe: byte-level byte-pair encoding
//!
//! A tokenizer for the rest of attend, and a library on its own (it does not depend on
//! Burn): train a byte-level BPE vocabulary on text files, encode text to ids, decode ids to
//! text, and save or load it as a HuggingFace `tokenizer.json`.
//!
//! - **Lossless**: every one of the 256 bytes is a token, so any text is representable and
//!   `decode(encode(s)) == s`.
//! - **Compatible**: pre-tokenization is GPT-2's pattern as HuggingFace's `ByteLevel`
//!   pre-tokenizer applies it ([`pretokenize`]); the saved file loads in Python's
//!   `tokenizers.Tokenizer.from_file` and encodes to the same ids.
//! - **Deterministic**: ties between equally frequent pairs go to the smaller pair of ids;
//!   the same input gives a byte-identical file.
//! - **Fast**: files are counted in parallel chunks, merges update counts incrementally,
//!   and the encoder caches pieces and merges long pieces in `O(n log n)`.
//!
//! [`classic`] holds the other BPE, Sennrich et al.'s over whitespace-separated words with an
//! end-of-word marker (`subword-nmt learn-bpe`), written as subword-nmt's codes file and as a
//! HuggingFace `tokenizer.json`.
//!
//! ```
//! use attend_bpe::{Trainer, TrainerConfig};
//! let trainer = Trainer::new(TrainerConfig {
//!     vocab_size: 270,
//!     min_frequency: 2,
//!     special_tokens: vec!["<pad>".into()],
//!     show_progress: false,
//! })?;
//! let tok = trainer.train_texts(["low lower lowest\n", "low low lower\n"]);
//! let ids = tok.encode("<pad>lowest low");
//! assert_eq!(ids[0], 0); // the special token, never split
//! assert_eq!(tok.decode(&ids)?, "<pad>lowest low");
//! # Ok::<(), attend_bpe::BpeError>(())
//! ```

pub mod byte_level;
pub mod classic;
mod corpus;
mod encode;
mod error;
mod json;
pub mod pretokenize;
mod tokenizer;
mod train;

#[cfg(test)]
mod test_rng;

pub use corpus::{count_words, count_words_in_files, WordCounts};
pub use encode::Encoder;
pub use error::{BpeError, Result};
pub use tokenizer::{AddedToken, Merge, Tokenizer};
pub use train::{Trainer, TrainerConfig};
