#!/usr/bin/env python3
"""Our training step's GPU time by kind of kernel beside PyTorch's, from one call's
summary.jsonl: the `profile` part's line (`kernel_profile.py --by-step`) and the
`peer-profile` part's (`torch_step_profile.py`), as one Markdown table (ms and launches a step).

  python3 scripts/profiles_vs_torch.py summary.jsonl [--ours TAG] [--peer TAG]

--ours defaults to the last line whose tag ends in `profile-wgpu`, --peer to the last
`pytorch-fp32-profile`. Our kernels are put in torch_step_profile.py's kinds by name. Two kinds
do not line up: PyTorch's `attention` is one fused kernel each way that holds attention's
products, where ours are six launches of `products` a layer (the scores, the context and the
backward's four) and our two kernels of the weights (`attention`).
"""
import argparse, re

from products_vs_torch import json_lines

# CubeCL's and our kernels' names (kernel_profile.py's keys) by kind, the first that matches.
OURS = [
    ("attention", r"^AttentionWeights"),
    ("products", r"^ProductKernel|^MatmulEntry|Matmul"),
    ("layer norm", r"^LayerNorm"),
    ("softmax and cross-entropy", r"^Softmax|^CrossEntropy"),
    ("optimizer and clipping (multi-tensor)", r"^Adamw|^SquaresPartial|^SumPartials"),
    ("dropout and random numbers", r"^Prng|Random|Bernoulli"),
    ("gelu", r"^Gelu"),
    ("reductions", r"Reduce"),
    ("copies, gathers and concatenations", r"Slice|Select|Gather|Scatter|Copy|Cat|Into"),
    ("element-wise", r"Elemwise|Binop|Unary|Cmp|Cast|Full|Mask|Clamp"),
]


def kind_of(name):
    for kind, pattern in OURS:
        if re.search(pattern, name):
            return kind
    return "other"


def last(rows, test, what):
    found = [r for r in rows if test(r.get("tag", ""))]
    if not found:
        raise SystemExit(f"no {what} line in the file(s)")
    return found[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--ours")
    ap.add_argument("--peer")
    a = ap.parse_args()
    rows = list(json_lines(a.files))
    ours = last(rows, (lambda t: t == a.ours) if a.ours else (lambda t: t.endswith("profile-wgpu")), "profile")
    peer = last(rows, (lambda t: t == a.peer) if a.peer else (lambda t: t == "pytorch-fp32-profile"),
                "peer-profile")
    if "kernels" not in ours or "by_kind" not in peer:
        raise SystemExit(f"{ours.get('tag')} or {peer.get('tag')}: not a profile line")
    kinds = {}
    for k in ours["kernels"]:
        entry = kinds.setdefault(kind_of(k["name"]), [0.0, 0.0])
        entry[0] += k["ms"]
        entry[1] += k["launches"]
    order = list(dict.fromkeys([*sorted(kinds, key=lambda k: -kinds[k][0]), *peer["by_kind"]]))
    print(f"| kind | ours ({ours['tag']}): ms | launches | PyTorch ({peer['tag']}): ms | launches |")
    print("| --- | --- | --- | --- | --- |")
    for kind in order:
        mine = kinds.get(kind)
        theirs = peer["by_kind"].get(kind)
        left = f"{mine[0]:.3f} | {mine[1]:g}" if mine else " | "
        right = f"{theirs['ms']:.3f} | {theirs['launches']:g}" if theirs else " | "
        print(f"| {kind} | {left} | {right} |")
    total = sum(v[0] for v in kinds.values())
    print(f"| all | {total:.3f} | {sum(v[1] for v in kinds.values()):g} | "
          f"{peer['kernel_ms_per_step']:.3f} | {peer['launches_per_step']:g} |")


if __name__ == "__main__":
    main()
