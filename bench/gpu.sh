#!/usr/bin/env bash
# One command for a GPU machine: builds the library with the CUDA backend
# (sm_90), runs the whole test suite (test_cuda compares every layer with
# the CPU backend, checks bit-identical checkpointing, the device memory
# against the plan and the device errors on the GPU), then memonger's
# headline: ResNet-152, batch 16, 224², float32 with TF32 off and on — our
# keep-everything, sqrt and budget schedules and PyTorch plain and
# checkpoint_sequential at the same segment count (peak memory, it/s) —
# where one of our steps spends its time (BatchNorm's share printed and kept
# in batchnorm_share.txt), and the largest batch each fits
# in 16 GiB; bench/gpu_table.py turns it into the tables of
# bench/RESULTS.md. Logs go to $OUT (or ./gpu-out).
#   usage: bench/gpu.sh [BUILD_DIR] [PHASE...]
# PHASEs (default: all, in this order): build cuda suite resnet profile
# det maxbatch table (det: what deterministic convolutions cost each side). A machine lent for ten minutes a command runs a few at a
# time; each phase after build reuses BUILD_DIR. Where no package registry
# can be reached, bench/gpu_deps.sh's carried packages (.gpudeps) are used.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
build=${1:-build-gpu}
shift || true
phases=${*:-build cuda suite resnet profile det maxbatch table}
has() { [[ " $phases " == *" $1 "* ]]; }
steps=${SL_GPU_STEPS:-20} # timed steps per run (the median after the first)
log="$out/gpu-${phases// /-}.log"
exec > >(tee "$log") 2>&1
echo "== machine ($phases)"; date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' || true

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
if [ -d .gpudeps/debs ]; then
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
fi
[ -x "$build/tests/test_cuda" ] || { echo "no build in $build: run the build phase"; exit 1; }

if has cuda; then
  echo "== CUDA tests"
  CK_VERBOSITY=verbose "$build/tests/test_cuda"
fi
if has suite; then
  echo "== full suite"
  ctest --test-dir "$build" -j8 --output-on-failure 2>&1 | tail -60
fi

if has resnet || has maxbatch || has det; then
  half=$("$build/sublinear" plan --model resnet152 --batch 16 --res 224 --schedule none --json |
         python3 -c 'import json,sys; print(json.load(sys.stdin)["planned_bytes"]["total"]//2)')
  segs=$(python3 -c 'import math; print(math.ceil(math.sqrt(57)))')
fi
if has resnet; then
  echo "== ResNet-152, batch 16, 224x224: TF32 off, then on"
  for tf in "" --tf32; do
    for s in none sqrt "budget:$half"; do
      "$build/bench/bench_gpu" --schedule "$s" --steps "$steps" $tf | tee -a "$out/ours.jsonl"
    done
    python3 bench/bench_gpu_torch.py --segments 0 --steps "$steps" $tf | tee -a "$out/torch.jsonl"
    python3 bench/bench_gpu_torch.py --segments "$segs" --steps "$steps" $tf | tee -a "$out/torch.jsonl"
  done
fi
if has profile; then
  echo "== where a step goes (one profiled step, TF32 off)"
  for s in none sqrt; do "$build/bench/bench_gpu" --schedule "$s" --profile | tee -a "$out/profile.jsonl"; done
  # BatchNorm's share of the profiled step (its statistics and normalise,
  # forward, re-forward and backward), from sl_net_profile's entries: the
  # figure issue 25's BatchNorm kernels are judged by.
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
  python3 bench/bench_gpu_torch.py --segments 0 --steps "$steps" --deterministic | tee -a "$out/det.jsonl"
  python3 bench/bench_gpu_torch.py --segments "$segs" --steps "$steps" --deterministic |
    tee -a "$out/det.jsonl"
fi
if has maxbatch; then
  echo "== largest batch in 16 GiB"
  lim=$((16 * 1024 * 1024 * 1024))
  for s in none sqrt "budget:$lim"; do
    "$build/bench/bench_gpu" --schedule "$s" --max-batch "$lim" | tee -a "$out/maxbatch.jsonl"
  done
  python3 bench/bench_gpu_torch.py --segments 0 --max-batch "$lim" | tee -a "$out/maxbatch.jsonl"
  python3 bench/bench_gpu_torch.py --segments "$segs" --max-batch "$lim" | tee -a "$out/maxbatch.jsonl"
fi
if has table; then
  echo "== tables (for bench/RESULTS.md)"
  python3 bench/gpu_table.py "$out" | tee "$out/RESULTS-gpu.md"
fi
echo "== done: logs in $out"
