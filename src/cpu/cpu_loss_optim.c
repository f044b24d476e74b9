/*
 * cpu_loss_optim.c — the end of a training step on the CPU (run stage):
 * softmax cross-entropy with its gradient, and the SGD and Adam updates
 * with PyTorch's rules (torch.optim.SGD with dampening 0, torch.optim.Adam
 * with L2 weight decay added to the gradient, torch.optim.AdamW), and the
 * sum of squares behind the gradient norm. The per-row and
 * per-parameter rules are base/element.h's, shared with
 * cuda_loss_optim.cu; here only the threading and the in-order sum of the
 * row losses.
 */
#include "base/element.h"
#include "cpu/cpu.h"

/* Rows of a language model's loss chunk are independent: one thread each
 * (bf16 rows, ex->bf16, widened as read and rounded as written). */
void sl_cpu_lm_xent(const sl_exec *ex, int rows, int vocab, int ld, float *logits,
                    const int *labels, int ignore_index, float scale, int grad, double *row_loss,
                    int *row_hit)
{
    int par = (double)rows * vocab >= CPU_PAR_MIN;
    if (ex->bf16) {
        uint16_t *x16 = (uint16_t *)(void *)logits;
        SL_PARALLEL_FOR(cpu_threads(ex), par, (int r = 0; r < rows; r++), {
            sl_lm_xent_row_bf16(x16 + (size_t)r * ld, vocab, labels[r], ignore_index, scale,
                                grad, &row_loss[r], &row_hit[r]);
        });
        return;
    }
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int r = 0; r < rows; r++), {
        sl_lm_xent_row(logits + (size_t)r * ld, vocab, labels[r], ignore_index, scale, grad,
                       &row_loss[r], &row_hit[r]);
    });
}

/* dlogits rows are independent (one thread each); the loss and the count of
 * correct rows are then summed by one thread, rows in order, in double. */
void sl_cpu_softmax_xent(const sl_exec *ex, int n, int classes, const float *logits,
                         const int *labels, float *dlogits, float *loss, int *correct, void *ws)
{
    (void)ws;
    int par = (double)n * classes >= CPU_PAR_MIN;
    float inv_n = 1.0f / (float)n;
    if (dlogits) {
        SL_PARALLEL_FOR(cpu_threads(ex), par, (int r = 0; r < n; r++), {
            const float *x = logits + (size_t)r * classes;
            float *g = dlogits + (size_t)r * classes;
            int arg;
            float mx = sl_row_max(x, classes, &arg);
            sl_xent_row_grad(x, classes, mx, labels[r], inv_n, g);
        });
    }
    double total = 0.0;
    int hits = 0;
    for (int r = 0; r < n; r++) {
        const float *x = logits + (size_t)r * classes;
        int arg;
        float mx = sl_row_max(x, classes, &arg);
        total += sl_xent_row_loss(x, classes, mx, labels[r]);
        hits += arg == labels[r];
    }
    if (loss)
        *loss = n > 0 ? (float)(total / n) : 0.0f;
    if (correct)
        *correct = hits;
}

/* The optimizers' loops run a span of OPT_SPAN elements at a time: the
 * tensors restrict (a parameter, its gradient and its state are distinct
 * arrays) and the step's constants local copies, so the loop's branches
 * are invariant and it vectorises (sqrtf inline: -fno-math-errno, the
 * IEEE square root either way). Elementwise: the same bits as one element
 * at a time, whatever the split. */
#define OPT_SPAN 16384

static long long opt_spans(size_t count) { return (long long)((count + OPT_SPAN - 1) / OPT_SPAN); }

static size_t span_end(long long c, size_t count)
{
    size_t hi = (size_t)(c + 1) * OPT_SPAN;
    return hi < count ? hi : count;
}

static void sgd_span(size_t lo, size_t hi, float *restrict w, const float *restrict g,
                     float *restrict mom, float lr, float momentum, float weight_decay,
                     int nesterov, int first, float grad_scale)
{
    for (size_t i = lo; i < hi; i++)
        sl_sgd_element(i, w, g, mom, lr, momentum, weight_decay, nesterov, first, grad_scale);
}

static void adam_span(size_t lo, size_t hi, float *restrict w, const float *restrict g,
                      float *restrict m, float *restrict v, sl_adam_step a)
{
    for (size_t i = lo; i < hi; i++)
        sl_adam_element(i, w, g, m, v, &a);
}

void sl_cpu_sgd_update(const sl_exec *ex, size_t count, float *w, const float *g, float *mom,
                       float lr, float momentum, float weight_decay, int nesterov, int first,
                       float grad_scale)
{
    SL_PARALLEL_FOR(cpu_threads(ex), count >= CPU_PAR_MIN,
                    (long long c = 0; c < opt_spans(count); c++), {
        sgd_span((size_t)c * OPT_SPAN, span_end(c, count), w, g, mom, lr, momentum,
                 weight_decay, nesterov, first, grad_scale);
    });
}

/* PyTorch's arithmetic (sl_adam_element). */
void sl_cpu_adam_update(const sl_exec *ex, size_t count, float *w, const float *g, float *m,
                        float *v, float lr, float beta1, float beta2, float eps,
                        float weight_decay, int decoupled, int64_t step, float grad_scale)
{
    sl_adam_step a = sl_adam_step_of(lr, beta1, beta2, eps, weight_decay, decoupled, step,
                                     grad_scale);
    SL_PARALLEL_FOR(cpu_threads(ex), count >= CPU_PAR_MIN,
                    (long long c = 0; c < opt_spans(count); c++),
                    { adam_span((size_t)c * OPT_SPAN, span_end(c, count), w, g, m, v, a); });
}

/* Each thread takes groups of SUMSQ_GROUP slots (4 KiB of a row: one page,
 * read in turn) and walks the rows of
 * SL_SUM_SQUARES_SLOTS elements (contiguous reads); every slot still adds
 * its elements in index order, as the GPU's thread of that slot does. */
#define SUMSQ_GROUP 1024
void sl_cpu_sum_squares(const sl_exec *ex, size_t count, const float *x, double *slots)
{
    const size_t row = SL_SUM_SQUARES_SLOTS;
    SL_PARALLEL_FOR(cpu_threads(ex), count >= CPU_PAR_MIN,
                    (int g = 0; g < SL_SUM_SQUARES_SLOTS / SUMSQ_GROUP; g++), {
        double acc[SUMSQ_GROUP] = {0.0};
        size_t t0 = (size_t)g * SUMSQ_GROUP;
        for (size_t r = 0; r * row + t0 < count; r++) {
            const float *xr = x + r * row + t0;
            size_t n = count - (r * row + t0);
            n = n < SUMSQ_GROUP ? n : SUMSQ_GROUP;
            for (size_t k = 0; k < n; k++)
                acc[k] = sl_square_add(acc[k], xr[k]);
        }
        for (int k = 0; k < SUMSQ_GROUP; k++)
            slots[t0 + (size_t)k] += acc[k];
    });
}
