#!/usr/bin/env bash
# (bench/gpu_session.sh runs these phases for a lent session in few calls,
# diagnosing a failing test with the escape switches below.)
# One command for a GPU machine: builds the library with the CUDA backend
# (sm_90), runs the tests (test_cuda compares every layer with the CPU
# backend, checks bit-identical checkpointing, the device memory against
# the plan and the device errors on the GPU), then GPT-2 small beside
# PyTorch (Hugging Face's GPT2LMHeadModel) and memonger's headline:
# ResNet-152, batch 16, 224², float32 with TF32 off and on — our
# keep-everything, sqrt and budget schedules and PyTorch plain and
# checkpoint_sequential at the same segment count (peak memory, it/s) —
# each comparison in interleaved rounds, medians and ranges; where one of
# our steps spends its time (BatchNorm's share printed and kept in
# batchnorm_share.txt), and the largest batch each fits in 16 GiB;
# bench/gpu_table.py turns it into the tables of bench/RESULTS.md. Logs go
# to $OUT (or ./gpu-out); each phase prints the seconds it took.
#   usage: bench/gpu.sh [BUILD_DIR] [PHASE...]
# PHASEs (default: all but gputests, in this order): build cuda suite gpt2
# resnet profile det maxbatch shakespeare table
#   build        configure and build BUILD_DIR (about 20-60 s with 16 cores)
#   cuda         test_cuda, verbose
#   gputests     only the tests that use the GPU (with SL_GPU_STOP_ON_FAIL=1,
#                quick's default, a failure skips the benches after it) (test_cuda*,
#                test_backend_* (lists, ops: GPU against CPU per op),
#                test_gpt2, test_dist, test_cli, test_bench_gpu_gpt2:
#                about 135 s on an H100, one at a time (they share the GPU
#                lock), half of it test_bench_gpu_gpt2; SL_GPU_TESTS
#                (a ctest regex) picks others)
#   suite        the whole ctest suite (about 4 minutes)
#   gpt2         bench/gpu_gpt2.py: GPT-2 small, ours none / sqrt / least
#                beside PyTorch plain / checkpointed at B=8 T=1024 and
#                B=128 T=64, TF32 on, $SL_GPT2_ROUNDS (3) interleaved rounds
#                of $SL_GPT2_STEPS (6) steps a run, within $SL_GPT2_BUDGET_S
#                seconds (0: no limit): gpt2.jsonl, gpt2_runs.jsonl,
#                gpt2_profile.txt (where our step goes, by layer type),
#                gpt2_versions.txt (the cuDNN / cuBLAS each side loaded),
#                gpt2.log. About 3 minutes at the issue's targets, 8 at
#                today's speed (see gpu_gpt2.py)
#   resnet       ResNet-152 b16, TF32 $SL_RESNET_TF32 ("off on"), ours
#                under $SL_RESNET_SCHEDULES ("none sqrt budget") beside
#                PyTorch plain and checkpointed, $SL_GPU_ROUNDS (3)
#                interleaved rounds of $SL_GPU_STEPS (20) steps a run,
#                within $SL_RESNET_BUDGET_S seconds (0: no limit); a run
#                takes about 12 s, a round of all ten about 2 minutes. Each
#                of our configurations logs its convolutions' cuDNN choice
#                per geometry (SL_CUDA_CONV_LOG=1: engine and heuristics
#                mode, or legacy algorithm) to conv_choices-tf32<on|off>-
#                <schedule>.txt, and its JSON names the API ("conv_api")
#   kernels      where one GPT-2 small step (B=8 T=1024, TF32) goes kernel by
#                kernel: ncu --metrics gpu__time_duration.sum over the first
#                $SL_NCU_KERNELS (1500) kernels of two steps, within
#                $SL_NCU_TIMEOUT_S (60) seconds, summarised by
#                bench/ncu_table.py into ncu_kernels.txt (about 30 s)
#   rkernels     the same for one ResNet-152 b16 step (schedule none, TF32
#                off: the configuration behind PyTorch plain), the first
#                $SL_NCU_RESNET_KERNELS (2600, about a step) kernels, into
#                ncu_resnet.txt: BatchNorm's, ReLU's and the loss's kernels
#                beside cuDNN's
#   kdetail      why the kernels that miss the memory's pace miss it: ncu's
#                speed-of-light, occupancy, warp-state and memory sections
#                for the second launch of each kernel named by a regex of
#                $SL_NCU_DETAIL (LayerNorm's backward and forward, the
#                language model's loss, the casts, the bias gradient, the
#                bf16 attention's dK/dV kernel, its slowest) in a
#                bf16 GPT-2 small step (B=8 T=1024), one process a kernel
#                of at most $SL_NCU_TIMEOUT_S (25) seconds, into
#                ncu_detail.txt
#   profile, det, maxbatch   ResNet: where a step goes; what deterministic
#                convolutions cost each side; the largest batch in 16 GiB
#   shakespeare  scripts/shakespeare.sh --device cuda (needs data/ carried:
#                scripts/setup.sh fetches it, scripts/shakespeare.sh
#                --prepare tokenizes it), about 1-2 minutes
#   table        bench/gpu_table.py over $OUT
#   quick        (alone) one device call of about 8 minutes: build gputests
#                gpt2 kernels resnet table, the gpt2 phase within 230 s, ResNet with
#                TF32 on, ours none and sqrt, within 150 s (each variable
#                set beforehand wins). Expected (H100, 2026-11-26): build
#                25 s, gputests 75 s, gpt2 230 s (a round of the ten runs
#                takes about 70-100 s, PyTorch's imports most of it: 2-3
#                rounds), kernels 30 s, resnet about 150 s (about 12 s a
#                run, 4 runs a round), table 1 s
# A machine lent for ten minutes a command runs a few at a time; each phase
# after build reuses BUILD_DIR. Where no package registry can be reached,
# bench/gpu_deps.sh's carried packages (.gpudeps, or $SL_GPU_DEPS) are used. PYTHON names
# the interpreter with torch and transformers (python3). Without a GPU,
# SL_GPT2_DEVICE=cpu with SL_GPT2_MODEL (bench_gpt2's model options) and
# SL_GPT2_SHAPES (BxT,...) runs the gpt2 phase's logic on the CPU.
# Kernels written without a GPU at hand have switches back to the path
# before them, for a session whose GPU tests show one broken:
# SL_CUDA_FLASH_MMA=off (the fused attention's wmma kernels instead of its
# mma.sync ones, written 2026-11-27 without a GPU), SL_CUDA_FLASH_BF16=off
# (bf16 activations' fused attention in TF32 on widened tiles instead of
# bf16 products, the same day), SL_CUDA_FLASH_DROPOUT=off (attention
# dropout in the chunked cuBLAS path instead of inside the fused mma.sync
# kernels, written 2026-11-27 without a GPU), SL_CUDA_FLASH=off
# (chunked cuBLAS attention), SL_CUDA_LT=off (gemm then
# bias_add), SL_CUDA_BF16_GEMM=off (bf16 Conv1D on float copies),
# SL_CUDA_BF16_KERNELS=off (bf16 ReLU, adds, LayerNorm, GELU and fused
# attention on float copies), SL_CUDA_LT_WORKSPACE_MIB=0 (cuBLASLt without
# its 32 MiB workspace, as before 2026-11-27's second run),
# SL_CUDA_LN_REGS=off (LayerNorm's forward summing each value as its load
# arrives instead of loading the row into registers first, and its input
# gradient re-reading x and dy as it writes, the same bits; written
# 2026-11-27 without a GPU), SL_CUDA_CONV_API=legacy (convolutions
# through cuDNN's cudnnGetConvolution*_v7 algorithm choice instead of the
# graph API's engine heuristics, written without a GPU),
# SL_CUDA_XENT_STAGED=off (the language model's loss in three passes over
# global memory instead of each row staged in shared memory, the same
# bits; written 2026-11-27 without a GPU), SL_CUDA_COL_PARTS=off (the
# bias and LayerNorm parameter gradients by column tiles instead of
# column parts joined in thread-block clusters; other sums, written
# 2026-11-27 without a GPU), SL_CUDA_BN_FUSED=on (BatchNorm's final
# sums inside its normalise and input gradient instead of in kernels of
# their own, the same bits; off by default since 2026-11-27-e, 1.4 %
# slower on ResNet-152), SL_CUDA_XENT_BLOCKS=off (a classifier's loss
# a thread per row instead of a block per row; other sums; both written
# 2026-11-27, the fourth session, without a GPU), SL_CUDA_BN_RELU=off
# (BatchNorm and the in-place ReLU after it as two steps each way instead
# of one, the same bits; written 2026-11-27, the fifth session).
# SL_GPT2_PRECISION=bf16 runs the gpt2 phase in mixed precision (ours with
# bf16 activations, PyTorch under autocast) into gpt2_bf16.jsonl and its
# siblings; SL_GPT2_LLMC=PATH adds llm.c's train_gpt2cu (built by the user
# from a fetched checkout: this project holds none of it) as a third side
# there. SL_GPT2_SCHEDULES picks our schedules (none,sqrt,least),
# SL_GPT2_MODES PyTorch's (plain,checkpoint).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-gpu-out}
mkdir -p "$out"
build=${1:-build-gpu}
shift || true
phases=${*:-build cuda suite gpt2 resnet profile det maxbatch shakespeare table}
if [ "$phases" = quick ]; then
  # one device call of about 8 minutes (see the header)
  phases="build gputests gpt2 kernels resnet table"
  : "${SL_GPT2_BUDGET_S:=230}" "${SL_RESNET_BUDGET_S:=150}"
  : "${SL_RESNET_TF32:=on}" "${SL_RESNET_SCHEDULES:=none sqrt}" "${SL_GPU_STOP_ON_FAIL:=1}"
fi
has() { [[ " $phases " == *" $1 "* ]]; }
# Nsight Compute's ncu: on the PATH or in the CUDA tree (empty: none)
ncu_bin() { command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1; }
steps=${SL_GPU_STEPS:-20} # timed steps per run (the median after the first)
rounds=${SL_GPU_ROUNDS:-3} # interleaved rounds of the ResNet comparison
py=${PYTHON:-python3}      # the interpreter with torch (and transformers)
log="$out/gpu-${phases// /-}.log"
exec > >(tee "$log") 2>&1
echo "== machine ($phases)"; date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' || true
t0=$SECONDS
took() { echo "== $1: $((SECONDS - t0)) s"; t0=$SECONDS; }

# cuDNN: under /usr/local/cuda, or the copy PyTorch carries.
extra=()
if ! ls /usr/local/cuda/lib64/libcudnn.so* /usr/local/cuda/lib/libcudnn.so* >/dev/null 2>&1; then
  d=$(python3 -c 'import nvidia.cudnn,os;print(os.path.dirname(nvidia.cudnn.__file__))' 2>/dev/null)
  if [ -n "$d" ]; then
    lib=$(ls "$d"/lib/libcudnn.so* | head -1)
    [ -e "$d/lib/libcudnn.so" ] || ln -sf "$lib" "$d/lib/libcudnn.so"
    extra+=(-DCUDNN_LIB="$d/lib/libcudnn.so" -DCUDNN_INCLUDE="$d/include")
    export LD_LIBRARY_PATH="$d/lib:${LD_LIBRARY_PATH:-}"
  fi
fi
if [ -d "${SL_GPU_DEPS:-.gpudeps}/debs" ]; then
  # shellcheck source=bench/gpu_deps.sh
  source bench/gpu_deps.sh
  read -ra deps <<<"$SL_DEPS_CMAKE"
  extra+=("${deps[@]}")
elif command -v apt-get >/dev/null && ! pkg-config --exists check 2>/dev/null; then
  apt-get install -y -q check libopenblas-dev libcjson-dev libpcre2-dev pkg-config >/dev/null 2>&1
fi

if has build; then
  echo "== build"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc "${extra[@]}" | grep -E "sublinear|Error|error" || exit 1
  cmake --build "$build" -j"$(nproc)" 2>&1 | grep -E -A3 "error|warning" ; [ -x "$build/tests/test_cuda" ] || exit 1
  # the CUDA libraries the benches load (their versions also go into every GPU result)
  ldd "$build/bench/bench_gpt2" | grep -E "cudnn|cublas|cudart" || true
  took build
fi
[ -x "$build/bench/bench_gpt2" ] || { echo "no build in $build: run the build phase"; exit 1; }
if has cuda || has gputests || has suite; then
  [ -x "$build/tests/test_cuda" ] || { echo "no test_cuda in $build: a build without CUDA?"; exit 1; }
fi

if has cuda; then
  echo "== CUDA tests"
  CK_VERBOSITY=verbose "$build/tests/test_cuda"
  took cuda
fi
if has gputests; then
  echo "== the tests that use the GPU"
  # every test's own output (timings, skips) in gputests.log, the summary
  # here; a test past SL_GPU_TEST_TIMEOUT seconds (a kernel that hangs) is
  # killed by ctest and reported as Timeout, so no process keeps the GPU
  gpu_tests_ok=1
  ctest --test-dir "$build" -j4 -V --output-on-failure --timeout "${SL_GPU_TEST_TIMEOUT:-150}" \
    -R "${SL_GPU_TESTS:-^(test_cuda.*|test_backend_.*|test_gpt2|test_dist|test_cli|test_bench_gpu_gpt2)\$}" \
    > "$out/gputests.log" 2>&1 || gpu_tests_ok=0
  grep -E "tests passed|tests failed|Failed|\*\*\*|Test #|Not Run" "$out/gputests.log" | tail -40
  grep -E ":[FE]:" "$out/gputests.log" | cut -c1-300 | head -20
  took gputests
  if [ "$gpu_tests_ok" = 0 ] && [ "${SL_GPU_STOP_ON_FAIL:-0}" = 1 ]; then
    # timings of kernels that fail their checks are worth nothing: the
    # device time goes back unspent
    echo "gputests failed: skipping the benches (SL_GPU_STOP_ON_FAIL=1); see gputests.log"
    phases="table"
  fi
fi
if has suite; then
  echo "== full suite"
  ctest --test-dir "$build" -j8 --output-on-failure 2>&1 | tail -60
  took suite
fi
if has gpt2; then
  echo "== GPT-2 beside PyTorch (bench/gpu_gpt2.py)"
  gpt2_args=(--bin "$build/bench/bench_gpt2" --out "$out" --python "$py"
             --device "${SL_GPT2_DEVICE:-cuda}" --rounds "${SL_GPT2_ROUNDS:-3}"
             --steps "${SL_GPT2_STEPS:-6}" --budget-s "${SL_GPT2_BUDGET_S:-0}")
  [ -z "${SL_GPT2_SHAPES:-}" ] || gpt2_args+=(--shapes "$SL_GPT2_SHAPES")
  [ -z "${SL_GPT2_MODEL:-}" ] || gpt2_args+=(--model-args "$SL_GPT2_MODEL")
  [ -z "${SL_GPT2_PRECISION:-}" ] || gpt2_args+=(--precision "$SL_GPT2_PRECISION")
  [ -z "${SL_GPT2_LLMC:-}" ] || gpt2_args+=(--llmc "$SL_GPT2_LLMC")
  [ -z "${SL_GPT2_SCHEDULES:-}" ] || gpt2_args+=(--schedules "$SL_GPT2_SCHEDULES")
  [ -z "${SL_GPT2_MODES:-}" ] || gpt2_args+=(--modes "$SL_GPT2_MODES")
  ! command -v nvidia-smi >/dev/null || gpt2_args+=(--smi)
  "$py" bench/gpu_gpt2.py "${gpt2_args[@]}"
  took gpt2
fi

if has kernels; then
  echo "== one GPT-2 step, kernel by kernel (ncu)"
  ncu=$(ncu_bin)
  if [ -n "$ncu" ]; then
    timeout "${SL_NCU_TIMEOUT_S:-60}" "$ncu" --metrics gpu__time_duration.sum --csv \
      -c "${SL_NCU_KERNELS:-1500}" "$build/bench/bench_gpt2" --device cuda --tf32 --batch 8 \
      --seq 1024 --steps 2 >"$out/ncu_gpt2.csv" 2>&1
    python3 bench/ncu_table.py "$out/ncu_gpt2.csv" --top 30 --title "GPT-2 small B=8 T=1024 TF32, \
schedule none, the first ${SL_NCU_KERNELS:-1500} kernels of two steps under ncu (serialised, caches \
flushed, clocks fixed: read the order and the shares)" | tee "$out/ncu_kernels.txt"
  else
    echo "kernels: no ncu on this machine"
  fi
  took kernels
fi

if has rkernels; then
  echo "== one ResNet-152 step, kernel by kernel (ncu)"
  ncu=$(ncu_bin)
  if [ -n "$ncu" ]; then
    timeout "${SL_NCU_TIMEOUT_S:-90}" "$ncu" --metrics gpu__time_duration.sum --csv \
      -c "${SL_NCU_RESNET_KERNELS:-2600}" "$build/bench/bench_gpu" --schedule none --steps 1 \
      >"$out/ncu_resnet.csv" 2>&1
    python3 bench/ncu_table.py "$out/ncu_resnet.csv" --top 40 --title "ResNet-152 b16 224², TF32 \
off, schedule none, the first ${SL_NCU_RESNET_KERNELS:-2600} kernels under ncu (serialised, caches \
flushed, clocks fixed: read the order and the shares)" | tee "$out/ncu_resnet.txt"
  else
    echo "rkernels: no ncu on this machine"
  fi
  took rkernels
fi

if has kdetail; then
  echo "== the slow kernels' reasons (ncu sections, bf16 GPT-2 step)"
  ncu=$(ncu_bin)
  if [ -n "$ncu" ]; then
    : >"$out/ncu_detail.txt"
    # one process a kernel: ncu's launch count is over all the kernels it matches
    for k in ${SL_NCU_DETAIL:-ln_dx_k ln_param_ lm_xent copy4<float,.unsigned.short> bias_bwd_ ln_fwd_k flash_bwd_kv_bf16_k}; do
      echo "=== $k" >>"$out/ncu_detail.txt"
      timeout "${SL_NCU_TIMEOUT_S:-25}" "$ncu" --kernel-name-base demangled --kernel-name "regex:$k" --launch-skip 1 \
        --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats \
        --section MemoryWorkloadAnalysis --section LaunchStats \
        "$build/bench/bench_gpt2" --device cuda --tf32 --precision bf16 --batch 8 --seq 1024 \
        --steps 2 >>"$out/ncu_detail.txt" 2>&1
    done
    grep -E "^===|Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Warp Cycles Per Issued|Block Limit" \
      "$out/ncu_detail.txt" | head -90
  else
    echo "kdetail: no ncu on this machine"
  fi
  took kdetail
fi
if has resnet || has maxbatch || has det; then
  half=$("$build/sublinear" plan --model resnet152 --batch 16 --res 224 --schedule none --json |
         python3 -c 'import json,sys; print(json.load(sys.stdin)["planned_bytes"]["total"]//2)')
  segs=$(python3 -c 'import math; print(math.ceil(math.sqrt(57)))')
fi
if has resnet; then
  read -ra tfs <<<"${SL_RESNET_TF32:-off on}"
  read -ra scheds <<<"${SL_RESNET_SCHEDULES:-none sqrt budget}"
  echo "== ResNet-152, batch 16, 224x224: TF32 ${tfs[*]}, ours ${scheds[*]}, $rounds interleaved rounds"
  # every configuration once a round, every other round in reverse order;
  # each JSON line gets its round
  cfgs=()
  for tf in "${tfs[@]}"; do
    for s in "${scheds[@]}"; do
      [ "$s" != budget ] || s=budget:$half
      cfgs+=("ours $tf $s")
    done
    cfgs+=("torch $tf 0" "torch $tf $segs")
  done
  r=1 round_s=0 t_resnet=$SECONDS
  while [ "$r" -le "$rounds" ]; do
    if [ "$r" -gt 1 ] && [ "${SL_RESNET_BUDGET_S:-0}" -gt 0 ] &&
       [ $((SECONDS - t_resnet + round_s)) -gt "${SL_RESNET_BUDGET_S}" ]; then
      echo "resnet: stopped before round $r: a round takes ${round_s} s, the budget is ${SL_RESNET_BUDGET_S} s"
      break
    fi
    t_round=$SECONDS order=()
    for c in "${cfgs[@]}"; do
      if [ $((r % 2)) -eq 1 ]; then order+=("$c"); else order=("$c" "${order[@]}"); fi
    done
    for c in "${order[@]}"; do
      read -r side tf arg <<<"$c"
      flag=()
      [ "$tf" = off ] || flag=(--tf32)
      if [ "$side" = ours ]; then
        choices="$out/conv_choices-tf32$tf-${arg%%:*}.txt"
        SL_CUDA_CONV_LOG=1 "$build/bench/bench_gpu" --schedule "$arg" --steps "$steps" \
          "${flag[@]}" 2>"$choices" | sed "s/^{/{\"round\":$r,/" | tee -a "$out/ours.jsonl"
        grep -v '^sublinear cuda conv' "$choices" >&2 # the run's own messages
      else
        "$py" bench/bench_gpu_torch.py --segments "$arg" --steps "$steps" "${flag[@]}" |
          sed "s/^{/{\"round\":$r,/" | tee -a "$out/torch.jsonl"
      fi
    done
    round_s=$((SECONDS - t_round))
    echo "resnet: round $r took ${round_s} s"
    r=$((r + 1))
  done
  took resnet
fi
if has profile; then
  # SL_PROFILE_TF32=1: with TF32 on (where sqrt / none was 1.6 on an H100,
  # 2026-11-27, against 1.18 with it off)
  ptf=()
  [ "${SL_PROFILE_TF32:-0}" = 1 ] && ptf=(--tf32)
  echo "== where a step goes (one profiled step, TF32 ${ptf[*]:+on}${ptf[*]:-off})"
  # the first run also logs cuDNN's choice for each geometry (conv_algos.txt)
  SL_CUDA_CONV_LOG=1 "$build/bench/bench_gpu" --schedule none --profile ${ptf[@]+"${ptf[@]}"} \
    2>"$out/conv_algos.txt" | tee -a "$out/profile.jsonl"
  grep -v '^sublinear cuda conv' "$out/conv_algos.txt" >&2 # the run's own messages
  echo "cuDNN's choices for $(grep -c '^sublinear cuda conv' "$out/conv_algos.txt") geometries in conv_algos.txt"
  "$build/bench/bench_gpu" --schedule sqrt --profile ${ptf[@]+"${ptf[@]}"} | tee -a "$out/profile.jsonl"
  took profile
  # BatchNorm's share of the profiled step (its statistics and normalise,
  # forward, re-forward and backward), from sl_net_profile's entries: the
  # figure issue 25's BatchNorm kernels are judged by. Since 2026-11-27-e
  # it holds the ReLUs joined to BatchNorm too (SL_CUDA_BN_RELU=off for
  # the share as before).
  python3 - "$out/profile.jsonl" <<'PY' | tee "$out/batchnorm_share.txt"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    prof = r.get("profile") or []
    total = sum(e["ms"] for e in prof)
    bn = [e for e in prof if e["type"] == "BatchNorm2d"]
    share = sum(e["ms"] for e in bn)
    parts = ", ".join(f'{e["pass"]} {e["ms"]:.2f} ms ({e["calls"]} calls)' for e in bn)
    print(f'BatchNorm2d, schedule {r["schedule"]}: {share:.2f} of {total:.2f} ms profiled '
          f'({100 * share / total if total else 0:.1f}%): {parts}')
PY
fi
if has det; then
  # what deterministic algorithms cost, on each side (TF32 off): ours
  # without the restriction, PyTorch with it (cudnn.deterministic)
  echo "== determinism, TF32 off"
  for s in none sqrt; do
    "$build/bench/bench_gpu" --schedule "$s" --steps "$steps" --nondeterministic | tee -a "$out/det.jsonl"
  done
  "$py" bench/bench_gpu_torch.py --segments 0 --steps "$steps" --deterministic | tee -a "$out/det.jsonl"
  "$py" bench/bench_gpu_torch.py --segments "$segs" --steps "$steps" --deterministic |
    tee -a "$out/det.jsonl"
  took det
fi
if has maxbatch; then
  echo "== largest batch in 16 GiB"
  lim=$((16 * 1024 * 1024 * 1024))
  for s in none sqrt "budget:$lim"; do
    "$build/bench/bench_gpu" --schedule "$s" --max-batch "$lim" | tee -a "$out/maxbatch.jsonl"
  done
  "$py" bench/bench_gpu_torch.py --segments 0 --max-batch "$lim" | tee -a "$out/maxbatch.jsonl"
  "$py" bench/bench_gpu_torch.py --segments "$segs" --max-batch "$lim" | tee -a "$out/maxbatch.jsonl"
  took maxbatch
fi
if has shakespeare; then
  echo "== a GPT on Shakespeare's plays on the GPU (scripts/shakespeare.sh --device cuda)"
  if ls data/shakespeare/*_gut.txt >/dev/null 2>&1 && [ -s data/gpt2/encoder.json ]; then
    SL_BUILD=$build timeout "${SL_SHAKESPEARE_TIMEOUT_S:-300}" scripts/shakespeare.sh --device cuda \
      2>&1 | tee "$out/shakespeare.log"
  else
    echo "shakespeare: no data/ here: carry it (scripts/setup.sh fetches it, scripts/shakespeare.sh --prepare tokenizes it)"
  fi
  took shakespeare
fi
if has table; then
  echo "== tables (for bench/RESULTS.md)"
  python3 bench/gpu_table.py "$out" | tee "$out/RESULTS-gpu.md"
fi
echo "== done: logs in $out"
