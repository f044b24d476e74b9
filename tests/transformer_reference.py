"""PyTorch float64 references for tests/test_transformer_layers.c.

Usage: transformer_reference.py DIR

Every subdirectory of DIR holding a case.txt is one case written by the C
test. case.txt is one line naming the layer and its sizes:
    layernorm <C> <eps> <rows>
    conv1d <in> <out> <rows>
    gelu <count>
    embedding <vocab> <context> <C> <n> <t>
beside raw little-endian files: x.bin (float32; int32 token ids for the
embedding), dy.bin (float32, the gradient of the output) and param<i>.bin
(float32, the layer's parameters in the library's order). Rows are tokens
of C values, the library's token-major layout.

For each result key (out, dx, grad<i>) the script writes ref.<key>.bin
(float64: torch's value in float64 on the same float32 data) and
mag.<key>.bin (float64, one per element): the magnitude M in the bound
the C test checks for each element, |ours - ref| <= ulps * 2^-24 * M,
with ulps the number of float32 roundings the C side allows for the key. M is the usual forward
error magnitude of the computation: for a sum, the sum of the absolute
values of its terms; for LayerNorm and GELU, the size of the terms the
rounding of each intermediate (mean, x - mean, rstd, tanh) can reach.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def load(d, name, dtype=np.float32):
    return torch.from_numpy(np.fromfile(os.path.join(d, name), dtype=dtype).astype(np.float64))


def save(d, key, ref, mag):
    """ref, and the magnitude of each of its elements (mag broadcast)."""
    ref = ref.detach()
    ref.numpy().astype("<f8").tofile(os.path.join(d, "ref.%s.bin" % key))
    mag = mag.expand_as(ref).contiguous()
    mag.numpy().astype("<f8").tofile(os.path.join(d, "mag.%s.bin" % key))


def layernorm(d, c, eps, rows):
    x = load(d, "x.bin").reshape(rows, c).requires_grad_()
    w = load(d, "param0.bin").requires_grad_()
    b = load(d, "param1.bin").requires_grad_()
    dy = load(d, "dy.bin").reshape(rows, c)
    y = F.layer_norm(x, (c,), w, b, eps)
    y.backward(dy)
    with torch.no_grad():
        mean = x.mean(dim=1, keepdim=True)
        rstd = 1.0 / torch.sqrt(x.var(dim=1, unbiased=False, keepdim=True) + eps)
        xhat = (x - mean) * rstd
        shift = (mean * rstd).abs()  # the rounding of the mean, in units of xhat
        g = (dy * w).abs()
        spread = xhat.abs().amax(dim=1, keepdim=True) + shift
        save(d, "out", y, (xhat.abs() + shift) * w.abs() + b.abs())
        # dx = rstd (g - mean(g) - xhat mean(g xhat)): |mean(g)| <= max|g|,
        # |xhat mean(g xhat)| <= spread^2 max|g|
        save(d, "dx", x.grad, rstd * g.amax(dim=1, keepdim=True) * (1 + spread) ** 2)
        save(d, "grad0", w.grad, (dy.abs() * (xhat.abs() + shift)).sum(dim=0))
        save(d, "grad1", b.grad, dy.abs().sum(dim=0))


def conv1d(d, fin, fout, rows):
    x = load(d, "x.bin").reshape(rows, fin).requires_grad_()
    w = load(d, "param0.bin").reshape(fin, fout).requires_grad_()
    b = load(d, "param1.bin").requires_grad_()
    dy = load(d, "dy.bin").reshape(rows, fout)
    y = x @ w + b
    y.backward(dy)
    with torch.no_grad():
        save(d, "out", y, x.abs() @ w.abs() + b.abs())
        save(d, "dx", x.grad, dy.abs() @ w.abs().t())
        save(d, "grad0", w.grad, x.abs().t() @ dy.abs())
        save(d, "grad1", b.grad, dy.abs().sum(dim=0))


def gelu(d, count):
    x = load(d, "x.bin").reshape(count).requires_grad_()
    dy = load(d, "dy.bin").reshape(count)
    y = F.gelu(x, approximate="tanh")
    y.backward(dy)
    with torch.no_grad():
        beta, kappa = (2.0 / np.pi) ** 0.5, 0.044715
        inner = (beta * (x + kappa * x ** 3)).abs()
        d_inner = beta * (1 + 3 * kappa * x ** 2)
        save(d, "out", y, x.abs() * (1 + inner))
        save(d, "dx", x.grad, dy.abs() * (1 + inner) * (1 + x.abs() * d_inner))


def embedding(d, vocab, context, c, n, t):
    ids = torch.from_numpy(np.fromfile(os.path.join(d, "x.bin"), dtype="<i4").astype(np.int64))
    ids = ids.reshape(n, t)
    wte = load(d, "param0.bin").reshape(vocab, c).requires_grad_()
    wpe = load(d, "param1.bin").reshape(context, c).requires_grad_()
    dy = load(d, "dy.bin").reshape(n, t, c)
    y = F.embedding(ids, wte) + wpe[:t].unsqueeze(0)
    y.backward(dy)
    with torch.no_grad():
        save(d, "out", y, wte[ids].abs() + wpe[:t].abs())
        te = torch.zeros(vocab, c).index_add_(0, ids.flatten(), dy.abs().reshape(n * t, c))
        pe = torch.zeros(context, c)
        pe[:t] = dy.abs().sum(dim=0)
        save(d, "grad0", wte.grad, te)
        save(d, "grad1", wpe.grad, pe)


def run_case(d):
    with open(os.path.join(d, "case.txt")) as f:
        words = f.read().split()
    kind, args = words[0], words[1:]
    if kind == "layernorm":
        layernorm(d, int(args[0]), float(args[1]), int(args[2]))
    elif kind == "conv1d":
        conv1d(d, *(int(a) for a in args))
    elif kind == "gelu":
        gelu(d, int(args[0]))
    elif kind == "embedding":
        embedding(d, *(int(a) for a in args))
    else:
        sys.exit("unknown case kind %r in %s" % (kind, d))


def main():
    root = sys.argv[1]
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if os.path.isfile(os.path.join(d, "case.txt")):
            run_case(d)


if __name__ == "__main__":
    main()
