"""GPT-2's math in plain PyTorch, the reference of tests/test_gpt2.c.

Usage: gpt2_reference.py DIR

DIR holds what the C test wrote: case.txt, a manifest of lines
    config LAYERS EMBD HEADS VOCAB CONTEXT BATCH SEQ EPS
    param NAME DIM...
and beside it NAME.bin (little-endian float32, one per param line),
ids.bin and targets.bin (int32, BATCH x SEQ; a target of -100 counts
nothing). The parameters carry Hugging Face GPT2LMHeadModel's names and
layouts (Conv1D weights [in, out]; the LM head is the token embedding).

The script runs one training step's forward and backward three times,
in float64, in float32 and in float32 under torch.autocast's bfloat16
(CPU), from the same float32 tensors, and writes for each precision P
(64, 32, bf16) refP.logits.bin, refP.loss.bin and refP.grad.NAME.bin,
as little-endian float64. The C test measures its own distance from
float64 against PyTorch's in the same precision.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F


def read_case(d):
    params = {}
    config = None
    with open(os.path.join(d, "case.txt")) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "config":
                config = [int(v) for v in w[1:8]] + [float(w[8])]
            elif w[0] == "param":
                shape = [int(v) for v in w[2:]]
                data = np.fromfile(os.path.join(d, w[1] + ".bin"), dtype="<f4")
                if data.size != int(np.prod(shape)):
                    sys.exit("%s: %d values for shape %s" % (w[1], data.size, shape))
                params[w[1]] = data.reshape(shape)
            else:
                sys.exit("unknown manifest line: " + line)
    layers, embd, heads, vocab, context, batch, seq, eps = config
    ids = np.fromfile(os.path.join(d, "ids.bin"), dtype="<i4").reshape(batch, seq)
    targets = np.fromfile(os.path.join(d, "targets.bin"), dtype="<i4").reshape(batch, seq)
    return (layers, embd, heads, vocab, context, batch, seq, eps), params, ids, targets


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(cfg, p, ids, targets):
    layers, C, H, V, context, B, T, eps = cfg
    D = C // H
    x = p["transformer.wte.weight"][ids] + p["transformer.wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(layers):
        q = "transformer.h.%d." % i
        h = F.layer_norm(x, (C,), p[q + "ln_1.weight"], p[q + "ln_1.bias"], eps)
        qkv = h @ p[q + "attn.c_attn.weight"] + p[q + "attn.c_attn.bias"]
        qq, kk, vv = qkv.split(C, dim=2)
        qq = qq.view(B, T, H, D).transpose(1, 2)
        kk = kk.view(B, T, H, D).transpose(1, 2)
        vv = vv.view(B, T, H, D).transpose(1, 2)
        s = (qq @ kk.transpose(-2, -1)) / math.sqrt(D)
        s = s.masked_fill(~mask, float("-inf"))
        y = torch.softmax(s, dim=-1) @ vv
        y = y.transpose(1, 2).reshape(B, T, C)
        x = x + y @ p[q + "attn.c_proj.weight"] + p[q + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), p[q + "ln_2.weight"], p[q + "ln_2.bias"], eps)
        f = gelu_tanh(h @ p[q + "mlp.c_fc.weight"] + p[q + "mlp.c_fc.bias"])
        x = x + f @ p[q + "mlp.c_proj.weight"] + p[q + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], eps)
    logits = x @ p["transformer.wte.weight"].t()
    loss = F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T), ignore_index=-100)
    return logits, loss


def run(d, cfg, params, ids, targets, dtype, tag, autocast=False):
    p = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in params.items()}
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits, loss = forward(cfg, p, torch.tensor(ids, dtype=torch.long),
                               torch.tensor(targets, dtype=torch.long))
    loss.float().backward()

    def out(key, t):
        t.detach().to(torch.float64).numpy().astype("<f8").tofile(
            os.path.join(d, "ref%s.%s.bin" % (tag, key)))

    out("logits", logits)
    out("loss", loss.reshape(1))
    for k, t in p.items():
        out("grad." + k, t.grad)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    cfg, params, ids, targets = read_case(d)
    torch.set_num_threads(1)
    run(d, cfg, params, ids, targets, torch.float64, "64")
    run(d, cfg, params, ids, targets, torch.float32, "32")
    run(d, cfg, params, ids, targets, torch.float32, "bf16", autocast=True)


if __name__ == "__main__":
    main()
