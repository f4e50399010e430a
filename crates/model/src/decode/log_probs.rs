//! One row of the model's next-token distribution, as beam search reads it: the logits and,
//! computed once on first use, their log-normalizer, so that
//! `log softmax(row)[t] = row[t] − log Σ_u exp(row[u])` costs a subtraction per token asked for.
//!
//! Beam search asks for a few tokens of each live row: the `k` best (by logit, which orders
//! them as their log-probabilities do), then their log-probabilities. Rows of finished
//! sentences, still fed to the batch, are never normalized.

use std::cell::OnceCell;
use std::cmp::Ordering;

/// A row of logits and its lazily computed `log Σ exp`.
#[derive(Clone, Debug)]
pub(crate) struct LogProbs {
    logits: Vec<f32>,
    log_sum: OnceCell<f64>,
}

impl LogProbs {
    pub(crate) fn new(logits: Vec<f32>) -> LogProbs {
        LogProbs { logits, log_sum: OnceCell::new() }
    }

    /// `log P(t)`, in `f64`: `row[t] − (max + ln Σ exp(row − max))`, the `exp` within two
    /// units in the last place of libm's ([`crate::fused::log_sum_exp_f64`]).
    pub(crate) fn get(&self, token: usize) -> f64 {
        let log_sum = *self.log_sum.get_or_init(|| crate::fused::log_sum_exp_f64(&self.logits));
        self.logits[token] as f64 - log_sum
    }

    /// The `k` most likely tokens, most likely first; ties go to the lower token id. One
    /// pass over the row with a sorted list of at most `k` entries.
    pub(crate) fn top(&self, k: usize) -> Vec<usize> {
        let mut best: Vec<usize> = Vec::with_capacity(k + 1);
        if k == 0 {
            return best;
        }
        // `a` ranks before `b`: the larger logit (total order, so NaN too), then the lower id.
        let before = |a: usize, b: usize| self.logits[b].total_cmp(&self.logits[a]).then(a.cmp(&b)) == Ordering::Less;
        for token in 0..self.logits.len() {
            if best.len() == k && !before(token, best[k - 1]) {
                continue;
            }
            let at = best.partition_point(|&held| before(held, token));
            best.insert(at, token);
            best.truncate(k);
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::LogProbs;

    /// A row of `n` logits drawn from few distinct values (so that ties abound), by an LCG.
    fn row(seed: u64, n: usize, distinct: u64) -> Vec<f32> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((state >> 33) % distinct) as f32 * 0.37 - 3.0
            })
            .collect()
    }

    #[test]
    fn log_probs_are_the_f64_log_softmax_to_1e_14_and_sum_to_one() {
        let logits = row(7, 1000, 997);
        let lp = LogProbs::new(logits.clone());
        let max = logits.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x as f64));
        let log_sum = max + logits.iter().map(|&x| (x as f64 - max).exp()).sum::<f64>().ln();
        for (t, &x) in logits.iter().enumerate() {
            let exact = x as f64 - log_sum;
            assert!((lp.get(t) - exact).abs() < 1e-14, "token {t}: {} against {exact}", lp.get(t));
        }
        let total: f64 = (0..logits.len()).map(|t| lp.get(t).exp()).sum();
        assert!((total - 1.0).abs() < 1e-12, "{total}");
    }

    #[test]
    fn top_k_equals_a_full_sort_with_ties_to_the_lower_token() {
        for seed in 0..50u64 {
            for (n, distinct, k) in [(200, 5, 8), (200, 1000, 8), (7, 3, 8), (64, 2, 1), (30, 30, 30)] {
                let logits = row(seed, n, distinct);
                let mut sorted: Vec<usize> = (0..n).collect();
                sorted.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
                sorted.truncate(k);
                assert_eq!(LogProbs::new(logits).top(k), sorted, "seed {seed}, n {n}, k {k}");
            }
        }
        assert!(LogProbs::new(vec![1.0, 2.0]).top(0).is_empty());
    }
}
