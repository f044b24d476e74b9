#!/usr/bin/env bash
# Builds (Release, in ./build) if needed, then runs the `sublinear` command
# with the given arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x build/sublinear ] || [ -n "$(find src include tools CMakeLists.txt -newer build/sublinear -print -quit)" ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)" --target sublinear_cli >/dev/null
fi
exec ./build/sublinear "$@"
