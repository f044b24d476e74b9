#!/bin/sh
# test_install.sh — the installed package works for a project outside the
# tree, both ways a C project finds a library:
#
#   tests/test_install.sh BUILD_DIR CONSUMER_SOURCE_DIR [C_COMPILER]
#
# builds CONSUMER_SOURCE_DIR/consumer.c against the build tree through its
# sublinear-uninstalled.pc, then installs BUILD_DIR (already built) into a
# temporary prefix with
# `cmake --install --prefix` (nothing is rebuilt), then builds
# CONSUMER_SOURCE_DIR/consumer.c against it with find_package(sublinear)
# (CMAKE_PREFIX_PATH) and with pkg-config (PKG_CONFIG_PATH, --static: the
# library is static by default), runs both programs, and runs the
# installed `sublinear` command.
set -eu

build=$1
consumer=$2
cc=${3:-cc}
tmp=$(mktemp -d /tmp/sl_install_XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
prefix=$tmp/prefix

fail() {
    echo "test_install: $*" >&2
    exit 1
}

echo "== pkg-config sublinear from the build tree (sublinear-uninstalled.pc)"
[ -f "$build/sublinear-uninstalled.pc" ] || fail "no sublinear-uninstalled.pc in $build"
[ ! -f "$build/sublinear.pc" ] || fail "$build/sublinear.pc names paths that exist only after install"
# shellcheck disable=SC2046  # the flags are words
"$cc" -std=c11 $(PKG_CONFIG_PATH="$build" pkg-config --cflags sublinear) "$consumer/consumer.c" \
    -o "$tmp/by-build-tree" $(PKG_CONFIG_PATH="$build" pkg-config --static --libs sublinear) ||
    fail "building the consumer against the build tree with pkg-config failed"
LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$tmp/by-build-tree" "$tmp/by-build-tree.safetensors" | tee "$tmp/by-build-tree.out"
grep -q "consumer ok" "$tmp/by-build-tree.out" || fail "the build-tree consumer did not run"

echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" ||
    { cat "$tmp/install.log" >&2; fail "install failed"; }
[ -f "$prefix/include/sublinear.h" ] || fail "no include/sublinear.h"
[ -x "$prefix/bin/sublinear" ] || fail "no bin/sublinear"
config=$(find "$prefix" -name sublinearConfig.cmake | head -n 1)
pc=$(find "$prefix" -name sublinear.pc | head -n 1)
[ -n "$config" ] || fail "no sublinearConfig.cmake"
[ -n "$pc" ] || fail "no sublinear.pc"
ls "$(dirname "$(dirname "$pc")")"/libsublinear.* >/dev/null 2>&1 || fail "no libsublinear next to pkgconfig/"

echo "== find_package(sublinear)"
cmake -S "$consumer" -B "$tmp/by-cmake" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release >"$tmp/configure.log" 2>&1 ||
    { cat "$tmp/configure.log" >&2; fail "configuring the consumer with find_package failed"; }
cmake --build "$tmp/by-cmake" >"$tmp/build.log" 2>&1 ||
    { cat "$tmp/build.log" >&2; fail "building the consumer with find_package failed"; }
"$tmp/by-cmake/consumer" "$tmp/by-cmake.safetensors" | tee "$tmp/by-cmake.out"
grep -q "consumer ok" "$tmp/by-cmake.out" || fail "the find_package consumer did not run"

echo "== pkg-config sublinear"
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
pkg-config --exists sublinear || fail "pkg-config does not find sublinear"
[ "$(pkg-config --modversion sublinear)" = "$(sed -n 's/^Version: //p' "$pc")" ] || fail "version"
cflags=$(pkg-config --cflags sublinear)
libs=$(pkg-config --static --libs sublinear)
echo "cflags: $cflags"
echo "libs:   $libs"
# shellcheck disable=SC2086  # the flags are words
"$cc" -std=c11 $cflags "$consumer/consumer.c" -o "$tmp/by-pkg-config" $libs ||
    fail "building the consumer with pkg-config failed"
# A shared libsublinear.so in a prefix the loader does not search needs
# LD_LIBRARY_PATH (the CMake consumer has an RPATH; pkg-config gives none).
LD_LIBRARY_PATH="$(dirname "$(dirname "$pc")")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$tmp/by-pkg-config" "$tmp/by-pkg-config.safetensors" | tee "$tmp/by-pkg-config.out"
grep -q "consumer ok" "$tmp/by-pkg-config.out" || fail "the pkg-config consumer did not run"

echo "== the installed command"
"$prefix/bin/sublinear" plan --model resnet20 --batch 2 --res 32 --classes 10 --json >"$tmp/plan.json" ||
    fail "the installed sublinear plan failed"
grep -q '"planned_bytes"' "$tmp/plan.json" || fail "sublinear plan printed no plan"
"$prefix/bin/sublinear" bench list
echo "test_install: ok"
