#!/usr/bin/env python3
"""Writes the exact hypothesis/reference pairs `../shared/bench/peers/sacrebleu_bench.py` scores.

So that `cargo xtask bleu` is timed on the same 100,000 segments sacreBLEU is timed on
(docs/benchmarks.md, "Metrics"). The construction below is copied from that script (same
sentence cutting, same `random.Random(seed)` call sequence); it needs only the standard library.

Usage: python3 write_sacrebleu_bench_pairs.py --text corpus.txt --out DIR [--n 100000] [--seed 0]
Writes DIR/hyps.txt and DIR/refs.txt, one segment per line.
"""
import argparse
import os
import random
import re


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    refs = []
    with open(a.text, encoding="utf-8") as f:
        for line in f:
            for s in re.split(r"(?<=\.) ", line.strip()):
                w = s.split()
                if 5 <= len(w) <= 60:
                    refs.append(" ".join(w))
                    if len(refs) >= a.n: break
            if len(refs) >= a.n: break
    if len(refs) < a.n:
        raise SystemExit(f"only {len(refs)} sentences in {a.text}")
    rng = random.Random(a.seed)
    hyps = []
    for r in refs:
        w = [x for x in r.split() if rng.random() >= 0.1] or r.split()[:1]
        for i in range(len(w) - 1):
            if rng.random() < 0.1:
                w[i], w[i + 1] = w[i + 1], w[i]
        hyps.append(" ".join(w))
    os.makedirs(a.out, exist_ok=True)
    for name, lines in [("hyps.txt", hyps), ("refs.txt", refs)]:
        with open(os.path.join(a.out, name), "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(line + "\n" for line in lines))
    print(f"wrote {len(refs)} pairs to {a.out}")


if __name__ == "__main__":
    main()
