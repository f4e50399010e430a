//! Corpus BLEU and chrF throughput on synthetic pairs built like
//! `../shared/bench/peers/sacrebleu_bench.py` builds its own: references of 5..60 words, and
//! hypotheses that drop each word with probability 0.1 and swap ~10% of adjacent pairs.
//!
//! The head-to-head with sacreBLEU on its own 100,000 pairs is in `docs/benchmarks.md` (it
//! times `cargo xtask bleu` on the exact pairs sacreBLEU scores).

use attend_metrics::{corpus_bleu, corpus_chrf, BleuConfig, ChrfConfig};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// A tiny deterministic generator (xorshift64*), so the bench needs no RNG crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

const WORDS: &[&str] = &[
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "he",
    "she",
    "it",
    "that",
    "with",
    "for",
    "on",
    "dog",
    "cat",
    "man",
    "woman",
    "house",
    "city",
    "river",
    "said",
    "went",
    "Mr.",
    "U.S.",
    "(see",
    "below)",
    "3.14",
    "1,000",
    "e-mail",
    "don't",
    "end.",
    "however,",
    "\"quoted\"",
    "years",
    "time",
];

fn pairs(n: usize) -> (Vec<String>, Vec<String>) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut refs = Vec::with_capacity(n);
    let mut hyps = Vec::with_capacity(n);
    for _ in 0..n {
        let len = 5 + (rng.next() % 56) as usize;
        let words: Vec<&str> = (0..len).map(|_| WORDS[(rng.next() % WORDS.len() as u64) as usize]).collect();
        let mut kept: Vec<&str> = words.iter().copied().filter(|_| rng.uniform() >= 0.1).collect();
        if kept.is_empty() {
            kept.push(words[0]);
        }
        for i in 0..kept.len() - 1 {
            if rng.uniform() < 0.1 {
                kept.swap(i, i + 1);
            }
        }
        refs.push(words.join(" "));
        hyps.push(kept.join(" "));
    }
    (hyps, refs)
}

fn bench(c: &mut Criterion) {
    let n = 10_000;
    let (hyps, refs) = pairs(n);
    let refs = [refs];
    let mut group = c.benchmark_group("corpus");
    group.throughput(Throughput::Elements(n as u64));
    group.sample_size(20);
    group.bench_function("bleu_13a_10k_segments", |b| {
        b.iter(|| corpus_bleu(&hyps, &refs, &BleuConfig::corpus()).unwrap().score)
    });
    group.bench_function("chrf_10k_segments", |b| {
        b.iter(|| corpus_chrf(&hyps, &refs, &ChrfConfig::chrf()).unwrap().score)
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
