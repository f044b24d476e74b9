#!/usr/bin/env bash
# The build's Debian dependencies for a GPU machine that cannot reach a
# package registry (the device tool's machines): OpenBLAS, cJSON, PCRE2,
# Check and pkgconf, as .deb files unpacked into a prefix (never into /).
#   bench/gpu_deps.sh download      here, where apt works: fills .gpudeps/debs
#   source bench/gpu_deps.sh        there: unpacks into .gpudeps/root and sets
#                                   PKG_CONFIG_*, LD_LIBRARY_PATH, PATH and
#                                   SL_DEPS_CMAKE (arguments for cmake)
# Debian 12's libraries need glibc 2.36, which the GPU image's newer glibc
# provides. The folder travels with `carry: [".gpudeps"]` (about 14 MiB).
deps_dir=${SL_GPU_DEPS:-$PWD/.gpudeps}
if [ "${1:-}" = download ]; then
  set -e
  mkdir -p "$deps_dir/debs"
  cd "$deps_dir/debs"
  apt-get download libopenblas-dev libopenblas0 libopenblas0-pthread libopenblas-pthread-dev \
    libgfortran5 libcjson-dev libcjson1 libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 \
    libpcre2-posix3 check libsubunit-dev libsubunit0 pkgconf pkgconf-bin libpkgconf3
  exit 0
fi
P=$deps_dir/root
L=$P/usr/lib/x86_64-linux-gnu
if [ ! -d "$P" ]; then
  mkdir -p "$P"
  for f in "$deps_dir"/debs/*.deb; do dpkg -x "$f" "$P"; done
  # the links Debian's alternatives would make
  for n in libopenblas.so libopenblas.so.0 libblas.so.3; do ln -sf "openblas-pthread/$n" "$L/$n"; done
  for h in cblas.h openblas_config.h; do
    ln -sf "x86_64-linux-gnu/openblas-pthread/$h" "$P/usr/include/$h"
  done
  # the modules' paths into the prefix (a sysroot would also move the
  # build tree's own sublinear-uninstalled.pc)
  sed -i -E "s#^(prefix|exec_prefix|libdir|includedir)=/usr#\1=$P/usr#" "$L"/pkgconfig/*.pc
fi
export PKG_CONFIG_LIBDIR=$L/pkgconfig:$P/usr/share/pkgconfig
export LD_LIBRARY_PATH=$L:$L/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$PATH:$P/usr/bin
SL_DEPS_CMAKE="-DCMAKE_PREFIX_PATH=$P/usr -DCMAKE_LIBRARY_PATH=$L -DCMAKE_INCLUDE_PATH=$P/usr/include"
SL_DEPS_CMAKE+=" -DPKG_CONFIG_EXECUTABLE=$P/usr/bin/pkgconf -DCMAKE_C_FLAGS=-I$P/usr/include"
export SL_DEPS_CMAKE
