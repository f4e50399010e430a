#!/usr/bin/env python3
"""Where PyTorch's training step spends the GPU's time: the peer `nanogpt_gpu_bench.py`, run
as it is, under `torch.profiler`, its kernels' device time a step by kind (products,
attention, LayerNorm, element-wise, ...), to stand beside our `profile` part
(`kernel_profile.py --by-step`) in the same call.

  python3 scripts/torch_step_profile.py --peer PEER --data input.txt [--precision fp32]
      [--wait 5] [--steps 6] [--top 25] [-- PEER'S OTHER ARGUMENTS]

The peer is not changed: this wraps `torch.optim.AdamW.step`, which the peer calls once a
step, so that each call ends a profiler step. The first `--wait` steps (and two more, the
profiler's own warm-up) are not recorded; the next `--steps` are, and each kernel's time is
divided by them. The peer's own printed timing is then the profiled one and is ignored here.
One JSON line on stdout. `--activity cpu` profiles the CPU's operators instead (with a peer
that runs on the CPU: a check of this script without a GPU).
"""
import argparse, json, re, runpy, sys

import torch
from torch.profiler import ProfilerActivity, profile, schedule

# Kinds of kernel by name, the first that matches, case aside (PyTorch's, cuBLAS's and CUTLASS's
# names; on the CPU, the operators').
KINDS = [
    ("attention", r"fmha|attention|flash|efficient"),
    ("products", r"gemm|cutlass|xmma|cublas|splitK|matmul|aten::mm|aten::bmm|aten::addmm"),
    ("layer norm", r"layer_?norm|GammaBeta"),
    ("softmax and cross-entropy", r"softmax|nll_loss|cross_entropy"),
    ("optimizer and clipping (multi-tensor)", r"adam|multi_tensor|LpNorm"),
    ("dropout and random numbers", r"dropout|philox|bernoulli|curand|distribution"),
    ("gelu", r"gelu"),
    ("reductions", r"reduce|norm"),
    ("copies, gathers and concatenations", r"copy|CatArray|aten::cat|index|gather|scatter|embedding"),
    ("element-wise", r"elementwise|vectorized|unrolled|aten::"),
]


def kind_of(name):
    for kind, pattern in KINDS:
        if re.search(pattern, name, re.I):
            return kind
    return "other"


def self_time_us(event, device):
    """An averaged event's own time (µs) on the device, across PyTorch's renamings."""
    if device == "cpu":
        return event.self_cpu_time_total
    for attr in ("self_device_time_total", "self_cuda_time_total"):
        if hasattr(event, attr):
            return getattr(event, attr)
    raise SystemExit("this PyTorch's profiler events have no self device time")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", required=True, help="nanogpt_gpu_bench.py")
    ap.add_argument("--data", required=True, help="tiny Shakespeare's input.txt")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--wait", type=int, default=5)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--activity", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("rest", nargs="*", help="more arguments for the peer (after --)")
    a = ap.parse_args()
    if a.wait < 0 or a.steps <= 0:
        raise SystemExit(f"--wait ({a.wait}) must be at least 0 and --steps ({a.steps}) positive")
    # The CPU's operators are recorded on a GPU too (kernels are matched to their launches
    # through them); only the device's kernels are counted.
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if a.activity == "cuda" else [])
    prof = profile(activities=activities, schedule=schedule(wait=a.wait, warmup=2, active=a.steps, repeat=1))
    step = torch.optim.AdamW.step

    def stepped(self, *args, **kwargs):
        out = step(self, *args, **kwargs)
        prof.step()
        return out

    torch.optim.AdamW.step = stepped
    # The peer's steps: its warm-up plus timed ones, enough for the schedule and one more.
    iters = 3
    sys.argv = [a.peer, "--data", a.data, "--precision", a.precision, "--warmup", str(a.wait + 2 + a.steps),
                "--iters", str(iters), *a.rest]
    with prof:
        try:
            runpy.run_path(a.peer, run_name="__main__")
        finally:
            torch.optim.AdamW.step = step
    device = a.activity
    events = [e for e in prof.key_averages() if self_time_us(e, device) > 0]
    if device == "cuda":
        events = [e for e in events if str(getattr(e, "device_type", "")).endswith("CUDA")]
        if not events:
            raise SystemExit("torch.profiler recorded no CUDA kernel (is CUPTI there?)")
    else:
        # CPU operators nest; keep the leaves' own time (an operator's self time excludes its
        # children already), and drop the profiler's step markers.
        events = [e for e in events if not e.key.startswith("ProfilerStep")]
    by_kind, rows = {}, []
    for e in events:
        ms = self_time_us(e, device) / 1e3 / a.steps
        launches = e.count / a.steps
        k = kind_of(e.key)
        entry = by_kind.setdefault(k, {"ms": 0.0, "launches": 0.0})
        entry["ms"] += ms
        entry["launches"] += launches
        rows.append({"name": e.key[:120], "kind": k, "ms": round(ms, 4), "launches": launches})
    rows.sort(key=lambda r: -r["ms"])
    total = sum(v["ms"] for v in by_kind.values())
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print(json.dumps({"tag": f"pytorch-{a.precision}-profile", "gpu": name, "torch": torch.__version__,
                      "steps": a.steps, "kernel_ms_per_step": round(total, 3),
                      "launches_per_step": sum(v["launches"] for v in by_kind.values()),
                      "by_kind": {k: {"ms": round(v["ms"], 3), "launches": v["launches"]}
                                  for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]["ms"])},
                      "top": rows[:a.top]}, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
