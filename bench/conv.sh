#!/bin/sh
# conv.sh — ResNet-50 convolutions: sublinear's CPU kernels against PyTorch,
# both timed in this one job with the same thread count and batch.
#
#   bench/conv.sh [BUILD_DIR] [--threads N] [--batch N] [--reps N] [--rounds N]
#
# BUILD_DIR (default ./build) must hold bench/bench_conv (configure with
# -DSL_BUILD_BENCH=ON); this script builds nothing. PYTHON picks the
# interpreter that has torch (default /usr/bin/python3). Prints both
# per-shape tables side by side and the ratio of total times ours / PyTorch
# (below 1 means we are faster). With --rounds N both programs run N times,
# alternating which goes first, and each shape and pass keeps its fastest
# median over the rounds (on a shared machine this filters out rounds that
# another process disturbed). Each program reports the share of the cores
# other processes used while it ran; both sides, PyTorch most, slow down
# when a thread loses its core.
set -eu

build=./build
case "${1:-}" in
    ""|-*) ;;
    *) build=$1; shift ;;
esac
threads=2
batch=8
reps=5
rounds=1
while [ $# -gt 0 ]; do
    case "$1" in
        --threads) threads=$2; shift 2 ;;
        --batch) batch=$2; shift 2 ;;
        --reps) reps=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        *) echo "usage: $0 [BUILD_DIR] [--threads N] [--batch N] [--reps N] [--rounds N]" >&2
           exit 2 ;;
    esac
done

here=$(cd "$(dirname "$0")" && pwd)
bin=$build/bench/bench_conv
py=${PYTHON:-/usr/bin/python3}
if [ ! -x "$bin" ]; then
    echo "conv.sh: $bin not found; configure $build with -DSL_BUILD_BENCH=ON and build" >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

run_ours() {
    "$bin" --threads "$threads" --batch "$batch" --reps "$reps" --json > "$tmp/ours.$1.json"
}
run_torch() {
    "$py" "$here/bench_conv_torch.py" --threads "$threads" --batch "$batch" --reps "$reps" \
        --json > "$tmp/torch.$1.json"
}
r=1
while [ "$r" -le "$rounds" ]; do
    if [ $((r % 2)) -eq 1 ]; then run_ours "$r"; run_torch "$r"; else run_torch "$r"; run_ours "$r"; fi
    r=$((r + 1))
done

"$py" - "$tmp" "$rounds" <<'EOF'
import json, sys

def merged(kind):
    """Fastest median per shape and pass over the rounds."""
    runs = [json.load(open("%s/%s.%d.json" % (sys.argv[1], kind, r)))
            for r in range(1, int(sys.argv[2]) + 1)]
    best = runs[0]
    for run in runs[1:]:
        for a, b in zip(best["shapes"], run["shapes"]):
            for key in ("fwd_ms", "bwd_data_ms", "bwd_filter_ms"):
                a[key] = min(a[key], b[key])
    t = best["total"]
    for key in ("fwd_ms", "bwd_data_ms", "bwd_filter_ms"):
        t[key] = sum(s["count"] * s[key] for s in best["shapes"])
    t["ms"] = t["fwd_ms"] + t["bwd_data_ms"] + t["bwd_filter_ms"]
    best["foreign_cpu_pct"] = [run.get("foreign_cpu_pct", -1) for run in runs]
    return best

ours, torch = merged("ours"), merged("torch")
passes = (("fwd_ms", "fwd"), ("bwd_data_ms", "bwdD"), ("bwd_filter_ms", "bwdW"))
print("ResNet-50 convolutions, batch %d, %dx%d, %d threads, median of %d, best of %s "
      "round(s); %s vs %s" % (ours["batch"], ours["image"], ours["image"], ours["threads"],
                             ours["reps"], sys.argv[2], ours["impl"], torch["impl"]))
print("ms per call: ours / torch (ratio); totals weight each shape by its count n")
head = "%-24s %3s" % ("c->k kxk/s hw->ohw", "n")
for _, p in passes:
    head += " %22s" % (p + " ours/torch")
head += " %7s %7s" % ("GF/s us", "GF/s pt")
print(head)
for a, b in zip(ours["shapes"], torch["shapes"]):
    assert (a["c"], a["k"], a["hw"], a["kernel"], a["stride"]) == \
           (b["c"], b["k"], b["hw"], b["kernel"], b["stride"]), "shape lists differ"
    geo = "%d->%d %dx%d/%d %d->%d" % (a["c"], a["k"], a["kernel"], a["kernel"], a["stride"],
                                      a["hw"], a["ohw"])
    line = "%-24s %3d" % (geo, a["count"])
    for key, _ in passes:
        line += " %7.2f/%7.2f (%4.2f)" % (a[key], b[key], a[key] / b[key])
    ta = sum(a[k] for k, _ in passes)
    tb = sum(b[k] for k, _ in passes)
    gf = 3 * 2e-6 * a["macs"]
    line += " %7.1f %7.1f" % (gf / ta, gf / tb)
    print(line)
ta, tb = ours["total"], torch["total"]
line = "%-24s %3d" % ("total (weighted)", ta["convs"])
for key, _ in passes:
    line += " %7.0f/%7.0f (%4.2f)" % (ta[key], tb[key], ta[key] / tb[key])
gf = 3 * 2e-6 * ta["macs"]
line += " %7.1f %7.1f" % (gf / ta["ms"], gf / tb["ms"])
print(line)
print("fwd+bwd total: ours %.1f ms, PyTorch %.1f ms, ratio ours/PyTorch %.3f"
      % (ta["ms"], tb["ms"], ta["ms"] / tb["ms"]))
fo, ft = ours["foreign_cpu_pct"], torch["foreign_cpu_pct"]
print("other processes' share of the cores while timing, per round: ours %s, PyTorch %s"
      % (" ".join("%.0f%%" % f for f in fo), " ".join("%.0f%%" % f for f in ft)))
if min(fo) > 5 or min(ft) > 5:
    print("WARNING: the machine was busy in every round; both sides (PyTorch most) slow "
          "down when their threads lose a core. Re-run on an idle machine or with more "
          "--rounds.")
EOF
