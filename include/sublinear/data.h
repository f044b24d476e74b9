/*
 * sublinear/data.h — datasets: the built-in synthetic set, MNIST and
 * CIFAR-10 from their files.
 *
 *     sl_dataset *ds;
 *     sl_dataset_synthetic(10, 3, 32, 32, 42, &ds);
 *     sl_dataset_batch(ds, SL_SPLIT_TRAIN, step * 32, 32, x, labels);
 *     sl_dataset_free(ds);
 */
#ifndef SUBLINEAR_DATA_H
#define SUBLINEAR_DATA_H

#include "sublinear/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Datasets                                                            */
/* ------------------------------------------------------------------ */

/* An image-classification dataset: the built-in synthetic set, or MNIST or
 * CIFAR-10 read from their files. Every kind gives float NCHW images and
 * int labels through sl_dataset_batch. */
typedef struct sl_dataset sl_dataset;

typedef enum sl_split { SL_SPLIT_TRAIN = 0, SL_SPLIT_TEST = 1 } sl_split;

/* What a dataset gives. */
typedef struct sl_dataset_info {
    const char *name;          /* "synthetic", "mnist" or "cifar10" (static) */
    int classes;
    int channels, height, width; /* of one sample as sl_dataset_batch writes it */
    int64_t samples[2];        /* distinct samples per split (indexed by
                                  sl_split): 0 where a file set has no test
                                  files; 2^62 for the synthetic set */
} sl_dataset_info;

/* The built-in dataset, which needs no download: each class is a smooth
 * random pattern; a sample is its class pattern, randomly shifted and
 * scaled, plus noise. Learnable, not noise. Samples are a pure function of
 * (seed, split, index). num_classes >= 2, sizes >= 1. On success *out
 * owns it; free with sl_dataset_free. */
SL_API sl_status sl_dataset_synthetic(int num_classes, int channels, int height, int width,
                               uint64_t seed, sl_dataset **out);

/* MNIST from its uncompressed IDX files in dir (train-images-idx3-ubyte,
 * train-labels-idx1-ubyte, and optionally the t10k-* test pair; the
 * ".idx3-ubyte" spellings are accepted too). channels is 1 (the grey
 * images) or 3 (repeated into 3 equal channels, so RGB networks take
 * them unchanged). Pixels are scaled to [0, 1] and normalised with
 * MNIST's mean 0.1307 and standard deviation 0.3081. Every file is read
 * and checked whole when the set opens: a missing file is
 * SL_ERR_NOT_FOUND, an unreadable one SL_ERR_IO, a truncated, gzip'd or
 * foreign one (wrong magic, labels out of 0-9, image and label counts that
 * differ) SL_ERR_FORMAT, each with a message naming the file. The
 * training split is read in an order shuffled by seed; the test split in
 * file order. On failure *out is unchanged. */
SL_API sl_status sl_dataset_mnist(const char *dir, int channels, uint64_t seed, sl_dataset **out);

/* CIFAR-10's binary version (data_batch_1.bin .. data_batch_5.bin and
 * test_batch.bin, in dir or in dir/cifar-10-batches-bin), 3 x 32 x 32,
 * normalised with its usual per-channel mean and standard deviation;
 * errors and order as sl_dataset_mnist. */
SL_API sl_status sl_dataset_cifar10(const char *dir, uint64_t seed, sl_dataset **out);

/* Frees a dataset. Accepts NULL. */
SL_API void sl_dataset_free(sl_dataset *ds);

/* The dataset's kind, classes, sample shape and split sizes. */
SL_API sl_status sl_dataset_get_info(const sl_dataset *ds, sl_dataset_info *out);

/* Fills x (n x channels x height x width floats) and labels (n ints) with
 * samples index .. index + n - 1 of a split. File sets wrap around (index
 * counts on through epochs); a split without files is SL_ERR_NOT_FOUND. */
SL_API sl_status sl_dataset_batch(const sl_dataset *ds, sl_split split, int64_t index, int n,
                           float *x, int *labels);

/* ------------------------------------------------------------------ */
/* Token shards (llm.c's format)                                       */
/* ------------------------------------------------------------------ */

/* A file of tokens as llm.c writes them (and `sublinear tokenize`): a
 * header of 256 int32 [20240520, 1, count, 0 ...], then count uint16
 * tokens. Held in memory whole. */
typedef struct sl_token_shard sl_token_shard;

/* Reads a shard. SL_ERR_IO when the file cannot be read or is not a
 * regular file (a FIFO is refused, not waited on), SL_ERR_FORMAT naming
 * what is wrong when it is not a shard (another magic or version, a size
 * that does not match its count), SL_ERR_NOMEM. */
SL_API sl_status sl_token_shard_open(const char *path, sl_token_shard **out);
SL_API void sl_token_shard_free(sl_token_shard *s);
/* Whether every token of the shard is an id below vocab, the ids a model
 * with that vocabulary embeds: SL_OK, or SL_ERR_FORMAT naming the file,
 * the first token out of range, its offset (in tokens and in bytes of the
 * file) and the largest id. Call it once after opening, before training:
 * a batch that meets a bad id fails only when it is reached, and names
 * its place in the batch, not in the file. SL_ERR_INVALID_ARG for a NULL
 * shard or vocab < 1. Costs nothing after the open (which finds the
 * largest id) unless an id is out of range. */
SL_API sl_status sl_token_shard_check_vocab(const sl_token_shard *s, int vocab);
/* Writes tokens[0, count) as a shard at path (the header, then the
 * tokens as little-endian uint16), atomically: a temporary file beside
 * path is synced and renamed over it, so a failure (a full disk, a file
 * size limit) leaves a previous file at path as it was. SL_ERR_IO with
 * the reason (strerror) and what became of the previous file;
 * SL_ERR_INVALID_ARG for NULL arguments or more than 2^31 - 1 tokens (the
 * header's int32 count). */
SL_API sl_status sl_token_shard_write(const char *path, const uint16_t *tokens, size_t count);
/* The number of tokens in the shard. */
SL_API size_t sl_token_shard_count(const sl_token_shard *s);
/* How many distinct batches of batch x seq positions the shard holds:
 * (count - 1) / (batch * seq); 0 when it is too short for one. */
SL_API int64_t sl_token_shard_batch_count(const sl_token_shard *s, int batch, int seq);
/* Batch `index` (wrapping around: index counts on through epochs) as
 * llm.c's loader cuts it: batch * seq + 1 consecutive tokens from position
 * (index mod batches) * batch * seq; ids gets the first batch * seq and
 * targets the same shifted by one (the next token at every position).
 * SL_ERR_SHAPE when the shard is too short for one batch. */
SL_API sl_status sl_token_shard_batch(const sl_token_shard *s, int64_t index, int batch, int seq,
                                      int32_t *ids, int32_t *targets);

#ifdef __cplusplus
}
#endif

#endif /* SUBLINEAR_DATA_H */
