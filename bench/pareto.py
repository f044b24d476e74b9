#!/usr/bin/env python3
"""pareto.py — the table and the SVG of bench/pareto.sh.

    pareto.py TMPDIR ROUNDS OUT.svg [--max-foreign PCT]

Reads NAME.ROUND.json (bench_resnet or bench_resnet_torch.py output) for
each configuration. A round in which other processes used more than PCT %
of the cores (default 10) is left out, and the output says so; where every
round of a configuration was disturbed, all are kept and flagged. Each
configuration is then its rounds' median s/step, with their min-max range,
and its largest peak RSS. Prints a markdown table and writes a
self-contained SVG: peak RSS (x) against s/step relative to our
keep-everything's median (y), the range as an error bar, ours joined in
order of memory, PyTorch's points apart. Below the table it lists where
the measurement contradicts the cost model (one of ours recomputes more
estimated time yet is measured faster than another) and whether the two
ranges overlap. Standard library only.
"""
import json
import math
import os
import statistics
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
OURS, THEIRS = "#1f77b4", "#d62728"
# Text width per character, in font sizes: DejaVu Sans digits are 0.64,
# so 0.65 keeps the estimate on the safe side (tests/svg_check.py too).
CHAR_W = 0.65


def load(tmp, rounds, name, max_foreign):
    runs = []
    for r in range(1, rounds + 1):
        try:
            with open(os.path.join(tmp, "%s.%d.json" % (name, r))) as f:
                run = json.load(f)
        except (OSError, ValueError):
            continue
        run["round"] = r
        run["disturbed"] = run.get("foreign_cpu_pct", 0) > max_foreign
        runs.append(run)
    if not runs:
        return None
    kept = [x for x in runs if not x["disturbed"]] or runs
    secs = [x["s_per_step"] for x in kept]
    best = dict(kept[0])
    best.update(s_per_step=statistics.median(secs), s_min=min(secs), s_max=max(secs),
                peak_rss=max(x["peak_rss"] for x in runs), runs=runs,
                all_disturbed=len(kept) == len(runs) and runs[0]["disturbed"])
    return best


def table(res, base, max_foreign):
    print("| config | planned peak MiB | planned activations MiB | peak RSS MiB | s/step median "
          "(min-max) | vs keep-everything median (min-max) | recomputed est. time % | "
          "recomputed FLOPs % | s/step each round | foreign CPU % each round |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, label in CONFIGS:
        r = res.get(name)
        if r is None:
            print("| %s | failed | | | | | | | | |" % label)
            continue
        ours = r.get("impl") == "sublinear"
        print("| %s `%s` | %s | %s | %.1f | %.2f (%.2f-%.2f) | %.3f (%.3f-%.3f) | %s | %s | %s "
              "| %s |" % (
                  label, r.get("schedule", r.get("mode")),
                  "%.1f" % (r["planned_total"] / M) if ours else "",
                  "%.1f" % (r["planned_arena"] / M) if ours else "",
                  r["peak_rss"] / M, r["s_per_step"], r["s_min"], r["s_max"],
                  r["s_per_step"] / base, r["s_min"] / base, r["s_max"] / base,
                  "%.1f" % (100 * r["recompute_time_fraction"]) if ours else "",
                  "%.1f" % (100 * r["recompute_fraction"]) if ours else "",
                  " ".join("%.2f%s" % (x["s_per_step"], "*" if x["disturbed"] else "")
                           for x in r["runs"]),
                  " ".join("%.0f" % x["foreign_cpu_pct"] for x in r["runs"])))
    print()
    left_out = ["%s round %d (%.0f %%)" % (SHORT[n], x["round"], x["foreign_cpu_pct"])
                for n, _ in CONFIGS if res.get(n) for x in res[n]["runs"]
                if x["disturbed"] and not res[n]["all_disturbed"]]
    print("Rounds in which other processes used more than %g %% of the cores (marked *) are "
          "left out: %s." % (max_foreign, ", ".join(left_out) if left_out else "none"))
    for n, _ in CONFIGS:
        if res.get(n) and res[n]["all_disturbed"]:
            print("Every round of %s was disturbed; all are kept." % SHORT[n])


def order_check(res):
    """Where the measurement contradicts the model: a configuration of ours
    that recomputes a larger share of the estimated time yet is measured
    faster than another, with whether their ranges overlap (noise can
    explain it) or not."""
    ours = [(n, res[n]) for n, _ in CONFIGS if res.get(n) and res[n].get("impl") == "sublinear"]
    lines = []
    for n, a in ours:
        for m, b in ours:
            if a["recompute_time_fraction"] > b["recompute_time_fraction"] and \
                    a["s_per_step"] < b["s_per_step"]:
                lines.append("- %s (%.1f %% recomputed) measured faster than %s (%.1f %%): %s"
                             % (SHORT[n], 100 * a["recompute_time_fraction"], SHORT[m],
                                100 * b["recompute_time_fraction"],
                                "ranges overlap" if a["s_max"] >= b["s_min"]
                                else "ranges do NOT overlap"))
    print()
    print("Against the model (more recomputed estimated time, yet faster):"
          + ("" if lines else " none"))
    for line in lines:
        print(line)


def nice_ticks(lo, hi, target=5):
    """Ticks at a 1-2-5 step covering [lo, hi]: (step, decimals, values)."""
    raw = max(hi - lo, 1e-12) / target
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m for m in (1, 2, 5, 10) if raw <= m * mag * (1 + 1e-9)) * mag
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    decimals = max(0, -int(math.floor(math.log10(step) + 1e-9)))
    return step, decimals, [round(k * step, decimals) for k in range(first, last + 1)]


def text_box(x, y, s, size=12, anchor="start"):
    w = CHAR_W * size * len(s)
    x0 = {"middle": x - w / 2, "end": x - w}.get(anchor, x)
    return (x0, y - 0.8 * size, x0 + w, y + 0.2 * size)


def overlaps(a, b, pad=2):
    return a[0] < b[2] + pad and b[0] < a[2] + pad and a[1] < b[3] + pad and b[1] < a[3] + pad


def crosses(box, segs):
    """Whether any segment ((x0, y0), (x1, y1)) passes through box."""
    for (ax, ay), (bx, by) in segs:
        n = 1 + int(max(abs(bx - ax), abs(by - ay)) / 2)
        for i in range(n + 1):
            x, y = ax + (bx - ax) * i / n, ay + (by - ay) * i / n
            if box[0] <= x <= box[2] and box[1] <= y <= box[3]:
                return True
    return False


def place(x, y, s, frame, taken, segs, dists):
    """A spot for label s near the point (x, y): the first candidate, going
    outwards through dists, that stays in frame and clear of the boxes in
    taken, trying first also to stay off the segments. (tx, ty, anchor,
    box) or None."""
    for avoid_lines in (True, False):
        for d in dists:
            for dx, dy, anchor in ((d, 4, "start"), (-d, 4, "end"), (0, -d + 2, "middle"),
                                   (0, d + 8, "middle"), (d * .7, -d * .7, "start"),
                                   (d * .7, d * .7 + 8, "start"), (-d * .7, -d * .7, "end"),
                                   (-d * .7, d * .7 + 8, "end")):
                b = text_box(x + dx, y + dy, s, anchor=anchor)
                if (b[0] < frame[0] or b[1] < frame[1] or b[2] > frame[2] or b[3] > frame[3]
                        or any(overlaps(b, t) for t in taken)
                        or (avoid_lines and crosses(b, segs))):
                    continue
                return x + dx, y + dy, anchor, b
    return None


def rss_over_plan(pts):
    """What our points' x is, in words from the data: peak RSS, so many MiB
    above the planned peak."""
    d = sorted((r["peak_rss"] - r["planned_total"]) / M for _, r in pts
               if r.get("impl") == "sublinear" and "planned_total" in r)
    if not d:
        return "peak RSS of the process"
    if round(d[0]) == round(d[-1]):
        return "peak RSS of the process, %.0f MiB above the planned peak" % d[0]
    return "peak RSS of the process, %.0f to %.0f MiB above the planned peak" % (d[0], d[-1])


def svg(res, base, path, rounds):
    pts = [(name, res[name]) for name, _ in CONFIGS if res.get(name)]
    xs = [r["peak_rss"] / M for _, r in pts]
    ys = [r["s_per_step"] / base for _, r in pts]
    lo = [r["s_min"] / base for _, r in pts]
    hi = [r["s_max"] / base for _, r in pts]
    W, L, R, T, PH = 860, 80, 40, 56, 370
    xstep, xdec, xticks = nice_ticks(0, max(xs) * 1.04)
    ystep, ydec, yticks = nice_ticks(min(lo + [1.0]) - 0.02, max(hi) + 0.02)
    x0, x1, y0, y1 = xticks[0], xticks[-1], yticks[0], yticks[-1]
    px = lambda x: L + (W - L - R) * (x - x0) / (x1 - x0)
    py = lambda y: T + PH * (1 - (y - y0) / (y1 - y0))
    bottom = T + PH
    first = pts[0][1]
    body = ['<text x="%d" y="26" font-size="15">ResNet-152 training, batch %d, %dx%d, CPU: '
            'peak memory against time per step</text>' % (L, first["batch"], first["res"],
                                                          first["res"]),
            '<g stroke="#888"><line x1="%d" y1="%d" x2="%d" y2="%d"/><line x1="%d" y1="%d" '
            'x2="%d" y2="%d"/></g>' % (L, bottom, W - R, bottom, L, T, L, bottom)]
    for v in xticks:
        body.append('<text class="tick" data-axis="x" data-value="%.*f" x="%.1f" y="%d" '
                    'text-anchor="middle">%.*f MiB</text>'
                    % (xdec, v, px(v), bottom + 18, xdec, v))
    for v in yticks:
        body.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>'
                    % (L, py(v), W - R, py(v)))
        body.append('<text class="tick" data-axis="y" data-value="%.*f" x="%d" y="%.1f" '
                    'text-anchor="end">%.*f\u00d7</text>' % (ydec, v, L - 6, py(v) + 4, ydec, v))
    body.append('<text x="%.1f" y="%d" text-anchor="middle">peak RSS of the process</text>'
                % ((L + W - R) / 2, bottom + 40))
    body.append('<text x="16" y="%.1f" transform="rotate(-90 16 %.1f)" text-anchor="middle">'
                's/step \u00f7 our keep-everything\'s</text>' % (T + PH / 2, T + PH / 2))
    ours = sorted((px(x), py(y)) for (n, r), x, y in zip(pts, xs, ys)
                  if r.get("impl") == "sublinear")
    segs = list(zip(ours, ours[1:]))
    body.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>'
                % (OURS, " ".join("%.1f,%.1f" % p for p in ours)))
    taken = []
    for (n, r), x, y, a, b in zip(pts, xs, ys, lo, hi):
        cx, cy, ya, yb = px(x), py(y), py(a), py(b)
        color = OURS if r.get("impl") == "sublinear" else THEIRS
        body.append('<path d="M%.1f %.1fV%.1fM%.1f %.1fh8M%.1f %.1fh8" stroke="%s"/>'
                    % (cx, ya, yb, cx - 4, ya, cx - 4, yb, color))
        taken.append((cx - 5, min(ya, yb, cy - 5), cx + 5, max(ya, yb, cy + 5)))
        if color == OURS:
            body.append('<circle cx="%.1f" cy="%.1f" r="5" fill="%s"/>' % (cx, cy, color))
        else:
            body.append('<rect class="marker" x="%.1f" y="%.1f" width="10" height="10" '
                        'fill="%s"/>' % (cx - 5, cy - 5, color))
    frame = (L + 2, T, W - R, bottom - 2)
    key = []
    for (n, r), x, y in zip(pts, xs, ys):
        color = OURS if r.get("impl") == "sublinear" else THEIRS
        # A name close to its point, else a number (explained below the
        # plot), else no label and the point's numbers below the plot.
        spot = place(px(x), py(y), SHORT[n], frame, taken, segs, (9, 16))
        text = SHORT[n]
        if not spot:
            text = str(1 + sum(" = " in k for k in key))
            spot = place(px(x), py(y), text, frame, taken, segs, (9, 16, 26))
            key.append("%s = %s" % (text, SHORT[n]) if spot else
                       "%s: %.0f MiB, %.2f\u00d7" % (SHORT[n], x, y))
        if spot:
            taken.append(spot[3])
            body.append('<text x="%.1f" y="%.1f" text-anchor="%s" fill="%s">%s</text>'
                        % (spot[0], spot[1], spot[2], color, text))
    y = bottom + 66
    theirs = next((r["impl"].replace("pytorch", "PyTorch") for _, r in pts
                   if r.get("impl") != "sublinear"), "PyTorch")
    body.append('<circle cx="%d" cy="%d" r="5" fill="%s"/><text x="%d" y="%d">ours '
                '(sublinear): %s</text>' % (L + 5, y - 4, OURS, L + 18, y, rss_over_plan(pts)))
    y += 20
    body.append('<rect class="swatch" x="%d" y="%d" width="10" height="10" fill="%s"/>'
                '<text x="%d" y="%d">%s: peak RSS of the process</text>'
                % (L, y - 9, THEIRS, L + 18, y, theirs))
    y += 20
    body.append('<text x="%d" y="%d">point: median s/step of the rounds kept (of %d); bar: '
                'their fastest to slowest</text>' % (L, y, rounds))
    y += 20
    body.append('<text x="%d" y="%d">line: ours in order of memory</text>' % (L, y))
    for k in key:
        y += 20
        body.append('<text x="%d" y="%d">%s</text>' % (L, y, k))
    H = y + 14
    head = ['<?xml version="1.0" encoding="UTF-8"?>',
            '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
            'font-family="sans-serif" font-size="12">' % (W, H),
            '<title>ResNet-152 training on the CPU: peak memory against time per step</title>',
            '<rect width="100%" height="100%" fill="white"/>']
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(head + body + ["</svg>"]) + "\n")


def main():
    args = sys.argv[1:]
    max_foreign = 10.0
    if "--max-foreign" in args:
        i = args.index("--max-foreign")
        max_foreign = float(args[i + 1])
        del args[i:i + 2]
    if len(args) != 3:
        sys.exit("usage: pareto.py TMPDIR ROUNDS OUT.svg [--max-foreign PCT]")
    tmp, rounds, path = args[0], int(args[1]), args[2]
    res = {name: load(tmp, rounds, name, max_foreign) for name, _ in CONFIGS}
    if not res.get("none"):
        sys.exit("pareto.py: keep-everything failed; nothing to compare with")
    base = res["none"]["s_per_step"]
    n = res["none"]
    print("ResNet-152, batch %d, %dx%d, %d threads, s/step = median of %d steps after a warm-up; "
          "each configuration: median and range of its %d round(s), alternating order"
          % (n["batch"], n["res"], n["res"], n["threads"], n["steps"] - 1, rounds))
    print()
    table(res, base, max_foreign)
    order_check(res)
    svg(res, base, path, rounds)
    print()
    print("wrote %s" % path)


if __name__ == "__main__":
    main()
