#!/usr/bin/env bash
# The README's first command: a small GPT-2 learns Shakespeare in sublinear
# memory. Tokenizes the plays scripts/setup.sh fetched (data/shakespeare,
# GPT-2's BPE from data/gpt2) into llm.c shards once (5 % held out), trains
# 4 layers x 128 channels at 128 tokens a sequence with sqrt(N)
# checkpointing, prints the held-out loss against a unigram model of the
# training tokens, a sample from the trained model, and the memory saved
# against keeping every activation. Extra arguments go to `sublinear train`
# (e.g. --steps 600 --layers 6 --embd 384 --seq 256 for a longer run).
set -euo pipefail
cd "$(dirname "$0")/.."
tokens=data/shakespeare/tokens
if [ ! -s "$tokens/train.bin" ] || [ ! -s "$tokens/val.bin" ]; then
  mkdir -p "$tokens"
  ./scripts/run.sh tokenize --vocab data/gpt2/encoder.json --merges data/gpt2/vocab.bpe \
    --out "$tokens/train.bin" --val-fraction 0.05 --val-out "$tokens/val.bin" \
    data/shakespeare/*_gut.txt
fi
shape="--layers 4 --embd 128 --heads 4 --context 128"
# (the trained model is saved as Hugging Face's model directory, which
#  `sublinear sample --config` and transformers' from_pretrained read)
./scripts/run.sh train --model gpt2 $shape --data "$tokens/train.bin" --val "$tokens/val.bin" \
  --seq 128 --batch 16 --steps 150 --lr 2e-3 --warmup 10 --clip 1.0 --eval 128 \
  --schedule sqrt --log-every 10 --save-model "$tokens/model" "$@"
echo
echo "a sample from the trained model (greedy decoding would repeat itself; top-k 40, temperature 0.8):"
./scripts/run.sh sample --model-file "$tokens/model/model.safetensors" \
  --config "$tokens/model/config.json" --prompt "ROMEO:" --tokens 60 --temperature 0.8 --top-k 40 --seed 1
