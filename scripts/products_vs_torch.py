#!/usr/bin/env python3
"""`bench products` beside its peer (`torch_products.py`), from the JSON lines of one call
(`gpu_parts.sh`'s summary.jsonl, or any files holding both): a Markdown table of each product,
CubeCL's, ours under each kernel timed, and PyTorch's times (ms), with PyTorch's time over
ours (above 1: ours is faster); then a training step's products added up from them.

  python3 scripts/products_vs_torch.py summary.jsonl [more.jsonl ...] [--ours "attend auto"]

A column is a kernel and the run that timed it: the `products` part's TAG where the lines
carry one (`attend auto (xtask-QV-spirv)`), else the backend (`attend auto (wgpu)`).

The step (nanoGPT's GPU configuration, 6 layers) as each side runs it:
- ours: per layer the three projections `q`, `k`, `v` and the output map as four `384 → 384`
  maps (`ATTEND_QKV` separate, the GPU's default), the MLP's two, each with its forward, `dx`
  and weight gradient in row slices, and attention's six products under the causal mask;
  then the output map over the vocabulary (`384 → 65`), whose input gradient is needed.
- PyTorch: per layer `c_attn` (`384 → 1152`), the output map and the MLP's two, each forward,
  `dx` and one weight-gradient product, and `scaled_dot_product_attention` forward and
  backward; then `lm_head`.
Neither counts the token lookup's gradient, and our attention's sum leaves out our two
kernels of its weights (the masked softmax with dropout, and its backward), which PyTorch's
attention holds. The sums are of products timed one kind at a
time, not a training step's: the `profile` and `peer-profile` parts time those.
"""
import argparse, json, sys

LAYERS = 6
LINEAR = ["forward x·W", "dx = dy·Wᵀ"]
OURS_DW, TORCH_DW = "dW = xᵀ·dy (row slices)", "dW = xᵀ·dy (one product)"
CAUSAL = ["scores Q·Kᵀ", "context P·V", "dP = dC·Vᵀ", "dV = Pᵀ·dC", "dQ = dS·K", "dK = dSᵀ·Q"]
SDPA = "attention forward + backward (sdpa, causal, dropout)"


def json_lines(paths):
    """Every JSON object line of `paths` (other lines skipped); a broken one is named."""
    for path in paths:
        for n, line in enumerate(open(path, encoding="utf-8"), 1):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}:{n}: not a JSON line ({e})")


def rows_of(paths):
    return (row for row in json_lines(paths) if row.get("bench") == "product")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--ours", default="attend auto",
                    help="our kernel the step's sum takes: a column's name, or a kernel (its first run)")
    a = ap.parse_args()
    times, kernels, heads = {}, [], set()
    for row in rows_of(a.files):
        # One side per kernel and run: `gpu_parts.sh` tags a `products` part's lines with its
        # TAG (a WGSL and a SPIR-V runner both say backend `wgpu`), else the backend names it.
        run = row.get("tag", "").removesuffix("-products") or row["backend"]
        side = "torch" if row["backend"].startswith("torch") else f'{row["kernel"]} ({run})'
        if side != "torch" and side not in kernels:
            kernels.append(side)
        times[(tuple(row["map"]), row["product"], side)] = row["ms"]
        if row["matrices"] > 1:
            heads.add(tuple(row["map"]))
    if not kernels or not any(k[2] == "torch" for k in times):
        raise SystemExit(f"{', '.join(a.files)}: needs both `bench products` lines and torch_products.py's")
    ours = a.ours if a.ours in kernels else next((k for k in kernels if k.startswith(a.ours + " (")), None)
    if ours is None:
        raise SystemExit(f"--ours {a.ours!r}: no such kernel timed (timed: {', '.join(kernels)})")
    products = list(dict.fromkeys((m, p) for m, p, _ in times))
    print("| map | product | " + " | ".join(kernels) + " | PyTorch | PyTorch / ours |")
    print("| --- | --- |" + " --- |" * (len(kernels) + 2))
    for m, p in products:
        # Attention's `[len, head width]`, a linear map's `d_in → d_out`.
        what = f"{m[0]} × {m[1]} heads" if m in heads else f"{m[0]} → {m[1]}"
        cells = [f"{times[(m, p, k)]:.3f}" if (m, p, k) in times else "" for k in kernels]
        # Our causal products stand beside PyTorch's full ones (it has no causal product).
        peer = times.get((m, p, "torch"), times.get((m, p.removesuffix(", causal"), "torch")))
        mine = times.get((m, p, ours))
        ratio = f"{peer / mine:.2f}" if peer and mine else ""
        print(f"| {what} | {p} | " + " | ".join(cells) + (f" | {peer:.3f} | {ratio} |" if peer else " | | |"))

    def need(key):
        if key not in times:
            raise SystemExit(f"the step's sum needs {key[2]}'s {key[1]!r} of {key[0]}: not timed")
        return times[key]

    def maps(side, dw, widths):
        return sum(need((w, p, side)) for w in widths for p in LINEAR + [dw])

    layer_ours = maps(ours, OURS_DW, [(384, 384)] * 4 + [(384, 1536), (1536, 384)])
    attention_ours = sum(need(((256, 64), f"{p}, causal", ours)) for p in CAUSAL)
    layer_torch = maps("torch", TORCH_DW, [(384, 1152), (384, 384), (384, 1536), (1536, 384)])
    attention_torch = need(((256, 64), SDPA, "torch"))
    step_ours = LAYERS * (layer_ours + attention_ours) + maps(ours, OURS_DW, [(384, 65)])
    step_torch = LAYERS * (layer_torch + attention_torch) + maps("torch", TORCH_DW, [(384, 65)])
    print()
    print(f"A step's products ({ours}): linear maps {LAYERS * layer_ours:.2f} ms, attention "
          f"{LAYERS * attention_ours:.2f} ms, all {step_ours:.2f} ms")
    print(f"A step's products (PyTorch): linear maps {LAYERS * layer_torch:.2f} ms, attention (sdpa) "
          f"{LAYERS * attention_torch:.2f} ms, all {step_torch:.2f} ms; PyTorch / ours {step_torch / step_ours:.2f}")


if __name__ == "__main__":
    sys.exit(main())
