#!/bin/sh
# pareto.sh — the memory/time trade-off of ResNet-152 training on the CPU:
# our schedules from keep-everything down to the least memory any
# schedule reaches, and PyTorch plain and checkpoint_sequential, measured
# in this one job; prints a markdown table and writes a Pareto SVG.
#
#   bench/pareto.sh [BUILD_DIR] [--out FILE.svg] [--batch N] [--res N]
#                   [--steps N] [--threads N] [--rounds N] [--quiet-wait S]
#
# BUILD_DIR (default ./build) must hold bench/bench_resnet; PYTHON is the
# interpreter with torch (default /usr/bin/python3). Configurations, one
# process each (peak RSS is per process), every other round in reverse
# order, each keeping its fastest round:
#
#   ours: none, budget:2GiB, ops:2GiB, budget-third, ops-third (a third of
#   keep-everything's activations), sqrt, least (the least planned peak);
#   PyTorch: plain, checkpoint:K (K = our sqrt segment count)
#
# The SVG (default pareto.svg) plots each configuration at its peak RSS
# (x) against its s/step over our keep-everything's (y); the table adds
# planned peaks and the recomputed share of FLOPs and of estimated time.
# Both sides run with OMP_WAIT_POLICY=passive unless it is set: on cores
# other processes use, spinning OpenMP threads slow a step many times
# over (docs/guide.md). --quiet-wait S waits up to S seconds before each
# run for 5 seconds in which the cores are less than 10 % busy.
set -eu
: "${OMP_WAIT_POLICY:=passive}"
export OMP_WAIT_POLICY

build=./build
case "${1:-}" in
    ""|-*) ;;
    *) build=$1; shift ;;
esac
out=pareto.svg
batch=16
res=224
steps=3
threads=2
rounds=1
quiet_wait=0
while [ $# -gt 0 ]; do
    case "$1" in
        --quiet-wait) quiet_wait=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --batch) batch=$2; shift 2 ;;
        --res) res=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        *) echo "usage: $0 [BUILD_DIR] [--out FILE.svg] [--batch N] [--res N] [--steps N]" \
                "[--threads N] [--rounds N] [--quiet-wait SECONDS]" >&2
           exit 2 ;;
    esac
done

here=$(cd "$(dirname "$0")" && pwd)
bin=$build/bench/bench_resnet
py=${PYTHON:-/usr/bin/python3}
if [ ! -x "$bin" ]; then
    echo "pareto.sh: $bin not found; configure $build with -DSL_BUILD_BENCH=ON and build" >&2
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
shape="--batch $batch --res $res"
common="$shape --steps $steps --threads $threads --json"

# shellcheck disable=SC2086
k=$("$bin" --model resnet152 --schedule sqrt $shape --plan-only --json |
    "$py" -c 'import json,sys; print(json.load(sys.stdin)["sqrt_segments"])')

# Busy and idle jiffies of the whole machine (/proc/stat).
jiffies() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6; exit }' /proc/stat; }
wait_quiet() {
    waited=0
    while [ "$waited" -lt "$quiet_wait" ]; do
        # shellcheck disable=SC2046 # two numbers, split on purpose
        set -- $(jiffies)
        sleep 5
        waited=$((waited + 5))
        # shellcheck disable=SC2046
        set -- "$@" $(jiffies)
        if [ $(( ($3 - $1) * 10 < ($3 - $1) + ($4 - $2) )) -eq 1 ]; then
            return 0
        fi
    done
    [ "$quiet_wait" -eq 0 ] || echo "pareto.sh: still busy after ${quiet_wait}s; running" >&2
}

list="none:ours:none torch_plain:torch:plain b2g:ours:budget:2GiB o2g:ours:ops:2GiB
bthird:ours:budget-third othird:ours:ops-third sqrt:ours:sqrt torch_ckpt:torch:checkpoint:$k
least:ours:least"
reversed=$(echo "$list" | tr ' ' '\n' | awk '{ l[NR] = $0 } END { for (i = NR; i > 0; i--) print l[i] }')
r=1
while [ "$r" -le "$rounds" ]; do
    if [ $((r % 2)) -eq 1 ]; then order=$list; else order=$reversed; fi
    for item in $order; do
        name=${item%%:*}
        rest=${item#*:}
        kind=${rest%%:*}
        arg=${rest#*:}
        wait_quiet
        echo "pareto.sh: round $r: $kind $arg" >&2
        # shellcheck disable=SC2086
        if [ "$kind" = ours ]; then
            "$bin" --model resnet152 --schedule "$arg" $common > "$tmp/$name.$r.json" \
                2> "$tmp/$name.$r.err" || cat "$tmp/$name.$r.err" >&2
        else
            "$py" "$here/bench_resnet_torch.py" --depth 152 --mode "$arg" $common \
                > "$tmp/$name.$r.json" 2> "$tmp/$name.$r.err" || cat "$tmp/$name.$r.err" >&2
        fi
    done
    r=$((r + 1))
done
"$py" "$here/pareto.py" "$tmp" "$rounds" "$out"
