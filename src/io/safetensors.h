/*
 * safetensors.h — the safetensors container (safetensors.c) and atomic
 * file writes (atomic_file.c), io stage. Knows nothing of networks: it
 * parses and writes named, typed, shaped byte ranges; io/serialize.h maps
 * them onto a network's tensors.
 */
#ifndef SL_SAFETENSORS_H
#define SL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "io/json.h"

/* ---- the safetensors container ---- */

/* Room for the longest name we write ("optimizer." + param + ".exp_avg_sq"). */
#define SL_ST_NAME_MAX (SL_NAME_MAX + 32)
/* Dimensions kept per entry; a file may have more (it then matches nothing). */
#define SL_ST_DIMS_KEPT 8
/* The reference implementation refuses larger headers; so do we. */
#define SL_ST_HEADER_MAX 100000000ull

/* Every dtype of the reference implementation (0.8); a file naming any
 * other is invalid there and here. Only F32, F16 and BF16 load into a
 * network (io/serialize.c); the others are valid files whose tensors a
 * network cannot take. */
typedef enum sl_st_dtype {
    SL_ST_BOOL, SL_ST_F4, SL_ST_F6_E2M3, SL_ST_F6_E3M2, SL_ST_U8, SL_ST_I8, SL_ST_F8_E5M2,
    SL_ST_F8_E4M3, SL_ST_F8_E8M0, SL_ST_F8_E4M3FNUZ, SL_ST_F8_E5M2FNUZ, SL_ST_I16, SL_ST_U16,
    SL_ST_F16, SL_ST_BF16, SL_ST_I32, SL_ST_U32, SL_ST_F32, SL_ST_C64, SL_ST_F64, SL_ST_I64,
    SL_ST_U64, SL_ST_DTYPE_COUNT
} sl_st_dtype;

/* "F32" for SL_ST_F32. */
const char *sl_st_dtype_name(sl_st_dtype dtype);

/* One validated entry of a parsed file. */
typedef struct sl_st_entry {
    const char *name; /* owned by the parsed header; NUL-terminated, but the
                         name is name_len bytes and may itself hold NUL */
    size_t name_len;
    sl_st_dtype dtype;
    int ndim;
    uint64_t dims[SL_ST_DIMS_KEPT]; /* the first min(ndim, SL_ST_DIMS_KEPT) */
    uint64_t begin, end;            /* byte range in the data section */
    const uint8_t *data;            /* = data section + begin */
} sl_st_entry;

typedef struct sl_st_file {
    sl_json_doc doc;      /* the parsed header, owned */
    int metadata;         /* index in doc of the "__metadata__" object, or -1 */
    int n;
    sl_st_entry *entries; /* sorted by name, owned */
} sl_st_file;

/* Parses and validates a whole file held in memory as the reference
 * implementation does: the 8-byte header length, the header (strict JSON
 * in UTF-8, json.h; an object whose "__metadata__" is null or maps strings
 * to strings, and whose other members are tensors, each an object with
 * "dtype", "shape" and "data_offsets" or an array of those three, a dtype
 * written "F32" or {"F32": null}), and the data section (the entries'
 * ranges cover it exactly, with no overlap and no hole). Stricter than the
 * reference in two ways, both ambiguities it settles by keeping the last
 * copy: a tensor name or a "__metadata__" key that appears twice is
 * refused. buf must outlive out. `what` names the file in messages. On
 * failure SL_ERR_FORMAT (or SL_ERR_NOMEM) and *out is empty. */
sl_status sl_st_parse(const uint8_t *buf, size_t bytes, const char *what, sl_st_file *out);
void sl_st_release(sl_st_file *f);
/* The entry with this name, or NULL. */
const sl_st_entry *sl_st_find(const sl_st_file *f, const char *name);
/* The string value of a "__metadata__" key (NUL-terminated; *len, when not
 * NULL, gets its length, which exceeds strlen when it holds NUL), or NULL. */
const char *sl_st_metadata(const sl_st_file *f, const char *key, size_t *len);
/* Bits per element of a dtype (4 for F4, 6 for F6_*, 32 for F32). */
unsigned sl_st_dtype_bits(sl_st_dtype dtype);
/* The entry's name for messages (control bytes escaped), in buf. */
const char *sl_st_entry_label(const sl_st_entry *e, char *buf, size_t size);

/* ---- F16 and BF16 (half.c) ---- */

/* Exact widening of one F16 / BF16 value (bits as stored, little-endian
 * already read) to F32, NaN payloads kept. */
float sl_f16_to_f32(uint16_t h);
float sl_bf16_to_f32(uint16_t b);
/* Narrowing with round to nearest, ties to even; NaN stays a quiet NaN;
 * a finite value beyond the type's range becomes infinity (F16: at least
 * 65520 in magnitude; BF16: beyond about 3.39e38). */
uint16_t sl_f32_to_f16(float f);
uint16_t sl_f32_to_bf16(float f);

/* One tensor to write. */
typedef struct sl_st_tensor {
    char name[SL_ST_NAME_MAX];
    sl_st_dtype dtype; /* SL_ST_F32, SL_ST_F16, SL_ST_BF16 or SL_ST_I64 */
    int ndim;          /* 0 for a scalar */
    int dims[4];
    const void *data;  /* little-endian values, dims' product of them */
    size_t bytes;
} sl_st_tensor;

/* Writes a safetensors file atomically (atomic_file.c): tensors in the
 * given order, metadata as n_meta key/value string pairs. */
sl_status sl_st_write(const char *path, const sl_st_tensor *tensors, int n,
                      const char *const (*meta)[2], int n_meta, const char *fn);

/* ---- atomic writes and whole-file reads (atomic_file.c) ---- */

typedef struct sl_atomic_file {
    char *path; /* target, owned */
    char *tmp;  /* temporary in the same directory, owned */
    void *file; /* FILE * of tmp, which we hold an flock on */
    int dir_fd; /* the target's directory, open */
    uint64_t written;
    uint64_t expected_bytes; /* the whole file, for a full disk's message; 0 unknown */
    const char *fn;
    int had_previous; /* a file was at path when the save began */
} sl_atomic_file;

/* Removes the temporary files of earlier saves of path that no live
 * writer holds (left by a process killed while saving), then creates a
 * temporary file next to path (mkstemp) and locks it. SL_ERR_IO when the
 * directory is missing or not writable. */
sl_status sl_atomic_open(sl_atomic_file *af, const char *path, const char *fn);
/* Appends bytes; on failure the caller calls sl_atomic_abort. */
sl_status sl_atomic_write(sl_atomic_file *af, const void *data, size_t bytes);
/* fflush, fsync, close, rename over path, fsync the directory. On failure
 * the temporary file is removed and a previous file at path is intact. */
sl_status sl_atomic_commit(sl_atomic_file *af);
/* Closes and removes the temporary file (after a failed write). */
void sl_atomic_abort(sl_atomic_file *af);

/* Tests only: every later atomic write fails once a file has received
 * `bytes` bytes (those bytes are written first); negative switches the
 * failure off. Not thread-safe. */
void sl_atomic_test_fail_after(long long bytes);
/* Tests only: the errno those failures report (default EIO). */
void sl_atomic_test_fail_errno(int err);

#endif
