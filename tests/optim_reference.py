"""PyTorch reference for tests/test_optim.c: GPT-2-style training steps.

Usage: optim_reference.py DIR

DIR holds what the C test wrote: config.txt (one "key value..." a line:
steps, batch, shape c h w, classes, hidden, warmup, total, lr_max, lr_min,
beta1, beta2, eps, weight_decay, clip, and one "param <index> <name> <ndim>
<dims...>" line per tensor, file param.<index>.bin), and per step s the
input x.<s>.bin (float32) and labels.<s>.bin (int32), all little-endian.

The script builds nn.Sequential(Flatten, Linear, ReLU, Linear) in float64
with those tensors and trains `steps` steps as nanoGPT does:
torch.optim.AdamW with two parameter groups (weight decay on the >= 2-d
parameters, none on the others), the warmup + cosine learning rate set on
the groups before each step, and torch.nn.utils.clip_grad_norm_ before
each optimizer step. It writes (float64) ref.lr.<s>.bin, ref.loss.<s>.bin,
ref.norm.<s>.bin (the norm clip_grad_norm_ returns, before clipping) and
ref.after.<index>.bin (the parameters after the run).

A tensor name or shape that differs from the torch model's is an error:
the script exits nonzero with the reason on stderr.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_config(d):
    cfg, params = {}, []
    with open(os.path.join(d, "config.txt")) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "param":
                params.append((int(w[1]), w[2], [int(v) for v in w[4:4 + int(w[3])]]))
            else:
                cfg[w[0]] = w[1:]
    return cfg, params


def warmup_cosine(step, warmup, total, lr_max, lr_min):
    if step < warmup:
        return lr_max * (step + 1) / warmup
    if step >= total:
        return lr_min
    progress = (step - warmup) / (total - warmup)
    return lr_min + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr_max - lr_min)


def load(d, name, dtype, shape):
    return torch.from_numpy(np.fromfile(os.path.join(d, name), dtype=dtype).reshape(shape).copy())


def save(d, key, value):
    np.asarray(value, dtype="<f8").tofile(os.path.join(d, "ref." + key + ".bin"))


def main():
    d = sys.argv[1]
    cfg, params = read_config(d)
    num = lambda k: float(cfg[k][0])
    count = lambda k: int(cfg[k][0])
    c, h, w = (int(v) for v in cfg["shape"])
    model = nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, count("hidden")), nn.ReLU(),
                          nn.Linear(count("hidden"), count("classes"))).double()
    named = dict(model.named_parameters())
    if sorted(named) != sorted(p[1] for p in params):
        sys.exit("tensor names differ: torch %s, test %s" % (sorted(named), [p[1] for p in params]))
    order = []
    with torch.no_grad():
        for index, name, dims in params:
            t = named[name]
            if list(t.shape) != dims:
                sys.exit("%s: torch shape %s, test %s" % (name, list(t.shape), dims))
            t.copy_(load(d, "param.%d.bin" % index, "<f4", dims).double())
            order.append((index, t))
    decay = [t for _, t in order if t.dim() >= 2]
    no_decay = [t for _, t in order if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": num("weight_decay")},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=num("lr_max"), betas=(num("beta1"), num("beta2")), eps=num("eps"))
    n = count("batch")
    for s in range(count("steps")):
        lr = warmup_cosine(s, count("warmup"), count("total"), num("lr_max"), num("lr_min"))
        for g in opt.param_groups:
            g["lr"] = lr
        x = load(d, "x.%d.bin" % s, "<f4", (n, c, h, w)).double()
        labels = load(d, "labels.%d.bin" % s, "<i4", (n,)).long()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), labels)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), num("clip"))
        opt.step()
        save(d, "lr.%d" % s, [lr])
        save(d, "loss.%d" % s, [loss.item()])
        save(d, "norm.%d" % s, [norm.item()])
    for index, t in order:
        save(d, "after.%d" % index, t.detach().numpy().ravel())


if __name__ == "__main__":
    main()
