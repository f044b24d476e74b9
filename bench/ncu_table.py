#!/usr/bin/env python3
"""ncu_table.py — where a GPU step's time goes, kernel by kernel, from Nsight
Compute's CSV (`ncu --metrics gpu__time_duration.sum --csv ...`): each
kernel's total, calls and mean duration, largest first, with its block and
grid, and the share of the whole. bench/gpu.sh's kernels phase writes
ncu_kernels.txt with it.

    ncu_table.py FILE.csv [--title TEXT] [--top N]

ncu serialises the kernels, flushes the caches between them and fixes the
clocks, so its durations run longer than in a step: read the order and the
shares, not the milliseconds. Lines that are not CSV rows (the profiled
program's own output, ncu's ==PROF== lines) are skipped.
"""
import argparse
import collections
import csv
import sys


def read_rows(path):
    """The CSV rows of ncu's output (dicts by column name)."""
    lines = [x for x in open(path, errors="replace") if x.startswith('"')]
    if not lines:
        return []
    return list(csv.DictReader(lines))


def summarise(rows):
    """[(name, total_ns, calls, block, grid)] largest first; the total."""
    total = collections.OrderedDict()
    calls = collections.Counter()
    shape = {}
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = r["Kernel Name"].split("(")[0].strip()
        if name.startswith("void "):
            name = name[5:]
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "ns")
        v *= {"ns": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}.get(unit, 1.0)
        total[name] = total.get(name, 0.0) + v
        calls[name] += 1
        shape.setdefault(name, (r.get("Block Size", ""), r.get("Grid Size", "")))
    out = [(n, t, calls[n], shape[n][0], shape[n][1]) for n, t in total.items()]
    out.sort(key=lambda x: -x[1])
    return out, sum(total.values())


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--title", default="")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args(argv)
    rows = read_rows(a.csv)
    kernels, total = summarise(rows)
    if not kernels:
        print("ncu_table: no gpu__time_duration rows in %s" % a.csv, file=sys.stderr)
        return 1
    if a.title:
        print(a.title)
    print("%9s %6s %6s %9s  %s" % ("ms total", "share", "calls", "us/call", "block grid kernel"))
    for name, t, n, block, grid in kernels[:a.top]:
        print("%9.3f %5.1f%% %6d %9.1f  %s %s %s" % (t / 1e6, 100 * t / total, n, t / n / 1e3,
                                                      block, grid, name[:110]))
    print("total %.3f ms over %d kernel runs (%d kernels)"
          % (total / 1e6, sum(k[2] for k in kernels), len(kernels)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
