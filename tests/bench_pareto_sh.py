#!/usr/bin/env python3
"""bench_pareto_sh.py — bench/pareto.sh's logic on synthetic runs
(registered in ctest as test_bench_pareto_sh): no network is trained.

    bench_pareto_sh.py BENCH_DIR

A stand-in bench_resnet and a stand-in interpreter for
bench_resnet_torch.py print the JSON the real ones print, with s/step
drawn from each configuration's cost and the run's count, and with 40 %
foreign CPU load in sqrt's first run. Checks that the configurations are
interleaved over the default 5 rounds in alternating order, that the load
of each run is printed, that the disturbed round is left out and named,
that the medians and ranges are those of the rounds kept, and that the
SVG passes svg_check.py.
"""
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import svg_check  # noqa: E402

# Seconds per step of each configuration in its first run; later runs of
# the same configuration add 0.1 s per run before them (run 3: +0.2 s).
COST = {"none": 10.0, "budget:2GiB": 10.5, "ops:2GiB": 10.6, "budget-third": 11.0,
        "ops-third": 11.1, "sqrt": 12.0, "least": 13.0, "plain": 10.8, "checkpoint:8": 13.5}

FAKE = r'''#!/usr/bin/env python3
import json, os, sys
a = sys.argv[1:]
torch = bool(a) and a[0].endswith("bench_resnet_torch.py")
if not torch and os.path.basename(sys.argv[0]) != "bench_resnet":
    os.execv(sys.executable, [sys.executable] + a)  # the interpreter, for pareto.py
if "--plan-only" in a:
    print(json.dumps({"sqrt_segments": 8}))
    sys.exit(0)
cfg = a[a.index("--mode" if torch else "--schedule") + 1]
count = os.path.join(os.environ["FAKE_DIR"], cfg.replace(":", "_"))
n = int(open(count).read()) if os.path.exists(count) else 0
open(count, "w").write(str(n + 1))
cost = json.loads(os.environ["FAKE_COST"])[cfg] + 0.1 * n
d = dict(batch=16, res=224, threads=2, steps=3, s_per_step=cost,
         foreign_cpu_pct=40.0 if cfg == "sqrt" and n == 0 else 2.0)
if torch:
    d.update(impl="pytorch 2.15.0", mode=cfg, peak_rss=int((4000 if cfg == "plain" else 2800) << 20))
else:
    planned = {"none": 3382, "sqrt": 1244, "least": 959}.get(cfg, 2000)
    d.update(impl="sublinear", schedule=cfg, planned_total=planned << 20,
             planned_arena=(planned - 690) << 20, peak_rss=(planned + 170) << 20,
             recompute_fraction=0.1, recompute_time_fraction=0.12)
print(json.dumps(d))
'''


def main():
    bench = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="sl_pareto_sh_")
    failures = []
    try:
        fake = os.path.join(tmp, "fake")
        os.makedirs(os.path.join(tmp, "build", "bench"))
        with open(fake, "w") as f:
            f.write(FAKE)
        os.chmod(fake, stat.S_IRWXU)
        os.symlink(fake, os.path.join(tmp, "build", "bench", "bench_resnet"))
        env = dict(os.environ, PYTHON=fake, FAKE_DIR=tmp, FAKE_COST=json.dumps(COST))
        svg = os.path.join(tmp, "pareto.svg")
        p = subprocess.run(["sh", os.path.join(bench, "pareto.sh"), os.path.join(tmp, "build"),
                            "--out", svg], capture_output=True, text=True, env=env)
        print(p.stderr)
        print(p.stdout)
        if p.returncode != 0:
            failures.append("pareto.sh failed (%d)" % p.returncode)
        runs = re.findall(r"pareto.sh: round (\d): (\S+) (\S+)\n", p.stderr)
        order = {}
        for r, _, cfg in runs:
            order.setdefault(int(r), []).append(cfg)
        if sorted(order) != [1, 2, 3, 4, 5]:
            failures.append("not 5 rounds: %s" % sorted(order))
        elif order[2] != order[1][::-1] or order[3] != order[1] or order[1][0] != "none":
            failures.append("rounds not in alternating order: %s" % order)
        loads = re.findall(r"round \d: \S+ \S+: [0-9.]+ s/step, other processes used (\d+) %",
                           p.stderr)
        if len(loads) != 45 or loads.count("40") != 1:
            failures.append("the foreign load of each of the 45 runs not printed: %s" % loads)
        if "left out: sqrt round 1 (40 %)" not in p.stdout:
            failures.append("the disturbed round of sqrt not named as left out")
        # none: 10.0 .. 10.4, median 10.2; sqrt: rounds 2-5 kept, 12.1 .. 12.4
        if not re.search(r"`none` .*\| 10\.20 \(10\.00-10\.40\) \| 1\.000 \(0\.980-1\.020\)",
                         p.stdout):
            failures.append("keep-everything's median and range wrong")
        if not re.search(r"`sqrt` .*\| 12\.25 \(12\.10-12\.40\) \|", p.stdout):
            failures.append("sqrt's median and range do not leave out its disturbed round")
        if os.path.exists(svg):
            failures += ["%s: %s" % (svg, f) for f in svg_check.check(svg)]
            if "170 MiB above the planned peak" not in open(svg).read():
                failures.append("the legend does not state 170 MiB over the planned peak")
        else:
            failures.append("no SVG written")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAIL: " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
