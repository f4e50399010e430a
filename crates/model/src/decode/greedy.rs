//! Greedy decoding: the most likely next token at each step.

use burn::tensor::{backend::Backend, Int, Tensor};

use super::{argmax, rows, Feeder, IncrementalDecoder};

/// Settings of [`greedy`].
#[derive(Clone, Debug, PartialEq)]
pub struct GreedyOptions {
    /// Most tokens to generate per row (EOS included).
    pub max_new_tokens: usize,
    /// End-of-sequence token: a row stops after emitting it.
    pub eos: Option<u32>,
}

/// Greedy continuation of each row of `prompt`; returns the generated tokens per row, without
/// the EOS token. Ties go to the lowest token id.
///
/// # Shapes
/// - `prompt`: `[batch, prompt_len]` (at least one token per row: BOS for a decoder)
pub fn greedy<B: Backend, M: IncrementalDecoder<B>>(
    model: &M,
    mut cache: M::Cache,
    prompt: Tensor<B, 2, Int>,
    options: &GreedyOptions,
) -> Vec<Vec<u32>> {
    let batch = prompt.dims()[0];
    let (mut feeder, mut logits, steps) = Feeder::start(model, &mut cache, prompt, options.max_new_tokens);
    let mut out = vec![Vec::new(); batch];
    let mut done = vec![false; batch];
    for step in 0..steps {
        let next: Vec<u32> = rows(logits).iter().map(|row| argmax(row) as u32).collect();
        for (b, &token) in next.iter().enumerate() {
            if done[b] {
                continue;
            }
            if Some(token) == options.eos {
                done[b] = true;
            } else {
                out[b].push(token);
            }
        }
        if done.iter().all(|&d| d) || step + 1 == steps {
            break;
        }
        logits = feeder.feed(model, &mut cache, &next);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::toy::{prompt, Toy, A, B, BOS, EOS};

    #[test]
    fn greedy_takes_the_argmax_and_stops_at_eos() {
        let options = GreedyOptions { max_new_tokens: 4, eos: Some(EOS) };
        // From BOS: a (0.6), then a (0.35, tied with b: lowest id), ...; from b: EOS (0.9).
        let out = greedy(&Toy, Vec::new(), prompt(&[&[BOS], &[B]]), &options);
        assert_eq!(out, vec![vec![A, A, A, A], vec![]]);
    }

    /// One model step per token that is fed: the prompt, then each generated token but the
    /// last (no step after the last token, none after every row has ended).
    #[test]
    fn greedy_steps_the_model_once_per_token_it_feeds() {
        use crate::decode::toy::{Watched, TABLE};
        for (rows, steps) in [(vec![BOS], 6), (vec![B], 1)] {
            let watched = Watched::new(1, &TABLE);
            let out =
                greedy(&watched, Vec::new(), prompt(&[&rows]), &GreedyOptions { max_new_tokens: 6, eos: Some(EOS) });
            assert_eq!(watched.steps.get(), steps, "from {rows:?}: {out:?}");
        }
    }
}
