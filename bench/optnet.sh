#!/usr/bin/env bash
# optnet's memory tables (AlexNet, VGG-A, GoogLeNet at 224², CIFAR
# ResNet-110 at 32², float32; inference at batch 128, training at batch
# 64): planned bytes before (every tensor in storage of its own) and after
# our planner, beside optnet's published savings. Planning only: no kernel
# runs, the figures are deterministic. Usage: bench/optnet.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
exec "$build/sublinear" bench optnet
