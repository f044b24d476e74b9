/* swish_se.c — two layer types and two blocks written with the public
 * custom-layer API (docs/guide.md, "Writing a layer"). The library plans
 * their memory and re-forwards them under a checkpointing schedule as it
 * does its own layers; these callbacks only compute. */
#include <math.h>
#include <string.h>

#include "swish_se.h"

static sl_status cpu_only(sl_device device, const char *what)
{
    if (device == SL_DEVICE_CPU)
        return SL_OK;
    return sl_set_error(SL_ERR_UNSUPPORTED, "%s: this example has CPU callbacks only", what);
}

static float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

/* ---- Swish with a learned slope per channel ---- */

typedef struct swish_config {
    int channels;
} swish_config;

static sl_status swish_shape(const void *config, int n_in, const sl_shape *in, sl_custom_sizes *out)
{
    const swish_config *cfg = config;
    (void)n_in;
    if (in[0].c != cfg->channels)
        return sl_set_error(SL_ERR_SHAPE, "Swish has %d channels, its input %d", cfg->channels,
                            in[0].c);
    int64_t count = (int64_t)in[0].n * in[0].c * in[0].h * in[0].w;
    out->out = in[0];
    out->forward_flops = 5 * count;
    out->backward_flops = 10 * count;
    return SL_OK;
}

static int swish_channels(const void *config, int n_in, const int *in_channels)
{
    const swish_config *cfg = config;
    (void)n_in;
    if (in_channels[0] != 0 && in_channels[0] != cfg->channels) {
        sl_set_error(SL_ERR_SHAPE, "Swish has %d channels", cfg->channels);
        return -1;
    }
    return cfg->channels;
}

/* x is read in backward, so y never overwrites it; dx may overwrite dy
 * (each element of dy is read before its dx is written). */
static sl_status swish_forward(const sl_custom_forward_args *a)
{
    sl_status st = cpu_only(a->device, "Swish");
    if (st != SL_OK)
        return st;
    sl_shape s = a->in[0];
    const float *x = a->x[0], *beta = a->params[0];
    size_t hw = (size_t)s.h * s.w;
    for (size_t i = 0, n = (size_t)s.n * s.c * hw; i < n; i++)
        a->y[i] = x[i] * sigmoid(beta[(i / hw) % (size_t)s.c] * x[i]);
    return SL_OK;
}

static sl_status swish_backward(const sl_custom_backward_args *a)
{
    sl_status st = cpu_only(a->device, "Swish");
    if (st != SL_OK)
        return st;
    sl_shape s = a->in[0];
    const float *x = a->x[0], *beta = a->params[0], *dy = a->dy;
    float *dx = a->dx[0], *dbeta = a->grads[0];
    size_t hw = (size_t)s.h * s.w;
    for (int n = 0; n < s.n; n++)
        for (int c = 0; c < s.c; c++) {
            size_t base = ((size_t)n * s.c + c) * hw;
            double db = 0.0;
            for (size_t k = base; k < base + hw; k++) {
                float sg = sigmoid(beta[c] * x[k]), g = dy[k];
                db += (double)g * x[k] * x[k] * sg * (1.0f - sg);
                if (dx) {
                    float d = g * (sg + beta[c] * x[k] * sg * (1.0f - sg));
                    dx[k] = a->accumulate[0] ? dx[k] + d : d;
                }
            }
            dbeta[c] += (float)db;
        }
    return SL_OK;
}

static const sl_custom_type swish_type = {
    .name = "Swish",
    .flags = SL_CUSTOM_NEEDS_INPUT | SL_CUSTOM_BWD_INPLACE,
    .shape = swish_shape,
    .forward = swish_forward,
    .backward = swish_backward,
    .out_channels = swish_channels,
};

sl_layer *swish(int channels)
{
    swish_config cfg = {channels};
    sl_custom_param beta = {"beta", 1, {channels}, SL_PARAM_ONES, 0, 1};
    return sl_custom_layer(&swish_type, &cfg, sizeof cfg, &beta, 1);
}

/* ---- channel gate: y = x * sigmoid(s) ---- */

static sl_status gate_shape(const void *config, int n_in, const sl_shape *in, sl_custom_sizes *out)
{
    (void)config;
    (void)n_in;
    if (in[1].n != in[0].n || in[1].c != in[0].c || in[1].h != 1 || in[1].w != 1)
        return sl_set_error(SL_ERR_SHAPE, "the gate of %d x %d channels must be %dx%dx1x1",
                            in[0].n, in[0].c, in[0].n, in[0].c);
    int64_t count = (int64_t)in[0].n * in[0].c * in[0].h * in[0].w;
    out->out = in[0];
    out->forward_flops = 2 * count;
    out->backward_flops = 4 * count;
    return SL_OK;
}

static int gate_channels(const void *config, int n_in, const int *in_channels)
{
    (void)config;
    (void)n_in;
    if (in_channels[0] && in_channels[1] && in_channels[0] != in_channels[1]) {
        sl_set_error(SL_ERR_SHAPE, "gate of %d channels for %d channels", in_channels[1],
                     in_channels[0]);
        return -1;
    }
    return in_channels[0];
}

static sl_status gate_forward(const sl_custom_forward_args *a)
{
    sl_status st = cpu_only(a->device, "ChannelGate");
    if (st != SL_OK)
        return st;
    size_t planes = (size_t)a->in[0].n * a->in[0].c, hw = (size_t)a->in[0].h * a->in[0].w;
    for (size_t p = 0; p < planes; p++) {
        float g = sigmoid(a->x[1][p]);
        for (size_t k = p * hw; k < (p + 1) * hw; k++)
            a->y[k] = a->x[0][k] * g;
    }
    return SL_OK;
}

/* Per plane: the gate's gradient from dy first, then dx, which may
 * overwrite dy. */
static sl_status gate_backward(const sl_custom_backward_args *a)
{
    sl_status st = cpu_only(a->device, "ChannelGate");
    if (st != SL_OK)
        return st;
    size_t planes = (size_t)a->in[0].n * a->in[0].c, hw = (size_t)a->in[0].h * a->in[0].w;
    for (size_t p = 0; p < planes; p++) {
        float g = sigmoid(a->x[1][p]);
        double sum = 0.0;
        for (size_t k = p * hw; k < (p + 1) * hw; k++)
            sum += (double)a->dy[k] * a->x[0][k];
        if (a->dx[1]) {
            float ds = (float)sum * g * (1.0f - g);
            a->dx[1][p] = a->accumulate[1] ? a->dx[1][p] + ds : ds;
        }
        if (a->dx[0])
            for (size_t k = p * hw; k < (p + 1) * hw; k++)
                a->dx[0][k] = a->accumulate[0] ? a->dx[0][k] + a->dy[k] * g : a->dy[k] * g;
    }
    return SL_OK;
}

static const sl_custom_type gate_type = {
    .name = "ChannelGate",
    .flags = SL_CUSTOM_NEEDS_INPUT | SL_CUSTOM_BWD_INPLACE,
    .n_inputs = 2,
    .shape = gate_shape,
    .forward = gate_forward,
    .backward = gate_backward,
    .out_channels = gate_channels,
};

sl_layer *channel_gate(void) { return sl_custom_layer(&gate_type, NULL, 0, NULL, 0); }

/* ---- blocks ---- */

sl_layer *se_block(int channels, int reduction)
{
    int hidden = channels / reduction; /* sl_linear refuses 0 with a message */
    sl_layer *b = sl_block("SqueezeExcite");
    int t = 0;
    sl_block_add(b, "pool", sl_global_avgpool(), 1, &t, &t);
    sl_block_add(b, "fc1", sl_linear(channels, hidden, 1), 1, &t, &t);
    sl_block_add(b, "relu", sl_relu(), 1, &t, &t);
    sl_block_add(b, "fc2", sl_linear(hidden, channels, 1), 1, &t, &t);
    int gate_in[2] = {0, t};
    if (sl_block_add(b, "gate", channel_gate(), 2, gate_in, NULL) != SL_OK) {
        sl_layer_free(b);
        return NULL; /* sl_last_error() says which step failed */
    }
    return b;
}

sl_layer *se_residual_block(int channels, int reduction)
{
    sl_layer *b = sl_block("SEBasicBlock");
    int t = 0;
    sl_block_add(b, "conv1", sl_conv2d(channels, channels, 3, 1, 1), 1, &t, &t);
    sl_block_add(b, "bn1", sl_batchnorm2d(channels), 1, &t, &t);
    sl_block_add(b, "act1", swish(channels), 1, &t, &t);
    sl_block_add(b, "conv2", sl_conv2d(channels, channels, 3, 1, 1), 1, &t, &t);
    sl_block_add(b, "bn2", sl_batchnorm2d(channels), 1, &t, &t);
    sl_block_add(b, "se", se_block(channels, reduction), 1, &t, &t);
    int sum_in[2] = {t, 0}; /* the residual: the SE output plus the block's input */
    sl_block_add(b, "add", sl_join_sum(), 2, sum_in, &t);
    if (sl_block_add(b, "act2", swish(channels), 1, &t, NULL) != SL_OK) {
        sl_layer_free(b);
        return NULL;
    }
    return b;
}
