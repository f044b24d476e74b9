/*
 * base.h — internal plumbing shared by every stage (the lowest folder,
 * src/base): error reporting, the context's fields, the Philox counter RNG
 * and small helpers. Not installed.
 */
#ifndef SL_BASE_H
#define SL_BASE_H

#include <stddef.h>
#include <stdint.h>

#include "sublinear.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records a formatted message for sl_last_error() and returns status. */
sl_status sl_fail(sl_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The current message (for wrapping: "sl_net_add: <previous>"). */
const char *sl_error_message(void);

struct sl_backend;

struct sl_context {
    sl_device device;
    int threads;
    uint64_t seed;
    uint64_t dropout_counter; /* next free Philox counter block for dropout */
    int deterministic;
    struct sl_backend *backend; /* owned: made by sl_backend_create */
    size_t device_free_at_start; /* CUDA: free device bytes at creation */
    /* The first failure of a custom layer's forward or backward in the
     * current run (layers/custom.c records it, the run reports it). */
    sl_status callback_status;
    char callback_error[512];
};

/* ---- Philox4x32-10 (Salmon et al., SC'11) ---- */

/* One Philox4x32-10 block: 4 random words for counter ctr under key. */
void sl_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* Standard normal and uniform draws for initialisation: element i of a
 * stream (seed, stream) is a pure function of those three numbers. */
float sl_random_normal(uint64_t seed, uint64_t stream, uint64_t i);
float sl_random_uniform(uint64_t seed, uint64_t stream, uint64_t i); /* [0,1) */

/* ---- helpers ---- */

static inline size_t sl_shape_count(sl_shape s)
{
    return (size_t)s.n * (size_t)s.c * (size_t)s.h * (size_t)s.w;
}

static inline int sl_shape_equal(sl_shape a, sl_shape b)
{
    return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w;
}

/* malloc/calloc that record a readable error on failure. */
void *sl_alloc(size_t bytes, const char *what);
void *sl_zalloc(size_t bytes, const char *what);
/* 64-byte aligned, zeroed; free with sl_aligned_free. */
void *sl_aligned_zalloc(size_t bytes, const char *what);
void sl_aligned_free(void *p);

/* Number of threads a context asks for, resolved (0 -> cores). */
int sl_context_threads(const sl_context *ctx);

#define SL_ALIGN 64
static inline size_t sl_align_up(size_t n) { return (n + SL_ALIGN - 1) & ~(size_t)(SL_ALIGN - 1); }

/* Floats a tensor of `count` floats takes in a block of tensors (parameters,
 * gradients, optimizer state): rounded up to SL_ALIGN bytes. */
static inline size_t sl_stride_floats(size_t count)
{
    return sl_align_up(count * sizeof(float)) / sizeof(float);
}

#define SL_NAME_MAX 128

/* dst = a + "." + b, truncated to fit n bytes. */
void sl_join_name(char *dst, size_t n, const char *a, const char *b);

#ifdef __cplusplus
}
#endif

#endif
