//! Criterion benchmarks of the tokenizer: training and encoding speed.
//!
//! Data: the file named by `ATTEND_BENCH_CORPUS`, else tiny Shakespeare in `../shared/data`.
//! Run with `cargo bench -p attend-bpe`; the same-run comparison with the peers is
//! `cargo xtask bench bpe`.

use std::path::PathBuf;

use attend_bpe::{Trainer, TrainerConfig};
use criterion::{criterion_group, criterion_main, Criterion};

fn corpus() -> PathBuf {
    std::env::var_os("ATTEND_BENCH_CORPUS").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/tinyshakespeare/input.txt")
    })
}

fn trainer(vocab_size: usize) -> Trainer {
    Trainer::new(TrainerConfig {
        vocab_size,
        min_frequency: 2,
        special_tokens: vec!["<|endoftext|>".into()],
        show_progress: false,
    })
    .expect("valid config")
}

fn bench_train(c: &mut Criterion) {
    let path = corpus();
    let mut group = c.benchmark_group("bpe_train");
    group.sample_size(10);
    group.bench_function("vocab_8000", |b| b.iter(|| trainer(8000).train_files(std::slice::from_ref(&path)).unwrap()));
    group.finish();
}

fn bench_encode(c: &mut Criterion) {
    let path = corpus();
    let text = std::fs::read_to_string(&path).expect("corpus readable");
    let text: String = text.chars().take(2_000_000).collect();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let tok = trainer(8000).train_files(&[path]).unwrap();
    let mut group = c.benchmark_group("bpe_encode");
    group.throughput(criterion::Throughput::Bytes(text.len() as u64));
    group.sample_size(10);
    group.bench_function("one_thread_per_line", |b| {
        b.iter(|| {
            let mut enc = attend_bpe::Encoder::new(&tok);
            lines.iter().map(|l| enc.encode(l).len()).sum::<usize>()
        })
    });
    group.finish();
}

criterion_group!(benches, bench_train, bench_encode);
criterion_main!(benches);
