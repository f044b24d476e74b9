#!/usr/bin/env bash
# One lent GPU session in few device calls: bench/gpu.sh's phases in the
# order a session needs them, with the time left counted, a test failure
# diagnosed instead of ending the session, and everything packed into one
# archive under the device tool's $OUT.
#
#   bench/gpu_session.sh STAGE [STAGE...]     (on the GPU machine)
#
# STAGEs, in the order given:
#   tests   build build-gpu, then the GPU tests (gpu.sh gputests) but
#           test_bench_gpu_gpt2 (65 s of the 135 on an H100, 2026-11-27:
#           the f32 and bf16 stages run its script for real; `tests-all`
#           keeps it). Where a
#           test fails, the failing tests run again with each escape switch
#           of the kernels written without a GPU (SWITCHES below), one at a
#           time; the first that makes them pass is kept for the benches
#           (switches.txt), else the two fused-attention switches together,
#           otherwise all of them. Logs: gputests.log,
#           diag-*.log.
#   ab      each switch of AB_SWITCHES (the environment's, else the 1x1
#           backward passes' cuBLAS GEMMs turned off, TF32 off and on:
#           workload resnettf32 is ResNet's with --tf32; the strided
#           ones alone turned off; the stride-1 forwards and input
#           gradients taken to cuBLAS too, TF32 off and on; and
#           BatchNorm's four values a thread turned off) in turn against
#           none,
#           3 interleaved rounds of 6
#           steps, on the workload its path runs: the convolution,
#           BatchNorm and classifier-loss switches (SL_CUDA_CONV_*,
#           SL_CUDA_BN_*, SL_CUDA_XENT_BLOCKS) on ours none, ResNet-152
#           b16 224² with TF32 off
#           (bench_gpu, it/s), the fused attention's dropout switch
#           (SL_CUDA_FLASH_DROPOUT) on GPT-2 small B=8 T=1024 TF32 trained
#           with dropout 0.1 (bench_gpt2 --dropout 0.1, ms a step), the
#           others on the same without dropout; ab.txt says which of the
#           new paths pays (about 10 s a run), ab-<workload>-<switch>.log
#           holds each one's stderr (the ResNet runs' with each geometry's
#           convolution choice, SL_CUDA_CONV_LOG=1). test_cuda_attention's
#           log (gputests.log) times the attention kernels alone, mma.sync
#           and wmma.
#   f32     gpu.sh gpt2 (3 interleaved rounds, within what is left) and
#           kernels (ncu)
#   fp32    ResNet-152 b16 TF32 off under each side's algorithm rules:
#           ours deterministic (the default: 1x1 backward passes as
#           cuBLAS GEMMs; with the stride-1 forwards and input gradients
#           as GEMMs too; with cuDNN for all of them; on PyTorch's cuDNN),
#           non-deterministic (alone; with the GEMMs; with the forward
#           GEMMs too; with engines timed) beside PyTorch plain with its
#           heuristics and with cudnn.benchmark, 3 interleaved rounds
#           (fp32.jsonl, fp32.txt: medians, ratios)
#   bf16    gpu.sh gpt2 with SL_GPT2_PRECISION=bf16, B=8 T=1024, ours none,
#           sqrt (planned at about 0.5x llm.c's peak: the memory target
#           at a small recompute), least:0.02 (2% above the least peak:
#           28% of a step's FLOPs recomputed where the least recomputes
#           124%, CPU plan) and least beside PyTorch autocast and,
#           when SL_GPT2_LLMC names
#           llm.c's train_gpt2cu (built by the user: the project holds none
#           of it), llm.c
#   resnet  gpu.sh resnet, TF32 on and off (SL_RESNET_TF32), none and
#           sqrt, 3 rounds; ours with whatever SL_CUDA_* the environment
#           sets (SL_CUDA_CONV_TUNE=on: the table with engines timed)
#   detail  gpu.sh kdetail: ncu's reasons for the kernels below the
#           memory's pace (LayerNorm's backward first) and for the bf16
#           attention's dK/dV kernel, seven ncu processes of at most 25 s
#   rprofile  gpu.sh profile with TF32 on: ResNet-152's none and sqrt
#           steps by layer type and pass (profile.jsonl, batchnorm_share.txt),
#           to see why sqrt / none was 1.6 with TF32 on (1.18 off)
#   rkernels  gpu.sh rkernels: one ResNet-152 step (none, TF32 off) kernel
#           by kernel under ncu (ncu_resnet.txt), where BatchNorm, ReLU and
#           the loss stand beside cuDNN's convolutions
#   det     gpu.sh det: ResNet-152 b16, TF32 off, ours none and sqrt with
#           cuDNN free to pick non-deterministic algorithms, PyTorch plain
#           and checkpointed held to deterministic ones (det.jsonl): what
#           determinism costs each side where ours is 1.1x PyTorch plain
#           (2026-11-27-e), about a minute
#   shakespeare  gpu.sh shakespeare (needs data/ carried)
# DEADLINE (seconds, default 470) bounds the whole call: each stage gets
# what is left. OUT (the device tool's) receives gpu-session.tgz; the logs
# are written to $SL_SESSION_DIR (/tmp/gpu-session) as they come, so a
# follow-up call on the still-warm machine adds to them.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
final=${OUT:-gpu-out}
dir=${SL_SESSION_DIR:-/tmp/gpu-session}
mkdir -p "$dir" "$final"
export OUT=$dir
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
t0=$SECONDS
left() { echo $((${DEADLINE:-470} - (SECONDS - t0))); }
SWITCHES="SL_CUDA_CONV_GEMM_FWD=off SL_CUDA_CONV_GEMM_STRIDED=off SL_CUDA_CONV_GEMM=off SL_CUDA_BN_VEC=off SL_CUDA_CONV_API=legacy SL_CUDA_BN_RELU=off SL_CUDA_XENT_BLOCKS=off SL_CUDA_XENT_STAGED=off SL_CUDA_COL_PARTS=off SL_CUDA_LN_REGS=off SL_CUDA_FLASH_DROPOUT=off SL_CUDA_FLASH_MMA=off SL_CUDA_FLASH_BF16=off SL_CUDA_FLASH=off SL_CUDA_LT=off SL_CUDA_LT_WORKSPACE_MIB=0 SL_CUDA_BF16_GEMM=off SL_CUDA_BF16_KERNELS=off"
AB_SWITCHES=${AB_SWITCHES:-"SL_CUDA_CONV_GEMM=off SL_CUDA_CONV_GEMM_STRIDED=off SL_CUDA_CONV_GEMM_FWD=on SL_CUDA_BN_VEC=off SL_CUDA_CONV_GEMM=off@resnettf32 SL_CUDA_CONV_GEMM_FWD=on@resnettf32"}
build="build-gpu"
switches() { [ -s "$dir/switches.txt" ] && cat "$dir/switches.txt"; }
# runs "$@" with the kept switches (VAR=VALUE words) in its environment
with_switches() {
  local kept=()
  read -ra kept <<<"$(switches)"
  env "${kept[@]}" "$@"
}

stage_tests() {
  timeout 150 bench/gpu.sh "$build" build > "$dir/session-build.txt" 2>&1
  tail -2 "$dir/session-build.txt"
  local only=()
  [ "${1:-}" = all ] ||
    only=(SL_GPU_TESTS='^(test_cuda.*|test_backend_.*|test_gpt2|test_dist|test_cli)$')
  env ${only[@]+"${only[@]}"} timeout 200 bench/gpu.sh "$build" gputests \
    > "$dir/session-gputests.txt" 2>&1
  grep -E "tests passed|tests failed" "$dir/session-gputests.txt" | tail -2
  local failing
  failing=$(grep -oE "[0-9]+ - test_[a-z0-9_]+ \((Failed|Timeout|SEGFAULT|Subprocess aborted)" \
    "$dir/gputests.log" | awk '{print $3}' | sort -u | paste -sd'|')
  : > "$dir/switches.txt"
  [ -z "$failing" ] && return 0
  echo "failing: $failing"
  for sw in $SWITCHES; do
    # the diagnosis never eats the benches' time: stop with 2 minutes left
    # (the benches then run on the default paths, switches.txt empty)
    if [ "$(left)" -le 120 ]; then
      echo "diagnosis stopped: $(left) s left; benches on the default paths"
      return 0
    fi
    env "$sw" timeout 100 ctest --test-dir "$build" -R "^($failing)\$" --output-on-failure --timeout 90 \
      > "$dir/diag-${sw%%=*}.log" 2>&1
    echo "$sw: $(grep -E 'tests passed|tests failed' "$dir/diag-${sw%%=*}.log" | tail -1)"
    if grep -q "100% tests passed" "$dir/diag-${sw%%=*}.log"; then
      echo "$sw" > "$dir/switches.txt"
      break
    fi
  done
  if [ ! -s "$dir/switches.txt" ]; then
    # no one switch: the two fused-attention switches together (both
    # kernel sets of 2026-11-27 broken), then all of them
    local pair="SL_CUDA_FLASH_MMA=off SL_CUDA_FLASH_BF16=off"
    read -ra words <<<"$pair"
    env "${words[@]}" timeout 100 ctest --test-dir "$build" -R "^($failing)\$" --output-on-failure \
      --timeout 90 > "$dir/diag-pair.log" 2>&1
    echo "$pair: $(grep -E 'tests passed|tests failed' "$dir/diag-pair.log" | tail -1)"
    if grep -q "100% tests passed" "$dir/diag-pair.log"; then
      echo "$pair" > "$dir/switches.txt"
    else
      echo "$SWITCHES" > "$dir/switches.txt"
    fi
  fi
  echo "benches with: $(switches)"
}

# the workload whose time switch $1 changes: resnet (convolutions, BatchNorm),
# gpt2drop (attention dropout) or gpt2; a switch written VAR=VALUE@WORKLOAD
# names its own (SL_CUDA_GRAPHS=on@gpt2: the graphs on GPT-2's step)
ab_workload() {
  case "$1" in
    *@*) echo "${1##*@}" ;;
    SL_CUDA_CONV_* | SL_CUDA_BN_* | SL_CUDA_XENT_BLOCKS=* | SL_CUDA_GRAPHS=*) echo resnet ;;
    SL_CUDA_FLASH_DROPOUT=*) echo gpt2drop ;;
    *) echo gpt2 ;;
  esac
}

# one A/B run: switch $1 (VAR=VALUE, or none) on workload $2; prints its
# measure ("ms_step":N or "it_per_s":N), its stderr to ab-$2-<switch>.log
ab_run() {
  local cmd key log="$dir/ab-$2-${1%%=*}.log" sw=()
  [ "$1" = none ] || sw=("${1%@*}")
  if [ "$2" = resnet ] || [ "$2" = resnettf32 ]; then
    cmd=("$build/bench/bench_gpu" --schedule none --steps 6) key=it_per_s
    [ "$2" = resnettf32 ] && cmd+=(--tf32)
  else
    cmd=("$build/bench/bench_gpt2" --batch 8 --seq 1024 --steps 6 --device cuda --tf32
         --threads 16 --json) key=ms_step
    [ "$2" = gpt2drop ] && cmd+=(--dropout 0.1)
  fi
  with_switches ${sw[@]+"${sw[@]}"} SL_CUDA_CONV_LOG=1 timeout 60 "${cmd[@]}" 2>"$log" |
    grep -o "\"$key\":[0-9.]*"
}

stage_ab() {
  local round workload sw ran
  for round in 1 2 3; do
    for workload in gpt2 gpt2drop resnet resnettf32; do
      ran=0
      for sw in $AB_SWITCHES; do
        [ "$(ab_workload "$sw")" = "$workload" ] || continue
        if [ "$ran" = 0 ]; then # its baseline first, once a round
          [ "$(left)" -gt 20 ] || return 0
          echo "round $round: $workload none $(ab_run none "$workload" || echo failed)" |
            tee -a "$dir/ab.txt"
          ran=1
        fi
        [ "$(left)" -gt 20 ] || return 0
        echo "round $round: $workload $sw $(ab_run "$sw" "$workload" || echo failed)" |
          tee -a "$dir/ab.txt"
      done
    done
  done
}

stage_f32() {
  with_switches SL_GPT2_ROUNDS=3 SL_GPT2_BUDGET_S=$(($(left) - 60)) \
    timeout $(($(left) - 40)) bench/gpu.sh "$build" gpt2 > "$dir/session-gpt2.txt" 2>&1
  grep -E "target|NOT|met" "$dir/session-gpt2.txt" | tail -6
  with_switches SL_NCU_TIMEOUT_S=35 timeout $(($(left) > 5 ? $(left) : 5)) \
    bench/gpu.sh "$build" kernels > "$dir/session-kernels.txt" 2>&1
  head -12 "$dir/ncu_kernels.txt" 2>/dev/null
}

stage_bf16() {
  with_switches SL_GPT2_PRECISION=bf16 SL_GPT2_SHAPES=8x1024 SL_GPT2_SCHEDULES=none,sqrt,least:0.02,least \
    SL_GPT2_MODES=plain SL_GPT2_ROUNDS=3 SL_GPT2_BUDGET_S=$(($(left) - 30)) \
    timeout $(($(left) - 10)) bench/gpu.sh "$build" gpt2 > "$dir/session-gpt2-bf16.txt" 2>&1
  grep -E "target|NOT|met" "$dir/session-gpt2-bf16.txt" | tail -6
}

stage_resnet() {
  with_switches SL_GPU_ROUNDS=3 SL_GPU_STEPS=20 SL_RESNET_TF32="${SL_RESNET_TF32:-on off}" \
    SL_RESNET_SCHEDULES="none sqrt" SL_RESNET_BUDGET_S=$(($(left) - 30)) \
    timeout $(($(left) - 10)) bench/gpu.sh "$build" resnet table > "$dir/session-resnet.txt" 2>&1
  grep -E "target" "$dir/session-resnet.txt" | tail -8
}

stage_detail() {
  # seven kernels, one ncu process each: at most a seventh of what is left
  with_switches SL_NCU_TIMEOUT_S=$(($(left) > 185 ? 25 : ($(left) - 10) / 7)) \
    bench/gpu.sh "$build" kdetail > "$dir/session-detail.txt" 2>&1
  tail -40 "$dir/session-detail.txt"
}

stage_rprofile() {
  with_switches SL_PROFILE_TF32=1 timeout $(($(left) > 10 ? $(left) - 5 : 5)) \
    bench/gpu.sh "$build" profile > "$dir/session-rprofile.txt" 2>&1
  tail -4 "$dir/session-rprofile.txt"
}

stage_rkernels() {
  with_switches SL_NCU_TIMEOUT_S=$(($(left) > 100 ? 90 : $(left) - 10)) \
    bench/gpu.sh "$build" rkernels > "$dir/session-rkernels.txt" 2>&1
  tail -45 "$dir/session-rkernels.txt"
}

stage_tests-all() { stage_tests all; }

stage_det() {
  with_switches timeout $(($(left) > 10 ? $(left) - 5 : 5)) \
    bench/gpu.sh "$build" det > "$dir/session-det.txt" 2>&1
  grep -o '"side":"[a-z]*"\|"schedule":"[a-z]*"\|"mode":"[a-z:0-9]*"\|"it_per_s":[0-9.]*' \
    "$dir/det.jsonl" 2>/dev/null | paste -sd' ' | sed 's/ "side"/\n"side"/g'
}

# the FP32 target (ResNet-152 b16 224², TF32 off, ours none <= 1.0x
# PyTorch plain) under each side's algorithm rules, 3 interleaved rounds
# of 10 steps: ours with deterministic engines (the default: 1x1 filter
# gradients and strided 1x1 input gradients as cuBLAS GEMMs), with the
# stride-1 1x1 forwards and input gradients as GEMMs too
# (SL_CUDA_CONV_GEMM_FWD=on), the same with cuDNN for all of them
# (SL_CUDA_CONV_GEMM=off), the default again on PyTorch's cuDNN (9.19 in
# its wheel beside the system's 9.14, 2026-11-28: the JSON's "cudnn" says
# which one ran), free to take non-deterministic engines, with the GEMMs
# there too (SL_CUDA_CONV_GEMM=all, with and without
# SL_CUDA_CONV_GEMM_FWD=on), and with the
# engines timed (SL_CUDA_CONV_TUNE=on); PyTorch plain with its
# heuristics (its default, non-deterministic algorithms allowed) and with
# cudnn.benchmark. Each entry: variant, schedule (or segments), the
# environment (VAR=VALUE words joined by commas, or -), flags.
# fp32.jsonl, fp32.txt
fp32_cfgs=("ours-det none - " "ours-det-gemmfwd none SL_CUDA_CONV_GEMM_FWD=on "
           "ours-det-cudnn none SL_CUDA_CONV_GEMM=off "
           "ours-det-cudnn919 none LD_LIBRARY_PATH=@torchcudnn "
           "ours-nondet none - --nondeterministic"
           "ours-nondet-gemm none SL_CUDA_CONV_GEMM=all --nondeterministic"
           "ours-nondet-gemmfwd none SL_CUDA_CONV_GEMM=all,SL_CUDA_CONV_GEMM_FWD=on --nondeterministic"
           "ours-nondet-tuned none SL_CUDA_CONV_TUNE=on --nondeterministic"
           "torch-plain 0 - " "torch-plain-benchmark 0 - --benchmark")
stage_fp32() {
  local round c variant arg envs extra torchcudnn
  # the cuDNN in PyTorch's wheel (its lib folder), where there is one
  torchcudnn=$("${PYTHON:-python3}" -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null)
  for round in 1 2 3; do
    for c in "${fp32_cfgs[@]}"; do
      [ "$(left)" -gt 30 ] || break 2
      read -r variant arg envs extra <<<"$c"
      local env_words=()
      if [ "$envs" != - ]; then
        if [ "${envs#*@torchcudnn}" != "$envs" ]; then
          [ -n "$torchcudnn" ] || continue # no PyTorch cuDNN here: the variant is left out
          envs=${envs//@torchcudnn/$torchcudnn:$LD_LIBRARY_PATH}
        fi
        IFS=, read -ra env_words <<<"$envs"
      fi
      if [ "${variant%%-*}" = ours ]; then
        with_switches ${env_words[@]+"${env_words[@]}"} SL_CUDA_CONV_LOG=1 timeout 60 \
          "$build/bench/bench_gpu" --schedule "$arg" --steps 10 ${extra:+$extra} \
          2>"$dir/fp32-$variant-$arg.log"
      else
        timeout 60 "${PYTHON:-python3}" bench/bench_gpu_torch.py --segments "$arg" \
          --steps 10 ${extra:+$extra} 2>"$dir/fp32-$variant.log"
      fi | sed "s/^{/{\"round\":$round,\"variant\":\"$variant\",/" | tee -a "$dir/fp32.jsonl" |
        grep -o '"variant":"[a-z0-9-]*"\|"schedule":"[a-z]*"\|"cudnn": *[0-9]*\|"it_per_s": *[0-9.]*' |
        paste -sd' '
    done
  done
  python3 - "$dir/fp32.jsonl" <<'PY' | tee "$dir/fp32.txt"
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = (r["variant"], r.get("schedule", "plain"))
    runs.setdefault(key, []).append(1000.0 / r["it_per_s"])
med = {k: statistics.median(v) for k, v in runs.items()}
for k, v in runs.items():
    print(f"{k[0]:24s} {k[1]:6s} median {med[k]:6.1f} ms/step, range {min(v):.1f}-{max(v):.1f}, "
          f"{len(v)} rounds")
base = med.get(("torch-plain", "plain"))
for k in med:
    if base and k[0].startswith("ours"):
        print(f"{k[0]} {k[1]} / PyTorch plain (heuristics): {med[k] / base:.3f}")
bench = med.get(("torch-plain-benchmark", "plain"))
tuned = med.get(("ours-nondet-tuned", "none"))
if bench and tuned:
    print(f"ours-nondet-tuned none / PyTorch plain with cudnn.benchmark: {tuned / bench:.3f}")
PY
}

stage_shakespeare() {
  with_switches SL_SHAKESPEARE_TIMEOUT_S=$(($(left) - 10)) \
    bench/gpu.sh "$build" shakespeare > "$dir/session-shakespeare.txt" 2>&1
  tail -15 "$dir/session-shakespeare.txt"
}

[ $# -gt 0 ] || { echo "usage: bench/gpu_session.sh STAGE... (tests tests-all ab f32 fp32 bf16 resnet det detail rprofile rkernels shakespeare)" >&2; exit 2; }
for stage in "$@"; do
  case "$stage" in
    tests | tests-all | ab | f32 | fp32 | bf16 | resnet | det | detail | rprofile | rkernels | shakespeare) ;;
    *) echo "gpu_session.sh: unknown stage '$stage'" >&2; exit 2 ;;
  esac
done
for stage in "$@"; do
  echo "== $stage ($(left) s left)"
  "stage_$stage"
done
tar czf "$final/gpu-session.tgz" -C "$(dirname "$dir")" "$(basename "$dir")"
echo "== done in $((SECONDS - t0)) s: $final/gpu-session.tgz"
