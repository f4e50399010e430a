//! A seeded sparse Markov source over a small word vocabulary, with its exact entropy rate.
//!
//! State: the last `order` words. From each state the next word comes from a sparse
//! distribution `q_s` over `branching` words (Dirichlet(1) weights), mixed with a little
//! uniform mass: `p(w | s) = ε/V + (1 − ε) q_s(w)`. The mixing makes the chain irreducible and
//! aperiodic, so it has one stationary distribution `π`, and the entropy rate is exactly
//! `H = Σ_s π(s) · H(p(· | s))` nats per word (Cover & Thomas, Theorem 4.2.4): the lowest
//! cross-entropy any model can reach on this text (docs/math.md, Generated data).

use crate::rng::Rng;

/// The source's shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MarkovSpec {
    /// Number of distinct words `V`.
    pub vocab: usize,
    /// Words of context that determine the next word.
    pub order: usize,
    /// Words each state prefers (the sparse part).
    pub branching: usize,
    /// Uniform mixing weight `ε`.
    pub epsilon: f64,
}

/// A Markov source: `V^order` states, each with a full next-word distribution.
#[derive(Clone, Debug)]
pub struct MarkovSource {
    spec: MarkovSpec,
    /// `probs[s * V + w] = p(w | s)`; state `s` is the context read as base-`V` digits.
    probs: Vec<f64>,
    words: Vec<String>,
}

/// `n` distinct pronounceable words made of two consonant-vowel syllables.
pub fn make_words(n: usize, consonants: &str, vowels: &str) -> Vec<String> {
    let cs: Vec<char> = consonants.chars().collect();
    let vs: Vec<char> = vowels.chars().collect();
    let syllables: Vec<String> = cs.iter().flat_map(|c| vs.iter().map(move |v| format!("{c}{v}"))).collect();
    (0..n)
        .map(|i| {
            let (a, b) = (i % syllables.len(), i / syllables.len());
            let second = &syllables[(b * 7 + a * 3 + 1) % syllables.len()];
            format!("{}{}{}", syllables[a], second, if b > 0 { b.to_string() } else { String::new() })
        })
        .collect()
}

impl MarkovSource {
    /// Draws a source from `seed`.
    pub fn new(spec: MarkovSpec, seed: u64) -> Self {
        let v = spec.vocab;
        let states = v.pow(spec.order as u32);
        let mut rng = Rng::derive(seed, "markov-source", 0);
        let mut probs = vec![spec.epsilon / v as f64; states * v];
        for s in 0..states {
            let mut chosen: Vec<usize> = Vec::with_capacity(spec.branching);
            while chosen.len() < spec.branching.min(v) {
                let w = rng.below(v as u64) as usize;
                if !chosen.contains(&w) {
                    chosen.push(w);
                }
            }
            // Dirichlet(1, ..., 1): normalized exponentials.
            let weights: Vec<f64> = chosen.iter().map(|_| -(1.0 - rng.next_f64()).ln()).collect();
            let total: f64 = weights.iter().sum();
            for (&w, &x) in chosen.iter().zip(&weights) {
                probs[s * v + w] += (1.0 - spec.epsilon) * x / total;
            }
        }
        MarkovSource { spec, probs, words: make_words(v, "bdfgklmnprstvz", "aeiou") }
    }

    pub fn spec(&self) -> MarkovSpec {
        self.spec
    }

    /// The words, by id.
    pub fn words(&self) -> &[String] {
        &self.words
    }

    fn next_state(&self, s: usize, w: usize) -> usize {
        let v = self.spec.vocab;
        (s * v + w) % v.pow(self.spec.order as u32)
    }

    /// The stationary distribution `π`, by power iteration to 1e-13 in L1.
    pub fn stationary(&self) -> Vec<f64> {
        let v = self.spec.vocab;
        let states = self.probs.len() / v;
        let mut pi = vec![1.0 / states as f64; states];
        for _ in 0..100_000 {
            let mut next = vec![0.0; states];
            for s in 0..states {
                for w in 0..v {
                    next[self.next_state(s, w)] += pi[s] * self.probs[s * v + w];
                }
            }
            let change: f64 = next.iter().zip(&pi).map(|(a, b)| (a - b).abs()).sum();
            pi = next;
            if change < 1e-13 {
                break;
            }
        }
        pi
    }

    /// The entropy rate in nats per word: `Σ_s π(s) H(p(· | s))`.
    pub fn entropy_rate(&self) -> f64 {
        let v = self.spec.vocab;
        self.stationary()
            .iter()
            .enumerate()
            .map(|(s, &pi)| {
                let h: f64 = self.probs[s * v..(s + 1) * v].iter().filter(|&&p| p > 0.0).map(|&p| -p * p.ln()).sum();
                pi * h
            })
            .sum()
    }

    /// The source's own cross-entropy on `ids`, in nats per word: the mean of `−log p(w | s)`
    /// over every word with `order` words before it (none for a shorter stream). A perfect
    /// model scores this on the sample; it differs from the entropy rate by sampling noise only.
    pub fn log_loss(&self, ids: &[u32]) -> Option<f64> {
        let (v, order) = (self.spec.vocab, self.spec.order);
        if ids.len() <= order {
            return None;
        }
        let mut s = ids[..order].iter().fold(0, |s, &w| self.next_state(s, w as usize));
        let mut nll = 0.0;
        for &w in &ids[order..] {
            nll -= self.probs[s * v + w as usize].ln();
            s = self.next_state(s, w as usize);
        }
        Some(nll / (ids.len() - order) as f64)
    }

    /// `n` words (as ids) drawn from the source, after a burn-in of 1,000 words.
    pub fn sample(&self, n: usize, rng: &mut Rng) -> Vec<u32> {
        let v = self.spec.vocab;
        let mut s = 0;
        let mut out = Vec::with_capacity(n);
        for i in 0..n + 1000 {
            let w = rng.weighted(&self.probs[s * v..(s + 1) * v]);
            s = self.next_state(s, w);
            if i >= 1000 {
                out.push(w as u32);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(order: usize) -> MarkovSpec {
        MarkovSpec { vocab: 6, order, branching: 2, epsilon: 0.1 }
    }

    #[test]
    fn stationary_distribution_is_a_fixed_point() {
        let src = MarkovSource::new(spec(2), 3);
        let pi = src.stationary();
        assert!((pi.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        let v = 6;
        let mut next = vec![0.0; pi.len()];
        for s in 0..pi.len() {
            for w in 0..v {
                next[src.next_state(s, w)] += pi[s] * src.probs[s * v + w];
            }
        }
        for (a, b) in next.iter().zip(&pi) {
            assert!((a - b).abs() < 1e-12);
        }
    }

    #[test]
    fn uniform_source_has_entropy_rate_ln_vocab() {
        let src = MarkovSource::new(MarkovSpec { epsilon: 1.0, ..spec(1) }, 1);
        assert!((src.entropy_rate() - 6f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn empirical_log_loss_under_the_true_model_approaches_entropy_rate() {
        let src = MarkovSource::new(spec(2), 5);
        let ids = src.sample(200_000, &mut Rng::new(9));
        let rate = src.log_loss(&ids).unwrap();
        assert!((rate - src.entropy_rate()).abs() < 0.01, "{rate} vs {}", src.entropy_rate());
    }

    #[test]
    fn log_loss_scores_each_word_from_the_order_words_before_it() {
        // Order 1 over 6 words: the loss of [a, b, c] is the mean of −log p(b|a), −log p(c|b).
        let src = MarkovSource::new(spec(1), 2);
        let p = |s: usize, w: usize| src.probs[s * 6 + w];
        let want = -(p(3, 1).ln() + p(1, 4).ln()) / 2.0;
        assert!((src.log_loss(&[3, 1, 4]).unwrap() - want).abs() < 1e-12);
        assert_eq!(src.log_loss(&[3]), None);
    }

    #[test]
    fn words_are_distinct() {
        let words = make_words(300, "bdfgklmnprstvz", "aeiou");
        let set: std::collections::HashSet<_> = words.iter().collect();
        assert_eq!(set.len(), 300);
    }
}
