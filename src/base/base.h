/*
 * base.h — internal plumbing shared by every stage (base stage, the lowest
 * folder): error reporting, the context's fields, the Philox counter RNG
 * and small helpers. Not installed.
 */
#ifndef SL_BASE_H
#define SL_BASE_H

#include <stddef.h>
#include <stdint.h>

#include "sublinear.h"
#include "base/philox.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The status of the last sl_set_error on this thread (SL_OK before any). */
sl_status sl_error_status(void);

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

/* ---- Philox4x32-10 (Salmon et al., SC'11): the generator
 * sl_philox4x32_10 and the initialisation streams sl_random_normal /
 * sl_random_uniform are in base/philox.h ---- */

/* ---- helpers ---- */

static inline size_t sl_shape_count(sl_shape s)
{
    return (size_t)s.n * (size_t)s.c * (size_t)s.h * (size_t)s.w;
}

/* 1 for a layout the library knows (a caller's shape may hold anything). */
static inline int sl_layout_known(sl_layout l)
{
    return l == SL_LAYOUT_NCHW || l == SL_LAYOUT_NHWC;
}

/* 1 when the layout changes where a shape's values lie: more than one
 * channel at more than one position. Otherwise NCHW and NHWC are the same
 * memory (token ids {B, 1, T, 1}, feature vectors {n, c, 1, 1}). */
static inline int sl_layout_matters(sl_shape s)
{
    return s.c > 1 && (s.h > 1 || s.w > 1);
}

/* The shape's values lie as NCHW planes (its layout says so, or does not
 * matter). */
static inline int sl_shape_planar(sl_shape s)
{
    return s.layout == SL_LAYOUT_NCHW || !sl_layout_matters(s);
}

/* The shape's values lie as rows of channels, NHWC (a sequence). */
static inline int sl_shape_rows(sl_shape s)
{
    return s.layout == SL_LAYOUT_NHWC || !sl_layout_matters(s);
}

/* 1 when a and b are the same tensor in memory: the same sizes, and the
 * same layout where it matters. */
static inline int sl_shape_equal(sl_shape a, sl_shape b)
{
    return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w &&
           (a.layout == b.layout || !sl_layout_matters(a));
}

/* A shape for messages: "2x3x32x32" (NCHW), "4x1024x768 (B x T x C)" (a
 * sequence), "2x32x32x3 (NHWC)"; written into buf (SL_SHAPE_STR bytes),
 * which it returns. */
#define SL_SHAPE_STR 80
const char *sl_shape_str(sl_shape s, char *buf);

/* The library's allocator (alloc.c): malloc, calloc, realloc, strdup and
 * 64-byte aligned malloc, each NULL on failure with no message (a zero
 * size allocates one byte). Free with sl_free (= free). Every allocation of
 * the library goes through these, so tests can inject failures. */
void *sl_malloc(size_t bytes);
void *sl_calloc(size_t n, size_t size);
void *sl_realloc(void *p, size_t bytes);
void *sl_aligned_malloc(size_t bytes);
char *sl_strdup(const char *s);
void sl_free(void *p);

/* Tests only: with n > 0 the n-th allocation from now fails (once); with
 * n < 0 allocations are only counted; 0 switches both off. Not
 * thread-safe: call it while no other thread uses the library. */
void sl_test_alloc_fail_at(long n);
/* Allocations since the last sl_test_alloc_fail_at with n != 0. */
long sl_test_alloc_count(void);

/* sl_malloc/sl_calloc that record a readable error on failure. */
void *sl_alloc(size_t bytes, const char *what);
void *sl_zalloc(size_t bytes, const char *what);
/* 64-byte aligned, zeroed; free with sl_aligned_free. */
void *sl_aligned_zalloc(size_t bytes, const char *what);
void sl_aligned_free(void *p);

/* Reads a regular file whole into *data (free with sl_free), followed by
 * a NUL that *bytes does not count (so text can be parsed in place).
 * SL_ERR_IO (a missing or unreadable file, or one that is not a regular
 * file: a FIFO, a directory or a device is refused without blocking) or
 * SL_ERR_NOMEM, with a message that starts with fn and names the file. */
sl_status sl_read_whole_file(const char *path, const char *fn, uint8_t **data, size_t *bytes);

/* The length (1 to 4) of the valid UTF-8 character that starts s[0, n),
 * or 0 when none does (Rust's str::from_utf8 rules: no overlong forms,
 * no surrogates, nothing above U+10FFFF, no truncated sequence); the
 * code point in *cp when cp is not NULL. */
size_t sl_utf8_char(const uint8_t *s, size_t n, uint32_t *cp);

/* s[0, n) made safe to quote in a message: printable ASCII and valid
 * UTF-8 are kept (a backslash doubled), control characters become \u00XX
 * and bytes that are not valid UTF-8 \xHH; cut with "..." to fit size
 * bytes (NUL included). For every message that echoes a file's content. */
void sl_printable(char *buf, size_t size, const void *s, size_t n);

/* Host memory this process may still take (sysmem.c): the least of
 * MemAvailable, the room under the memory cgroup's limit and the room
 * under RLIMIT_AS less address_reserve (address space the caller's work
 * will map besides what it asks about), with the binding one's limit, use
 * (MemTotal less MemAvailable for the host's memory) and name; reserved is
 * address_reserve when RLIMIT_AS binds, else 0. known = 0 when none could
 * be read (not Linux). */
typedef struct sl_host_memory {
    int known;
    uint64_t available, limit, used, reserved;
    char source[48];
} sl_host_memory;
sl_host_memory sl_host_memory_available(uint64_t address_reserve);

/* A thread count as options give it, resolved (0 or less -> cores). */
int sl_threads_resolve(int threads);
/* Number of threads a context asks for, resolved (0 -> cores). */
int sl_context_threads(const sl_context *ctx);

/* Seconds on a monotonic clock (for timing). */
double sl_now_seconds(void);

/* `for HEADER BODY` split over `threads` OpenMP threads (static schedule)
 * when threads > 1 and cond holds; otherwise run by the calling thread
 * without entering OpenMP at all. libgomp allocates a team for every
 * parallel region, even one of a single thread, and ends the process when
 * that allocation fails: a one-thread context never calls into it.
 * HEADER is parenthesised and BODY braced:
 *     SL_PARALLEL_FOR(t, n > 1000, (long i = 0; i < n; i++), { y[i] = x[i]; }); */
#define SL_PARALLEL_FOR(threads, cond, header, ...)                                 \
    do {                                                                            \
        int sl_team_ = (cond) ? (threads) : 1;                                      \
        if (sl_team_ > 1) {                                                         \
            _Pragma("omp parallel for num_threads(sl_team_) schedule(static)")      \
            for header __VA_ARGS__                                                  \
        } else {                                                                    \
            for header __VA_ARGS__                                                  \
        }                                                                           \
    } while (0)

#define SL_ALIGN 64
/* Sums and products of byte and FLOP counts that stop at UINT64_MAX
 * instead of wrapping, so that a planned figure too large for 64 bits is
 * refused or reported as saturated, never as its remainder mod 2^64. */
static inline uint64_t sl_add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static inline uint64_t sl_mul_sat(uint64_t a, uint64_t b)
{
    return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static inline uint64_t sl_mul3_sat(uint64_t a, uint64_t b, uint64_t c)
{
    return sl_mul_sat(sl_mul_sat(a, b), c);
}

/* The element count of a shape, saturating: the layers' FLOP formulas run
 * before the shape pass refuses an oversized step, on any shape. */
static inline uint64_t sl_shape_count_sat(sl_shape s)
{
    return sl_mul_sat(sl_mul3_sat((uint64_t)s.n, (uint64_t)s.c, (uint64_t)s.h), (uint64_t)s.w);
}

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
