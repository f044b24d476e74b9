#!/usr/bin/env python3
"""memonger's headline on a GPU, PyTorch's side: ResNet-152 (v1.5
bottlenecks, [3, 8, 36, 3]) as an nn.Sequential of its top-level layers,
trained with SGD + momentum, plain or with torch.utils.checkpoint's
checkpoint_sequential at K segments (use_reentrant=False); float32 with TF32
off, or with --tf32 on for convolutions and matmuls. Prints one JSON line:
peak torch.cuda.max_memory_allocated and max_memory_reserved, the device's
free-memory drop, iterations per second (median after a warm-up), the
device's name and the cuDNN / cuBLAS versions loaded (gpu_libs.py). --max-batch BYTES
finds the largest batch that trains within BYTES (the caching allocator is
capped with set_per_process_memory_fraction) by doubling and bisection.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint_sequential


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = 4 * width
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width),
            nn.ReLU(inplace=True), nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        s = x if self.down is None else self.down(x)
        return torch.relu(self.body(x) + s)


def resnet152(classes=1000):
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in [(64, 3, 1), (128, 8, 2), (256, 36, 2), (512, 3, 2)]:
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1))
            cin = 4 * width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def run(batch, segments, steps, res):
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    free0, _ = torch.cuda.mem_get_info()
    model = resnet152().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 3, res, res, device="cuda")  # no input gradient, as ours
    y = torch.randint(0, 1000, (batch,), device="cuda")
    times, drop = [], 0
    for _ in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = (checkpoint_sequential(model, segments, x, use_reentrant=False) if segments
               else model(x))
        loss = nn.functional.cross_entropy(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        drop = max(drop, free0 - torch.cuda.mem_get_info()[0])
    peak = torch.cuda.max_memory_allocated()
    reserved = torch.cuda.max_memory_reserved()
    del model, opt, x, y, out, loss
    return peak, reserved, drop, 1.0 / statistics.median(times[1:])


def fits(batch, segments, res):
    try:
        run(batch, segments, 2, res)
        return True
    except torch.cuda.OutOfMemoryError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--segments", type=int, default=0, help="0: plain")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--res", type=int, default=224)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--max-batch", type=int, default=0, help="bytes")
    ap.add_argument("--tf32", action="store_true", help="TF32 on for convolutions and matmuls")
    ap.add_argument("--deterministic", action="store_true",
                    help="cuDNN's deterministic algorithms only (as sublinear runs by default)")
    ap.add_argument("--benchmark", action="store_true",
                    help="cudnn.benchmark: each convolution's algorithm timed on first use "
                         "(as sublinear's SL_CUDA_CONV_TUNE=on)")
    a = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = a.tf32
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.benchmark = a.benchmark
    torch.backends.cudnn.deterministic = a.deterministic
    mode = f"checkpoint:{a.segments}" if a.segments else "plain"
    if a.max_batch:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, a.max_batch / total))
        lo, hi = 0, 1
        while hi < 4096 and fits(hi, a.segments, a.res):
            lo, hi = hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid, a.segments, a.res) else (lo, mid)
        print(json.dumps({"side": "pytorch", "mode": mode, "max_batch": lo, "limit": a.max_batch,
                          "tf32": a.tf32}))
        return
    peak, reserved, drop, its = run(a.batch, a.segments, a.steps, a.res)
    import gpu_libs  # the device, the cuDNN / cuBLAS versions loaded
    print(json.dumps(dict({"side": "pytorch", "mode": mode, "batch": a.batch, "max_allocated": peak,
                           "max_reserved": reserved, "device_drop": drop, "it_per_s": round(its, 4),
                           "tf32": a.tf32, "deterministic": a.deterministic,
                           "benchmark": a.benchmark, "torch": torch.__version__}, **gpu_libs.describe(torch))))


if __name__ == "__main__":
    main()
