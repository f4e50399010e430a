//! Beam search with GNMT's length penalty (Wu et al. 2016, eq. 14), as the paper uses it
//! (section 6.1: beam 4, α = 0.6): hypotheses are ranked by `log P(Y) / lp(Y)` with
//! `lp(Y) = ((5 + |Y|) / 6)^α`.
//!
//! Batched: each batch row keeps `width` beams, laid out as rows `b·width .. (b+1)·width` of
//! the model's cache. At each step the `2·width` best extensions of a row's beams are scanned
//! in order: an EOS among the first `width` finishes a hypothesis, other tokens fill the next
//! beams. A row is done once it has `width` finished hypotheses (or runs out of length), so
//! that width 1 with α = 0 is greedy decoding exactly.

use burn::tensor::{backend::Backend, Int, Tensor};

use super::log_probs::LogProbs;
use super::{budget, index_tensor, rows, token_tensor, IncrementalDecoder};

/// Settings of [`beam_search`].
#[derive(Clone, Debug, PartialEq)]
pub struct BeamOptions {
    /// Beams per batch row. The paper: 4.
    pub width: usize,
    /// Length-penalty exponent α. The paper: 0.6; 0 ranks by `log P` alone.
    pub length_penalty: f64,
    /// Most tokens to generate per hypothesis (EOS included).
    pub max_new_tokens: usize,
    /// End-of-sequence token.
    pub eos: Option<u32>,
}

/// A finished hypothesis.
#[derive(Clone, Debug, PartialEq)]
pub struct Hypothesis {
    /// Generated tokens, without EOS.
    pub tokens: Vec<u32>,
    /// `log P(Y)`, EOS included when it was generated.
    pub log_prob: f64,
    /// `log P(Y) / lp(Y)`, the ranking score.
    pub score: f64,
}

/// GNMT's length penalty `lp(Y) = ((5 + |Y|) / 6)^α`; `|Y|` counts generated tokens, EOS
/// included.
///
/// Example: `length_penalty(1, 0.6) == 1.0`, `length_penalty(7, 1.0) == 2.0`.
pub fn length_penalty(len: usize, alpha: f64) -> f64 {
    ((5.0 + len as f64) / 6.0).powf(alpha)
}

#[derive(Clone, Debug)]
struct Beam {
    tokens: Vec<u32>,
    log_prob: f64,
}

/// Beam search from each row of `prompt`; returns the best hypothesis per row.
///
/// # Panics
/// If `options.width` is 0.
///
/// # Shapes
/// - `prompt`: `[batch, prompt_len]` (at least one token per row: BOS for a decoder)
pub fn beam_search<B: Backend, M: IncrementalDecoder<B>>(
    model: &M,
    mut cache: M::Cache,
    prompt: Tensor<B, 2, Int>,
    options: &BeamOptions,
) -> Vec<Hypothesis> {
    let width = options.width;
    assert!(width > 0, "beam width must be at least 1");
    let device = prompt.device();
    let batch = prompt.dims()[0];

    // 1. Run the prompt once, then give each batch row `width` copies of its cache; at the
    //    first step only beam 0 of each row is live.
    let logits = model.step(prompt, &mut cache);
    let expand: Vec<usize> = (0..batch * width).map(|r| r / width).collect();
    let mut cache = model.reorder(cache, index_tensor(&expand, &device));
    let first: Vec<LogProbs> = rows(logits).into_iter().map(LogProbs::new).collect();
    let mut log_probs: Vec<LogProbs> = expand.iter().map(|&b| first[b].clone()).collect();
    let steps = budget(options.max_new_tokens, model.cached_len(&cache), model.max_len());

    let mut beams: Vec<Vec<Beam>> = vec![vec![Beam { tokens: Vec::new(), log_prob: 0.0 }]; batch];
    let mut finished: Vec<Vec<Hypothesis>> = vec![Vec::new(); batch];
    let mut done = vec![false; batch];
    let finish = |beam: &Beam, len: usize| Hypothesis {
        tokens: beam.tokens.clone(),
        log_prob: beam.log_prob,
        score: beam.log_prob / length_penalty(len, options.length_penalty),
    };
    let filler = options.eos.unwrap_or(0);

    for step in 0..steps {
        let mut parents = Vec::with_capacity(batch * width);
        let mut fed = Vec::with_capacity(batch * width);
        for b in 0..batch {
            if done[b] {
                parents.extend((0..width).map(|w| b * width + w));
                fed.extend((0..width).map(|_| vec![filler]));
                continue;
            }
            // 2. The 2·width best extensions of this row's live beams.
            let candidates = best_extensions(&beams[b], |w| &log_probs[b * width + w], 2 * width);
            let mut next: Vec<(usize, Beam)> = Vec::with_capacity(width);
            for (rank, (w, token, log_prob)) in candidates.into_iter().enumerate() {
                let mut tokens = beams[b][w].tokens.clone();
                if Some(token) == options.eos {
                    // 3. EOS finishes a hypothesis only from among the top `width`.
                    if rank < width {
                        let len = tokens.len() + 1;
                        finished[b].push(finish(&Beam { tokens, log_prob }, len));
                    }
                } else {
                    tokens.push(token);
                    next.push((w, Beam { tokens, log_prob }));
                    if next.len() == width {
                        break;
                    }
                }
            }
            // 4. Done with `width` finished hypotheses; out of length, the live beams finish.
            if finished[b].len() >= width {
                done[b] = true;
            } else if step + 1 == steps || next.is_empty() {
                finished[b].extend(next.iter().map(|(_, beam)| finish(beam, beam.tokens.len())));
                done[b] = true;
            }
            for w in 0..width {
                let (parent, token) = match next.get(w) {
                    Some((parent, beam)) => (*parent, *beam.tokens.last().expect("extended beam")),
                    None => (0, filler),
                };
                parents.push(b * width + parent);
                fed.push(vec![token]);
            }
            beams[b] = next.into_iter().map(|(_, beam)| beam).collect();
        }
        if done.iter().all(|&d| d) {
            break;
        }
        // 5. Reorder the cache to the chosen parents (each within its own row's beams) and
        //    feed the chosen tokens.
        cache = model.reorder_beams(cache, index_tensor(&parents, &device));
        let logits = model.step(token_tensor(&fed, &device), &mut cache);
        log_probs = rows(logits).into_iter().map(LogProbs::new).collect();
    }

    finished
        .into_iter()
        .map(|hyps| {
            hyps.into_iter()
                .fold(None::<Hypothesis>, |best, h| match best {
                    Some(best) if best.score >= h.score => Some(best),
                    _ => Some(h),
                })
                // Only with max_new_tokens = 0 can a row finish nothing.
                .unwrap_or(Hypothesis { tokens: Vec::new(), log_prob: 0.0, score: 0.0 })
        })
        .collect()
}

/// The `k` best `(beam, token, log P)` extensions, best first; ties go to the lower beam,
/// then the lower token id.
fn best_extensions<'a>(beams: &[Beam], log_probs: impl Fn(usize) -> &'a LogProbs, k: usize) -> Vec<(usize, u32, f64)> {
    let mut all: Vec<(usize, u32, f64)> = Vec::new();
    for (w, beam) in beams.iter().enumerate() {
        let row = log_probs(w);
        // Only this beam's k best tokens can be among the overall k best.
        all.extend(row.top(k).into_iter().map(|t| (w, t as u32, beam.log_prob + row.get(t))));
    }
    all.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
    all.truncate(k);
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::greedy::{greedy, GreedyOptions};
    use crate::decode::toy::{prompt, Toy, Watched, A, B, BOS, EOS, LONG_A, TABLE};

    fn options(width: usize, alpha: f64) -> BeamOptions {
        BeamOptions { width, length_penalty: alpha, max_new_tokens: 6, eos: Some(EOS) }
    }

    #[test]
    fn length_penalty_is_gnmt() {
        assert_eq!(length_penalty(1, 0.6), 1.0);
        assert!((length_penalty(7, 1.0) - 2.0).abs() < 1e-12);
        assert_eq!(length_penalty(30, 0.0), 1.0);
    }

    /// Hand derivation on the toy bigram model: greedy follows a, a, a, ...; beam 2 finishes
    /// "b EOS" (0.4 · 0.9 = 0.36) at step 2 and "a b EOS" (0.6 · 0.35 · 0.9 = 0.189) at step 3,
    /// and returns the former.
    #[test]
    fn beam_finds_the_likelier_sequence_greedy_misses() {
        let best = beam_search(&Toy, Vec::new(), prompt(&[&[BOS]]), &options(2, 0.0));
        assert_eq!(best[0].tokens, vec![B]);
        assert!((best[0].log_prob - 0.36f64.ln()).abs() < 1e-6);
        let greedy = greedy(&Toy, Vec::new(), prompt(&[&[BOS]]), &GreedyOptions { max_new_tokens: 6, eos: Some(EOS) });
        assert_eq!(greedy[0], vec![A; 6]);
    }

    #[test]
    fn beam_width_one_without_penalty_equals_greedy_on_toy() {
        for start in [BOS, A, B] {
            let beam = beam_search(&Toy, Vec::new(), prompt(&[&[start]]), &options(1, 0.0));
            let greedy =
                greedy(&Toy, Vec::new(), prompt(&[&[start]]), &GreedyOptions { max_new_tokens: 6, eos: Some(EOS) });
            assert_eq!(beam[0].tokens, greedy[0]);
        }
    }

    #[test]
    fn batched_beam_equals_one_row_at_a_time() {
        let batched = beam_search(&Toy, Vec::new(), prompt(&[&[BOS], &[A], &[B]]), &options(3, 0.6));
        for (row, start) in [BOS, A, B].into_iter().enumerate() {
            let alone = beam_search(&Toy, Vec::new(), prompt(&[&[start]]), &options(3, 0.6));
            assert_eq!(batched[row], alone[0]);
        }
    }

    #[test]
    fn score_is_log_prob_over_length_penalty() {
        let best = beam_search(&Toy, Vec::new(), prompt(&[&[A]]), &options(2, 0.6));
        let len = best[0].tokens.len() + 1; // EOS included
        assert!((best[0].score - best[0].log_prob / length_penalty(len, 0.6)).abs() < 1e-12);
    }

    /// With α = 5 the longer "a b" (0.189 over `lp(3)`: -0.395) outranks "b" (0.36 over
    /// `lp(2)`: -0.473), which finished first: the best is chosen by score, not by order.
    #[test]
    fn a_later_finished_hypothesis_with_a_better_score_wins() {
        let best = beam_search(&Toy, Vec::new(), prompt(&[&[BOS]]), &options(2, 5.0));
        assert_eq!(best[0].tokens, vec![A, B]);
        assert!((best[0].log_prob - 0.189f64.ln()).abs() < 1e-6);
    }

    /// Rows that finish at different steps (from b at step 1, from BOS at step 2): every reorder
    /// keeps each row's parent among its own input's beams.
    #[test]
    fn every_beam_reorder_stays_within_each_inputs_beams() {
        for width in [2, 3] {
            let watched = Watched::new(width, &TABLE);
            let rows = prompt(&[&[B], &[BOS], &[B], &[A]]);
            let best = beam_search(&watched, Vec::new(), rows, &options(width, 0.0));
            assert_eq!(best[0].tokens, Vec::<u32>::new());
            assert!(watched.steps.get() > 2, "the search ran {} steps", watched.steps.get());
        }
    }

    /// On [`LONG_A`] at width 2 the rows from b are done after step 1 while the rows from a run
    /// all 6 steps: the done rows' beams, which are fed filler, stay in their own groups too.
    #[test]
    fn a_done_rows_beams_stay_in_its_own_group_while_another_row_goes_on() {
        let watched = Watched::new(2, &LONG_A);
        let best = beam_search(&watched, Vec::new(), prompt(&[&[A], &[B], &[A], &[B]]), &options(2, 0.0));
        assert_eq!(best[0].tokens, vec![A; 6]);
        assert_eq!(best[1].tokens, Vec::<u32>::new());
        assert_eq!(best[2], best[0]);
        assert_eq!(best[3], best[1]);
        // The prompt, then one step after each of steps 0..5 but the last.
        assert_eq!(watched.steps.get(), 6);
    }
}
