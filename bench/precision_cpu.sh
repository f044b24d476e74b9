#!/bin/sh
# precision_cpu.sh — float against bf16 training on the CPU, ours and
# PyTorch's, in one job: a ResNet (ResNet-50 by default, batch 16, 224x224,
# schedule none) under bench_resnet --precision f32 and bf16, and PyTorch
# plain in float and under torch.autocast's bfloat16
# (bench_resnet_torch.py --autocast), each configuration in a process of
# its own, for --rounds rounds (every other round in reverse order), then
# the medians and ranges of s/step and the peak RSS.
#
#   bench/precision_cpu.sh [BUILD_DIR] [--depth 50|101|152] [--batch N] [--res N]
#                          [--steps N] [--threads N] [--rounds N]
#
# BUILD_DIR (default ./build) must hold bench/bench_resnet. PYTHON picks
# the interpreter that has torch (default /usr/bin/python3). The JSON
# lines go to stdout first, the summary after them.
set -eu

build=./build
case "${1:-}" in
    ""|-*) ;;
    *) build=$1; shift ;;
esac
depth=50
batch=16
res=224
steps=4
threads=2
rounds=3
while [ $# -gt 0 ]; do
    case "$1" in
        --depth) depth=$2; shift 2 ;;
        --batch) batch=$2; shift 2 ;;
        --res) res=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        *) echo "usage: $0 [BUILD_DIR] [--depth 50|101|152] [--batch N] [--res N] [--steps N]" \
                "[--threads N] [--rounds N]" >&2
           exit 2 ;;
    esac
done
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-/usr/bin/python3}
bin=$build/bench/bench_resnet
[ -x "$bin" ] || { echo "$0: $bin not found (configure with -DSL_BUILD_BENCH=ON)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common="--batch $batch --res $res --steps $steps --threads $threads"

run() { # name, command...
    name=$1
    shift
    if OMP_WAIT_POLICY=passive "$@" --json >"$tmp/run.json" 2>"$tmp/run.err"; then
        cat "$tmp/run.json"
        sed "s/^/$name /" "$tmp/run.json" >>"$tmp/all"
    else
        echo "$0: $name failed:" >&2
        cat "$tmp/run.err" >&2
        exit 1
    fi
}

list="ours-f32 ours-bf16 torch-f32 torch-autocast"
r=1
while [ "$r" -le "$rounds" ]; do
    order=$list
    [ $((r % 2)) -eq 0 ] && order=$(echo "$list" | tr ' ' '\n' | tac | tr '\n' ' ')
    for c in $order; do
        case $c in
            ours-f32) run "$c" "$bin" --model "resnet$depth" $common --precision f32 ;;
            ours-bf16) run "$c" "$bin" --model "resnet$depth" $common --precision bf16 ;;
            torch-f32) run "$c" "$py" "$here/bench_resnet_torch.py" --depth "$depth" $common ;;
            torch-autocast) run "$c" "$py" "$here/bench_resnet_torch.py" --depth "$depth" $common --autocast ;;
        esac
    done
    r=$((r + 1))
done
"$py" - "$tmp/all" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, js = line.split(" ", 1)
    rows.setdefault(name, []).append(json.loads(js))
def med(name, key):
    v = [r[key] for r in rows[name]]
    return statistics.median(v), min(v), max(v)
print()
print("| run | s/step median (range) | peak RSS median MiB | rounds |")
print("|---|---|---|---|")
for name in ["ours-f32", "ours-bf16", "torch-f32", "torch-autocast"]:
    s = med(name, "s_per_step")
    m = med(name, "peak_rss")
    print("| %s | %.3f (%.3f-%.3f) | %.1f | %d |" % (name, s[0], s[1], s[2], m[0] / 2**20, len(rows[name])))
def ratio(a, b):
    ra = sorted(r["s_per_step"] for r in rows[a]); rb = sorted(r["s_per_step"] for r in rows[b])
    return statistics.median(ra) / statistics.median(rb)
print()
print("ours bf16 / ours f32, step: %.3f" % ratio("ours-bf16", "ours-f32"))
print("torch autocast / torch f32, step: %.3f" % ratio("torch-autocast", "torch-f32"))
print("ours bf16 / torch autocast, step: %.3f" % ratio("ours-bf16", "torch-autocast"))
print("ours f32 / torch f32, step: %.3f" % ratio("ours-f32", "torch-f32"))
k = rows["ours-bf16"][0]
print("machine: %s; %s" % (k.get("cpu_model"), k.get("cpu_kernels")))
t = rows["torch-autocast"][0]
print("PyTorch: %s (%s)" % (t.get("impl"), t.get("cpu_capability")))
PY
