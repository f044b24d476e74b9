/*
 * bpe_files.h — a small vocabulary in GPT-2's file format (bpe_files.c),
 * written by the tokenizer tests where GPT-2's own files are not needed.
 */
#ifndef SL_TEST_BPE_FILES_H
#define SL_TEST_BPE_FILES_H

/* Token 256 + i is the merge i of "h e", "l l", "he ll", "Ġ w", "Ġw o",
 * "r l", "Ġwo rl", "a a"; byte b has id b; "<|endoftext|>" is the last id. */
#define BF_SMALL_MERGES 8

/* Writes encoder.json and vocab.bpe of the small vocabulary, with
 * json_extra appended inside the JSON object and bpe_extra after the
 * merge lines (both "" for the valid files). */
void bf_write_small(const char *json_path, const char *bpe_path, const char *json_extra,
                    const char *bpe_extra);

#endif
