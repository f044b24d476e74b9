#!/usr/bin/env python3
"""tokenizer_reference.py - the oracle of tests/test_tokenizer.c: tiktoken's
encoder built from local GPT-2 files (no download), GPT-2's pattern.

Usage: tokenizer_reference.py ENCODER_JSON VOCAB_BPE TEXT_FILE IDS_FILE
  TEXT_FILE is read as UTF-8; IDS_FILE receives encode_ordinary's ids as
  little-endian int32. Exits 3 when tiktoken cannot be imported.
"""
import struct
import sys

try:
    import tiktoken
    import tiktoken.load
except ImportError:
    sys.exit(3)

GPT2_PATTERN = (r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"""
                r"""|\s+(?!\S)|\s+""")


def main():
    encoder_json, vocab_bpe, text_file, ids_file = sys.argv[1:5]
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=vocab_bpe, encoder_json_file=encoder_json)
    enc = tiktoken.Encoding(name="gpt2-local-files", pat_str=GPT2_PATTERN,
                            mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": len(ranks)})
    with open(text_file, "rb") as f:
        text = f.read().decode("utf-8")
    ids = enc.encode_ordinary(text)
    with open(ids_file, "wb") as f:
        f.write(struct.pack("<%di" % len(ids), *ids))


if __name__ == "__main__":
    main()
