#!/usr/bin/env python3
"""What one training step asks of burn-fusion (#15): executions, kernels and operations per step.

burn-fusion 0.21 logs every execution it runs when BURN_FUSION_LOG=full: a table per execution
("fusion trace"), one block per kernel it fused (ElementWise, Matmul, Reduce, ...) and one per
operation it ran alone ("un-fused": metadata operations such as reshapes, our custom kernels,
reductions it could not fuse). Two runs of the same configuration, N1 and N2 steps, give the
work of one step as (count at N2 − count at N1) / (N2 − N1): start-up, the first steps'
exploration and the final evaluation cancel out. Each host operation costs a hand-off to the
device thread and each block a launch, so these counts are the fixed per-step cost's units,
and they are the same on every machine (no timing noise).

    BURN_FUSION_LOG=full xtask train ... --set train.max_steps=2 2> a.err
    BURN_FUSION_LOG=full xtask train ... --set train.max_steps=6 2> b.err
    scripts/fusion_trace.py a.err:2 b.err:6 [--top 15]

One file alone (FILE:N) prints its totals divided by N.
"""
import argparse
import collections
import json
import re

FUSED = re.compile(r"^\d+\s+▸ fused (\S+) \(score=\d+, (\d+) ops?\)\s+(\S+)")
UNFUSED = re.compile(r"^\d+\s+▸ un-fused \((\d+) ops?\)\s+(\S+)")
ROW = re.compile(r"^\d+\s{3,}(\w+::\w+|Drop)\b")


def count(path):
    """Totals of one log: executions, blocks by kind, operations by name, explorations."""
    c = collections.Counter()
    ops = collections.Counter()
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("fusion trace"):
                c["executions"] += 1
            elif line.startswith("[plan] exploration completed"):
                c["explorations"] += 1
            elif m := FUSED.match(line):
                c["fused blocks"] += 1
                c[f"fused: {m.group(1)}"] += 1
                c["operations"] += int(m.group(2))
                ops[m.group(3)] += 1
            elif m := UNFUSED.match(line):
                c["unfused blocks"] += 1
                c["operations"] += int(m.group(1))
                ops[m.group(2)] += 1
            elif m := ROW.match(line):
                ops[m.group(1)] += 1
    return c, ops


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", help="FILE:STEPS, one or two")
    parser.add_argument("--top", type=int, default=15, help="operations to list")
    args = parser.parse_args()
    runs = []
    for spec in args.logs:
        path, _, steps = spec.rpartition(":")
        if not path or not steps.isdigit():
            parser.error(f"{spec}: expected FILE:STEPS")
        runs.append((count(path), int(steps)))
    if len(runs) == 1:
        (c, ops), n = runs[0]
        base, base_ops, steps = collections.Counter(), collections.Counter(), n
    elif len(runs) == 2 and runs[1][1] > runs[0][1]:
        (base, base_ops), n1 = runs[0]
        (c, ops), n2 = runs[1]
        steps = n2 - n1
    else:
        parser.error("two logs: the second of more steps than the first")
    per_step = {k: round((c[k] - base[k]) / steps, 2) for k in sorted(set(c) | set(base))}
    top = {k: round((ops[k] - base_ops[k]) / steps, 2) for k, _ in (ops - base_ops).most_common(args.top)}
    print(json.dumps({"per_step": per_step, "operations_per_step": top}, indent=1))


if __name__ == "__main__":
    main()
