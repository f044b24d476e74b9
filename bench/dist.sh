#!/bin/sh
# dist.sh — data-parallel training on this machine: ResNet-50 (batch 8 per
# rank, 224x224, 1 thread per rank) on 1 rank and on 2 ranks under
# mpirun, and the 2 ranks again with the overlap off, in this one job.
#
#   bench/dist.sh [BUILD_DIR] [--model M] [--batch N] [--res N] [--steps N]
#                 [--schedule sqrt|none] [--rounds N]
#
# BUILD_DIR (default ./build) must hold bench/bench_dist (a build with
# MPI). Prints a markdown table (per-step time, the time a rank waited
# after backward for its buckets, bytes reduced, other processes' share of
# the cores) and the ratios:
#   scaling efficiency = step time on 1 rank / step time on 2 ranks
#     (the same batch per rank: 1.0 when 2 ranks do twice the work in the
#     same time)
#   hidden             = 1 - exposed with overlap / exposed without overlap
#     where "exposed" is the wait after backward of the rank that arrived
#     last (it waits for no slower rank, only for communication still in
#     flight). Without overlap every bucket is reduced after backward, so
#     that is the whole allreduce time; with overlap, the part not hidden
#     behind backward and re-forward)
# With --rounds N the three runs repeat N times and each keeps its fastest
# round (a shared machine's noise only slows runs down).
set -eu
build=./build
case "${1:-}" in
    ""|-*) ;;
    *) build=$1; shift ;;
esac
model=resnet50 batch=8 res=224 steps=3 schedule=sqrt rounds=1
while [ $# -gt 0 ]; do
    case "$1" in
        --model) model=$2; shift 2 ;;
        --batch) batch=$2; shift 2 ;;
        --res) res=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --schedule) schedule=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        *) echo "usage: $0 [BUILD_DIR] [--model M] [--batch N] [--res N] [--steps N]" \
                "[--schedule sqrt|none] [--rounds N]" >&2
           exit 2 ;;
    esac
done
bench=$build/bench/bench_dist
[ -x "$bench" ] || { echo "no $bench: build with MPI (libopenmpi-dev) and -DSL_BUILD_BENCH=ON" >&2; exit 1; }
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
args="--model $model --batch $batch --res $res --steps $steps --warmup 1 --threads 1 --schedule $schedule"
r=1
while [ "$r" -le "$rounds" ]; do
    mpirun -np 1 "$bench" $args --overlap 1 >>"$out"
    mpirun -np 2 --oversubscribe "$bench" $args --overlap 1 >>"$out"
    mpirun -np 2 --oversubscribe "$bench" $args --overlap 0 >>"$out"
    r=$((r + 1))
done
python3 - "$out" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
best = {}
for j in runs:
    k = (j["ranks"], j["overlap"])
    if k not in best or j["step_s"] < best[k]["step_s"]:
        best[k] = j
one, two, block = best[(1, 1)], best[(2, 1)], best[(2, 0)]
print(f"{one['model']}, batch {one['batch']} per rank, {one['res']}x{one['res']}, "
      f"schedule {one['schedule']}, 1 thread per rank, {len(runs) // 3} round(s)\n")
print("| ranks | overlap | s/step | mean wait s/step | exposed s/step | agree s/step | MiB reduced/step | buckets/step (done during backward) | foreign CPU % |")
print("|---|---|---|---|---|---|---|---|---|")
for j in (one, two, block):
    print(f"| {j['ranks']} | {'on' if j['overlap'] else 'off'} | {j['step_s']:.3f} | {j['wait_s']:.4f} | "
          f"{j['exposed_s']:.4f} | {j['agree_s']:.4f} | {j['reduced_mib']:.1f} | "
          f"{j['buckets']:.0f} ({j['buckets_hidden']:.0f}) | {j['foreign_cpu_pct']:.0f} |")
eff = one["step_s"] / two["step_s"]
hidden = 1 - two["exposed_s"] / block["exposed_s"] if block["exposed_s"] > 0 else float("nan")
print(f"\nscaling efficiency (1 rank / 2 ranks, same batch per rank): {eff:.3f}")
print(f"allreduce time without overlap: {block['exposed_s']:.4f} s/step; exposed with overlap: "
      f"{two['exposed_s']:.4f} s/step; hidden: {100 * hidden:.1f} %")
PY
