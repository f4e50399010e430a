#!/usr/bin/env python3
"""The peer of `cargo xtask bench products`: the same matrix products of nanoGPT's GPU
configuration timed with PyTorch's (cuBLAS in f32, TF32 off: what `nanogpt_gpu_bench.py
--precision fp32` runs), on the same GPU, in the same call, so that each of our products has
PyTorch's beside it (`attend_train::product_bench` is the list; the names, `map`, `dims` and
`matrices` are the same).

  python3 scripts/torch_products.py [--rows 16384] [--reps 10] [--device cuda]

The timing is `bench products`' own: `max(3, reps)` untimed products kept together (so the
caching allocator already holds a buffer for each timed output), a synchronization, then
`reps` products back to back and a second synchronization; the outputs are kept until it.

Beside the products this times what PyTorch runs instead of attention's ten products and
two weight kernels: `F.scaled_dot_product_attention` (causal, dropout 0.2, f32, forward and
forward + backward), each a layer's `[64, 6, 256, 64]` heads.

One JSON line per product on stdout (`bench: product`, `backend: torch-<device>`,
`kernel: torch`, `ms`, `tflops`), as `bench products` prints its own.
"""
import argparse, json, time

import torch
import torch.nn.functional as F

# attend_train::product_bench::NANOGPT_GPU_MAPS and NANOGPT_GPU_ATTENTION.
MAPS = [(384, 1152), (384, 384), (384, 1536), (1536, 384), (384, 65)]
LEN, HEADS, WIDTH = 256, 6, 64
WARMUP = 3
# attend_model::fused::products' MIN_SPLIT_ROWS, MIN_SLICE_ROWS and SLICE_TARGET.
MIN_SPLIT_ROWS, MIN_SLICE_ROWS, SLICE_TARGET = 4096, 512, 1 << 22


def row_slices(n, outputs):
    """How many slices our weight gradients cut `n` rows into (products::row_slices)."""
    if n < MIN_SPLIT_ROWS:
        return 1
    s = 1
    while s * outputs < SLICE_TARGET and n % (2 * s) == 0 and n // (2 * s) >= MIN_SLICE_ROWS:
        s *= 2
    return s


def timed(device, reps, run):
    """Seconds per `run()`: `max(WARMUP, reps)` kept untimed, then `reps` between syncs."""
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    warm = [run() for _ in range(max(WARMUP, reps))]
    sync()
    del warm
    start = time.perf_counter()
    outputs = [run() for _ in range(reps)]
    sync()
    seconds = (time.perf_counter() - start) / reps
    del outputs
    return seconds


def linear_products(rows, d_in, d_out, device):
    """(name, dims, run) of each product of the map, as product_bench names them."""
    x = torch.randn(rows, d_in, device=device)
    w = torch.randn(d_in, d_out, device=device)
    dy = torch.randn(rows, d_out, device=device)
    s = row_slices(rows, d_in * d_out)
    xs, dys = x.view(s, rows // s, d_in), dy.view(s, rows // s, d_out)
    return [
        ("forward x·W", [rows, d_in, d_out], lambda: x @ w),
        ("dx = dy·Wᵀ", [rows, d_out, d_in], lambda: dy @ w.t()),
        ("dW = xᵀ·dy (row slices)", [d_in, rows, d_out], lambda: torch.bmm(xs.transpose(1, 2), dys).sum(0)),
        ("dW = xᵀ·dy (one product)", [d_in, rows, d_out], lambda: x.t() @ dy),
    ]


def attention_products(rows, device):
    """The six per-head products, full (transposes as views), as product_bench runs them."""
    batch = rows // LEN
    narrow = lambda: torch.randn(batch, HEADS, LEN, WIDTH, device=device)
    square = lambda: torch.randn(batch, HEADS, LEN, LEN, device=device)
    q, k, v, dc = narrow(), narrow(), narrow(), narrow()
    p, ds = square(), square()
    return [
        ("scores Q·Kᵀ", [LEN, WIDTH, LEN], lambda: q @ k.transpose(2, 3)),
        ("context P·V", [LEN, LEN, WIDTH], lambda: p @ v),
        ("dP = dC·Vᵀ", [LEN, WIDTH, LEN], lambda: dc @ v.transpose(2, 3)),
        ("dV = Pᵀ·dC", [LEN, LEN, WIDTH], lambda: p.transpose(2, 3) @ dc),
        ("dQ = dS·K", [LEN, LEN, WIDTH], lambda: ds @ k),
        ("dK = dSᵀ·Q", [LEN, LEN, WIDTH], lambda: ds.transpose(2, 3) @ q),
    ], batch * HEADS


def sdpa(rows, device):
    """PyTorch's attention of a layer as the peer runs it: causal, dropout 0.2, f32."""
    batch = rows // LEN
    qkv = [torch.randn(batch, HEADS, LEN, WIDTH, device=device, requires_grad=True) for _ in range(3)]
    dy = torch.randn(batch, HEADS, LEN, WIDTH, device=device)

    def forward():
        with torch.no_grad():
            return F.scaled_dot_product_attention(*qkv, is_causal=True, dropout_p=0.2)

    def both():
        y = F.scaled_dot_product_attention(*qkv, is_causal=True, dropout_p=0.2)
        return torch.autograd.grad(y, qkv, dy)

    # How many of attention's products each runs (2 forward, 4 more backward), for TFLOP/s.
    return [("attention forward (sdpa, causal, dropout)", 2, forward),
            ("attention forward + backward (sdpa, causal, dropout)", 6, both)], batch * HEADS


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    if a.rows <= 0 or a.reps <= 0:
        raise SystemExit(f"--rows ({a.rows}) and --reps ({a.reps}) must be positive")
    if a.rows % LEN:
        raise SystemExit(f"--rows ({a.rows}) must be whole sequences of {LEN}")
    device = torch.device(a.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    backend = f"torch-{device.type}"

    def emit(map_, product, dims, matrices, seconds, products=1.0):
        m, k, n = dims
        flops = 2.0 * m * k * n * matrices * products
        print(json.dumps({"bench": "product", "backend": backend, "map": list(map_), "product": product,
                          "dims": dims, "matrices": matrices, "kernel": "torch", "reps": a.reps,
                          "ms": seconds * 1e3, "tflops": flops / seconds / 1e12, "gpu": name,
                          "torch": torch.__version__}, ensure_ascii=False), flush=True)

    for d_in, d_out in MAPS:
        for product, dims, run in linear_products(a.rows, d_in, d_out, device):
            emit((d_in, d_out), product, dims, 1, timed(device, a.reps, run))
    products, matrices = attention_products(a.rows, device)
    for product, dims, run in products:
        emit((LEN, WIDTH), product, dims, matrices, timed(device, a.reps, run))
    # A causal product does half a full one's operations: forward 2 products, backward 4 more
    # (`dP`, `dV`, `dQ`, `dK`; the peer's kernel also recomputes the scores: not counted).
    attention, matrices = sdpa(a.rows, device)
    for product, full_products, run in attention:
        emit((LEN, WIDTH), product, [LEN, WIDTH, LEN], matrices, timed(device, a.reps, run), full_products / 2)


if __name__ == "__main__":
    main()
