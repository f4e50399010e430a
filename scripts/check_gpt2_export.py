"""Scores a text file with a directory written by `cargo xtask export` (GPT-2 layout), loaded
by HuggingFace `transformers` and `tokenizers` exactly as a user would, and prints one JSON
line: {"loss": nats per token, "tokens": scored positions}. The windows are those of
`cargo xtask eval --run DIR --data FILE`: the token stream cut into non-overlapping windows of
n_positions tokens (the last one shorter), each predicting its tokens 1..L from 0..L-1.

    python scripts/check_gpt2_export.py OUT FILE

Needs torch, transformers and tokenizers (a throw-away venv; never a dependency of attend).
"""
import json
import sys

import torch
from tokenizers import Tokenizer
from transformers import GPT2LMHeadModel


def main(out, path):
    model = GPT2LMHeadModel.from_pretrained(out).eval()
    ids = Tokenizer.from_file(f"{out}/tokenizer.json").encode(open(path, encoding="utf-8").read()).ids
    block = model.config.n_positions
    nll, tokens = 0.0, 0
    with torch.no_grad():
        start = 0
        while start + 1 < len(ids):
            length = min(block, len(ids) - 1 - start)
            x = torch.tensor([ids[start:start + length]])
            y = torch.tensor([ids[start + 1:start + length + 1]])
            logits = model(x).logits.double()
            nll += torch.nn.functional.cross_entropy(logits[0], y[0], reduction="sum").item()
            tokens += length
            start += length
    print(json.dumps({"loss": nll / tokens, "tokens": tokens, "ids": len(ids)}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
