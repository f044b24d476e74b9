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
                    (--checkpoint is --mode checkpoint)

    bench_gpt2_torch.py [--layers 12] [--embd 768] [--heads 12] [--vocab 50257]
                        [--context 1024] [--batch 4] [--seq 64] [--mode plain]
                        [--checkpoint] [--steps 4] [--threads 2] [--seed 0]
                        [--device cpu|cuda] [--gpu N] [--tf32] [--autocast]
                        [--json]

One configuration per process (peak RSS is the process's, getrusage). The
first step is a warm-up; the step time is the median of the others (the
warm-up's own time with --steps 1), with the fastest and slowest. A step
is timed as bench_gpt2.c times ours: from before the token batch goes to
the device to after the update, the loss read back.

--device cuda runs on a GPU, float32, with TF32 off for matmuls and cuDNN
unless --tf32 turns both on (PyTorch's defaults differ between the two
switches: both are set, and recorded). Its peak memory is measured as
bench_gpu_torch.py measures it for ResNet and as bench_gpt2.c measures
ours: the largest drop of the device's free memory (cudaMemGetInfo) after
any step, from after the CUDA context is made ("peak_MiB"); the caching
allocator's max_memory_allocated and max_memory_reserved come beside it.
--autocast runs the forward and the loss under torch.autocast's bfloat16
(mixed precision, the peer of ours under --precision bf16); "precision"
says "bf16" (else "f32"). The JSON line then names the device and the cuDNN / cuBLAS versions the
process loaded (gpu_libs.py). Both sides print "model", "side",
"schedule", "batch", "seq", "tf32", "ms_step", "ms_min", "ms_max",
"peak_MiB" and "device" (gpu_gpt2.py reads them).

Needs torch and transformers (run it with the interpreter of a venv that
has both, gpt2.sh's $PYTHON); without them it prints "SKIPPED:
transformers not importable" (and {"skipped": ...} with --json) and exits
0.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_load import LoadMeter, current_rss, mib, peak_rss  # noqa: E402


def model_name(a):
    """bench_gpt2.c's name of the model (model_name there)."""
    if (a.layers, a.embd, a.heads, a.vocab) == (12, 768, 12, 50257):
        return "gpt2-small"
    return "gpt2-L%d-C%d-H%d-V%d" % (a.layers, a.embd, a.heads, a.vocab)


def set_tf32(torch, on):
    """Both TF32 switches to `on`; what they read back afterwards."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # newer PyTorch calls these switches legacy
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on
        return {"matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
                "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32)}


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
    ap.add_argument("--checkpoint", dest="mode", action="store_const", const="checkpoint",
                    help="--mode checkpoint")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--autocast", action="store_true",
                    help="forward and loss under torch.autocast(dtype=torch.bfloat16)")
    ap.add_argument("--tf32", action="store_true",
                    help="CUDA: TF32 tensor cores for matmuls and cuDNN")
    a = ap.parse_args()
    if a.device == "cpu" and (a.tf32 or a.gpu):
        ap.error("--tf32 and --gpu need --device cuda")

    try:
        import torch
        import torch.nn.functional as F
        import transformers
        from transformers import GPT2Config, GPT2LMHeadModel
    except Exception as e:  # ImportError, or a broken install
        msg = "SKIPPED: transformers not importable (%s: %s)" % (sys.executable, e)
        print(json.dumps({"skipped": msg}) if a.json else msg)
        return 0

    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("bench_gpt2_torch.py: --device cuda: no usable CUDA device (torch %s, CUDA %s)"
              % (torch.__version__, torch.version.cuda), file=sys.stderr)
        return 1
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    tf32 = {}
    free0 = 0
    if cuda:
        torch.cuda.set_device(a.gpu)
        tf32 = set_tf32(torch, a.tf32)
        torch.cuda.init()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        free0 = torch.cuda.mem_get_info()[0]  # after the context, before the model
    dev = torch.device("cuda", a.gpu) if cuda else torch.device("cpu")
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
    model.to(dev)
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
              "B=%d T=%d, %s, %d threads, %d steps, on %s%s" % (
                  torch.__version__, transformers.__version__, attn, n_params, a.batch, a.seq,
                  a.mode, a.threads, a.steps, "CUDA" if cuda else "the CPU",
                  " (TF32)" if a.tf32 else ""))
        print("RSS before the first step: %.1f MiB" % mib(rss_base), flush=True)

    times, losses = [], []
    drop = 0
    load = LoadMeter()
    for step in range(a.steps):
        ids = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen)
        targets = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen)
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        ids_d, targets_d = ids.to(dev), targets.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.autocast):
            logits = model(input_ids=ids_d).logits
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets_d.view(-1))
        del logits
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        if cuda:
            drop = max(drop, free0 - torch.cuda.mem_get_info()[0])
        if not a.json:
            print("step %d: %.3f s, loss %.4f, RSS %.1f MiB" % (
                step + 1, times[-1], losses[-1], mib(current_rss())), flush=True)
    foreign = load.foreign_pct()
    measured = times[1:] if len(times) > 1 else times
    s_step = statistics.median(measured)
    peak = peak_rss()
    gpu = {}
    if cuda:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import gpu_libs
        gpu = dict(gpu_libs.describe(torch, a.gpu), max_allocated=torch.cuda.max_memory_allocated(),
                   max_reserved=torch.cuda.max_memory_reserved(), device_drop=drop, **tf32)
    if a.json:
        print(json.dumps(dict(
            impl="pytorch", torch=torch.__version__, transformers=transformers.__version__,
            attention=attn, mode=a.mode, params=n_params, batch=a.batch, seq=a.seq,
            threads=a.threads, steps=a.steps, rss_baseline=rss_base, peak_rss=peak,
            s_per_step=s_step, warmup_s=times[0], first_loss=losses[0], last_loss=losses[-1],
            foreign_cpu_pct=foreign, model=model_name(a), side="pytorch", schedule=a.mode,
            tf32=a.tf32, precision="bf16" if a.autocast else "f32",
            ms_step=round(1e3 * s_step, 3), ms_min=round(1e3 * min(measured), 3),
            ms_max=round(1e3 * max(measured), 3),
            peak_MiB=round(mib(drop if cuda else peak), 1),
            peak_source="device free-memory drop" if cuda else "peak RSS",
            **(gpu if cuda else {"device": "cpu"}))))
    else:
        print("peak RSS %.1f MiB (baseline %.1f MiB)" % (mib(peak), mib(rss_base)))
        if cuda:
            print("device memory (largest drop of the GPU's free memory after a step) %.1f MiB; "
                  "max allocated %.1f MiB, max reserved %.1f MiB" % (
                      mib(drop), mib(gpu["max_allocated"]), mib(gpu["max_reserved"])))
        print("%.3f s/step (median of %d after a %.3f s warm-up), from %.3f to %.3f s" % (
            s_step, len(measured), times[0], min(measured), max(measured)))
        if foreign >= 0:
            print("other processes used %.1f%% of the cores meanwhile" % foreign)
    return 0


if __name__ == "__main__":
    sys.exit(main())
