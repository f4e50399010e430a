//! Interpolated modified Kneser-Ney smoothing (Chen & Goodman, "An Empirical Study of
//! Smoothing Techniques for Language Modeling", 1998, TR-10-98, section 3.5), as SRILM's
//! `ngram-count -kndiscount -interpolate` builds it (without count cutoffs).
//!
//! For an n-gram model and a history h (its last n−1 words), recursively from order 1:
//!
//! ```text
//! p_k(w | h) = max(c_k(hw) − D_k(c_k(hw)), 0) / Σ_v c_k(hv)  +  γ_k(h) · p_{k−1}(w | h')
//! γ_k(h)     = (D_k,1 · N1(h•) + D_k,2 · N2(h•) + D_k,3+ · N3+(h•)) / Σ_v c_k(hv)
//! p_0(w)     = 1 / V
//! ```
//!
//! with h' the history without its first word, and Nᵢ(h•) the number of words following h
//! with count i (3 or more for N3+). At the highest order c_k is the training count; at lower
//! orders it is the continuation count N1+(•hw), the number of distinct words seen before hw,
//! except for n-grams starting with `<s>`, which have no left context and keep their count.
//! A history never seen at order k contributes nothing there (p_k = p_{k−1}). The three
//! discounts per order come from the count-of-counts nᵢ of the (modified) counts:
//! `Y = n1/(n1 + 2n2)`, `D1 = 1 − 2Y·n2/n1`, `D2 = 2 − 3Y·n3/n2`, `D3+ = 3 − 4Y·n4/n3`.
//!
//! The n-grams live in one trie: node ids for every n-gram of orders 1..=N, a hash map from
//! (parent node, word) to child. A node is both an n-gram (its count) and a history (the
//! statistics of its children).

use rustc_hash::FxHashMap;

use super::{LanguageModel, Vocab};
use crate::MetricsError;

const ROOT: u32 = 0;

/// An interpolated modified Kneser-Ney n-gram model.
#[derive(Clone, Debug)]
pub struct KneserNey {
    order: usize,
    vocab_size: usize,
    /// `(parent << 32) | word` → child node.
    children: FxHashMap<u64, u32>,
    /// Per node: its (modified) count at its own order.
    count: Vec<u32>,
    /// Per node as a history: the sum of its children's counts, and how many children have
    /// count 1, 2 and ≥ 3.
    history: Vec<HistoryStats>,
    /// Per order 1..=N: the discounts D1, D2, D3+.
    discounts: Vec<[f64; 3]>,
}

#[derive(Clone, Copy, Debug, Default)]
struct HistoryStats {
    total: u32,
    n: [u32; 3],
}

/// What counting leaves per node, used to derive the modified counts.
struct RawTrie {
    children: FxHashMap<u64, u32>,
    raw: Vec<u32>,
    parent: Vec<u32>,
    depth: Vec<u8>,
    /// The node of the n-gram without its first word (ROOT for unigrams).
    suffix: Vec<u32>,
    starts_at_bos: Vec<bool>,
}

impl KneserNey {
    /// Trains an `order`-gram model on `sentences`, each `<s> w… <eos>` as
    /// [`Vocab::encode_line`] gives them.
    pub fn train(sentences: &[Vec<u32>], vocab: &Vocab, order: usize) -> Result<Self, MetricsError> {
        if order == 0 || order > 255 {
            return Err(MetricsError::InvalidSetting {
                name: "order",
                value: order.to_string(),
                reason: "an n-gram order must be between 1 and 255",
            });
        }
        if sentences.iter().all(|s| s.len() <= 1) {
            return Err(MetricsError::EmptyTrainingData);
        }
        // 1. Count every n-gram of orders 1..=N.
        let trie = count_ngrams(sentences, order, vocab.bos());
        // 2. Replace lower-order counts by continuation counts.
        let count = modified_counts(&trie, order);
        // 3. Discounts per order from the count-of-counts.
        let is_bos_unigram = |v: usize| trie.depth[v] == 1 && trie.starts_at_bos[v];
        let mut count_of_counts = vec![[0u64; 4]; order];
        for v in 1..count.len() {
            if !is_bos_unigram(v) && (1..=4).contains(&count[v]) {
                count_of_counts[trie.depth[v] as usize - 1][count[v] as usize - 1] += 1;
            }
        }
        let discounts = count_of_counts.into_iter().map(modified_kn_discounts).collect();
        // 4. History statistics: each node's children.
        let mut history = vec![HistoryStats::default(); count.len()];
        for v in 1..count.len() {
            if is_bos_unigram(v) || count[v] == 0 {
                continue;
            }
            let h = &mut history[trie.parent[v] as usize];
            h.total += count[v];
            h.n[count[v].min(3) as usize - 1] += 1;
        }
        Ok(KneserNey { order, vocab_size: vocab.len(), children: trie.children, count, history, discounts })
    }

    /// The model's order N.
    pub fn order(&self) -> usize {
        self.order
    }

    /// The discounts (D1, D2, D3+) of orders 1..=N.
    pub fn discounts(&self) -> &[[f64; 3]] {
        &self.discounts
    }

    /// Number of distinct n-grams of all orders seen in training.
    pub fn ngram_count(&self) -> usize {
        self.count.len() - 1
    }

    fn child(&self, node: u32, word: u32) -> Option<u32> {
        self.children.get(&key(node, word)).copied()
    }

    /// The node of the n-gram `words` (ROOT for none), if it was seen.
    fn node_of(&self, words: &[u32]) -> Option<u32> {
        words.iter().try_fold(ROOT, |node, &w| self.child(node, w))
    }
}

impl LanguageModel for KneserNey {
    fn log_prob(&self, history: &[u32], word: u32) -> f64 {
        let h = &history[history.len().saturating_sub(self.order - 1)..];
        let mut p = 1.0 / self.vocab_size as f64;
        for k in 1..=self.order {
            if k - 1 > h.len() {
                break;
            }
            let Some(ctx) = self.node_of(&h[h.len() - (k - 1)..]) else {
                break;
            };
            let stats = self.history[ctx as usize];
            if stats.total == 0 {
                break;
            }
            let d = &self.discounts[k - 1];
            let c = self.child(ctx, word).map_or(0, |v| self.count[v as usize]);
            let discounted = if c == 0 { 0.0 } else { (f64::from(c) - d[c.min(3) as usize - 1]).max(0.0) };
            let total = f64::from(stats.total);
            let gamma =
                (d[0] * f64::from(stats.n[0]) + d[1] * f64::from(stats.n[1]) + d[2] * f64::from(stats.n[2])) / total;
            p = discounted / total + gamma * p;
        }
        p.ln()
    }
}

fn key(parent: u32, word: u32) -> u64 {
    (u64::from(parent) << 32) | u64::from(word)
}

/// Counts all n-grams of orders 1..=`order` of every sentence in a trie. Positions are walked
/// right to left so that the chain of nodes starting one position later (the suffixes of the
/// current chain) is at hand.
fn count_ngrams(sentences: &[Vec<u32>], order: usize, bos: u32) -> RawTrie {
    let mut t = RawTrie {
        children: FxHashMap::default(),
        raw: vec![0],
        parent: vec![ROOT],
        depth: vec![0],
        suffix: vec![ROOT],
        starts_at_bos: vec![false],
    };
    let (mut chain, mut next_chain) = (Vec::with_capacity(order), Vec::with_capacity(order));
    for s in sentences {
        next_chain.clear();
        for i in (0..s.len()).rev() {
            chain.clear();
            let mut node = ROOT;
            for k in 0..order.min(s.len() - i) {
                let parent = node;
                let fresh = t.raw.len() as u32;
                node = *t.children.entry(key(parent, s[i + k])).or_insert(fresh);
                if node == fresh {
                    t.raw.push(0);
                    t.parent.push(parent);
                    t.depth.push(k as u8 + 1);
                    t.suffix.push(if k == 0 { ROOT } else { next_chain[k - 1] });
                    t.starts_at_bos.push(s[i] == bos);
                }
                t.raw[node as usize] += 1;
                chain.push(node);
            }
            std::mem::swap(&mut chain, &mut next_chain);
        }
    }
    t
}

/// The count each node's order uses: the raw count at the highest order and for n-grams
/// starting with `<s>`, else the continuation count (distinct one-word left extensions).
fn modified_counts(t: &RawTrie, order: usize) -> Vec<u32> {
    let mut continuation = vec![0u32; t.raw.len()];
    for v in 1..t.raw.len() {
        if t.depth[v] >= 2 {
            continuation[t.suffix[v] as usize] += 1;
        }
    }
    (0..t.raw.len())
        .map(|v| if t.depth[v] as usize == order || t.starts_at_bos[v] { t.raw[v] } else { continuation[v] })
        .collect()
}

/// Chen & Goodman's estimates of the three discounts from the count-of-counts n1..n4:
/// `Y = n1/(n1 + 2n2)`, `D1 = 1 − 2Y·n2/n1`, `D2 = 2 − 3Y·n3/n2`, `D3+ = 3 − 4Y·n4/n3`.
///
/// When a count-of-count is zero or an estimate falls outside `(0, i]` (tiny corpora), one
/// discount `Y` (Ney's absolute-discounting estimate) is used for all three, or 0.5 if `Y` is
/// undefined. Example: n = (2, 1, 0, 0) → Y = 0.5 → [0.5, 0.5, 0.5].
pub fn modified_kn_discounts(n: [u64; 4]) -> [f64; 3] {
    let [n1, n2, n3, n4] = n.map(|x| x as f64);
    if n.iter().all(|&x| x > 0) {
        let y = n1 / (n1 + 2.0 * n2);
        let d = [1.0 - 2.0 * y * n2 / n1, 2.0 - 3.0 * y * n3 / n2, 3.0 - 4.0 * y * n4 / n3];
        if d.iter().enumerate().all(|(i, &di)| di > 0.0 && di <= (i + 1) as f64) {
            return d;
        }
    }
    let y = if n[0] > 0 && n[1] > 0 { n1 / (n1 + 2.0 * n2) } else { 0.5 };
    [y; 3]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_one_is_absolute_discounting_interpolated_with_uniform() {
        // "a a b": counts a:2 b:1 <eos>:1; V = 4 (with <unk>); n = (2, 1, 0, 0) → D = 0.5;
        // total 4, γ = (0.5·2 + 0.5·1)/4 = 0.375; p(a) = 1.5/4 + 0.375/4 = 0.46875.
        let vocab = Vocab::from_lines(&["a a b"]);
        let model = KneserNey::train(&[vocab.encode_line("a a b")], &vocab, 1).unwrap();
        let p = |w: &str| model.log_prob(&[vocab.bos()], vocab.id(w)).exp();
        assert!((p("a") - 0.46875).abs() < 1e-15);
        assert!((p("b") - 0.21875).abs() < 1e-15);
        assert!((p("<unk>") - 0.09375).abs() < 1e-15);
    }

    #[test]
    fn discounts_follow_chen_and_goodman_formula() {
        // n = (100, 50, 30, 20): Y = 0.5; D1 = 0.5, D2 = 2 − 1.5·0.6 = 1.1, D3+ = 3 − 2·(2/3).
        let d = modified_kn_discounts([100, 50, 30, 20]);
        assert!((d[0] - 0.5).abs() < 1e-15 && (d[1] - 1.1).abs() < 1e-15);
        assert!((d[2] - (3.0 - 4.0 / 3.0)).abs() < 1e-15);
        assert_eq!(modified_kn_discounts([2, 1, 0, 0]), [0.5; 3]);
        // Y = 0.6 (D1 is always Y), D2 = 2 − 3·0.6·½ = 1.1, D3+ = 3 − 4·0.6·½ = 1.8.
        let d = modified_kn_discounts([120, 40, 20, 10]);
        assert!(d.iter().zip([0.6, 1.1, 1.8]).all(|(a, b)| (a - b).abs() < 1e-15), "{d:?}");
    }

    /// One discount Y for all three when a count-of-count is zero (even n4 alone, where the
    /// formula would give D3+ = 3) or an estimate is not in (0, i] (D2 = 0 exactly for
    /// (10, 10, 20, 15)); 0.5 when Y is undefined.
    #[test]
    fn discounts_fall_back_to_one_y_outside_the_formulas_range() {
        let third = 10.0 / 30.0;
        let cases = [
            ([4, 2, 1, 0], [0.5; 3]),
            ([10, 10, 20, 15], [third; 3]),
            ([3, 2, 0, 0], [3.0 / 7.0; 3]),
            ([3, 1, 0, 0], [0.6; 3]),
            ([2, 0, 0, 0], [0.5; 3]),
            ([0, 3, 0, 0], [0.5; 3]),
        ];
        for (n, expected) in cases {
            assert_eq!(modified_kn_discounts(n), expected, "{n:?}");
        }
    }

    #[test]
    fn lower_orders_use_continuation_counts() {
        // "x z" and "y z": the unigram z follows two distinct words; "<s> x" keeps its count.
        let vocab = Vocab::from_lines(&["x z", "y z", "x z"]);
        let sentences: Vec<_> = ["x z", "y z", "x z"].iter().map(|l| vocab.encode_line(l)).collect();
        let model = KneserNey::train(&sentences, &vocab, 2).unwrap();
        let z = model.node_of(&[vocab.id("z")]).unwrap();
        assert_eq!(model.count[z as usize], 2);
        let bos_x = model.node_of(&[vocab.bos(), vocab.id("x")]).unwrap();
        assert_eq!(model.count[bos_x as usize], 2);
        let x_z = model.node_of(&[vocab.id("x"), vocab.id("z")]).unwrap();
        assert_eq!(model.count[x_z as usize], 2);
    }

    /// "a b", "a c", "a b" as a bigram model. Bigrams (raw counts): `<s> a` 3, `a b` 2,
    /// `b <eos>` 2, `a c` 1, `c <eos>` 1, so n = (2, 2, 1, 0) and D = Y = 2/(2 + 4) = 1/3.
    /// Unigrams (continuation counts; `<s>` is never predicted and not counted): `a`, `b`,
    /// `c` 1 each, `<eos>` 2, so n = (3, 1, 0, 0) and D = 3/5. Ten distinct n-grams: five
    /// unigrams (`<s>` among them) and five bigrams.
    #[test]
    fn a_trained_models_discounts_come_from_its_own_count_of_counts() {
        let lines = ["a b", "a c", "a b"];
        let vocab = Vocab::from_lines(&lines);
        let sentences: Vec<_> = lines.iter().map(|l| vocab.encode_line(l)).collect();
        let model = KneserNey::train(&sentences, &vocab, 2).unwrap();
        assert_eq!((model.order(), model.ngram_count()), (2, 10));
        let [unigram, bigram] = model.discounts() else { panic!("{:?}", model.discounts()) };
        assert!(unigram.iter().all(|&d| (d - 0.6).abs() < 1e-15), "{unigram:?}");
        assert!(bigram.iter().all(|&d| (d - 1.0 / 3.0).abs() < 1e-15), "{bigram:?}");
    }

    #[test]
    fn orders_from_one_to_255_train_and_256_is_an_error() {
        let vocab = Vocab::from_lines(&["a b"]);
        let s = [vocab.encode_line("a b")];
        assert!(KneserNey::train(&s, &vocab, 1).is_ok() && KneserNey::train(&s, &vocab, 255).is_ok());
        assert!(matches!(KneserNey::train(&s, &vocab, 256), Err(MetricsError::InvalidSetting { .. })));
    }

    #[test]
    fn empty_training_text_and_order_zero_are_errors() {
        let vocab = Vocab::from_lines(&["a"]);
        assert!(matches!(KneserNey::train(&[], &vocab, 3), Err(MetricsError::EmptyTrainingData)));
        let s = [vocab.encode_line("a")];
        assert!(matches!(KneserNey::train(&s, &vocab, 0), Err(MetricsError::InvalidSetting { .. })));
    }
}
