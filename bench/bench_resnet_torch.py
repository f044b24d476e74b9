#!/usr/bin/env python3
"""bench_resnet_torch.py — PyTorch's side of bench_resnet.c.

Trains ResNet-152 (torchvision's v1.5 bottlenecks: stride on the 3x3 conv;
[3, 8, 36, 3] blocks; defined here, no torchvision needed) on random data
with SGD (momentum 0.9, weight decay 5e-4) and reports the process's peak
RSS and seconds per step, in one of two modes:

    plain           autograd keeps every activation
    checkpoint:K    torch.utils.checkpoint.checkpoint_sequential(model, K, x)

The network is one nn.Sequential of its top-level modules (conv1, bn1,
relu, maxpool, each bottleneck, avgpool, flatten, fc: 57 for ResNet-152),
the same chain bench_resnet.c's schedules cut, so checkpoint_sequential
splits it into K chunks of 57 // K modules (the last chunk takes the rest
and is not recomputed). Where checkpoint_sequential takes use_reentrant
(PyTorch 2.x, which wants it given) checkpointing is the non-reentrant
kind, the one PyTorch recommends; on 1.13 it is the reentrant kind, which
needs an input that requires grad, so there the input does (one extra
backward-data of the stem; plain mode does not).

    bench_resnet_torch.py [--depth 152] [--batch 16] [--res 224] [--classes 1000]
                          [--mode plain|checkpoint:K] [--steps 4] [--threads 2]
                          [--autocast] [--json]

--autocast runs the forward and the loss under torch.autocast's bfloat16
(mixed precision, the peer of bench_resnet --precision bf16); "precision"
in the JSON says which ran.

One configuration per process (peak RSS is the process's). The first step
is a warm-up; s/step is the median of the others. Needs torch (Debian's is
/usr/bin/python3).
"""
import argparse
import inspect
import json
import statistics
import time

from cpu_load import LoadMeter, current_rss, mib, peak_rss
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint_sequential


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, width, stride):
        super().__init__()
        out = width * self.expansion
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + identity)


BLOCKS = {50: [3, 4, 6, 3], 101: [3, 4, 23, 3], 152: [3, 8, 36, 3]}


def cpu_capability():
    """What PyTorch's CPU kernels dispatch to ("AVX512"); "unknown" where
    torch has no torch.backends.cpu (1.13, Debian's)."""
    cpu = getattr(torch.backends, "cpu", None)
    return cpu.get_cpu_capability() if cpu and hasattr(cpu, "get_cpu_capability") else "unknown"


def resnet(depth, classes):
    """The ImageNet ResNet as one flat nn.Sequential of top-level modules."""
    mods = [nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64),
            nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1)]
    inplanes = 64
    for stage, blocks in enumerate(BLOCKS[depth]):
        width = 64 << stage
        for b in range(blocks):
            mods.append(Bottleneck(inplanes, width, 2 if (b == 0 and stage > 0) else 1))
            inplanes = width * Bottleneck.expansion
    mods += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(inplanes, classes)]
    return nn.Sequential(*mods)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=152, choices=sorted(BLOCKS))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--res", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--mode", default="plain")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--autocast", action="store_true",
                    help="forward and loss under torch.autocast(dtype=torch.bfloat16)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.mode == "plain":
        segments = 0
    elif args.mode.startswith("checkpoint:") and args.mode[11:].isdigit() and int(args.mode[11:]) > 0:
        segments = int(args.mode[11:])
    else:
        ap.error("--mode must be plain or checkpoint:K")
    if args.steps < 1:
        ap.error("--steps must be at least 1")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = resnet(args.depth, args.classes)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randn(args.batch, 3, args.res, args.res, generator=gen)
    labels = torch.randint(0, args.classes, (args.batch,), generator=gen)
    reentrant_kw = {}
    if "use_reentrant" in inspect.signature(checkpoint_sequential).parameters:
        reentrant_kw = {"use_reentrant": False}
    elif segments:
        x.requires_grad_(True)  # reentrant checkpoint: else no gradient reaches the weights
    rss_base = current_rss()
    if not args.json:
        print("PyTorch %s, resnet%d, batch %d, %dx%d, %d classes, mode %s, %s, %d threads, "
              "%d steps" % (torch.__version__, args.depth, args.batch, args.res, args.res,
                            args.classes, args.mode, "bf16 autocast" if args.autocast else "f32",
                            args.threads, args.steps))
        print("top-level modules %d; RSS before the first step %.1f MiB"
              % (len(model), mib(rss_base)), flush=True)

    times, losses = [], []
    load = LoadMeter()
    for step in range(args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if x.grad is not None:
            x.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast):
            out = (checkpoint_sequential(model, segments, x, **reentrant_kw) if segments
                   else model(x))
            loss = loss_fn(out, labels)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
        del out, loss
        if not args.json:
            print("step %d: %.3f s, loss %.4f, RSS %.1f MiB"
                  % (step + 1, times[-1], losses[-1], mib(current_rss())), flush=True)
    foreign = load.foreign_pct()
    median = statistics.median(times[1:] if len(times) > 1 else times)
    rss = peak_rss()
    params = sum(p.numel() for p in model.parameters()) * 4
    if args.json:
        print(json.dumps(dict(impl="pytorch %s" % torch.__version__, depth=args.depth,
                              batch=args.batch, res=args.res, classes=args.classes,
                              mode=args.mode, segments=segments, top_layers=len(model),
                              precision="bf16" if args.autocast else "f32",
                              threads=args.threads, steps=args.steps, param_bytes=params,
                              rss_baseline=rss_base, peak_rss=rss, s_per_step=median,
                              warmup_s=times[0], first_loss=losses[0], last_loss=losses[-1],
                              foreign_cpu_pct=foreign,
                              cpu_capability=cpu_capability())))
        return
    print("peak RSS %.1f MiB (baseline %.1f MiB; parameters %.1f MiB)"
          % (mib(rss), mib(rss_base), mib(params)))
    print("%.3f s/step (median of %d after a %.3f s warm-up)"
          % (median, max(len(times) - 1, 1), times[0]))
    if foreign >= 0:
        print("other processes used %.1f%% of the cores meanwhile" % foreign)


if __name__ == "__main__":
    main()
