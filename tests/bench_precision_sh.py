#!/usr/bin/env python3
"""bench_precision_sh.py — bench/precision_cpu.sh at a tiny size (registered
in ctest as test_bench_precision_sh), so that the script cannot rot
unnoticed.

    bench_precision_sh.py BENCH_DIR BUILD_DIR

Runs `precision_cpu.sh BUILD_DIR --batch 2 --res 64 --steps 2 --rounds 2`
with the real bench_resnet and Debian's PyTorch (python3), and checks: all
four configurations ran in each round (ours in float and bf16, PyTorch in
float and under autocast) with finite step times; each JSON line says its
precision; ours in bf16 plans a smaller arena than ours in float and
measures the total it planned; the summary prints the four rows and the
ratios.
"""
import json
import math
import os
import subprocess
import sys


def fail(msg, out=""):
    print(out)
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    bench, build = sys.argv[1], sys.argv[2]
    env = dict(os.environ, PYTHON="/usr/bin/python3")  # Debian python3-torch
    p = subprocess.run(["sh", os.path.join(bench, "precision_cpu.sh"), build, "--batch", "2",
                        "--res", "64", "--steps", "2", "--rounds", "2"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
                       env=env)
    out = p.stdout
    print(out)
    if p.returncode != 0:
        fail("precision_cpu.sh exited with %d" % p.returncode)
    runs = {}
    for line in out.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            ours = r["impl"] == "sublinear"
            key = ("ours-" if ours else "torch-") + r["precision"]
            runs.setdefault(key, []).append(r)
    for key in ["ours-f32", "ours-bf16", "torch-f32", "torch-bf16"]:
        if len(runs.get(key, [])) != 2:
            fail("%s ran %d times, not 2" % (key, len(runs.get(key, []))))
        for r in runs[key]:
            if not (math.isfinite(r["s_per_step"]) and r["s_per_step"] > 0):
                fail("%s: step time %r" % (key, r["s_per_step"]))
    for key in ["ours-f32", "ours-bf16"]:
        for r in runs[key]:
            if r["measured_total"] != r["planned_total"]:
                fail("%s measured %d, planned %d" % (key, r["measured_total"], r["planned_total"]))
    if not runs["ours-bf16"][0]["planned_arena"] < runs["ours-f32"][0]["planned_arena"]:
        fail("the bf16 arena is not below the float one")
    for want in ["| ours-f32 |", "| ours-bf16 |", "| torch-f32 |", "| torch-autocast |",
                 "ours bf16 / ours f32, step:", "ours bf16 / torch autocast, step:"]:
        if want not in out:
            fail("the summary lacks %r" % want)
    print("PASS")


if __name__ == "__main__":
    main()
