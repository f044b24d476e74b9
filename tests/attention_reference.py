"""PyTorch float64 reference of causal multi-head self-attention for
tests/test_attention.c.

Usage: attention_reference.py DIR B T C HEADS

DIR holds qkv.bin (B*T rows of 3C little-endian float32: q, k, v of each
token, head h at columns h*D .. h*D+D-1 of each, D = C / HEADS), dy.bin
(B*T rows of C float32) and factors.bin (B*HEADS*T*T float32: the dropout
factor, 0 or 1 / (1 - p), of each probability, all 1 without dropout).
The script computes, in float64, y = ((softmax(q k^T / sqrt(D) + causal
mask)) * factors) v per head, written explicitly (no fused attention), and
the gradient of sum(y * dy) with respect to qkv by autograd, and writes
out.bin (B*T rows of C) and dx.bin (B*T rows of 3C) as little-endian
float64.
"""
import math
import os
import sys

import numpy as np
import torch


def main():
    d, b, t, c, heads = sys.argv[1], *map(int, sys.argv[2:6])
    hd = c // heads

    def load(name, shape):
        a = np.fromfile(os.path.join(d, name), dtype="<f4")
        if a.size != int(np.prod(shape)):
            sys.exit(f"{name}: {a.size} values, expected {int(np.prod(shape))}")
        return torch.from_numpy(a.astype(np.float64)).reshape(shape)

    qkv = load("qkv.bin", (b, t, 3 * c)).requires_grad_(True)
    dy = load("dy.bin", (b, t, c))
    factors = load("factors.bin", (b, heads, t, t))

    def split_heads(x):  # (b, t, c) -> (b, heads, t, hd), as Hugging Face GPT-2
        return x.reshape(b, t, heads, hd).permute(0, 2, 1, 3)

    q, k, v = (split_heads(x) for x in qkv.split(c, dim=2))
    scores = q @ k.transpose(-1, -2) / math.sqrt(hd)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    probs = torch.softmax(scores, dim=-1) * factors
    y = (probs @ v).permute(0, 2, 1, 3).reshape(b, t, c)
    (y * dy).sum().backward()
    y.detach().numpy().astype("<f8").tofile(os.path.join(d, "out.bin"))
    qkv.grad.numpy().astype("<f8").tofile(os.path.join(d, "dx.bin"))


if __name__ == "__main__":
    main()
