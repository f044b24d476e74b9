/*
 * serialize.h — saving and loading networks (internal, io stage): the
 * mapping between a network's tensors and a file's entries shared by
 * models (serialize.c) and training snapshots (snapshot.c), over the
 * container of io/safetensors.h. Reads and writes the parameter block that
 * the net stage owns.
 */
#ifndef SL_SERIALIZE_H
#define SL_SERIALIZE_H

#include <stddef.h>
#include <stdint.h>

#include "io/safetensors.h"
#include "net/net.h"

/* ---- networks <-> files (serialize.c) ---- */

/* A tensor the network expects from a file. */
typedef struct sl_tensor_slot {
    char name[SL_ST_NAME_MAX];
    int ndim;
    int dims[4];
    size_t count;       /* floats */
    const uint8_t *src; /* its bytes in the file once matched, else NULL */
    sl_st_dtype src_dtype; /* F32, F16 or BF16 once matched */
} sl_tensor_slot;

/* Copies a matched slot's values into dst (count floats), widening F16 and
 * BF16 exactly. */
void sl_slot_copy(float *dst, const sl_tensor_slot *slot);

/* Matches a parsed file against slots: sets each slot's src; reports
 * missing, unexpected and mismatched (shape, or a dtype other than F32,
 * F16 and BF16) tensors through opts->on_issue and counts them in *report
 * (may be NULL). Ignored (counted, not loaded): every
 * "*.num_batches_tracked"; "P.attn.bias" and "P.attn.masked_bias" where
 * a slot "P.attn.c_attn.weight" exists (Hugging Face's GPT-2 buffers);
 * and, when tied_head names the tensor a tied LM head uses (NULL: none),
 * "lm_head.weight" if it equals the file's tied_head tensor, a mismatch
 * if not. When opts->strict and anything did not match, fails naming the
 * first problem. Never touches a network. */
sl_status sl_match_tensors(const sl_st_file *f, sl_tensor_slot *slots, int n,
                           const sl_load_options *opts, sl_load_report *report, const char *what,
                           const char *tied_head, const char *fn);

/* Fails (SL_ERR_FORMAT) when a matched slot (src set) holds a NaN or an
 * infinity, naming the tensor and the index of its first such value;
 * slots without src are skipped. fn and what (the file) open the
 * message. */
sl_status sl_check_finite(const sl_tensor_slot *slots, int n, const char *what, const char *fn);

/* sl_save_model_with and sl_save_snapshot on this process alone, whether or
 * not the network is in a communicator (the communicator's save calls
 * them on rank 0); fn names the public call in messages. */
sl_status sl_save_model_here(sl_net *net, const char *path, sl_file_dtype dtype, const char *fn);
sl_status sl_save_snapshot_here(sl_net *net, const char *path, const char *fn);

/* Slots for every named tensor of a (materialised) network, in its order. */
sl_status sl_net_tensor_slots(sl_net *net, sl_tensor_slot **slots, int *n);

/* The tensors of a model file: every parameter and running statistic, and
 * an I64 "<bn>.num_batches_tracked" after each BatchNorm's running_var
 * holding *steps, with data in the host view. Room for `extra` more
 * entries at the end. */
sl_status sl_net_model_tensors(sl_net *net, const sl_host_view *view, const int64_t *steps,
                               int extra, sl_st_tensor **tensors, int *n);

/* Loads a network from the file at path: reads it whole, calls load on
 * its bytes (what = path), frees them; a failure undoes what the call did
 * on the network's first use. fn names the public call in messages. */
typedef sl_status (*sl_bytes_loader)(sl_net *net, const uint8_t *buf, size_t bytes,
                                     const char *what, void *user);
sl_status sl_net_load_file(sl_net *net, const char *path, const char *fn, sl_bytes_loader load,
                           void *user);

/* sl_load_snapshot_with on a file held in memory (the fuzz target calls
 * it); opts may be NULL for sl_load_defaults(). */
sl_status sl_snapshot_load_memory(sl_net *net, const uint8_t *buf, size_t bytes,
                                  const char *what, const sl_load_options *opts);

#endif
