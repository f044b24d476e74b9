/*
 * sublinear/io.h — thin model files (parameters and BatchNorm running
 * statistics, safetensors) and snapshots that resume training exactly;
 * every write is atomic.
 *
 *     sl_save_model(net, "model.safetensors");
 *     sl_load_model(other, "model.safetensors", NULL, NULL);
 */
#ifndef SUBLINEAR_IO_H
#define SUBLINEAR_IO_H

#include "sublinear/core.h"
#include "sublinear/net.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Saving and loading                                                  */
/* ------------------------------------------------------------------ */

/* Files are .safetensors: an 8-byte little-endian header length, a JSON
 * header naming each tensor's dtype, shape and data_offsets, then the raw
 * little-endian data. Tensor names are torchvision's ("layer1.0.conv1.weight",
 * "bn1.running_mean"), so PyTorch's load_state_dict reads a model file and
 * a file written from a torchvision state_dict loads here.
 *
 * Every write is atomic: the file is written to a temporary file in the
 * target's directory (".<name>.tmp.XXXXXX", locked with flock while it is
 * written), synced, and renamed over the target. A write that fails (a
 * missing or read-only directory, a full disk: the disk needs room for
 * the new file beside the old one) returns SL_ERR_IO, removes the
 * temporary file and leaves a previous file at path intact. A process
 * killed while saving leaves its temporary file behind; the next save of
 * the same path removes every such file that no live writer holds.
 * Names are bytes: a name holding "\u0000" is a different name from its
 * prefix (messages and on_issue show such names with control characters
 * escaped as \u00XX).
 *
 * Every load validates the whole file and stages it before it changes the
 * network: on any failure the network's tensors (and, for snapshots, its
 * optimizer and step count) are as they were. Errors name the tensor and
 * the problem:
 *   SL_ERR_IO         the file cannot be opened or read
 *   SL_ERR_FORMAT     truncated or not safetensors: a header length beyond
 *                     the file, a header that is not strict JSON in UTF-8
 *                     (the reference implementation's rules: no raw control
 *                     characters, no lone surrogates, integers only where
 *                     integers belong, at most 127 levels of nesting), a dtype
 *                     the reference does not know, offsets out of range,
 *                     overlapping, leaving holes or not matching the shape
 *                     (in every mode); a tensor name or "__metadata__" key
 *                     that appears twice (the reference keeps the last
 *                     copy; we refuse the ambiguity); a tensor of the
 *                     network stored with a dtype other than F32, F16 or
 *                     BF16 (strict)
 *   SL_ERR_NOMEM      memory ran out while reading or checking the file
 *   SL_ERR_NOT_FOUND  a tensor of the network is missing from the file, or
 *                     the file has a tensor the network does not (strict)
 *   SL_ERR_SHAPE      a tensor's shape differs from the network's (strict)
 * and SL_ERR_FORMAT also for a tensor holding a NaN or an infinity (in
 * every mode, unless sl_load_options.allow_nonfinite), e.g. "tensor
 * 'fc.weight' holds NaN at element 5 (index [1, 1]) of 12".
 */

/* What a load found wrong with one tensor. */
typedef enum sl_load_issue {
    SL_LOAD_MISSING = 0, /* the network has it, the file does not */
    SL_LOAD_UNEXPECTED,  /* the file has it, the network does not */
    SL_LOAD_MISMATCHED   /* both have it, with a different shape or dtype */
} sl_load_issue;

/* Called once per tensor with an issue, in both modes, before the load
 * succeeds or fails. name and detail (e.g. "shape [10, 64] in the file,
 * [5, 64] in the network") are valid during the call only. */
typedef void (*sl_load_issue_fn)(void *user, const char *name, sl_load_issue issue,
                                 const char *detail);

typedef struct sl_load_options {
    /* 1 (default): any issue fails the load, which changes nothing.
     * 0: the tensors that match are loaded, the others are reported and
     * keep their values. */
    int strict;
    sl_load_issue_fn on_issue; /* may be NULL */
    void *user;                /* passed to on_issue */
    /* 0 (default): a NaN or infinite value in any tensor the load would
     * copy (F32, F16 or BF16) fails the load, in both modes, with
     * SL_ERR_FORMAT naming the tensor and the index of its first such
     * value, and nothing is loaded: such a network computes NaN, and a
     * run trained from it only finds out at its first loss. 1: load
     * them as they are (to inspect a diverged run's file). */
    int allow_nonfinite;
} sl_load_options;

/* Counts of one load; filled also when a strict load fails on issues. */
typedef struct sl_load_report {
    int loaded;     /* tensors copied into the network */
    int ignored;    /* entries accepted without loading (see sl_load_model) */
    int missing, unexpected, mismatched;
} sl_load_report;

/* Strict, no callback, non-finite values refused. */
SL_API sl_load_options sl_load_defaults(void);

/* Saves the parameters and BatchNorm running statistics (F32), never
 * gradients, activations, workspaces or optimizer state, so a model file
 * is as large as its parameters plus a header. After each BatchNorm's
 * running statistics it writes "<bn>.num_batches_tracked" as an I64
 * scalar holding sl_net_step_count(), as PyTorch's state_dict has it, so
 * load_state_dict(strict=True) accepts the file. __metadata__ is
 * {"format": "pt", "producer": "sublinear"}. path is written atomically
 * (see above). Finalises the network as sl_net_param_count does. */
SL_API sl_status sl_save_model(sl_net *net, const char *path);

/* The float type of a saved model's parameters and running statistics. */
typedef enum sl_file_dtype {
    SL_FILE_F32 = 0, /* exact */
    SL_FILE_BF16 = 1, /* bfloat16: F32's range, 8 significant bits; half the file */
    SL_FILE_F16 = 2   /* IEEE half: 11 significant bits, largest finite 65504 */
} sl_file_dtype;

typedef struct sl_save_options {
    /* The tensors' type in the file (default SL_FILE_F32). F32 values are
     * rounded to nearest, ties to even (IEEE 754's default; NaN stays
     * NaN). A finite value beyond the type's range (F16: |x| >= 65520)
     * fails the save with SL_ERR_INVALID_ARG naming the tensor, and
     * nothing is written. Loading widens F16 and BF16 back to F32
     * exactly. */
    sl_file_dtype dtype;
} sl_save_options;

/* F32. */
SL_API sl_save_options sl_save_defaults(void);

/* sl_save_model with options; opts may be NULL for sl_save_defaults().
 * SL_ERR_INVALID_ARG for a dtype that is none of SL_FILE_*. */
SL_API sl_status sl_save_model_with(sl_net *net, const char *path, const sl_save_options *opts);

/* Loads a model file into a built network with the same tensor names.
 * opts may be NULL for sl_load_defaults(); report may be NULL. Three
 * kinds of file entries that the network has no tensor for are accepted
 * and ignored in both modes (counted in report->ignored), and no others:
 *  - "*.num_batches_tracked": PyTorch's BatchNorm counters, which this
 *    library does not use;
 *  - "P.attn.bias" and "P.attn.masked_bias" where the network has
 *    "P.attn.c_attn.weight": the causal-mask buffers that Hugging Face's
 *    GPT-2 attention stored in older files;
 *  - "lm_head.weight" in a network whose LM head is tied to a tensor W
 *    (sl_net_set_lm_head; GPT-2's W is "transformer.wte.weight"), when the
 *    file's lm_head.weight equals the file's W (shape and every value,
 *    compared as F32): the same tied tensor stored twice. One that differs
 *    is a mismatch ("an untied LM head cannot load into it"): strict loads
 *    fail with SL_ERR_FORMAT, others report it and load the rest.
 * Tensors
 * may be F32, F16 or BF16: F16 and BF16 widen to F32 exactly (every value
 * of either is a float), in strict mode too. A tensor of another dtype
 * (F64, an integer or 8-bit float type, ...) is a mismatch of that tensor
 * only: strict loads fail, non-strict loads report it and skip it, and a
 * file tensor the network does not have is "unexpected" whatever its
 * dtype. A snapshot's weights load with strict = 0
 * (its optimizer state is then reported as unexpected). Errors: see
 * above; on failure the network is unchanged. */
SL_API sl_status sl_load_model(sl_net *net, const char *path, const sl_load_options *opts,
                        sl_load_report *report);

/* sl_load_model from a file's bytes in memory (data, bytes; the caller
 * keeps ownership, nothing is kept after the call). */
SL_API sl_status sl_load_model_memory(sl_net *net, const void *data, size_t bytes,
                               const sl_load_options *opts, sl_load_report *report);

/* Saves everything needed to resume training exactly: the model file's
 * tensors; the optimizer's state as "optimizer.<param>.momentum_buffer"
 * (SGD with momentum) or "optimizer.<param>.exp_avg" and ".exp_avg_sq"
 * (Adam), F32; and, as strings in __metadata__ ("format":
 * "sublinear-snapshot"), the optimizer kind and hyperparameters, the step
 * count, and the context's seed and dropout counter. SL_ERR_STATE when no
 * optimizer is set. Written atomically. */
SL_API sl_status sl_save_snapshot(sl_net *net, const char *path);

/* Resumes from a snapshot: loads it (always strictly) into a network of
 * the same architecture, sets the file's optimizer (replacing any the
 * network has, or setting one where it has none) with its state and step
 * count, and sets the seed and dropout counter of the network's context
 * (shared with every network of that context). Training on from here
 * gives bit for bit the parameters of never having stopped. SL_ERR_FORMAT
 * for a file that is not a snapshot; otherwise errors as sl_load_model;
 * on failure the network and its context are unchanged. */
SL_API sl_status sl_load_snapshot(sl_net *net, const char *path);

/* sl_load_snapshot with options (NULL: sl_load_defaults()): on_issue and
 * allow_nonfinite as for sl_load_model, which apply to the optimizer
 * state's tensors too; strict is ignored (a snapshot always loads
 * strictly). */
SL_API sl_status sl_load_snapshot_with(sl_net *net, const char *path, const sl_load_options *opts);

#ifdef __cplusplus
}
#endif

#endif /* SUBLINEAR_IO_H */
