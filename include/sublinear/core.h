/*
 * sublinear/core.h — status codes and errors, shapes, and the context
 * (device, threads, seed) every network is made from; the export marker
 * and the version. Included by every other header of the library.
 *
 *     sl_context *ctx;
 *     if (sl_context_create(NULL, &ctx) != SL_OK)
 *         fprintf(stderr, "%s\n", sl_last_error());
 *     ...
 *     sl_context_free(ctx);
 */
#ifndef SUBLINEAR_CORE_H
#define SUBLINEAR_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* SL_API marks every public declaration. The library is built with
 * hidden visibility: a shared libsublinear exports these and nothing
 * else, and every other symbol of the static library starts with sl_. */
#if defined(__GNUC__) || defined(__clang__)
#define SL_API __attribute__((visibility("default")))
#else
#define SL_API
#endif

#define SL_VERSION_MAJOR 0
#define SL_VERSION_MINOR 1
#define SL_VERSION_PATCH 0

/* ------------------------------------------------------------------ */
/* Status and errors                                                   */
/* ------------------------------------------------------------------ */

typedef enum sl_status {
    SL_OK = 0,
    SL_ERR_INVALID_ARG,  /* a NULL handle, a negative size, an unknown name */
    SL_ERR_SHAPE,        /* a tensor shape a layer cannot take */
    SL_ERR_NOMEM,        /* an allocation failed */
    SL_ERR_IO,           /* a file could not be read or written */
    SL_ERR_FORMAT,       /* a file is truncated, foreign or inconsistent */
    SL_ERR_NOT_FOUND,    /* a named tensor or model does not exist */
    SL_ERR_BUDGET,       /* a memory budget that no schedule can meet */
    SL_ERR_STATE,        /* the call is not valid in the object's state */
    SL_ERR_BACKEND,      /* the compute backend (e.g. CUDA) reported a failure */
    SL_ERR_UNSUPPORTED   /* valid request, not implemented in this build */
} sl_status;

/* The message of the last failed call on this thread. Never NULL; the
 * string stays valid until the next failing call on this thread. */
SL_API const char *sl_last_error(void);

/* A short constant name for a status ("SL_ERR_SHAPE"). Never NULL. */
SL_API const char *sl_status_name(sl_status status);

/* Records a message for sl_last_error() (printf format) and returns
 * status: how a callback says why it fails. */
SL_API sl_status sl_set_error(sl_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ------------------------------------------------------------------ */
/* Shapes                                                              */
/* ------------------------------------------------------------------ */

/* How a 4-d tensor lies in memory. */
typedef enum sl_layout {
    SL_LAYOUT_NCHW = 0, /* images: n planes of c channels of h x w (the default) */
    SL_LAYOUT_NHWC = 1  /* channels innermost: n x h x w rows of c values. A
                           sequence [B, T, C] is NHWC with n = B, h = T, w = 1 */
} sl_layout;

/* A 4-d shape: n images (or sequences) of c channels over h x w positions,
 * laid out as `layout` says. Feature vectors (after Flatten or Linear) are
 * {n, features, 1, 1}, token ids [B, T] are {B, 1, T, 1}: where c == 1 or
 * h * w == 1 both layouts are the same memory and either may be given.
 * Build shapes with sl_shape_nchw and sl_shape_seq; a brace initialiser
 * that lists four fields leaves layout 0, NCHW. Convolutions, pooling and
 * BatchNorm take NCHW; LayerNorm, attention, Conv1D and the language-model
 * head take rows of channels (NHWC, as a sequence is). */
typedef struct sl_shape {
    int n, c, h, w;
    sl_layout layout;
} sl_shape;

/* An NCHW shape. */
static inline sl_shape sl_shape_nchw(int n, int c, int h, int w)
{
    sl_shape s = {n, c, h, w, SL_LAYOUT_NCHW};
    return s;
}

/* A sequence [b, t, c]: b sequences of t positions of c channels, the
 * channels innermost ({b, c, t, 1} in NHWC). */
static inline sl_shape sl_shape_seq(int b, int t, int c)
{
    sl_shape s = {b, c, t, 1, SL_LAYOUT_NHWC};
    return s;
}

/* ------------------------------------------------------------------ */
/* Context: device, threads, seed                                      */
/* ------------------------------------------------------------------ */

typedef enum sl_device { SL_DEVICE_CPU = 0, SL_DEVICE_CUDA = 1 } sl_device;

typedef struct sl_context_options {
    sl_device device;  /* SL_DEVICE_CPU (default) or SL_DEVICE_CUDA */
    int threads;       /* CPU threads for kernels (an OpenMP team); 0 = all
                          cores. On cores shared with other processes set
                          OMP_WAIT_POLICY=passive in the environment: spinning
                          waits can slow a step many times (docs/guide.md) */
    uint64_t seed;     /* seeds weight initialisation and dropout */
    int deterministic; /* CUDA: deterministic cuDNN algorithms only (default
                          1): checkpointed and plain gradients then match bit
                          for bit, as they always do on the CPU */
    int gpu;           /* CUDA: the device ordinal to run on (default 0);
                          a value past the machine's devices is an error */
    int tf32;          /* CUDA: 1 lets convolutions and GEMMs round their
                          inputs to TF32 on tensor cores (PyTorch's default
                          for convolutions); 0 (default) keeps true FP32
                          arithmetic, as on the CPU */
} sl_context_options;

typedef struct sl_context sl_context;

/* Defaults: CPU, all cores, seed 0, deterministic, GPU 0, no TF32. */
SL_API sl_context_options sl_context_defaults(void);

/* Creates a context. opts may be NULL for the defaults. On success *out
 * owns a new context; free it with sl_context_free() after every network
 * made from it. SL_DEVICE_CUDA fails with SL_ERR_UNSUPPORTED when this
 * build has no CUDA backend or no device is usable, and with
 * SL_ERR_INVALID_ARG when opts->gpu names no device of this machine (the
 * message says which, and how many there are). */
SL_API sl_status sl_context_create(const sl_context_options *opts, sl_context **out);
SL_API void sl_context_free(sl_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* SUBLINEAR_CORE_H */
