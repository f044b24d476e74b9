#!/usr/bin/env python3
"""svg_plots.py — the test over every SVG the library and the benches
write (registered in ctest as test_svg_plots).

    svg_plots.py SUBLINEAR_CLI BENCH_DIR

Draws memory timelines with `sublinear memplot` (sl_memory_timeline_write_svg on
real networks) and Pareto pictures with BENCH_DIR/pareto.py from synthetic
rounds in the files bench/pareto.sh writes, and checks each with
svg_check.py: round ticks, no overlapping text, no text outside the
picture. Each picture is also rendered to PNG with rsvg-convert (skipped,
saying so, where it is missing). First it proves the checker fails on a
picture with each fault. Set SL_SVG_KEEP=DIR to keep the files.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import svg_check  # noqa: E402

M = 1048576

# Per configuration: planned peak and activations (MiB; None for PyTorch),
# recomputed FLOPs and estimated time shares, peak RSS over the planned
# peak (MiB; PyTorch: the peak), s/step of each round. From the run in
# bench/results/pareto-resnet152-cpu-2026-11-23.log, stretched to five
# rounds, with the points and labels as crowded as they were there.
RUN_2026_11_23 = {
    "none": (3382.1, 2692.6, 0, 0, 17, [18.74, 21.87, 19.2, 19.9, 18.9]),
    "b2g": (2043.5, 1354.1, .095, .104, 17, [20.04, 21.27, 20.5, 20.9, 20.2]),
    "o2g": (1975.7, 1286.3, .079, .090, 25, [23.44, 20.18, 20.9, 21.1, 20.4]),
    "bthird": (1575.2, 885.8, .184, .190, 17, [22.42, 22.77, 22.5, 22.6, 22.9]),
    "othird": (1571.6, 882.2, .153, .163, 25, [21.29, 22.21, 21.8, 21.5, 22.0]),
    "sqrt": (1244.4, 555.0, .259, .263, 17, [24.24, 25.43, 24.9, 24.5, 25.1]),
    "least": (958.9, 269.5, .383, .395, 25, [26.16, 28.86, 26.9, 27.3, 26.5]),
    "torch_plain": (None, None, 0, 0, 4487.4, [20.28, 21.90, 20.7, 21.2, 20.5]),
    "torch_ckpt": (None, None, 0, 0, 2865.4, [26.90, 27.88, 27.1, 27.5, 27.0]),
}


def write_rounds(tmp, run, rss_over=None, disturbed=()):
    """NAME.ROUND.json as bench_resnet / bench_resnet_torch.py print them;
    the (name, round) pairs in disturbed get 40 % foreign CPU load."""
    for name, (planned, arena, rf, rtf, over, secs) in run.items():
        for r, s in enumerate(secs, 1):
            d = dict(batch=16, res=224, threads=2, steps=3, s_per_step=s,
                     foreign_cpu_pct=40.0 if (name, r) in disturbed else 1.0)
            if planned is None:
                d.update(impl="pytorch 2.15.0", mode="plain" if name == "torch_plain"
                         else "checkpoint:8", peak_rss=int(over * M))
            else:
                d.update(impl="sublinear", schedule=name, planned_total=int(planned * M),
                         planned_arena=int(arena * M), recompute_fraction=rf,
                         recompute_time_fraction=rtf,
                         peak_rss=int((planned + (over if rss_over is None else rss_over)) * M))
            with open(os.path.join(tmp, "%s.%d.json" % (name, r)), "w") as f:
                json.dump(d, f)


def crowded():
    """Every configuration within a few MiB and percent of the others, so
    that not every label fits beside its point."""
    return {n: (v[0] and 1000 + i, v[1] and 300 + i, v[2], v[3], 1010 + 3 * i if v[0] is None
                else v[4], [1.0 + 0.0005 * i + 0.0005 * k for k in range(3)])
            for i, (n, v) in enumerate(RUN_2026_11_23.items())}


def stacked():
    """Every configuration at one point: only numbers, or nothing, fit."""
    return {n: (v[0] and 1000, v[1] and 300, v[2], v[3], 1010 if v[0] is None else v[4],
                [1.0, 1.0, 1.0]) for n, v in RUN_2026_11_23.items()}


def render(svg, failures):
    if not shutil.which("rsvg-convert"):
        print("SKIPPED: rsvg-convert not installed (Debian: librsvg2-bin), %s not rendered" % svg)
        return
    png = svg[:-4] + ".png"
    p = subprocess.run(["rsvg-convert", "-o", png, svg], capture_output=True, text=True)
    if p.returncode != 0 or not os.path.getsize(png):
        failures.append("rsvg-convert failed on %s: %s" % (svg, p.stderr))
    else:
        print("rendered %s" % png)


def checker_fails_on_faults(tmp, failures):
    """A picture with each fault the checker exists to find."""
    bad = os.path.join(tmp, "bad.svg")
    with open(bad, "w") as f:
        f.write('<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100" '
                'font-size="12">\n'
                '<text class="tick" data-axis="x" data-value="0" x="20" y="90">0</text>\n'
                '<text class="tick" data-axis="x" data-value="969" x="60" y="90">969</text>\n'
                '<text class="tick" data-axis="x" data-value="1938" x="100" y="90">1938</text>\n'
                '<text x="50" y="40">ops:2GiB</text><text x="60" y="44">budget:2GiB</text>\n'
                '<text x="150" y="20">PyTorch plain</text>\n'
                '<circle cx="30" cy="60" r="5"/><text x="25" y="64">x</text>\n</svg>\n')
    found = "\n".join(svg_check.check(bad))
    for fault in ("not 1, 2 or 5", "overlap", "leaves the", "covers a marker"):
        if fault not in found:
            failures.append("svg_check.py missed '%s' in %s:\n%s" % (fault, bad, found))


def main():
    cli, bench = sys.argv[1], sys.argv[2]
    tmp = os.environ.get("SL_SVG_KEEP") or tempfile.mkdtemp(prefix="sl_svg_plots_")
    os.makedirs(tmp, exist_ok=True)
    failures = []
    checker_fails_on_faults(tmp, failures)
    svgs = []
    for name, args in (
            ("timeline_resnet20", "--model resnet20 --batch 4 --res 32 --classes 10 "
             "--schedules none,sqrt,segments:3"),
            ("timeline_resnet56", "--model resnet56 --batch 8 --res 32 --classes 10 "
             "--schedules none,sqrt,segments:2,segments:4,segments:6,segments:8,"
             "segments:12,budget:20MiB"),
            ("timeline_resnet152", "--model resnet152 --batch 16 --res 224 "
             "--schedules none,sqrt")):
        out = os.path.join(tmp, name + ".svg")
        p = subprocess.run([cli, "memplot", "-o", out] + args.split(), capture_output=True,
                           text=True)
        if p.returncode != 0:
            failures.append("sublinear memplot %s failed: %s" % (args, p.stderr))
            continue
        svgs.append(out)
    for name, run, over, disturbed in (
            ("pareto_2026_11_23", RUN_2026_11_23, None, {("sqrt", 3)}),
            ("pareto_rss_170", RUN_2026_11_23, 170, set()),
            ("pareto_crowded", crowded(), None, {("none", 2)}),
            ("pareto_stacked", stacked(), None, set())):
        data = os.path.join(tmp, name)
        os.makedirs(data, exist_ok=True)
        write_rounds(data, run, over, disturbed)
        out = os.path.join(tmp, name + ".svg")
        rounds = len(next(iter(run.values()))[5])
        p = subprocess.run([sys.executable, os.path.join(bench, "pareto.py"), data, str(rounds),
                            out], capture_output=True, text=True)
        print(p.stdout)
        if p.returncode != 0:
            failures.append("pareto.py on %s failed: %s" % (name, p.stderr))
            continue
        if disturbed and "left out: %s round" % ("sqrt" if ("sqrt", 3) in disturbed
                                                 else "none") not in p.stdout:
            failures.append("pareto.py on %s did not say which round it left out" % name)
        if name == "pareto_2026_11_23" and "- budget:2GiB (10.4 % recomputed) measured faster " \
                "than ops:2GiB (9.0 %): ranges overlap" not in p.stdout:
            failures.append("pareto.py on %s did not point out budget:2GiB faster than "
                            "ops:2GiB" % name)
        if name == "pareto_stacked" and ">1 = " not in open(out).read():
            failures.append("pareto.py's key on %s numbers no label" % name)
        if over == 170 and "170 MiB above the planned peak" not in open(out).read():
            failures.append("pareto.py's legend on %s does not state 170 MiB" % name)
        svgs.append(out)
    for svg in svgs:
        faults = svg_check.check(svg)
        failures += ["%s: %s" % (svg, f) for f in faults]
        print("%s: %s" % (svg, "%d fault(s)" % len(faults) if faults else "checked"))
        render(svg, failures)
    for f in failures:
        print("FAIL: " + f)
    if not os.environ.get("SL_SVG_KEEP"):
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
