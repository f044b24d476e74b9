/*
 * harness.c — see harness.h.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, strdup */

#include "harness.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/element.h"
#include "net/net.h"

void th_train_steps(sl_net *net, sl_shape shape, int steps, float perturb, float *losses)
{
    size_t n = (size_t)shape.n * shape.c * shape.h * shape.w;
    float *x = malloc(n * sizeof(float));
    int *labels = malloc((size_t)shape.n * sizeof(int));
    ck_assert(x && labels);
    for (int step = 0; step < steps; step++) {
        th_fill_normal(x, n, (uint64_t)step + 100, 1.0f);
        for (size_t i = 0; perturb != 0.0f && i < n; i++)
            x[i] *= 1.0f + (((i * 2654435761u) >> 7) & 1 ? perturb : -perturb);
        for (int b = 0; b < shape.n; b++)
            labels[b] = (b * 7 + step) % 10;
        sl_step_result r;
        ck_assert_msg(sl_net_train_step(net, x, shape, labels, &r) == SL_OK, "%s", sl_last_error());
        losses[step] = r.loss;
    }
    free(x);
    free(labels);
    sl_memory_report rep;
    ck_assert(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &rep) == SL_OK);
    ck_assert_msg(rep.arena_measured == rep.arena_bytes, "measured arena %llu, planned %llu",
                  (unsigned long long)rep.arena_measured, (unsigned long long)rep.arena_bytes);
}

sl_context *th_context(uint64_t seed)
{
    sl_context_options o = sl_context_defaults();
    o.threads = 2;
    o.seed = seed;
    sl_context *ctx = NULL;
    ck_assert_msg(sl_context_create(&o, &ctx) == SL_OK, "%s", sl_last_error());
    return ctx;
}

double th_rel_err(const float *a, const float *b, size_t n)
{
    double d = 0, m = 1e-12;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / m;
}

double th_norm_rel(const float *a, const float *b, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

void th_fill_normal(float *x, size_t n, uint64_t seed, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = scale * sl_random_normal(seed, 0x7e57, i);
}

void th_push_from_zero(float *x, size_t n, float gap)
{
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] >= 0 ? x[i] + gap : x[i] - gap;
}

void th_fill_distinct(float *x, size_t n, uint64_t seed, float step)
{
    for (size_t i = 0; i < n; i++)
        x[i] = step * ((float)i - (float)n / 2);
    for (size_t i = n; i > 1; i--) { /* Fisher-Yates with the seeded stream */
        size_t j = (size_t)(sl_random_uniform(seed, 0x5bff, i) * (float)i);
        if (j >= i)
            j = i - 1;
        float t = x[i - 1];
        x[i - 1] = x[j];
        x[j] = t;
    }
}

typedef struct gc {
    sl_net *net;
    sl_context *ctx;
    sl_shape in, out;
    size_t n_in, n_out;
    float *x, *r, *y, *dy_scratch;
    const int32_t *ids; /* the input instead of x: token ids {n, 1, h, 1} */
} gc;

sl_status th_forward_backward(sl_net *net, const float *x, const int32_t *ids, sl_shape in,
                              const float *dy, float *y, float *dx)
{
    return ids ? sl_net_forward_backward_tokens(net, ids, in.n, in.h, dy, y)
               : sl_net_forward_backward(net, x, in, dy, y, dx);
}

static double loss_at(gc *g)
{
    /* Same dropout masks every evaluation: restart the counter. */
    g->ctx->dropout_counter = 0;
    ck_assert_msg(th_forward_backward(g->net, g->x, g->ids, g->in, g->r, g->y, NULL) == SL_OK,
                  "%s", sl_last_error());
    double l = 0;
    for (size_t i = 0; i < g->n_out; i++)
        l += (double)g->y[i] * (double)g->r[i];
    return l;
}

/* Central difference of the loss in coordinate *p with step eps (the
 * steps actually taken in float). */
static double central_difference(gc *g, float *p, float eps)
{
    float saved = *p, up = saved + eps, down = saved - eps;
    *p = up;
    double lp = loss_at(g);
    *p = down;
    double lm = loss_at(g);
    *p = saved;
    return (lp - lm) / ((double)up - (double)down);
}

static void check_coord(gc *g, float *p, double analytic, float eps, double rtol, double atol,
                        const char *what, size_t idx, th_gradcheck_result *res)
{
    double fd = central_difference(g, p, eps);
    double fd_half = central_difference(g, p, eps / 2);
    res->candidates++;
    /* A kink (a ReLU input crossing 0, a max-pool tie) within eps makes the
     * two step sizes disagree far beyond their O(eps^2) difference; such a
     * point has no derivative to compare with. */
    if (fabs(fd - fd_half) > 0.5 * (atol + rtol * fmax(fabs(fd), fabs(fd_half)))) {
        res->skipped_kinks++;
        return;
    }
    double err = fabs(fd - analytic) / (atol + rtol * fmax(fabs(fd), fabs(analytic)));
    res->checked++;
    if (err > res->worst_error) {
        res->worst_error = err;
        snprintf(res->worst, sizeof res->worst, "%s[%zu]: fd %.6g analytic %.6g", what, idx, fd,
                 analytic);
    }
}

/* th_gradcheck on floats x, or (x NULL) on token ids (no input check). */
static void gradcheck_on(sl_net *net, const float *x, const int32_t *ids, sl_shape in,
                         int check_input, int coords, float eps, double rtol, double atol,
                         th_gradcheck_result *res)
{
    memset(res, 0, sizeof *res);
    gc g;
    memset(&g, 0, sizeof g);
    g.net = net;
    g.in = in;
    g.ids = ids;
    ck_assert_msg(sl_net_output_shape(net, in, &g.out) == SL_OK, "%s", sl_last_error());
    g.n_in = (size_t)in.n * in.c * in.h * in.w;
    g.n_out = (size_t)g.out.n * g.out.c * g.out.h * g.out.w;
    g.x = malloc(g.n_in * sizeof(float));
    g.r = malloc(g.n_out * sizeof(float));
    g.y = malloc(g.n_out * sizeof(float));
    float *dx = malloc(g.n_in * sizeof(float));
    ck_assert(g.x && g.r && g.y && dx);
    if (x)
        memcpy(g.x, x, g.n_in * sizeof(float));
    th_fill_normal(g.r, g.n_out, 0xd1, 1.0f);

    g.ctx = sl_net_context(net);

    /* Analytic gradients. */
    g.ctx->dropout_counter = 0;
    ck_assert_msg(th_forward_backward(net, g.x, ids, in, g.r, g.y, ids ? NULL : dx) == SL_OK,
                  "%s", sl_last_error());
    int np = th_param_count(net);
    float **grads = calloc((size_t)np + 1, sizeof *grads);
    ck_assert(grads);
    for (int i = 0; i < np; i++) {
        sl_param_info pi;
        ck_assert(sl_net_param(net, i, &pi) == SL_OK);
        if (!pi.trainable)
            continue;
        grads[i] = malloc(pi.count * sizeof(float));
        ck_assert(grads[i]);
        memcpy(grads[i], pi.grad, pi.count * sizeof(float));
    }
    if (check_input && !ids)
        for (int k = 0; k < coords; k++) {
            size_t idx = (size_t)(sl_random_uniform(0xc0, 1, (uint64_t)k) * (float)g.n_in) % g.n_in;
            check_coord(&g, &g.x[idx], dx[idx], eps, rtol, atol, "input", idx, res);
        }
    for (int i = 0; i < np; i++) {
        sl_param_info pi;
        ck_assert(sl_net_param(net, i, &pi) == SL_OK);
        if (!pi.trainable)
            continue;
        int n = coords < (int)pi.count ? coords : (int)pi.count;
        for (int k = 0; k < n; k++) {
            size_t idx = n == (int)pi.count
                             ? (size_t)k
                             : (size_t)(sl_random_uniform(0xc1, (uint64_t)i, (uint64_t)k) *
                                        (float)pi.count) % pi.count;
            check_coord(&g, &pi.data[idx], grads[i][idx], eps, rtol, atol, pi.name, idx, res);
        }
        free(grads[i]);
    }
    free(grads);
    free(dx);
    free(g.x);
    free(g.r);
    free(g.y);
}

void th_gradcheck(sl_net *net, const float *x, sl_shape in, int check_input, int coords,
                  float eps, double rtol, double atol, th_gradcheck_result *res)
{
    gradcheck_on(net, x, NULL, in, check_input, coords, eps, rtol, atol, res);
}

void th_gradcheck_tokens(sl_net *net, const int32_t *ids, sl_shape in, int coords, float eps,
                         double rtol, double atol, th_gradcheck_result *res)
{
    gradcheck_on(net, NULL, ids, in, 0, coords, eps, rtol, atol, res);
}

int th_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed;
}

/* CIFAR ResNet-56 with dropout after each stage and before the classifier. */
static void build_resnet56_dropout(sl_net *net)
{
    ck_assert(sl_net_add(net, "conv1", sl_conv2d(3, 16, 3, 1, 1)) == SL_OK);
    ck_assert(sl_net_add(net, "bn1", sl_batchnorm2d(16)) == SL_OK);
    ck_assert(sl_net_add(net, "relu", sl_relu()) == SL_OK);
    int width[3] = {16, 32, 64}, in = 16;
    for (int s = 0; s < 3; s++) {
        for (int b = 0; b < 9; b++) {
            char name[32];
            snprintf(name, sizeof name, "layer%d.%d", s + 1, b);
            ck_assert_msg(sl_net_add(net, name, sl_basic_block(in, width[s], b == 0 && s > 0 ? 2 : 1)) ==
                              SL_OK, "%s", sl_last_error());
            in = width[s];
        }
        char name[32];
        snprintf(name, sizeof name, "dropout%d", s + 1);
        ck_assert(sl_net_add(net, name, sl_dropout(0.2f)) == SL_OK);
    }
    ck_assert(sl_net_add(net, "avgpool", sl_global_avgpool()) == SL_OK);
    ck_assert(sl_net_add(net, "flatten", sl_flatten()) == SL_OK);
    ck_assert(sl_net_add(net, "dropout", sl_dropout(0.3f)) == SL_OK);
    ck_assert(sl_net_add(net, "fc", sl_linear(64, 10, 1)) == SL_OK);
}

void th_build_model(sl_net *net, const char *model, int res)
{
    if (strcmp(model, "resnet56-dropout") == 0)
        build_resnet56_dropout(net);
    else
        ck_assert_msg(sl_model_build(net, model, 10, res) == SL_OK, "%s", sl_last_error());
}

int th_freeze_batchnorms(sl_net *net)
{
    int frozen = 0;
    ck_assert_msg(sl_net_set_batchnorm_frozen(net, 1, &frozen) == SL_OK, "%s", sl_last_error());
    for (int i = 0; i < th_param_count(net); i++) {
        sl_param_info p;
        ck_assert(sl_net_param(net, i, &p) == SL_OK);
        const char *dot = strrchr(p.name, '.');
        int mean = dot && strcmp(dot, ".running_mean") == 0;
        if (!mean && !(dot && strcmp(dot, ".running_var") == 0))
            continue;
        float *v = malloc(p.count * sizeof(float));
        ck_assert(v);
        for (size_t c = 0; c < p.count; c++)
            v[c] = mean ? 0.05f * (float)(c % 5) - 0.1f : 0.5f + 0.25f * (float)(c % 7);
        ck_assert(sl_net_param_write(net, i, v) == SL_OK);
        free(v);
    }
    return frozen;
}

void th_assert_error(sl_status st, sl_status want, const char *fragment)
{
    ck_assert_msg(st == want, "status %s, wanted %s (%s)", sl_status_name(st), sl_status_name(want),
                  sl_last_error());
    ck_assert_msg(strstr(sl_last_error(), fragment) != NULL, "message '%s' lacks '%s'",
                  sl_last_error(), fragment);
}

void th_params_capture(sl_net *net, th_params *out)
{
    out->n = th_param_count(net);
    out->data = calloc((size_t)out->n + 1, sizeof(float *));
    out->grad = calloc((size_t)out->n + 1, sizeof(float *));
    out->count = calloc((size_t)out->n + 1, sizeof(size_t));
    ck_assert(out->data && out->grad && out->count);
    for (int i = 0; i < out->n; i++) {
        sl_param_info p;
        ck_assert(sl_net_param(net, i, &p) == SL_OK);
        out->count[i] = p.count;
        out->data[i] = malloc(p.count * sizeof(float));
        ck_assert(out->data[i]);
        ck_assert_msg(sl_net_param_read(net, i, out->data[i]) == SL_OK, "%s", sl_last_error());
        if (p.grad) {
            out->grad[i] = malloc(p.count * sizeof(float));
            ck_assert(out->grad[i]);
            ck_assert_msg(sl_net_param_read_grad(net, i, out->grad[i]) == SL_OK, "%s",
                          sl_last_error());
        }
    }
}

void th_params_free(th_params *p)
{
    for (int i = 0; i < p->n; i++) {
        free(p->data[i]);
        free(p->grad[i]);
    }
    free(p->data);
    free(p->grad);
    free(p->count);
    memset(p, 0, sizeof *p);
}

void th_params_assert_identical(const th_params *a, const th_params *b, const char *what)
{
    ck_assert_int_eq(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        ck_assert_msg(memcmp(a->data[i], b->data[i], a->count[i] * sizeof(float)) == 0,
                      "%s: tensor %d (parameter or running statistic) differs", what, i);
        ck_assert_msg(!a->grad[i] == !b->grad[i], "%s: tensor %d has a gradient in one run only",
                      what, i);
        if (a->grad[i])
            ck_assert_msg(memcmp(a->grad[i], b->grad[i], a->count[i] * sizeof(float)) == 0,
                          "%s: gradient of tensor %d differs", what, i);
    }
}

int th_most_forwards(const sl_net *net)
{
    const sl_program *p = &net->cache[SL_MODE_TRAIN].prog;
    int *runs = calloc((size_t)net->graph.n_nodes, sizeof *runs), most = 0;
    ck_assert(runs);
    for (int s = 0; s < p->n_steps; s++)
        if (p->steps[s].kind == SL_STEP_FWD || p->steps[s].kind == SL_STEP_REFWD)
            if (++runs[p->steps[s].node] > most)
                most = runs[p->steps[s].node];
    free(runs);
    return most;
}

int th_pick(th_rng *r, int n)
{
    int v = (int)(sl_random_uniform(r->seed, r->stream, r->i++) * (float)n);
    return v < n ? v : n - 1;
}

void th_add_classifier(sl_net *net, int classes)
{
    int c = net->out_channels;
    ck_assert(sl_net_add(net, "pool", sl_global_avgpool()) == SL_OK);
    ck_assert(sl_net_add(net, "flatten", sl_flatten()) == SL_OK);
    ck_assert(sl_net_add(net, "fc", sl_linear(c, classes, 1)) == SL_OK);
}

uint64_t th_named_least(void)
{
    static const char at_text[] = "smallest planned peak is ";
    const char *at = strstr(sl_last_error(), at_text);
    ck_assert_msg(at != NULL, "%s", sl_last_error());
    return strtoull(at + strlen(at_text), NULL, 10);
}

uint64_t th_least_budget(sl_net *net, sl_shape input)
{
    ck_assert(sl_net_set_schedule(net, SL_SCHEDULE_BUDGET(1)) == SL_OK);
    sl_memory_report rep;
    ck_assert(sl_net_memory_report(net, input, SL_MODE_TRAIN, &rep) == SL_ERR_BUDGET);
    return th_named_least();
}

int th_param_count(sl_net *net)
{
    int n = -1;
    sl_status st = sl_net_param_count(net, &n);
    ck_assert_msg(st == SL_OK, "sl_net_param_count: %s", sl_last_error());
    return n;
}

sl_net *th_gpt2(sl_context *ctx, const sl_gpt2_config *c, sl_schedule schedule)
{
    sl_net *net = NULL;
    ck_assert(sl_sublinear(ctx, 1, schedule, &net) == SL_OK);
    ck_assert_msg(sl_model_gpt2(net, c) == SL_OK, "%s", sl_last_error());
    return net;
}

void th_bf16_round_all(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = sl_bf16_round(src[i]);
}

void th_bf16_widen_all(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = sl_bf16_widen(src[i]);
}

uint64_t th_token_step_as_planned(sl_net *net, const int32_t *ids, const int32_t *targets, int b,
                                  int t, float *loss)
{
    sl_step_result r;
    ck_assert_msg(sl_net_compute_gradients_tokens(net, ids, targets, b, t, &r) == SL_OK, "%s",
                  sl_last_error());
    *loss = r.loss;
    sl_memory_report rep;
    ck_assert(sl_net_memory_report(net, sl_shape_seq(b, t, 1), SL_MODE_TRAIN, &rep) == SL_OK);
    ck_assert_uint_eq(rep.arena_measured, rep.arena_bytes);
    return rep.arena_bytes;
}

void th_switches_off(th_switches *s, const char *const *names, int n, unsigned off)
{
    ck_assert(n <= TH_SWITCHES);
    s->n = n;
    for (int k = 0; k < n; k++) {
        const char *was = getenv(names[k]);
        s->name[k] = names[k];
        s->was[k] = was ? strdup(was) : NULL;
        ck_assert(!was || s->was[k]);
        if (off & (1u << k))
            setenv(names[k], "off", 1);
    }
}

int th_env_off(const char *name)
{
    const char *v = getenv(name);
    return v && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0);
}

int th_env_on(const char *name)
{
    const char *v = getenv(name);
    return v && (strcmp(v, "on") == 0 || strcmp(v, "1") == 0);
}

void th_switches_restore(th_switches *s)
{
    for (int k = 0; k < s->n; k++) {
        if (s->was[k])
            setenv(s->name[k], s->was[k], 1);
        else
            unsetenv(s->name[k]);
        free(s->was[k]);
    }
    s->n = 0;
}
