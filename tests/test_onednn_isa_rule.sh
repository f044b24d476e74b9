#!/bin/sh
# test_onednn_isa_rule.sh — the CPU backend's engine choice (src/cpu/cpu_onednn.c)
# follows the instruction set oneDNN dispatches to: with oneDNN held to AVX2
# (ONEDNN_MAX_CPU_ISA, as on an AVX2-only machine) GEMM tiles stay on OpenBLAS
# and every convolution on im2col, as in a build without oneDNN; on a CPU with
# AVX-512 they go to oneDNN; SL_CPU_CONV / SL_CPU_GEMM override. Checked on
# the command's plan (no kernel runs), through SL_CPU_KERNELS_LOG.
#   test_onednn_isa_rule.sh PATH_TO_SUBLINEAR
set -eu
cli=$1
plan() { "$cli" plan --model resnet20 --res 32 --batch 4 2>&1 >/dev/null; }
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$(ONEDNN_MAX_CPU_ISA=AVX2 SL_CPU_KERNELS_LOG=1 plan)
echo "$out" | head -1
echo "$out" | grep -q "GEMM tiles: OpenBLAS; convolutions: im2col + GEMM" ||
    fail "held to AVX2, the choice is not OpenBLAS + im2col: $out"
! echo "$out" | grep -q "oneDNN jit" || fail "held to AVX2, a convolution went to oneDNN: $out"

out=$(SL_CPU_KERNELS_LOG=1 plan)
echo "$out" | head -1
if grep -q '^flags.* avx512f' /proc/cpuinfo && grep -q '^flags.* avx512bw' /proc/cpuinfo; then
    echo "$out" | grep -q "GEMM tiles: oneDNN sgemm" || fail "AVX-512 CPU, GEMM not oneDNN: $out"
    echo "$out" | grep -q "forward: oneDNN jit" || fail "AVX-512 CPU, no 3x3 conv on oneDNN: $out"
else
    echo "$out" | grep -q "GEMM tiles: OpenBLAS" || fail "no AVX-512, GEMM not OpenBLAS: $out"
fi

out=$(SL_CPU_CONV=im2col SL_CPU_GEMM=openblas SL_CPU_KERNELS_LOG=1 plan)
echo "$out" | grep -q "GEMM tiles: OpenBLAS; convolutions: im2col + GEMM" ||
    fail "SL_CPU_CONV / SL_CPU_GEMM did not override: $out"
echo "the engine choice follows the ISA and the overrides"
