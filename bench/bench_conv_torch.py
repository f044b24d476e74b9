#!/usr/bin/env python3
"""bench_conv_torch.py — PyTorch's side of bench_conv.c.

Times forward (F.conv2d), backward-data and backward-filter of every
distinct convolution shape of torchvision's ResNet-50 (v1.5), with the
multiplicity of each shape, at batch 8 and 224x224 by default. The backward
passes call aten.convolution_backward with one output mask at a time (what
autograd calls, and what torch.nn.grad.conv2d_input / conv2d_weight wrap),
so each gradient is timed alone, as bench_conv.c times each kernel alone.

    bench_conv_torch.py [--threads N] [--batch N] [--reps N] [--image N] [--json]

Each pass runs once to warm up, then --reps times; the median is kept.
GFLOP/s counts 2 * multiply-adds per pass. Needs torch (Debian's is
/usr/bin/python3).
"""
import argparse
import json
import statistics
import time

from cpu_load import LoadMeter
import torch
import torch.nn.functional as F


def resnet50_shapes(image):
    """[(name, c, k, hw, kernel, stride, pad, ohw, count)] in network order."""
    shapes = []
    index = {}

    def add(name, c, k, hw, kern, stride, pad):
        key = (c, k, hw, kern, stride, pad)
        if key in index:
            shapes[index[key]][-1] += 1
            return
        ohw = (hw + 2 * pad - kern) // stride + 1
        index[key] = len(shapes)
        shapes.append([name, c, k, hw, kern, stride, pad, ohw, 1])

    add("conv1", 3, 64, image, 7, 2, 3)
    hw = (image + 2 * 3 - 7) // 2 + 1
    hw = (hw + 2 * 1 - 3) // 2 + 1  # max pool 3x3/2
    inc = 64
    for layer, blocks in enumerate([3, 4, 6, 3]):
        width = 64 << layer
        out = width * 4
        for b in range(blocks):
            stride = 2 if (b == 0 and layer > 0) else 1
            ohw = (hw - 1) // stride + 1
            p = "layer%d.%d." % (layer + 1, b)
            add(p + "conv1", inc, width, hw, 1, 1, 0)
            add(p + "conv2", width, width, hw, 3, stride, 1)
            add(p + "conv3", width, out, ohw, 1, 1, 0)
            if b == 0:
                add(p + "downsample.0", inc, out, hw, 1, stride, 0)
            inc = out
            hw = ohw
    return [tuple(s) for s in shapes]


def median_ms(fn, reps):
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    n = args.batch
    rows = []
    # Other processes' share of the cores while we time: noise indicator.
    load = LoadMeter()
    with torch.no_grad():
        for name, c, k, hw, kern, stride, pad, ohw, count in resnet50_shapes(args.image):
            x = torch.rand(n, c, hw, hw) * 2 - 1
            w = (torch.rand(k, c, kern, kern) * 2 - 1) * 0.05
            dy = torch.rand(n, k, ohw, ohw) * 2 - 1
            st, pd, dl = [stride, stride], [pad, pad], [1, 1]

            def fwd():
                F.conv2d(x, w, None, stride, pad)

            def bwd_data():
                torch.ops.aten.convolution_backward(dy, x, w, None, st, pd, dl, False, [0, 0],
                                                    1, [True, False, False])

            def bwd_filter():
                torch.ops.aten.convolution_backward(dy, x, w, None, st, pd, dl, False, [0, 0],
                                                    1, [False, True, False])

            ms = [median_ms(f, args.reps) for f in (fwd, bwd_data, bwd_filter)]
            macs = n * k * ohw * ohw * c * kern * kern
            rows.append(dict(name=name, c=c, k=k, hw=hw, kernel=kern, stride=stride, pad=pad,
                             ohw=ohw, count=count, macs=macs, fwd_ms=ms[0],
                             bwd_data_ms=ms[1], bwd_filter_ms=ms[2]))

    foreign = load.foreign_pct()
    tot = {p: sum(r["count"] * r[p] for r in rows)
           for p in ("fwd_ms", "bwd_data_ms", "bwd_filter_ms")}
    tot["ms"] = tot["fwd_ms"] + tot["bwd_data_ms"] + tot["bwd_filter_ms"]
    tot["macs"] = sum(r["count"] * r["macs"] for r in rows)
    tot["convs"] = sum(r["count"] for r in rows)
    if args.json:
        print(json.dumps(dict(impl="pytorch %s" % torch.__version__, threads=args.threads,
                              batch=n, image=args.image, reps=args.reps,
                              mkldnn=torch.backends.mkldnn.is_available(), shapes=rows,
                              total=tot, foreign_cpu_pct=foreign), indent=1))
        return

    print("PyTorch %s CPU conv, ResNet-50 shapes: batch %d, %dx%d, %d threads, median of %d"
          % (torch.__version__, n, args.image, args.image, args.threads, args.reps))
    print("%-26s %-24s %3s %9s %9s %9s %7s %7s %7s" % ("first conv", "c->k kxk/s hw->ohw", "n",
          "fwd ms", "bwdD ms", "bwdW ms", "fwd GF", "bwdD GF", "bwdW GF"))
    for r in rows:
        geo = "%d->%d %dx%d/%d %d->%d" % (r["c"], r["k"], r["kernel"], r["kernel"],
                                          r["stride"], r["hw"], r["ohw"])
        gf = 2.0 * r["macs"] * 1e-6
        print("%-26s %-24s %3d %9.2f %9.2f %9.2f %7.1f %7.1f %7.1f" % (
            r["name"], geo, r["count"], r["fwd_ms"], r["bwd_data_ms"], r["bwd_filter_ms"],
            gf / r["fwd_ms"], gf / r["bwd_data_ms"], gf / r["bwd_filter_ms"]))
    gf = 2.0 * tot["macs"] * 1e-6
    print("total (%d convs, weighted) %24s %9.1f %9.1f %9.1f %7.1f %7.1f %7.1f" % (
        tot["convs"], "", tot["fwd_ms"], tot["bwd_data_ms"], tot["bwd_filter_ms"],
        gf / tot["fwd_ms"], gf / tot["bwd_data_ms"], gf / tot["bwd_filter_ms"]))
    print("fwd + bwd: %.1f ms, %.1f GFLOP/s (%.1f GFLOP)"
          % (tot["ms"], 3.0 * gf / tot["ms"], 3.0 * gf * 1e-3))
    if foreign >= 0.0:
        print("other processes used %.1f%% of the cores meanwhile" % foreign)


if __name__ == "__main__":
    main()
