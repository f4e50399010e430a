#!/usr/bin/env python3
"""Host CPU time per training step, thread by thread (#15: does the host's work per step grow?).

Runs a training command, and every --every seconds reads each of its threads' CPU time
(/proc/PID/task/TID/schedstat, nanoseconds on a CPU) and how many steps the run has logged
(the lines of RUN/metrics.jsonl with "event": "train"). Per window it prints the steps done and
each thread group's CPU milliseconds per step; threads are grouped by name (cubecl's device
servers are DSU-*/DSD-*, rayon's workers rayon-*/attend-*). A step time that grows while a
thread's CPU per step stays flat points at the device; a thread whose CPU per step grows is
the host work that accumulates.

    scripts/thread_cpu.py --run RUN [--every 5] [--out FILE.jsonl] -- xtask train --run RUN ...

Linux only (procfs). Python's standard library only, so it runs on the GPU machine as is.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time


def thread_times(pid):
    """{tid: (name, cpu_ns)} for every live thread of pid."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                cpu_ns = int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
        out[tid] = (name, cpu_ns)
    return out


def group(name):
    """Thread groups: the name without its trailing numbers (rayon-3 and rayon-7 are one)."""
    return re.sub(r"[-_]?\d+(-\d+)*$", "", name) or name


def steps_logged(metrics):
    try:
        with open(metrics) as f:
            return sum(1 for line in f if '"event":"train"' in line)
    except FileNotFoundError:
        return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="the run directory the command writes")
    parser.add_argument("--every", type=float, default=5.0, help="seconds per window")
    parser.add_argument("--out", help="also write one JSON line per window here")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    metrics = os.path.join(args.run, "metrics.jsonl")
    out = open(args.out, "w") if args.out else None

    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=sys.stderr)
    before, steps_before, t_before = {}, 0, time.monotonic()
    print("window_s steps  ms/step  cpu ms/step per thread group", flush=True)
    while proc.poll() is None:
        time.sleep(args.every)
        now_times, steps, t_now = thread_times(proc.pid), steps_logged(metrics), time.monotonic()
        per_group = {}
        for tid, (name, ns) in now_times.items():
            grown = ns - before.get(tid, (name, 0))[1]
            per_group[group(name)] = per_group.get(group(name), 0) + grown
        done = steps - steps_before
        if done > 0:
            row = {
                "step": steps,
                "steps": done,
                "wall_ms_per_step": 1e3 * (t_now - t_before) / done,
                "cpu_ms_per_step": {g: ns / 1e6 / done for g, ns in sorted(per_group.items()) if ns > 0},
            }
            cpu = "  ".join(f"{g} {v:.1f}" for g, v in row["cpu_ms_per_step"].items())
            print(f"{t_now - t_before:8.1f} {steps:5d} {row['wall_ms_per_step']:8.1f}  {cpu}", flush=True)
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()
            before, steps_before, t_before = now_times, steps, t_now
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
