#!/bin/sh
# gpt2.sh — GPT-2 small training on the CPU, ours against PyTorch with
# Hugging Face's GPT2LMHeadModel (SDPA attention) and against llm.c's
# train_gpt2, in one job, printing step times, peak RSS of every side and
# the ratios issue 21's targets are stated in.
#
#   bench/gpt2.sh [BUILD_DIR] [--llmc-bin PATH] [--steps N] [--mid-steps N] [--long-steps N]
#                 [--threads N] [--no-long] [--smoke] [--out DIR] [--table-only DIR]
#                 [--only NAME,NAME...]
#
# BUILD_DIR (default ./build) must hold bench/bench_gpt2 (configure with
# -DSL_BUILD_BENCH=ON); this script builds nothing. PYTHON is the
# interpreter with torch and transformers (PyPI torch 2.x: Debian's 1.13
# has no transformers); where it cannot import them the PyTorch rows say
# SKIPPED and the rest runs. --llmc-bin names a train_gpt2 binary the user
# built from karpathy/llm.c themselves; bench_gpt2_llmc.py writes its
# inputs (a seeded random gpt2_124M.bin and token shards) into a scratch
# folder and runs it there at its built-in B=4, T=64 (needs numpy, taken
# from SYS_PYTHON, default /usr/bin/python3). Each configuration runs in a
# process of its own (peak RSS is per process):
#
#   B=4 T=64:     ours none, PyTorch plain, PyTorch checkpointed, llm.c
#   B=4 T=1024:   ours none, ours budget (fixed memory + a fifth of
#                 keep-everything's activation arena: near the least
#                 planned peak, 2163 MiB), ours sqrt, PyTorch plain and
#                 checkpointed (gradient_checkpointing_enable); llm.c's
#                 memory there from its activation formula, not run
#   B=1 T=16384:  --context 16384, ours under budget:3800MiB, PyTorch
#                 checkpointed (--no-long skips both)
#   profile:      ours none at B=4 T=64 again with per-layer-type timing
#
# --steps N (default 3: a warm-up and 2 measured) applies at T=64,
# --mid-steps N (default 2) at T=1024, --long-steps N (default 1: the
# warm-up step's own time) at T=16384; llm.c always takes --steps + 1 of its steps. --smoke runs a
# tiny GPT-2 (2 layers, C=64, V=512), 1 step, ours only, to check the
# script itself (tests/test_bench_gpt2_sh). --out DIR keeps every run's
# JSON in DIR (else a temporary folder); --table-only DIR prints the table
# from such a folder without running anything (for a job cut short);
# --only runs just the named configurations (ours_64, torch_64,
# torch_ckpt_64, llmc_64, ours_1024, ours_budget_1024, ours_sqrt_1024,
# torch_1024, torch_ckpt_1024, ours_prof_64, ours_long, torch_ckpt_long),
# into --out's folder beside earlier ones.
set -eu

build=./build
case "${1:-}" in
    ""|-*) ;;
    *) build=$1; shift ;;
esac
llmc=
steps=3
mid_steps=2
long_steps=1
threads=2
long=1
smoke=0
out=
table_only=
only=
while [ $# -gt 0 ]; do
    case "$1" in
        --llmc-bin) llmc=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --mid-steps) mid_steps=$2; shift 2 ;;
        --long-steps) long_steps=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --no-long) long=0; shift ;;
        --smoke) smoke=1; shift ;;
        --out) out=$2; shift 2 ;;
        --table-only) table_only=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        *) echo "usage: $0 [BUILD_DIR] [--llmc-bin PATH] [--steps N] [--mid-steps N] [--long-steps N]" \
                "[--threads N] [--no-long] [--smoke] [--out DIR] [--table-only DIR]" \
                "[--only NAME,NAME...]" >&2
           exit 2 ;;
    esac
done

here=$(cd "$(dirname "$0")" && pwd)
bin=$build/bench/bench_gpt2
py=${PYTHON:-/usr/bin/python3}
syspy=${SYS_PYTHON:-/usr/bin/python3}
if [ -z "$table_only" ] && [ ! -x "$bin" ]; then
    echo "gpt2.sh: $bin not found; configure $build with -DSL_BUILD_BENCH=ON and build" >&2
    exit 1
fi

if [ -n "$table_only" ]; then
    tmp=$table_only
elif [ -n "$out" ]; then
    mkdir -p "$out"
    tmp=$out
else
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT INT TERM
fi

if [ "$smoke" -eq 1 ]; then
    model="--layers 2 --embd 64 --heads 4 --vocab 512 --context 64"
    short="--batch 2 --seq 16"
    mid="--batch 2 --seq 64"
    longm="--layers 2 --embd 64 --heads 4 --vocab 512 --context 256"
    longs="--batch 1 --seq 256"
    budget_mid=budget-arena:0.9
    budget_long=budget-arena:0.9
    steps=1
    mid_steps=1
    long_steps=1
    torch=0
    llmc=
else
    model=
    short="--batch 4 --seq 64"
    mid="--batch 4 --seq 1024"
    longm="--context 16384"
    longs="--batch 1 --seq 16384"
    budget_mid=budget-arena:0.2
    budget_long=budget:3800MiB
    torch=1
fi

me=gpt2.sh
echo "$me: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# run NAME KIND ARGS...: one process, its JSON in $tmp/NAME.json; a failure
# is recorded (its last error line), not fatal.
run() {
    name=$1 kind=$2
    shift 2
    case ",$only," in
        ,,|*",$name,"*) ;;
        *) return 0 ;;
    esac
    echo "$me: $name ($kind $*), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    case "$kind" in
        ours) set -- "$bin" "$@" --threads "$threads" --json ;;
        torch) set -- "$py" "$here/bench_gpt2_torch.py" "$@" --threads "$threads" --json ;;
        llmc) set -- "$syspy" "$here/bench_gpt2_llmc.py" run --bin "$llmc" "$@" \
                  --threads "$threads" --json ;;
    esac
    "$@" > "$tmp/$name.json" 2> "$tmp/$name.err" || tail -3 "$tmp/$name.err" >&2
    "$syspy" -c 'import json, sys
try:
    r = json.load(open(sys.argv[1]))
    if "skipped" in r:
        print("%s: %s" % (sys.argv[2], r["skipped"]))
    else:
        print("%s: %s: %.3f s/step, peak RSS %.1f MiB, other processes used %.0f %% of the cores"
              % (sys.argv[2], sys.argv[3], r["s_per_step"], r["peak_rss"] / 1048576.0,
                 r.get("foreign_cpu_pct", -1)))
except (OSError, ValueError, KeyError):
    pass' "$tmp/$name.json" "$me" "$name" >&2
}

# shellcheck disable=SC2086 # the option lists split on purpose
[ -n "$table_only" ] || {
    run ours_64 ours $model $short --schedule none --steps "$steps"
    [ "$torch" -eq 0 ] || run torch_64 torch $model $short --mode plain --steps "$steps"
    [ "$torch" -eq 0 ] || run torch_ckpt_64 torch $model $short --mode checkpoint --steps "$steps"
    [ -z "$llmc" ] || run llmc_64 llmc --steps $((steps + 1))
    run ours_1024 ours $model $mid --schedule none --steps "$mid_steps"
    run ours_budget_1024 ours $model $mid --schedule "$budget_mid" --steps "$mid_steps"
    run ours_sqrt_1024 ours $model $mid --schedule sqrt --steps "$mid_steps"
    [ "$torch" -eq 0 ] || run torch_1024 torch $model $mid --mode plain --steps "$mid_steps"
    [ "$torch" -eq 0 ] || run torch_ckpt_1024 torch $model $mid --mode checkpoint --steps "$mid_steps"
    run ours_prof_64 ours $model $short --schedule none --steps "$((steps > 1 ? steps : 2))" \
        --profile
    if [ "$long" -eq 1 ]; then
        run ours_long ours $longm $longs --schedule "$budget_long" --steps "$long_steps"
        # under an 18 GiB address-space limit, so that a run that does not
        # fit fails in PyTorch's allocator instead of waking the OOM killer
        # shellcheck disable=SC3045 # dash and bash have ulimit -v
        [ "$torch" -eq 0 ] || (ulimit -v 18874368
                               run torch_ckpt_long torch $longm $longs --mode checkpoint \
                                   --steps "$long_steps")
    fi
}
"$syspy" "$here/bench_gpt2_llmc.py" formula --batch 4 --seq 1024 --json > "$tmp/llmc_1024.json"
[ -n "$table_only" ] || echo "$me: done $(date -u '+%H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

"$syspy" - "$tmp" "$smoke" <<'EOF'
import json, os, sys

tmp, smoke = sys.argv[1], sys.argv[2] == "1"
M = 1048576.0


def load(name):
    try:
        with open(os.path.join(tmp, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        try:
            err = open(os.path.join(tmp, name + ".err")).read().strip()
        except OSError:
            return None  # not run
        return {"error": err.splitlines()[-1] if err else "failed"}


def ok(*xs):
    return all(x is not None and "error" not in x and "skipped" not in x for x in xs)


R = {k: load(k) for k in ("ours_64", "torch_64", "torch_ckpt_64", "llmc_64", "ours_1024",
                          "ours_budget_1024", "ours_sqrt_1024", "torch_1024", "torch_ckpt_1024",
                          "ours_long", "torch_ckpt_long", "ours_prof_64", "llmc_1024")}
rows = [("B=4 T=64", "ours, keep-everything", "ours_64"),
        ("B=4 T=64", "PyTorch + HF plain", "torch_64"),
        ("B=4 T=64", "PyTorch + HF gradient_checkpointing", "torch_ckpt_64"),
        ("B=4 T=64", "llm.c train_gpt2", "llmc_64"),
        ("B=4 T=1024", "ours, keep-everything", "ours_1024"),
        ("B=4 T=1024", "ours, budget", "ours_budget_1024"),
        ("B=4 T=1024", "ours, sqrt", "ours_sqrt_1024"),
        ("B=4 T=1024", "PyTorch + HF plain", "torch_1024"),
        ("B=4 T=1024", "PyTorch + HF gradient_checkpointing", "torch_ckpt_1024"),
        ("B=1 T=16384", "ours, budget", "ours_long"),
        ("B=1 T=16384", "PyTorch + HF gradient_checkpointing", "torch_ckpt_long")]
first = R["ours_64"] if ok(R["ours_64"]) else {}
print("GPT-2%s (L=%s C=%s V=%s), AdamW (lr 1e-4, weight decay 0) on every side, %s threads; "
      "s/step = median of the steps after a warm-up (the warm-up itself where only one "
      "step ran)" % (" (smoke config)" if smoke else " small", first.get("layers"),
                     first.get("embd"), first.get("vocab"), first.get("threads")))
print()
print("| shape | run | schedule / mode | s/step | warm-up s | planned total MiB | planned "
      "activations MiB | library measured MiB | peak RSS MiB | recompute % | foreign CPU % |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for shape, name, key in rows:
    r = R[key]
    if r is None:
        continue
    if "batch" in r and "seq" in r:
        shape = "B=%d T=%d" % (r["batch"], r["seq"])
    if "error" in r or "skipped" in r:
        print("| %s | %s | %s | | | | | | | | |" % (
            shape, name, r.get("error", r.get("skipped")).replace("|", "/")))
        continue
    mode = r.get("schedule") or r.get("mode") or "built-in"
    if r["impl"] == "sublinear":
        mode = "`%s` (%.0f MiB)" % (mode, r["budget_bytes"] / M) if r["budget_bytes"] else \
            "`%s`" % mode
        print("| %s | %s | %s | %.2f | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f | %.0f |" % (
            shape, name, mode, r["s_per_step"], r["warmup_s"], r["planned_total"] / M,
            r["planned_arena"] / M, r["measured_total"] / M, r["peak_rss"] / M,
            100 * r["recompute_fraction"], r["foreign_cpu_pct"]))
    else:
        print("| %s | %s | %s | %.2f | %.2f | | | | %.1f | | %s |" % (
            shape, name, mode, r["s_per_step"], r["warmup_s"], r["peak_rss"] / M,
            "%.0f" % r["foreign_cpu_pct"] if "foreign_cpu_pct" in r else ""))
f = R["llmc_1024"]
print("| B=4 T=1024 | llm.c (its formula, not run) | | | | %.1f | %.1f + %.1f for their "
      "gradients | | | | |" % (f["total_bytes"] / M, f["activation_bytes"] / M,
                               f["activation_grad_bytes"] / M))
print()


def verdict(c):
    return "met" if c else "NOT met"


def ratio(a, b, key):
    return a[key] / b[key]


o, t, tc, l = R["ours_64"], R["torch_64"], R["torch_ckpt_64"], R["llmc_64"]
if ok(o, t):
    r = ratio(o, t, "s_per_step")
    print("- T=64: ours / PyTorch plain: s/step %.3f (target <= 0.9: %s), peak RSS %.3f "
          "(%.0f vs %.0f MiB)" % (r, verdict(r <= 0.9), ratio(o, t, "peak_rss"),
                                  o["peak_rss"] / M, t["peak_rss"] / M))
if ok(o, tc):
    print("- T=64: ours / PyTorch checkpointed: s/step %.3f, peak RSS %.3f"
          % (ratio(o, tc, "s_per_step"), ratio(o, tc, "peak_rss")))
if ok(o, l):
    r = ratio(o, l, "s_per_step")
    print("- T=64: ours / llm.c: s/step %.3f (target <= 0.4: %s), peak RSS %.3f "
          "(%.0f vs %.0f MiB)" % (r, verdict(r <= 0.4), ratio(o, l, "peak_rss"),
                                  o["peak_rss"] / M, l["peak_rss"] / M))
if ok(o):
    g = o["peak_rss"] / M / 1024
    print("- T=64: our peak RSS %.2f GiB (target <= 2.1 GiB: %s)" % (g, verdict(g <= 2.1)))
n, b, s = R["ours_1024"], R["ours_budget_1024"], R["ours_sqrt_1024"]
tp, tk = R["torch_1024"], R["torch_ckpt_1024"]
for label, x in (("budget", b), ("sqrt", s)):
    if ok(n, x):
        r = ratio(x, n, "s_per_step")
        print("- T=1024: ours %s / ours plain: s/step %.3f (target <= 1.3: %s), planned total "
              "%.1f vs %.1f MiB (%.2f GiB; issue's <= 2.5 GiB: %s), peak RSS %.3f"
              % (label, r, verdict(r <= 1.3), x["planned_total"] / M, n["planned_total"] / M,
                 x["planned_total"] / M / 1024, verdict(x["planned_total"] <= 2.5 * 1024 * M),
                 ratio(x, n, "peak_rss")))
    if ok(x, tk):
        r = ratio(x, tk, "peak_rss")
        print("- T=1024: ours %s / PyTorch checkpointed: peak RSS %.3f (%.0f vs %.0f MiB; "
              "target <= 0.5: %s), s/step %.3f" % (label, r, x["peak_rss"] / M,
                                                   tk["peak_rss"] / M, verdict(r <= 0.5),
                                                   ratio(x, tk, "s_per_step")))
if ok(n, tp):
    print("- T=1024: ours plain / PyTorch plain: s/step %.3f, peak RSS %.3f (%.0f vs %.0f MiB)"
          % (ratio(n, tp, "s_per_step"), ratio(n, tp, "peak_rss"), n["peak_rss"] / M,
             tp["peak_rss"] / M))
if ok(tp, tk):
    print("- T=1024: PyTorch checkpointed / plain: s/step %.3f, peak RSS %.3f"
          % (ratio(tk, tp, "s_per_step"), ratio(tk, tp, "peak_rss")))
if ok(n):
    print("- T=1024: ours keep-everything activation arena %.1f MiB vs llm.c's activations "
          "%.1f MiB (+ %.1f MiB of their gradients) by its formula; llm.c's total %.1f MiB"
          % (n["none_planned_arena"] / M, f["activation_bytes"] / M,
             f["activation_grad_bytes"] / M, f["total_bytes"] / M))
lo, lt = R["ours_long"], R["torch_ckpt_long"]
if ok(lo):
    g = max(lo["planned_total"], lo["measured_total"], lo["peak_rss"]) / M / 1024
    print("- T=16384: ours planned %.1f MiB, measured by the library %.1f MiB, peak RSS %.1f "
          "MiB (target <= 4 GiB: %s), %.1f s/step" % (
              lo["planned_total"] / M, lo["measured_total"] / M, lo["peak_rss"] / M,
              verdict(g <= 4.0), lo["s_per_step"]))
if ok(lt):
    print("- T=16384: PyTorch checkpointed + SDPA peak RSS %.1f MiB, %.1f s/step"
          % (lt["peak_rss"] / M, lt["s_per_step"]))
    if ok(lo):
        print("- T=16384: ours / PyTorch checkpointed: peak RSS %.3f, s/step %.3f"
              % (ratio(lo, lt, "peak_rss"), ratio(lo, lt, "s_per_step")))
elif lt is not None and "error" in lt:
    print("- T=16384: PyTorch checkpointed did not finish: %s" % lt["error"])
p = R["ours_prof_64"]
if ok(p) and p.get("profile"):
    tot = sum(e["s_per_step"] for e in p["profile"])
    print("- where our T=64 step goes (one more step, profiled, after the measured ones at "
          "%.2f s/step):" % p["s_per_step"])
    for e in p["profile"][:8]:
        print("  - %s %s: %.3f s/step (%.0f %%)" % (e["layer"], e["pass"], e["s_per_step"],
                                                  100 * e["s_per_step"] / tot if tot else 0))
busy = [R[k]["foreign_cpu_pct"] for k in R if ok(R[k]) and "foreign_cpu_pct" in R[k]]
if busy and max(busy) > 5:
    print("- WARNING: other processes used up to %.0f %% of the cores during the runs; step "
          "times are inflated and ratios noisy" % max(busy))
EOF
