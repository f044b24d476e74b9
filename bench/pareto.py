#!/usr/bin/env python3
"""pareto.py — the table and the SVG of bench/pareto.sh.

    pareto.py TMPDIR ROUNDS OUT.svg

Reads NAME.ROUND.json (bench_resnet or bench_resnet_torch.py output) for
each configuration, keeps each one's fastest round (and its largest peak
RSS), prints a markdown table and writes a self-contained SVG: peak RSS
(x) against s/step relative to our keep-everything (y), ours joined in
order of memory, PyTorch's two points apart. Standard library only.
"""
import json
import os
import sys

CONFIGS = [("none", "ours, keep everything"), ("b2g", "ours, budget 2 GiB"),
           ("o2g", "ours, operator-level 2 GiB"),
           ("bthird", "ours, budget: a third of the activations"),
           ("othird", "ours, operator-level: a third of the activations"),
           ("sqrt", "ours, sqrt"), ("least", "ours, least memory (multi-level)"),
           ("torch_plain", "PyTorch plain"), ("torch_ckpt", "PyTorch checkpoint_sequential")]
SHORT = {"none": "none", "b2g": "budget:2GiB", "o2g": "ops:2GiB", "bthird": "budget 1/3",
         "othird": "ops 1/3", "sqrt": "sqrt", "least": "least", "torch_plain": "PyTorch plain",
         "torch_ckpt": "PyTorch ckpt"}
M = 1048576.0


def load(tmp, rounds, name):
    runs = []
    for r in range(1, rounds + 1):
        try:
            with open(os.path.join(tmp, "%s.%d.json" % (name, r))) as f:
                runs.append(json.load(f))
        except (OSError, ValueError):
            pass
    if not runs:
        return None
    best = dict(min(runs, key=lambda x: x["s_per_step"]))
    best["peak_rss"] = max(x["peak_rss"] for x in runs)
    best["all_s"] = [x["s_per_step"] for x in runs]
    best["all_foreign"] = [x["foreign_cpu_pct"] for x in runs]
    return best


def table(res, base):
    print("| config | planned peak MiB | planned activations MiB | peak RSS MiB | s/step "
          "(each round) | vs keep-everything | recomputed FLOPs % | recomputed est. time % | "
          "foreign CPU % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, label in CONFIGS:
        r = res.get(name)
        if r is None:
            print("| %s | failed | | | | | | | |" % label)
            continue
        ours = r.get("impl") == "sublinear"
        print("| %s `%s` | %s | %s | %.1f | %.2f (%s) | %.3f | %s | %s | %s |" % (
            label, r.get("schedule", r.get("mode")),
            "%.1f" % (r["planned_total"] / M) if ours else "",
            "%.1f" % (r["planned_arena"] / M) if ours else "",
            r["peak_rss"] / M, r["s_per_step"], " ".join("%.2f" % s for s in r["all_s"]),
            r["s_per_step"] / base, "%.1f" % (100 * r["recompute_fraction"]) if ours else "",
            "%.1f" % (100 * r["recompute_time_fraction"]) if ours else "",
            " ".join("%.0f" % f for f in r["all_foreign"])))


def svg(res, base, path):
    pts = [(name, res[name]) for name, _ in CONFIGS if res.get(name)]
    xs = [r["peak_rss"] / M for _, r in pts]
    ys = [r["s_per_step"] / base for _, r in pts]
    W, H, L, R, T, B = 860, 480, 80, 30, 50, 60
    x0, x1 = 0.0, max(xs) * 1.08
    y0, y1 = min(0.9, min(ys) - 0.05), max(ys) + 0.08
    px = lambda x: L + (W - L - R) * (x - x0) / (x1 - x0)
    py = lambda y: T + (H - T - B) * (1 - (y - y0) / (y1 - y0))
    o = ['<?xml version="1.0" encoding="UTF-8"?>',
         '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
         'font-family="sans-serif" font-size="12">' % (W, H),
         '<title>ResNet-152 training on the CPU: peak memory against time per step</title>',
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="24" font-size="15">ResNet-152, batch %d, %dx%d, CPU: peak RSS '
         'against time per step (1 = our keep-everything)</text>'
         % (L, pts[0][1]["batch"], pts[0][1]["res"], pts[0][1]["res"]),
         '<g stroke="#888"><line x1="%d" y1="%d" x2="%d" y2="%d"/><line x1="%d" y1="%d" '
         'x2="%d" y2="%d"/></g>' % (L, H - B, W - R, H - B, L, T, L, H - B)]
    for k in range(6):
        x = x0 + (x1 - x0) * k / 5
        o.append('<text x="%.1f" y="%d" text-anchor="middle">%.0f</text>' % (px(x), H - B + 18, x))
        y = y0 + (y1 - y0) * k / 5
        o.append('<text x="%d" y="%.1f" text-anchor="end">%.2f</text>' % (L - 6, py(y) + 4, y))
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>'
                 % (L, py(y), W - R, py(y)))
    o.append('<text x="%.1f" y="%d" text-anchor="middle">peak RSS of the process (MiB)</text>'
             % ((L + W - R) / 2, H - 18))
    o.append('<text x="16" y="%.1f" transform="rotate(-90 16 %.1f)" text-anchor="middle">'
             's/step / our keep-everything\'s</text>' % ((T + H - B) / 2, (T + H - B) / 2))
    ours = sorted([(x, y, n) for (n, r), x, y in zip(pts, xs, ys) if r.get("impl") == "sublinear"])
    o.append('<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="%s"/>'
             % " ".join("%.1f,%.1f" % (px(x), py(y)) for x, y, _ in ours))
    for (n, r), x, y in zip(pts, xs, ys):
        mine = r.get("impl") == "sublinear"
        color = "#1f77b4" if mine else "#d62728"
        if mine:
            o.append('<circle cx="%.1f" cy="%.1f" r="5" fill="%s"/>' % (px(x), py(y), color))
        else:
            o.append('<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s"/>'
                     % (px(x) - 5, py(y) - 5, color))
        o.append('<text x="%.1f" y="%.1f" fill="%s">%s</text>' % (px(x) + 8, py(y) - 7, color,
                                                                  SHORT[n]))
    o.append('<circle cx="%d" cy="%d" r="5" fill="#1f77b4"/><text x="%d" y="%d">sublinear '
             '(planned peak + ~17 MiB of process)</text>' % (L + 20, T + 10, L + 32, T + 14))
    o.append('<rect x="%d" y="%d" width="10" height="10" fill="#d62728"/><text x="%d" y="%d">'
             '%s</text>' % (L + 15, T + 25, L + 32, T + 34,
                            next((r["impl"] for _, r in pts if r.get("impl") != "sublinear"),
                                 "PyTorch")))
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def main():
    tmp, rounds, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    res = {name: load(tmp, rounds, name) for name, _ in CONFIGS}
    if not res.get("none"):
        sys.exit("pareto.py: keep-everything failed; nothing to compare with")
    base = res["none"]["s_per_step"]
    n = res["none"]
    print("ResNet-152, batch %d, %dx%d, %d threads, s/step = median of %d steps after a warm-up, "
          "fastest of %d round(s)" % (n["batch"], n["res"], n["res"], n["threads"],
                                       n["steps"] - 1, rounds))
    print()
    table(res, base)
    svg(res, base, path)
    print()
    print("wrote %s" % path)


if __name__ == "__main__":
    main()
