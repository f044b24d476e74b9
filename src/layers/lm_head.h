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
    int chunk_rows;   /* rows per chunk; 0: the automatic rule (sl_lm_head_chunk) */
} sl_lm_head;

/* The automatic rule's logit bytes of one chunk: at most 32 MiB on the
 * CPU; on a device at least `channels` rows a chunk where that stays
 * within 256 MiB. Each chunk reads and writes W's gradient once (2 V C
 * floats) beside its own logits' 4 n V: with n >= C that traffic is at
 * most half the logits', and a GPU gets a block per row of enough rows to
 * fill it (GPT-2 small at 8 x 1024 tokens: 11 chunks of 745 rows instead
 * of 50 of 164). The rule depends on the shape and the device, never on
 * the schedule: W's gradient is summed chunk by chunk, so every schedule
 * must use the same chunks to give the same bits. */
#define SL_LM_HEAD_CHUNK_BYTES ((size_t)32 << 20)
#define SL_LM_HEAD_DEVICE_CHUNK_BYTES ((size_t)256 << 20)

/* Rows per chunk for a run of `rows` rows (chunks as equal as can be) on
 * a device backend (1) or the CPU (0). */
int sl_lm_head_chunk(const sl_lm_head *h, int rows, int device);
/* A device's layout: cuBLAS's Hopper kernels want every leading
 * dimension and contiguous extent 16-byte aligned. With GPT-2's odd vocab
 * (50257) as the logits' row length and as the GEMMs' M, and 745-row
 * chunks as dW's K, an H100 ran the head's three GEMMs on Ampere kernels
 * ("align1") at about 90 TFLOP/s (21 ms of a 100 ms step, ncu,
 * 2026-11-26). So on a device:
 *   - a chunk's logit rows are vocab rounded up to the step apart
 *     (sl_lm_head_ld; the float head never writes or reads the columns
 *     past vocab; the bf16 head's products write and read zeros there,
 *     lm_head.c's head16_pass);
 *   - the float head's three GEMMs and the bf16 head's weight gradient
 *     take the vocabulary in two parts, the first vocab rounded down to
 *     the step, the rest (fewer than the step) in small GEMMs of their own
 *     (sl_lm_head_split); the bf16 head's logits and dh are one GEMM each
 *     over the padded vocabulary;
 *   - chunks of rows are whole multiples of the step where the cap
 *     allows (sl_lm_head_chunk).
 * The CPU keeps vocab, one part and equal chunks (tests take the device's
 * layout there with sl_lm_head_force_layout). */
#define SL_LM_HEAD_DEVICE_LD_STEP 32
/* Floats from one row of a chunk's logits to the next. */
int sl_lm_head_ld(const sl_lm_head *h, int device);
/* The vocabulary's first part (the rest are vocab - split). */
int sl_lm_head_split(const sl_lm_head *h, int device);
/* Tests: the CPU lays the head out as a device does with this step (0:
 * its own layout again). */
void sl_lm_head_force_layout(int step);
/* Planned scratch of a run of `rows` rows. */
size_t sl_lm_head_ws_bytes(const sl_lm_head *h, int rows, int device);
/* A bf16 network's head on bf16 products (the backend's gemm_bf16,
 * SL_BF16_GEMM; lm_head.c says how): its chunk rule (a chunk's bf16
 * logits, then their gradient over them, two bf16 copies of its rows and, in
 * the CPU's layout, a bf16 block of the weight within the float head's
 * chunk bytes; a device's layout keeps the whole weight in bf16 beside
 * the chunk), and
 * its scratch over `rows` rows on `be`, SIZE_MAX where the backend has no
 * bf16 GEMM for every product (the head then computes in float). */
int sl_lm_head_bf16_chunk(const sl_lm_head *h, int rows, int device);
size_t sl_lm_head_bf16_ws_bytes(const sl_lm_head *h, const sl_backend *be, int rows);
/* FLOPs of the head's forward and of its backward over `rows` rows. */
uint64_t sl_lm_head_fwd_flops(const sl_lm_head *h, int rows);
uint64_t sl_lm_head_bwd_flops(const sl_lm_head *h, int rows);

/* Runs the head over rows x channels hidden states h (device memory).
 * labels (host, rows; NULL: no loss) are in [0, vocab) or ignore_index.
 * With dh (device, rows x channels) the loss is the mean over counted rows:
 * dh receives its gradient and weight->grad gets the gradient of W added.
 * logits_out (host, rows x vocab) receives the logits when not NULL.
 * ws is sl_lm_head_ws_bytes(rows, !host_memory) of scratch. *counted is the number of
 * rows whose label is not ignore_index; *loss (the mean loss of those
 * rows) and *hits (those of them whose first arg-max logit is the label)
 * are written at once on the CPU and by the next sync on a device, so
 * they must stay valid until then. bf16: the products on bf16 (ws then
 * sl_lm_head_bf16_ws_bytes). */
void sl_lm_head_run(const sl_lm_head *hd, const sl_exec *ex, int rows, const float *h,
                    const int *labels, float *dh, float *logits_out, void *ws, float *loss,
                    int *hits, int *counted, int bf16);

#endif
