/*
 * custom_test_layers.c — see custom_test_layers.h. CPU callbacks over the
 * public sl_custom_* arguments, as a user would write them.
 */
#include "custom_test_layers.h"

#include <math.h>
#include <string.h>

tl_counts tl_stats;
int tl_fail_forward;

static size_t count_of(sl_shape s) { return (size_t)s.n * s.c * s.h * s.w; }

static void note_pass(sl_custom_pass pass, sl_device device, const void *stream, int threads)
{
    if (pass == SL_CUSTOM_TRAIN)
        tl_stats.train++;
    else if (pass == SL_CUSTOM_EVAL)
        tl_stats.eval++;
    else
        tl_stats.reforward++;
    if (device != SL_DEVICE_CPU || stream != NULL || threads < 1)
        tl_stats.bad_env++;
}

static sl_status same_shape(const void *config, int n_in, const sl_shape *in, sl_custom_sizes *out)
{
    (void)config;
    (void)n_in;
    out->out = in[0];
    out->forward_flops = (int64_t)count_of(in[0]);
    out->backward_flops = (int64_t)count_of(in[0]);
    return SL_OK;
}

static int same_channels(const void *config, int n_in, const int *in_channels)
{
    (void)config;
    (void)n_in;
    return in_channels[0];
}

/* ---- RandomScale ---- */

typedef struct random_scale {
    float sigma;
} random_scale;

static sl_status rs_shape(const void *config, int n_in, const sl_shape *in, sl_custom_sizes *out)
{
    same_shape(config, n_in, in, out);
    out->forward_workspace_bytes = (int64_t)(count_of(in[0]) * sizeof(float));
    out->backward_workspace_bytes = out->forward_workspace_bytes;
    return SL_OK;
}

static sl_status rs_forward(const sl_custom_forward_args *a)
{
    const random_scale *cfg = a->config;
    size_t n = count_of(a->out);
    note_pass(a->pass, a->device, a->stream, a->threads);
    if (a->y == a->x[0])
        tl_stats.fwd_inplace++;
    else
        tl_stats.fwd_separate++;
    if (a->pass == SL_CUSTOM_EVAL) {
        if (a->y != a->x[0])
            memcpy(a->y, a->x[0], n * sizeof(float));
        return SL_OK;
    }
    float *u = a->workspace;
    sl_status st = sl_custom_random_uniform(a->call, 0, n, u);
    if (st != SL_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        a->y[i] = a->x[0][i] * (1.0f + cfg->sigma * (2.0f * u[i] - 1.0f));
    return SL_OK;
}

static sl_status rs_backward(const sl_custom_backward_args *a)
{
    const random_scale *cfg = a->config;
    size_t n = count_of(a->out);
    tl_stats.backward++;
    if (a->dx[0] == a->dy)
        tl_stats.bwd_inplace++;
    else
        tl_stats.bwd_separate++;
    if (!a->dx[0])
        return SL_OK;
    float *u = a->workspace;
    sl_status st = sl_custom_random_uniform(a->call, 0, n, u);
    if (st != SL_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        float g = a->dy[i] * (1.0f + cfg->sigma * (2.0f * u[i] - 1.0f));
        a->dx[0][i] = a->accumulate[0] ? a->dx[0][i] + g : g;
    }
    return SL_OK;
}

sl_layer *tl_random_scale(float sigma, int inplace)
{
    sl_custom_type t = {
        .name = inplace ? "RandomScale" : "RandomScaleCopy",
        .flags = inplace ? SL_CUSTOM_FWD_INPLACE | SL_CUSTOM_BWD_INPLACE : 0,
        .shape = rs_shape,
        .forward = rs_forward,
        .backward = rs_backward,
        .out_channels = same_channels,
    };
    random_scale cfg = {sigma};
    return sl_custom_layer(&t, &cfg, sizeof cfg, NULL, 0);
}

/* ---- BatchScale ---- */

typedef struct batch_scale {
    int channels;
    float momentum, eps;
} batch_scale;

static sl_status bs_shape(const void *config, int n_in, const sl_shape *in, sl_custom_sizes *out)
{
    const batch_scale *cfg = config;
    if (in[0].c != cfg->channels)
        return sl_set_error(SL_ERR_SHAPE, "BatchScale of %d channels given %d", cfg->channels,
                            in[0].c);
    same_shape(config, n_in, in, out);
    out->saved_bytes = (int64_t)(cfg->channels * sizeof(float));
    return SL_OK;
}

/* Mean of squares of channel c over batch and space. */
static float mean_square(const float *x, sl_shape s, int c)
{
    size_t hw = (size_t)s.h * s.w;
    double sum = 0.0;
    for (int n = 0; n < s.n; n++)
        for (size_t k = 0; k < hw; k++) {
            double v = x[((size_t)n * s.c + c) * hw + k];
            sum += v * v;
        }
    return (float)(sum / ((double)s.n * hw));
}

static sl_status bs_forward(const sl_custom_forward_args *a)
{
    const batch_scale *cfg = a->config;
    sl_shape s = a->in[0];
    size_t hw = (size_t)s.h * s.w;
    float *rms = a->saved, *running = a->params[0];
    note_pass(a->pass, a->device, a->stream, a->threads);
    for (int c = 0; c < s.c; c++) {
        float r;
        if (a->pass == SL_CUSTOM_EVAL) {
            r = sqrtf(running[c] + cfg->eps);
        } else if (a->pass == SL_CUSTOM_REFORWARD) {
            r = rms[c]; /* kept from the training forward: nothing recomputed or updated */
        } else {
            float ms = mean_square(a->x[0], s, c);
            r = rms[c] = sqrtf(ms + cfg->eps);
            running[c] = (1.0f - cfg->momentum) * running[c] + cfg->momentum * ms;
        }
        for (int n = 0; n < s.n; n++)
            for (size_t k = 0; k < hw; k++) {
                size_t i = ((size_t)n * s.c + c) * hw + k;
                a->y[i] = a->x[0][i] / r;
            }
    }
    return SL_OK;
}

/* dx_i = dy_i / r - x_i * sum(dy x) / (M r^3), M values per channel. */
static sl_status bs_backward(const sl_custom_backward_args *a)
{
    sl_shape s = a->in[0];
    size_t hw = (size_t)s.h * s.w;
    const float *rms = a->saved, *x = a->x[0];
    tl_stats.backward++;
    if (!a->dx[0])
        return SL_OK;
    for (int c = 0; c < s.c; c++) {
        double dot = 0.0, m = (double)s.n * hw, r = rms[c];
        for (int n = 0; n < s.n; n++)
            for (size_t k = 0; k < hw; k++) {
                size_t i = ((size_t)n * s.c + c) * hw + k;
                dot += (double)a->dy[i] * x[i];
            }
        for (int n = 0; n < s.n; n++)
            for (size_t k = 0; k < hw; k++) {
                size_t i = ((size_t)n * s.c + c) * hw + k;
                float g = (float)(a->dy[i] / r - x[i] * dot / (m * r * r * r));
                a->dx[0][i] = a->accumulate[0] ? a->dx[0][i] + g : g;
            }
    }
    return SL_OK;
}

sl_layer *tl_batch_scale(int channels)
{
    static const sl_custom_type t = {
        .name = "BatchScale",
        .flags = SL_CUSTOM_NEEDS_INPUT | SL_CUSTOM_NEEDS_SAVED | SL_CUSTOM_SAVED_KEPT,
        .shape = bs_shape,
        .forward = bs_forward,
        .backward = bs_backward,
        .out_channels = same_channels,
    };
    batch_scale cfg = {channels, 0.1f, 1e-5f};
    sl_custom_param running = {"running_msq", 1, {channels}, SL_PARAM_ONES, 0, 0};
    return sl_custom_layer(&t, &cfg, sizeof cfg, &running, 1);
}

/* ---- identity layers for failures ---- */

static sl_status copy_forward(const sl_custom_forward_args *a)
{
    if (a->y != a->x[0])
        memcpy(a->y, a->x[0], count_of(a->out) * sizeof(float));
    return SL_OK;
}

static sl_status copy_backward(const sl_custom_backward_args *a)
{
    size_t n = count_of(a->out);
    if (a->dx[0])
        for (size_t i = 0; i < n; i++)
            a->dx[0][i] = a->accumulate[0] ? a->dx[0][i] + a->dy[i] : a->dy[i];
    return SL_OK;
}

static sl_status flaky_forward(const sl_custom_forward_args *a)
{
    if (tl_fail_forward == 1)
        return sl_set_error(SL_ERR_BACKEND, "injected failure at pass %d", (int)a->pass);
    if (tl_fail_forward == 2)
        return SL_ERR_BACKEND;
    return copy_forward(a);
}

sl_layer *tl_flaky(void)
{
    static const sl_custom_type t = {
        .name = "Flaky", .shape = same_shape, .forward = flaky_forward, .backward = copy_backward,
    };
    return sl_custom_layer(&t, NULL, 0, NULL, 0);
}

static sl_status od_shape(const void *config, int n_in, const sl_shape *in, sl_custom_sizes *out)
{
    same_shape(config, n_in, in, out);
    out->forward_workspace_bytes = (int64_t)(count_of(in[0]) * sizeof(float));
    out->backward_workspace_bytes = (int64_t)((count_of(in[0]) + 1) * sizeof(float));
    return SL_OK;
}

static sl_status od_forward(const sl_custom_forward_args *a)
{
    sl_status st = sl_custom_random_uniform(a->call, 0, count_of(a->out), a->workspace);
    return st != SL_OK ? st : copy_forward(a);
}

static sl_status od_backward(const sl_custom_backward_args *a)
{
    sl_status st = sl_custom_random_uniform(a->call, 0, count_of(a->out) + 1, a->workspace);
    return st != SL_OK ? st : copy_backward(a);
}

sl_layer *tl_overdraw(void)
{
    static const sl_custom_type t = {
        .name = "OverDraw", .shape = od_shape, .forward = od_forward, .backward = od_backward,
    };
    return sl_custom_layer(&t, NULL, 0, NULL, 0);
}

static sl_status liar_shape(const void *config, int n_in, const sl_shape *in, sl_custom_sizes *out)
{
    const int *lie = config;
    same_shape(config, n_in, in, out);
    switch (*lie) {
    case 1: out->backward_workspace_bytes = -64; break;
    case 2: out->saved_bytes = 0; break;
    case 3: out->saved_bytes = 16; break;
    case 4: out->out.c = 0; break;
    case 6: out->out.layout = (sl_layout)7; break;
    case 7: out->out.layout = SL_LAYOUT_NHWC; break;
    case 8: out->out.layout = SL_LAYOUT_NCHW; break;
    default: return sl_set_error(SL_ERR_SHAPE, "Liar wants 7 channels, not %d", in[0].c);
    }
    return SL_OK;
}

sl_layer *tl_liar(int lie)
{
    sl_custom_type t = {
        .name = "Liar",
        .flags = lie == 2 ? SL_CUSTOM_NEEDS_SAVED : 0,
        .shape = liar_shape,
        .forward = copy_forward,
        .backward = copy_backward,
    };
    return sl_custom_layer(&t, &lie, sizeof lie, NULL, 0);
}
