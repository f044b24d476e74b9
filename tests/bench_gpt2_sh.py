#!/usr/bin/env python3
"""bench_gpt2_sh.py — bench/gpt2.sh in its smoke mode (registered in ctest
as test_bench_gpt2_sh), so that the script cannot rot unnoticed.

    bench_gpt2_sh.py BENCH_DIR BUILD_DIR

Runs `gpt2.sh BUILD_DIR --smoke`: a tiny GPT-2 (2 layers, C=64, V=512)
through the real bench_gpt2, one step per configuration, ours only (no
PyTorch, no llm.c). Checks that every configuration of ours ran (keep-
everything, budget, sqrt, the long context) with a finite step time, that
the library's measured total equals the planned total in each, that the
checkpointed plans are below keep-everything's, that the profile lines
are printed, and that bench_gpt2_llmc.py's formula gives llm.c's own
activation count at B=4, T=64 (73,347,840 floats, which train_gpt2 prints
as num_activations) and the T x T share at T=1024.
"""
import math
import json
import os
import re
import subprocess
import sys


def fail(msg, out=""):
    print(out)
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    bench, build = sys.argv[1], sys.argv[2]
    p = subprocess.run(["sh", os.path.join(bench, "gpt2.sh"), build, "--smoke"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    out = p.stdout
    print(out)
    if p.returncode != 0:
        fail("gpt2.sh --smoke exited with %d" % p.returncode)
    rows = {}
    for line in out.splitlines():
        m = re.match(r"\| (B=\d+ T=\d+) \| (ours[^|]*) \| ([^|]*) \| ([^|]*) \| ([^|]*) \| "
                     r"([^|]*) \| ([^|]*) \| ([^|]*) \|", line)
        if m:
            rows[(m.group(1), m.group(2).strip())] = m.groups()
    want = [("B=2 T=16", "ours, keep-everything"), ("B=2 T=64", "ours, keep-everything"),
            ("B=2 T=64", "ours, budget"), ("B=2 T=64", "ours, sqrt"),
            ("B=1 T=256", "ours, budget")]
    for key in want:
        if key not in rows:
            fail("no row for %s %s" % key)
        g = rows[key]
        try:
            secs, planned, measured = float(g[3]), float(g[5]), float(g[7])
        except ValueError:
            fail("row %s %s did not run: %s" % (key[0], key[1], g[2]))
        if not (math.isfinite(secs) and secs >= 0):  # the table rounds to 0.01 s
            fail("row %s %s: step time %r" % (key[0], key[1], g[3]))
        if abs(planned - measured) > 0.05:
            fail("row %s %s: planned %.1f MiB, measured %.1f MiB" % (key[0], key[1], planned,
                                                                     measured))
    none = float(rows[("B=2 T=64", "ours, keep-everything")][5])
    for k in ("ours, budget", "ours, sqrt"):
        if not float(rows[("B=2 T=64", k)][5]) < none:
            fail("%s plans no less than keep-everything (%.1f MiB)" % (k, none))
    if "where our" not in out or not re.search(r"- Linear|- Conv1D|- SoftmaxCrossEntropy", out):
        fail("no profile lines")
    if "PyTorch" in out.split("| shape |")[1].split("\n- ")[0].replace("llm.c", ""):
        fail("smoke mode ran PyTorch")

    f = subprocess.run([sys.executable, os.path.join(bench, "bench_gpt2_llmc.py"), "formula",
                        "--batch", "4", "--seq", "64", "--json"], stdout=subprocess.PIPE,
                       check=True, text=True)
    r = json.loads(f.stdout)
    if r["activation_floats"] != 73347840:
        fail("llm.c's activations at B=4 T=64: %d floats, train_gpt2 says 73347840"
             % r["activation_floats"])
    f = subprocess.run([sys.executable, os.path.join(bench, "bench_gpt2_llmc.py"), "formula",
                        "--batch", "4", "--seq", "1024", "--json"], stdout=subprocess.PIPE,
                       check=True, text=True)
    r = json.loads(f.stdout)
    if r["attention_floats"] != 2 * 12 * 4 * 12 * 1024 * 1024:
        fail("llm.c's T x T tensors at T=1024: %d floats" % r["attention_floats"])
    print("OK")


if __name__ == "__main__":
    main()
