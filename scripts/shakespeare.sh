#!/usr/bin/env bash
# The README's first command: a small GPT-2 learns Shakespeare in sublinear
# memory. Tokenizes the plays scripts/setup.sh fetched (data/shakespeare,
# GPT-2's BPE from data/gpt2) into llm.c shards once (5 % held out), trains
# 4 layers x 128 channels at 128 tokens a sequence with sqrt(N)
# checkpointing, prints the held-out loss against a unigram model of the
# training tokens, a sample from the trained model, and the memory saved
# against keeping every activation. Extra arguments go to `sublinear train`
# (e.g. --steps 600 --layers 6 --embd 384 --seq 256 for a longer run).
#
#   scripts/shakespeare.sh [--device cuda] [--prepare] [TRAIN OPTIONS...]
#
# --device cuda trains a larger GPT on a GPU instead: 6 layers x 384
# channels (6 heads) at 256 tokens a sequence, 32 sequences a step, 1500
# AdamW steps with dropout 0.1, TF32 on, still under sqrt(N)
# checkpointing, and samples 200 tokens on the GPU; the model goes to
# data/shakespeare/tokens/model-cuda. It is meant to take about a minute
# once the GPU step is at the speed issue 31 asks for (about 40 ms a step);
# `--steps N` shortens it. --prepare only tokenizes (for a machine that
# will train without the tokenizer's inputs: carry data/ there).
# SL_BUILD=DIR uses DIR/sublinear (scripts/run.sh) instead of ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
device=cpu
prepare=0
rest=()
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=${2:-}; shift $(($# > 1 ? 2 : 1)) ;;
    --device=*) device=${1#--device=}; shift ;;
    --prepare) prepare=1; shift ;;
    *) rest+=("$1"); shift ;;
  esac
done
set -- "${rest[@]}"
case "$device" in
  cpu|cuda) ;;
  *) echo "shakespeare.sh: --device wants cpu or cuda, not '$device'" >&2; exit 2 ;;
esac
tokens=data/shakespeare/tokens
if [ ! -s "$tokens/train.bin" ] || [ ! -s "$tokens/val.bin" ]; then
  mkdir -p "$tokens"
  ./scripts/run.sh tokenize --vocab data/gpt2/encoder.json --merges data/gpt2/vocab.bpe \
    --out "$tokens/train.bin" --val-fraction 0.05 --val-out "$tokens/val.bin" \
    data/shakespeare/*_gut.txt
fi
[ "$prepare" -eq 0 ] || exit 0
# (the trained model is saved as Hugging Face's model directory, which
#  `sublinear sample --config` and transformers' from_pretrained read)
if [ "$device" = cuda ]; then
  model=$tokens/model-cuda
  ./scripts/run.sh train --model gpt2 --layers 6 --embd 384 --heads 6 --context 256 \
    --data "$tokens/train.bin" --val "$tokens/val.bin" --seq 256 --batch 32 --steps 1500 \
    --lr 1e-3 --warmup 100 --clip 1.0 --dropout 0.1 --eval 256 --schedule sqrt \
    --log-every 100 --device cuda --tf32 --save-model "$model" "$@"
  sample=(--tokens 200 --device cuda)
else
  model=$tokens/model
  ./scripts/run.sh train --model gpt2 --layers 4 --embd 128 --heads 4 --context 128 \
    --data "$tokens/train.bin" --val "$tokens/val.bin" --seq 128 --batch 16 --steps 150 \
    --lr 2e-3 --warmup 10 --clip 1.0 --eval 128 --schedule sqrt --log-every 10 \
    --save-model "$model" "$@"
  sample=(--tokens 60)
fi
echo
echo "a sample from the trained model (greedy decoding would repeat itself; top-k 40, temperature 0.8):"
./scripts/run.sh sample --model-file "$model/model.safetensors" --config "$model/config.json" \
  --prompt "ROMEO:" "${sample[@]}" --temperature 0.8 --top-k 40 --seed 1
