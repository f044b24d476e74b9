/*
 * cpu_loss_optim.c — the end of a training step on the CPU (run stage):
 * softmax cross-entropy with its gradient, and the SGD and Adam updates
 * with PyTorch's rules (torch.optim.SGD with dampening 0, torch.optim.Adam
 * with L2 weight decay added to the gradient).
 */
#include <math.h>

#include "cpu/cpu.h"

/* Row r's maximum logit and the index of its first maximum. */
static float row_max(const float *x, int classes, int *arg)
{
    float best = x[0];
    int at = 0;
    for (int j = 1; j < classes; j++) {
        if (x[j] > best) {
            best = x[j];
            at = j;
        }
    }
    *arg = at;
    return best;
}

/* dlogits rows are independent (one thread each); the loss and the count of
 * correct rows are then summed by one thread, rows in order, in double. */
void cpu_softmax_xent(const sl_exec *ex, int n, int classes, const float *logits,
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
            float mx = row_max(x, classes, &arg);
            double s = 0.0;
            for (int j = 0; j < classes; j++) {
                g[j] = expf(x[j] - mx);
                s += g[j];
            }
            float inv_s = (float)(1.0 / s);
            for (int j = 0; j < classes; j++)
                g[j] = g[j] * inv_s * inv_n;
            g[labels[r]] -= inv_n;
        });
    }
    double total = 0.0;
    int hits = 0;
    for (int r = 0; r < n; r++) {
        const float *x = logits + (size_t)r * classes;
        int arg;
        float mx = row_max(x, classes, &arg);
        double s = 0.0;
        for (int j = 0; j < classes; j++)
            s += exp((double)x[j] - (double)mx);
        total += log(s) - ((double)x[labels[r]] - (double)mx);
        hits += arg == labels[r];
    }
    if (loss)
        *loss = n > 0 ? (float)(total / n) : 0.0f;
    if (correct)
        *correct = hits;
}

void cpu_sgd_update(const sl_exec *ex, size_t count, float *w, const float *g, float *mom,
                    float lr, float momentum, float weight_decay, int nesterov, int first)
{
    long long cnt = (long long)count;
    SL_PARALLEL_FOR(cpu_threads(ex), cnt >= CPU_PAR_MIN, (long long i = 0; i < cnt; i++), {
        float d = g[i];
        if (weight_decay != 0.0f)
            d = d + weight_decay * w[i];
        if (momentum != 0.0f) {
            float buf = first ? d : momentum * mom[i] + d;
            mom[i] = buf;
            d = nesterov ? d + momentum * buf : buf;
        }
        w[i] = w[i] - lr * d;
    });
}

/* PyTorch's arithmetic, in float except the bias corrections (Python
 * doubles there): denom = sqrt(v) / sqrt(bc2) + eps; w -= (lr / bc1) * m / denom. */
void cpu_adam_update(const sl_exec *ex, size_t count, float *w, const float *g, float *m,
                     float *v, float lr, float beta1, float beta2, float eps, float weight_decay,
                     int64_t step)
{
    long long cnt = (long long)count;
    double bc1 = 1.0 - pow((double)beta1, (double)step);
    double bc2 = 1.0 - pow((double)beta2, (double)step);
    float step_size = (float)((double)lr / bc1);
    float bc2_sqrt = (float)sqrt(bc2);
    float one_b1 = 1.0f - beta1, one_b2 = 1.0f - beta2;
    SL_PARALLEL_FOR(cpu_threads(ex), cnt >= CPU_PAR_MIN, (long long i = 0; i < cnt; i++), {
        float d = g[i];
        if (weight_decay != 0.0f)
            d = d + weight_decay * w[i];
        float mi = beta1 * m[i] + one_b1 * d;
        float vi = beta2 * v[i] + one_b2 * d * d;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        w[i] = w[i] - step_size * mi / denom;
    });
}
