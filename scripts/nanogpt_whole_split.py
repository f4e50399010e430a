#!/usr/bin/env python3
"""PyTorch's side of the reference run (issue 14), scored on the whole validation split.

The peer `../shared/bench/peers/nanogpt_cpu_bench.py --mode full` reports nanoGPT's own
estimate: 20 random batches (15,360 tokens) drawn from its random stream. Our `eval` scores
every position of the validation split in non-overlapping 64-token windows. To compare like
with like, this script trains the same model the same way as that peer (nanoGPT's
train_shakespeare_char on CPU: 4 layers, 4 heads, 128 wide, block 64, batch 12, no bias, tied
embedding, AdamW 1e-3 betas 0.9/0.99, decay 0.1 on >=2-D parameters, 100 warm-up steps,
cosine to 1e-4 at 2,000, clip 1.0, dropout 0, seed 1337 + --seed) and, after 2,000 updates,
prints both estimates: nanoGPT's 20 batches and the whole split as ours computes it.

    python scripts/nanogpt_whole_split.py --data ../shared/data/tinyshakespeare/input.txt --seed 0

One JSON line on stdout. Needs numpy and torch (a throw-away venv, as the peers' README says).
"""
import argparse, json, math, time

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

N_LAYER, N_HEAD, N_EMBD, BLOCK, BATCH = 4, 4, 128, 64, 12


class LayerNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, None, 1e-5)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        # The peer's order of creation and of parameters (the random stream and the order of
        # the global norm's sum are then the peer's).
        self.ln_1 = LayerNorm(N_EMBD)
        self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD, bias=False)
        self.attn_proj = nn.Linear(N_EMBD, N_EMBD, bias=False)
        self.ln_2 = LayerNorm(N_EMBD)
        self.c_fc = nn.Linear(N_EMBD, 4 * N_EMBD, bias=False)
        self.c_proj = nn.Linear(4 * N_EMBD, N_EMBD, bias=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(N_EMBD, dim=2)
        q, k, v = [z.view(b, t, N_HEAD, c // N_HEAD).transpose(1, 2) for z in (q, k, v)]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, N_EMBD), nn.Embedding(BLOCK, N_EMBD)
        self.h = nn.ModuleList([Block() for _ in range(N_LAYER)])
        self.ln_f = LayerNorm(N_EMBD)
        self.lm_head = nn.Linear(N_EMBD, vocab, bias=False)
        self.wte.weight = self.lm_head.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
        for name, p in self.named_parameters():
            if name.endswith("attn_proj.weight") or name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * N_LAYER))

    def logits(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))

    def forward(self, idx, tgt):
        z = self.logits(idx)
        return F.cross_entropy(z.view(-1, z.shape[-1]), tgt.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--seed", type=int, default=0, help="torch seed = 1337 + SEED, as the peer")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2000)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1337 + a.seed)
    text = open(a.data, encoding="utf-8").read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = np.array([stoi[c] for c in text], dtype=np.int64)
    n = int(0.9 * len(data))
    train, val = torch.from_numpy(data[:n]), torch.from_numpy(data[n:])

    def batch(split):
        d = train if split == "train" else val
        ix = torch.randint(len(d) - BLOCK, (BATCH,))
        return torch.stack([d[i:i + BLOCK] for i in ix]), torch.stack([d[i + 1:i + 1 + BLOCK] for i in ix])

    model = GPT(len(chars))
    params = list(model.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99))

    def lr_at(it):
        if it < 100:
            return 1e-3 * (it + 1) / 101
        r = min(1.0, (it - 100) / (2000 - 100))
        return 1e-4 + 0.5 * (1.0 + math.cos(math.pi * r)) * (1e-3 - 1e-4)

    # The peer's random stream: an estimate (20 batches per split) every 250 steps, before the step.
    @torch.no_grad()
    def estimate():
        model.eval()
        out = {s: float(torch.stack([model(*batch(s)) for _ in range(20)]).mean()) for s in ("train", "val")}
        model.train()
        return out

    start = time.perf_counter()
    x, y = batch("train")
    for it in range(a.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(it)
        if it % 250 == 0:
            estimate()
        loss = model(x, y)
        x, y = batch("train")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    nanogpt = estimate()["val"]

    # Ours: every position of the split, non-overlapping windows of BLOCK tokens (the last
    # window shorter), the mean over all positions.
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for s in range(0, len(val) - 1, BLOCK):
            e = min(s + BLOCK, len(val) - 1)
            z = model.logits(val[s:e].unsqueeze(0))
            total += float(F.cross_entropy(z[0], val[s + 1:e + 1], reduction="sum"))
            count += e - s
    print(json.dumps({"seed": 1337 + a.seed, "steps": a.steps, "val_nanogpt_20_batches": nanogpt,
                      "val_whole_split": total / count, "tokens": count, "wall_s": time.perf_counter() - start,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
