#!/usr/bin/env python3
"""Where a training step's GPU time goes, kernel by kernel (#15): launches and device time per step.

CubeCL times every kernel it launches when its profiling logger is on, and writes one line per
launch, `| 1.234ms | Name | ... | Runtime`, to the file CUBECL_DEBUG_LOG names
(CUBECL_DEBUG_OPTION=profile keeps the profiling to that; the same file also gets each compiled
kernel's source). Each launch is then synchronized on its own, so the step is slower than
usual, but each kernel's time is its own. Two runs of the same configuration, N1 and N2 steps,
give one step's work as (total at N2 − total at N1) / (N2 − N1): start-up, autotuning (which
launches candidate kernels), the first steps and the final evaluation cancel out. A launch that
compiled its kernel is timed with the compilation, which differs from run to run: launches
over OUTLIER times their kernel's median in the same log are left out of both totals (and
counted in `left_out`).

    CUBECL_DEBUG_LOG=a.log CUBECL_DEBUG_OPTION=profile xtask train ... --set train.max_steps=2
    CUBECL_DEBUG_LOG=b.log CUBECL_DEBUG_OPTION=profile xtask train ... --set train.max_steps=6
    scripts/kernel_profile.py a.log:2 b.log:6 [--top 25]

Prints a JSON object: per kernel name (the first field after the time), launches and
milliseconds per step, largest time first, and the totals. One file alone (FILE:N) divides
its totals by N. Python's standard library only, so it runs on the GPU machine as is.
"""
import argparse
import collections
import json
import re
import statistics

LINE = re.compile(r"^\|\s*([0-9.]+)(ns|µs|us|ms|s)\s*\|\s*([^|]+?)\s*\|")
UNIT_MS = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1e3}


OUTLIER = 50


def totals(path):
    """{kernel name: [launches, milliseconds]} over one log, and how many launches were left out."""
    times = collections.defaultdict(list)
    with open(path, errors="replace") as f:
        for line in f:
            if m := LINE.match(line):
                value, unit, name = m.groups()
                times[name].append(float(value) * UNIT_MS[unit])
    out, left_out = collections.defaultdict(lambda: [0, 0.0]), 0
    for name, ms in times.items():
        cut = OUTLIER * statistics.median(ms)
        kept = [t for t in ms if t <= cut]
        left_out += len(ms) - len(kept)
        out[name] = [len(ms), sum(kept)]
    return out, left_out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+", help="FILE:STEPS, one or two")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    (p1, n1), *rest = [(s.rsplit(":", 1)[0], int(s.rsplit(":", 1)[1])) for s in a.logs]
    t1, out1 = totals(p1)
    left_out = {p1: out1}
    if rest:
        (p2, n2) = rest[0]
        t2, left_out[p2] = totals(p2)
        names = set(t1) | set(t2)
        per = {k: [(t2[k][0] - t1[k][0]) / (n2 - n1), (t2[k][1] - t1[k][1]) / (n2 - n1)] for k in names}
    else:
        per = {k: [v[0] / n1, v[1] / n1] for k, v in t1.items()}
    rows = sorted(per.items(), key=lambda kv: -kv[1][1])
    total_ms = sum(v[1] for v in per.values())
    print(json.dumps({
        "per_step": {"launches": round(sum(v[0] for v in per.values()), 1), "ms": round(total_ms, 3)},
        "left_out": left_out,
        "kernels": [{"name": k, "launches": round(v[0], 1), "ms": round(v[1], 3),
                     "share": round(v[1] / total_ms, 3) if total_ms else None} for k, v in rows[: a.top]],
    }, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
