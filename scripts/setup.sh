#!/usr/bin/env bash
# Installs the Debian packages the build, the tests (Open MPI for the
# data-parallel ones, rsvg-convert for test_svg_plots' PNGs) and the
# PyTorch comparisons need (run as root, or with sudo available), and the
# reference safetensors package (PyPI; not in Debian 12) into .pyref/ at
# the top of the source tree, for tests/test_safetensors_reference.c.
set -euo pipefail
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends \
  build-essential cmake pkg-config check libopenblas-dev libcjson-dev \
  python3 python3-torch python3-numpy graphviz libxml2-utils \
  clang libclang-rt-14-dev libomp-dev libopenmpi-dev openmpi-bin python3-venv \
  librsvg2-bin

cd "$(dirname "$0")/.."
if ! .pyref/bin/python3 -c 'import safetensors' >/dev/null 2>&1; then
  /usr/bin/python3 -m venv .pyref
  .pyref/bin/pip install -q --disable-pip-version-check safetensors==0.8.0
fi
