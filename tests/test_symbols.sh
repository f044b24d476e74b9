#!/bin/sh
# test_symbols.sh — the library exports only its API:
#
#   tests/test_symbols.sh LIBSUBLINEAR_A INCLUDE_DIR [C_COMPILER]
#
# 1. Every extern symbol the static library defines starts with sl_, so a
#    program that links libsublinear.a never collides with its internals.
#    The one exception is weak or unique C++ symbols (a C program cannot
#    name them and the linker merges them with any other copy) that
#    header templates and inline members instantiate: the CUDA toolkit's
#    (CUB's sort, the cuda::std and thrust objects it pulls in, dim3's
#    constructor), the C++ standard library's (std::mutex and
#    std::lock_guard, which a build without optimisation leaves out of
#    line), the library's own C++ types (named sl_...) and a file's
#    anonymous namespace.
# 2. A shared object linked from the same objects (the library is built
#    with hidden visibility) exports exactly the functions declared with
#    SL_API in INCLUDE_DIR: none missing, nothing else.
set -eu

lib=$1
include=$2
cc=${3:-cc}
tmp=$(mktemp -d /tmp/sl_symbols_XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
status=0

# Defined extern symbols (T/D/B/R/W/V...; lower-case letters are local),
# less what a sanitizer build's instrumentation adds (__odr_asan.NAME
# beside each global NAME): the compiler's, not the library's.
nm -g --defined-only "$lib" | awk 'NF == 3 { print $2, $3 }' | grep -v ' __odr_asan\.' |
    sort -u -k2 > "$tmp/typed"
awk '{ print $2 }' "$tmp/typed" > "$tmp/extern"
toolkit='^[WVu] _Z(GV)?Z?(NK?)?(3cub|4cuda|6thrust|St|4dim3|[0-9]+_GLOBAL__N_|[0-9]+sl_)'
grep -E "$toolkit" "$tmp/typed" | awk '{ print $2 }' > "$tmp/toolkit" || true
[ -s "$tmp/extern" ] || { echo "test_symbols: no symbols in $lib"; exit 1; }
grep -v '^sl_' "$tmp/extern" | grep -v -x -F -f "$tmp/toolkit" > "$tmp/unprefixed" || true
if [ -s "$tmp/unprefixed" ]; then
    echo "test_symbols: $(wc -l < "$tmp/unprefixed") extern symbol(s) of $lib without the sl_ prefix:"
    sed 's/^/  /' "$tmp/unprefixed"
    status=1
fi

# The API: every function declared with SL_API in the public headers.
cat "$include"/sublinear.h "$include"/sublinear/*.h |
    tr '\n' ' ' | grep -o 'SL_API[^;{(]*(' | grep -o 'sl_[a-z0-9_]*[ ]*($' |
    tr -d ' (' | sort -u > "$tmp/api"
[ -s "$tmp/api" ] || { echo "test_symbols: no SL_API declarations under $include"; exit 1; }

"$cc" -shared -o "$tmp/libcheck.so" -Wl,--whole-archive "$lib" -Wl,--no-whole-archive
# (less the weak template instantiations of 1., which the standard
# library's headers give default visibility)
nm -D --defined-only "$tmp/libcheck.so" | awk 'NF == 3 && $2 ~ /[TDBRWVu]/ { print $2, $3 }' |
    grep -v -E "$toolkit" | awk '{ print $2 }' | sort -u > "$tmp/exported"
comm -23 "$tmp/exported" "$tmp/api" > "$tmp/extra"
comm -13 "$tmp/exported" "$tmp/api" > "$tmp/missing"
if [ -s "$tmp/extra" ]; then
    echo "test_symbols: exported but not declared with SL_API:"
    sed 's/^/  /' "$tmp/extra"
    status=1
fi
if [ -s "$tmp/missing" ]; then
    echo "test_symbols: declared with SL_API but not exported (not defined, or hidden):"
    sed 's/^/  /' "$tmp/missing"
    status=1
fi
echo "test_symbols: $(wc -l < "$tmp/api") API functions, $(wc -l < "$tmp/exported") exported," \
    "$(wc -l < "$tmp/extern") extern symbols in the archive, $(wc -l < "$tmp/unprefixed") without sl_" \
    "(besides $(wc -l < "$tmp/toolkit") weak template instantiations)"
exit $status
