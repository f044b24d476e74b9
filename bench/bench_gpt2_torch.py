#!/usr/bin/env python3
"""bench_gpt2_torch.py — PyTorch's side of bench_gpt2.c.

Trains Hugging Face's GPT2LMHeadModel (SDPA attention, random init of the
same config, dropout 0, use_cache off) with torch.optim.AdamW (lr 1e-4,
betas 0.9 / 0.999, eps 1e-8, weight decay 0, as bench_gpt2.c's Adam and
llm.c's train_gpt2) on random token ids and random targets, the loss
F.cross_entropy over the logits (no shifted copy), in one of two modes:

    plain           autograd keeps every activation
    checkpoint      model.gradient_checkpointing_enable() (per block,
                    non-reentrant), as Hugging Face users turn it on

    bench_gpt2_torch.py [--layers 12] [--embd 768] [--heads 12] [--vocab 50257]
                        [--context 1024] [--batch 4] [--seq 64] [--mode plain]
                        [--steps 4] [--threads 2] [--seed 0] [--json]

One configuration per process (peak RSS is the process's, getrusage). The
first step is a warm-up; s/step is the median of the others (the warm-up's
own time with --steps 1). Needs torch and transformers (run it with the
interpreter of a venv that has both, gpt2.sh's $PYTHON); without them it
prints "SKIPPED: transformers not importable" (and {"skipped": ...} with
--json) and exits 0.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_load import LoadMeter, current_rss, mib, peak_rss  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--mode", choices=("plain", "checkpoint"), default="plain")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    try:
        import torch
        import torch.nn.functional as F
        import transformers
        from transformers import GPT2Config, GPT2LMHeadModel
    except Exception as e:  # ImportError, or a broken install
        msg = "SKIPPED: transformers not importable (%s: %s)" % (sys.executable, e)
        print(json.dumps({"skipped": msg}) if a.json else msg)
        return 0

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    cfg = GPT2Config(vocab_size=a.vocab, n_positions=a.context, n_embd=a.embd,
                     n_layer=a.layers, n_head=a.heads, resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0, use_cache=False,
                     bos_token_id=min(50256, a.vocab - 1),
                     eos_token_id=min(50256, a.vocab - 1))
    try:
        model = GPT2LMHeadModel._from_config(cfg, attn_implementation="sdpa")
    except TypeError:  # transformers before attn_implementation
        model = GPT2LMHeadModel(cfg)
    attn = getattr(model.config, "_attn_implementation", "eager")
    model.train()
    if a.mode == "checkpoint":
        try:
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False})
        except TypeError:
            model.gradient_checkpointing_enable()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    n_params = sum(p.numel() for p in model.parameters())
    gen = torch.Generator().manual_seed(a.seed + 1)
    rss_base = current_rss()
    if not a.json:
        print("PyTorch %s, transformers %s, GPT2LMHeadModel (%s attention, %d parameters), "
              "B=%d T=%d, %s, %d threads, %d steps" % (
                  torch.__version__, transformers.__version__, attn, n_params, a.batch, a.seq,
                  a.mode, a.threads, a.steps))
        print("RSS before the first step: %.1f MiB" % mib(rss_base), flush=True)

    times, losses = [], []
    load = LoadMeter()
    for step in range(a.steps):
        ids = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen)
        targets = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen)
        t0 = time.perf_counter()
        logits = model(input_ids=ids).logits
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        del logits
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
        if not a.json:
            print("step %d: %.3f s, loss %.4f, RSS %.1f MiB" % (
                step + 1, times[-1], losses[-1], mib(current_rss())), flush=True)
    foreign = load.foreign_pct()
    measured = times[1:] if len(times) > 1 else times
    s_step = statistics.median(measured)
    peak = peak_rss()
    if a.json:
        print(json.dumps(dict(impl="pytorch", torch=torch.__version__,
                              transformers=transformers.__version__, attention=attn,
                              mode=a.mode, params=n_params, batch=a.batch, seq=a.seq,
                              threads=a.threads, steps=a.steps, rss_baseline=rss_base,
                              peak_rss=peak, s_per_step=s_step, warmup_s=times[0],
                              first_loss=losses[0], last_loss=losses[-1],
                              foreign_cpu_pct=foreign)))
    else:
        print("peak RSS %.1f MiB (baseline %.1f MiB)" % (mib(peak), mib(rss_base)))
        print("%.3f s/step (median of %d after a %.3f s warm-up)" % (
            s_step, len(measured), times[0]))
        if foreign >= 0:
            print("other processes used %.1f%% of the cores meanwhile" % foreign)
    return 0


if __name__ == "__main__":
    sys.exit(main())
