#!/usr/bin/env bash
# Builds (Release, in ./build) if needed, then runs the `sublinear` command
# with the given arguments. SL_BUILD=DIR runs DIR/sublinear instead and
# builds nothing (bench/gpu.sh's build directory, configured for the GPU
# machine's CUDA and cuDNN).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${SL_BUILD:-}" ]; then
  [ -x "$SL_BUILD/sublinear" ] || { echo "run.sh: no $SL_BUILD/sublinear (SL_BUILD)" >&2; exit 1; }
  exec "$SL_BUILD/sublinear" "$@"
fi
if [ ! -x build/sublinear ] || [ -n "$(find src include tools CMakeLists.txt -newer build/sublinear -print -quit)" ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)" --target sublinear_cli >/dev/null
fi
exec ./build/sublinear "$@"
