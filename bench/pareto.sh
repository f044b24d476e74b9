#!/bin/sh
# pareto.sh — the memory/time trade-off of ResNet-152 training on the CPU:
# our schedules from keep-everything down to the least memory any
# schedule reaches, and PyTorch plain and checkpoint_sequential, measured
# in this one job; prints a markdown table and writes a Pareto SVG.
#
#   bench/pareto.sh [BUILD_DIR] [--out FILE.svg] [--batch N] [--res N]
#                   [--steps N] [--threads N] [--rounds N] [--quiet-wait S]
#                   [--max-foreign PCT]
#
# BUILD_DIR (default ./build) must hold bench/bench_resnet; PYTHON is the
# interpreter with torch (default /usr/bin/python3). Configurations, one
# process each (peak RSS is per process), interleaved over --rounds rounds
# (default 5), every other round in reverse order:
#
#   ours: none, budget:2GiB, ops:2GiB, budget-third, ops-third (a third of
#   keep-everything's activations), sqrt, least (the least planned peak);
#   PyTorch: plain, checkpoint:K (K = our sqrt segment count)
#
# Each configuration reports the median s/step of its rounds and their
# min-max range. A round in which other processes used more than
# --max-foreign PCT % of the cores (default 10; printed after every run)
# is left out, and the output names it. The SVG (default pareto.svg) plots
# each configuration at its peak RSS (x) against its median s/step over
# our keep-everything's (y), the range as an error bar; the table adds
# planned peaks and the recomputed share of FLOPs and of estimated time,
# and a list of where the measured order contradicts that estimate.
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
rounds=5
quiet_wait=0
max_foreign=10
while [ $# -gt 0 ]; do
    case "$1" in
        --quiet-wait) quiet_wait=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --batch) batch=$2; shift 2 ;;
        --res) res=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --max-foreign) max_foreign=$2; shift 2 ;;
        *) echo "usage: $0 [BUILD_DIR] [--out FILE.svg] [--batch N] [--res N] [--steps N]" \
                "[--threads N] [--rounds N] [--quiet-wait SECONDS] [--max-foreign PCT]" >&2
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

me=pareto.sh
# shellcheck source=bench/rounds.sh
. "$here/rounds.sh"
run_rounds "none:ours:none torch_plain:torch:plain b2g:ours:budget:2GiB o2g:ours:ops:2GiB
bthird:ours:budget-third othird:ours:ops-third sqrt:ours:sqrt torch_ckpt:torch:checkpoint:$k
least:ours:least"
"$py" "$here/pareto.py" "$tmp" "$rounds" "$out" --max-foreign "$max_foreign"
