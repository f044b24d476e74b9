#!/bin/sh
# resnet152.sh — ResNet-152 training on the CPU: memory against speed for
# keep-everything, sqrt and budget schedules, and PyTorch plain and
# checkpoint_sequential with sqrt's segment count, all in this one job.
#
#   bench/resnet152.sh [BUILD_DIR] [--batch N] [--res N] [--steps N] [--threads N]
#                      [--rounds N] [--quiet-wait SECONDS]
#
# BUILD_DIR (default ./build) must hold bench/bench_resnet (configure with
# -DSL_BUILD_BENCH=ON); this script builds nothing. PYTHON picks the
# interpreter that has torch (default /usr/bin/python3). Each
# configuration runs in a process of its own (peak RSS is per process),
# ours and PyTorch's alternating:
#
#   ours none, torch plain, ours sqrt, torch checkpoint:K (K = our sqrt
#   segment count, ceil(sqrt(top-level layers)) = 8 for ResNet-152),
#   ours budget-half (half of keep-everything's planned total), ours
#   budget:<sqrt's planned total> (the budget search at sqrt's memory), ours
#   least (the least planned peak any schedule reaches)
#
# and prints a markdown table (planned peak, the library's measured peak,
# peak RSS, the RSS before the first step, s/step as the median of the
# steps after a warm-up, recomputed FLOPs, other processes' share of the
# cores), the machine (CPU model, what sublinear's CPU kernels and
# PyTorch's dispatch to, OPENBLAS_CORETYPE), then the ratios the targets
# are stated in, on the medians of the rounds with their ranges. With --rounds N
# the whole list runs N times, every other round in reverse order, and
# each configuration keeps its fastest round's s/step and its largest peak
# RSS (on a shared machine this filters out runs another process slowed).
# With --quiet-wait S each run first waits, up to S seconds, for a 5-second
# window in which the machine's cores are less than 10 % busy (it then
# starts anyway and the foreign CPU column shows what it met).
# Defaults: batch 16, 224x224, 4 steps, 2 threads, 1 round; for a quick
# smoke run use --batch 2 --res 64 (budget-half then does not fit:
# parameters, gradients and momentum alone exceed half of keep-everything,
# and its row says so).
set -eu

build=./build
case "${1:-}" in
    ""|-*) ;;
    *) build=$1; shift ;;
esac
batch=16
res=224
steps=4
threads=2
rounds=1
quiet_wait=0
while [ $# -gt 0 ]; do
    case "$1" in
        --batch) batch=$2; shift 2 ;;
        --res) res=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --quiet-wait) quiet_wait=$2; shift 2 ;;
        *) echo "usage: $0 [BUILD_DIR] [--batch N] [--res N] [--steps N] [--threads N]" \
                "[--rounds N] [--quiet-wait SECONDS]" >&2
           exit 2 ;;
    esac
done

here=$(cd "$(dirname "$0")" && pwd)
bin=$build/bench/bench_resnet
py=${PYTHON:-/usr/bin/python3}
if [ ! -x "$bin" ]; then
    echo "resnet152.sh: $bin not found; configure $build with -DSL_BUILD_BENCH=ON and build" >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
shape="--batch $batch --res $res"
common="$shape --steps $steps --threads $threads --json"

# sqrt's segment count and planned total: planning runs no kernel.
field() { # field KEY < JSON
    "$py" -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}
# shellcheck disable=SC2086
"$bin" --model resnet152 --schedule sqrt $shape --plan-only --json > "$tmp/plan.json"
k=$(field sqrt_segments < "$tmp/plan.json")
sqrt_total=$(field planned_total < "$tmp/plan.json")

me=resnet152.sh
# shellcheck source=bench/rounds.sh
. "$here/rounds.sh"
run_rounds "none:ours:none torch_plain:torch:plain sqrt:ours:sqrt torch_ckpt:torch:checkpoint:$k
budget_half:ours:budget-half budget_sqrt:ours:budget:$sqrt_total least:ours:least"

"$py" - "$tmp" "$rounds" <<'EOF'
import json, os, statistics, sys

tmp = sys.argv[1]
rounds = int(sys.argv[2])


def load_one(name, r):
    path = os.path.join(tmp, "%s.%d.json" % (name, r))
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        try:
            err = open(os.path.join(tmp, "%s.%d.err" % (name, r))).read().strip()
        except OSError:
            err = ""
        return {"error": err.splitlines()[-1] if err else "failed"}


def load(name):
    """The fastest round's record, with the largest peak RSS of all rounds
    and every round's s/step and foreign CPU share."""
    runs = [load_one(name, r) for r in range(1, rounds + 1)]
    good = [x for x in runs if "error" not in x]
    if not good:
        return runs[0]
    best = dict(min(good, key=lambda x: x["s_per_step"]))
    best["peak_rss"] = max(x["peak_rss"] for x in good)
    best["all_s"] = [x["s_per_step"] for x in good]
    best["all_foreign"] = [x["foreign_cpu_pct"] for x in good]
    return best


runs = [("ours, keep-everything (none)", load("none")),
        ("ours, sqrt", load("sqrt")),
        ("ours, budget = half of none's planned total", load("budget_half")),
        ("ours, budget = sqrt's planned total", load("budget_sqrt")),
        ("ours, the least planned peak (least)", load("least")),
        ("PyTorch plain", load("torch_plain")),
        ("PyTorch checkpoint_sequential", load("torch_ckpt"))]
R = dict(zip(("none", "sqrt", "half", "bsqrt", "least", "tplain", "tckpt"), (r for _, r in runs)))
M = 1048576.0
first = next(r for _, r in runs if "error" not in r)
print("ResNet-152, batch %d, %dx%d, %d threads, s/step = median of %d steps after a warm-up, "
      "fastest of %d round(s); %s vs %s" % (
          first["batch"], first["res"], first["res"], first["threads"], first["steps"] - 1,
          rounds, R["none"].get("impl", "sublinear"), R["tplain"].get("impl", "pytorch")))
ours = next((r for _, r in runs if "error" not in r and r["impl"] == "sublinear"), None)
if ours and "cpu_model" in ours:
    print("machine: %s; sublinear's CPU kernels: %s; OPENBLAS_CORETYPE=%s; PyTorch's CPU "
          "capability: %s" % (ours["cpu_model"], ours["cpu_kernels"],
                              ours["openblas_coretype"] or "(unset)",
                              R["tplain"].get("cpu_capability", "?")))
print()
print("| config | recomputed segments | planned peak MiB | library measured MiB | "
      "peak RSS MiB | RSS before step 1 MiB | s/step (each round) | recompute % | "
      "foreign CPU % (each round) |")
print("|---|---|---|---|---|---|---|---|---|")


def rounds_of(r, key, fmt):
    return " ".join(fmt % v for v in r[key])


for name, r in runs:
    if "error" in r:
        print("| %s | %s | | | | | | | |" % (name, r["error"].replace("|", "/")))
        continue
    secs = "%.2f" % r["s_per_step"]
    if rounds > 1:
        secs += " (%s)" % rounds_of(r, "all_s", "%.2f")
    foreign = rounds_of(r, "all_foreign", "%.0f")
    if r["impl"] == "sublinear":
        print("| %s `%s` | %d | %.1f | %.1f | %.1f | %.1f | %s | %.1f | %s |" % (
            name, r["schedule"], r["recomputed_segments"], r["planned_total"] / M,
            r["measured_total"] / M, r["peak_rss"] / M, r["rss_baseline"] / M, secs,
            100 * r["recompute_fraction"], foreign))
    else:
        # checkpoint_sequential does not recompute its last chunk.
        print("| %s `%s` | %d | | | %.1f | %.1f | %s | | %s |" % (
            name, r["mode"], max(r["segments"] - 1, 0), r["peak_rss"] / M,
            r["rss_baseline"] / M, secs, foreign))
print()


def ok(*xs):
    return all("error" not in x for x in xs)


def verdict(cond):
    return "met" if cond else "NOT met"


n, s, h, b = R["none"], R["sqrt"], R["half"], R["bsqrt"]
tp, tc = R["tplain"], R["tckpt"]
if ok(n, s):
    pr = s["planned_total"] / n["planned_total"]
    rr = s["peak_rss"] / n["peak_rss"]
    print("- sqrt / none peak: planned %.1f %%, peak RSS %.1f %% (target <= 40 %%: %s)"
          % (100 * pr, 100 * rr, verdict(max(pr, rr) <= 0.40)))
if ok(s, tc):
    r = s["peak_rss"] / tc["peak_rss"]
    print("- ours sqrt / PyTorch checkpoint_sequential peak RSS: %.3f (%.0f vs %.0f MiB; "
          "target < 1: %s)" % (r, s["peak_rss"] / M, tc["peak_rss"] / M, verdict(r < 1)))


def med(x):
    return statistics.median(x["all_s"])


for name, x in (("sqrt", s), ("budget-half", h), ("budget at sqrt's total", b)):
    if ok(n, x):
        t = x["s_per_step"] / n["s_per_step"]
        tm = med(x) / med(n)
        print("- %s / none: s/step %.3f fastest round to fastest (target <= 1.25: %s), %.3f "
              "median round to median; planned peak %.1f %%, peak RSS %.1f %%, recompute "
              "%.1f %%" % (name, t, verdict(t <= 1.25), tm,
                           100 * x["planned_total"] / n["planned_total"],
                           100 * x["peak_rss"] / n["peak_rss"], 100 * x["recompute_fraction"]))
if ok(s, b):
    d = b["recompute_fraction"] - s["recompute_fraction"]
    how = ("less" if d < -1e-4 else "more" if d > 1e-4 else
           "the same (the search returned sqrt's schedule)")
    print("- budget at sqrt's memory vs sqrt: planned %.1f vs %.1f MiB, recompute %.1f vs "
          "%.1f %% (%s), s/step %.2f vs %.2f"
          % (b["planned_total"] / M, s["planned_total"] / M, 100 * b["recompute_fraction"],
             100 * s["recompute_fraction"], how, b["s_per_step"], s["s_per_step"]))
if ok(n, tp):
    print("- ours none / PyTorch plain: s/step %.3f (median rounds %.3f), peak RSS %.3f"
          % (n["s_per_step"] / tp["s_per_step"], med(n) / med(tp),
             n["peak_rss"] / tp["peak_rss"]))
if ok(s, tc):
    print("- ours sqrt / PyTorch checkpoint_sequential: s/step %.3f (median rounds %.3f)"
          % (s["s_per_step"] / tc["s_per_step"], med(s) / med(tc)))
if ok(tp, tc):
    print("- PyTorch checkpoint / plain: peak RSS %.1f %%, s/step %.3f (median rounds %.3f)"
          % (100 * tc["peak_rss"] / tp["peak_rss"], tc["s_per_step"] / tp["s_per_step"],
             med(tc) / med(tp)))


def spread(x):
    return "median %.2f s, range %.2f-%.2f" % (med(x), min(x["all_s"]), max(x["all_s"]))


# The CPU targets (issue 35), on medians of the rounds.
if ok(n, tp):
    t, m = med(n) / med(tp), n["peak_rss"] / tp["peak_rss"]
    print("- target: ours none <= 0.8x PyTorch plain's step at <= 0.8x its RSS: %.3f (%s vs %s), "
          "RSS %.3f: %s" % (t, spread(n), spread(tp), m, verdict(t <= 0.8 and m <= 0.8)))
if ok(s, tc):
    t, m = med(s) / med(tc), s["peak_rss"] / tc["peak_rss"]
    print("- target: ours sqrt <= 0.8x PyTorch checkpointed's step at <= 0.6x its RSS: %.3f "
          "(%s vs %s), RSS %.3f: %s" % (t, spread(s), spread(tc), m,
                                        verdict(t <= 0.8 and m <= 0.6)))
if ok(n, R["least"]):
    le = R["least"]
    t = med(le) / med(n)
    print("- target: the least-memory schedule <= 1.3x ours none: %.3f (%s; planned peak %.1f "
          "MiB, %.1f %% of none's, recompute %.1f %%): %s"
          % (t, spread(le), le["planned_total"] / M,
             100 * le["planned_total"] / n["planned_total"], 100 * le["recompute_fraction"],
             verdict(t <= 1.3)))
busy = [min(r["all_foreign"]) for _, r in runs if "error" not in r]
if busy and max(busy) > 5:
    print("- WARNING: other processes used up to %.0f %% of the cores during every round of "
          "some configuration; its s/step is inflated (re-run on an idle machine or with more "
          "--rounds)" % max(busy))
EOF
