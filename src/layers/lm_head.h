/*
 * lm_head.h — a language model's head fused with its loss (layers stage).
 *
 * The logits of a row of hidden states h (C values) are h W^T, W the
 * [vocab, C] weight it is tied to (the token embedding). They are never
 * stored whole: rows go through in chunks, and for each chunk the head
 * computes the logits, the loss and, in training, at once the gradient of
 * the hidden states and adds that of W (Liger's fused linear
 * cross-entropy; "Cut Your Losses", 2024). Scratch is one chunk of
 * logits. With a chunk of every row it is the plain, unfused computation.
 */
#ifndef SL_LM_HEAD_H
#define SL_LM_HEAD_H

#include "layers/layer.h"

typedef struct sl_lm_head {
    sl_param_spec *weight; /* [vocab, channels]: data and grad used as they are */
    int vocab, channels;
    int ignore_index; /* labels equal to it count nothing */
    int chunk_rows;   /* rows per chunk; 0: as many as fit SL_LM_HEAD_CHUNK_BYTES */
} sl_lm_head;

/* Logit bytes of one chunk when chunk_rows is 0. */
#define SL_LM_HEAD_CHUNK_BYTES ((size_t)32 << 20)

/* Rows per chunk for a run of `rows` rows (chunks as equal as can be). */
int sl_lm_head_chunk(const sl_lm_head *h, int rows);
/* Planned scratch of a run of `rows` rows. */
size_t sl_lm_head_ws_bytes(const sl_lm_head *h, int rows);
/* FLOPs of the head's forward and of its backward over `rows` rows. */
uint64_t sl_lm_head_fwd_flops(const sl_lm_head *h, int rows);
uint64_t sl_lm_head_bwd_flops(const sl_lm_head *h, int rows);

/* Runs the head over rows x channels hidden states h (device memory).
 * labels (host, rows; NULL: no loss) are in [0, vocab) or ignore_index.
 * With dh (device, rows x channels) the loss is the mean over counted rows:
 * dh receives its gradient and weight->grad gets the gradient of W added.
 * logits_out (host, rows x vocab) receives the logits when not NULL.
 * ws is sl_lm_head_ws_bytes(rows) of scratch. *counted is the number of
 * rows whose label is not ignore_index; *loss (the mean loss of those
 * rows) and *hits (those of them whose first arg-max logit is the label)
 * are written at once on the CPU and by the next sync on a device, so
 * they must stay valid until then. */
void sl_lm_head_run(const sl_lm_head *hd, const sl_exec *ex, int rows, const float *h,
                    const int *labels, float *dh, float *logits_out, void *ws, float *loss,
                    int *hits, int *counted);

#endif
