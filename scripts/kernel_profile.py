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

With `--by-step` one log of N steps suffices, and is more robust: the launches are cut into
steps after the last of each step's AdamW launches (which end every step), the first step and
the final evaluation are dropped, and each kernel's figures are the median over the other
steps (the difference of two runs above fails where the shorter run autotunes kernels the
longer one finds cached: negative times). It also lists one step's matrix products in order.

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
# Other launches that may come between two `marker` launches of the same step (by_step).
GAP = 8


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


def launches(path):
    """Every timed launch in the log, in order: (kernel name, milliseconds)."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            if m := LINE.match(line):
                value, unit, name = m.groups()
                out.append((name, float(value) * UNIT_MS[unit]))
    return out


def by_step(path, marker, top):
    """One training step's kernels, read from one log: a step ends with its last `marker`
    launch (AdamW's, which end every step) that is followed by more than GAP other launches
    before the next one (the updates of one step come with a copy or two between them, since
    all parameters' updates became one operation); the first step (compilation, autotuning)
    and what follows the last (the final evaluation) are dropped, and each kernel's figures are
    the median over the other steps."""
    runs = launches(path)
    marks = [i for i, (name, _) in enumerate(runs) if name == marker]
    ends = [i for i, j in zip(marks, marks[1:] + [len(runs) + GAP]) if j - i > GAP]
    steps = [runs[a + 1:b + 1] for a, b in zip([-1] + ends, ends)][1:]
    if not steps:
        raise SystemExit(f"{path}: fewer than two steps ended by {marker} launches")
    names = sorted({name for step in steps for name, _ in step})
    per = {}
    for name in names:
        counts = [sum(1 for n, _ in step if n == name) for step in steps]
        times = [sum(ms for n, ms in step if n == name) for step in steps]
        per[name] = [statistics.median(counts), statistics.median(times)]
    rows = sorted(per.items(), key=lambda kv: -kv[1][1])
    total_ms = sum(v[1] for v in per.values())
    middle = steps[len(steps) // 2]
    print(json.dumps({
        "steps": len(steps),
        "per_step": {"launches": round(sum(v[0] for v in per.values()), 1), "ms": round(total_ms, 3)},
        "kernels": [{"name": k, "launches": v[0], "ms": round(v[1], 3),
                     "share": round(v[1] / total_ms, 3) if total_ms else None} for k, v in rows[:top]],
        "matmul_ms_in_order": [round(ms, 3) for n, ms in middle if n == "MatmulEntry"],
        "product_kernel_ms_in_order": [round(ms, 3) for n, ms in middle if n == "ProductKernel"],
    }, ensure_ascii=False))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+", help="FILE:STEPS, one or two; with --by-step, one FILE")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--by-step", action="store_true",
                    help="split one log into steps at the end of each run of --marker launches "
                         "and give the median step")
    ap.add_argument("--marker", default="AdamwUpdate", help="the kernel whose launches end a step")
    a = ap.parse_args()
    if a.by_step:
        path = a.logs[0]
        by_step(path.rsplit(":", 1)[0] if re.fullmatch(r".*:[0-9]+", path) else path, a.marker, a.top)
        return
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
