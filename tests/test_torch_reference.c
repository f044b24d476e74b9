/*
 * test_torch_reference.c — forward outputs, input and parameter gradients,
 * BatchNorm running statistics, the softmax cross-entropy loss and the
 * optimizers against PyTorch (CPU, float64) on the same weights and data.
 *
 * Each case builds a network, writes its configuration (a manifest,
 * case.txt), its initial tensors and its inputs as raw little-endian
 * float32 files into a directory, runs it here and keeps our results. One
 * run of tests/torch_reference.py per test computes PyTorch's results for
 * every case of the test (ref.<key>.bin, float64); each of our tensors is
 * then compared with its reference:
 *
 *     relative error = max|ours - ref| / max(max|ref|, 1e-6) <= 1e-4.
 *
 * The manifest (one directive a line, read by torch_reference.py):
 *     mode forward_backward | predict | cross_entropy | train
 *     layer <name> <spec>        a top-level layer, e.g. "conv2d 3 4 3 3 ..."
 *     model <name> <classes>     a whole model instead of layer lines
 *     input <file> n c h w       the input (one per step in train mode)
 *     dy <file> n c h w          gradient of the output (forward_backward)
 *     labels <step> l0 l1 ...    class labels (cross_entropy, train)
 *     optimizer sgd <lr> <momentum> <weight_decay> <nesterov>
 *     optimizer adam <lr> <beta1> <beta2> <eps> <weight_decay>
 *     steps <k>                  optimizer steps (train)
 *     param <name> <trainable> <ndim> <dims...>   file param.<name>.bin
 * Result keys: out, dx, loss, loss.<step>, grad.<param>, after.<param> (a
 * tensor's value after the run: running statistics, trained weights).
 *
 * float32 and float64 may only be compared where the network is smooth at
 * float32 resolution, so the script also reports (ref.margin.bin) how
 * close any ReLU input came to 0 and any max-pool window to a tie; a case
 * whose data comes closer than MIN_MARGIN fails as ill-conditioned rather
 * than being compared. Deep networks are conditioned first (see
 * batch_condition).
 *
 * Without a python3 that imports torch (/usr/bin/python3, or
 * $SL_TEST_PYTHON) every test is skipped, visibly. SL_TEST_KEEP_TMP=1
 * keeps the temporary directory for inspection.
 */
#define _XOPEN_SOURCE 700

#include <check.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "harness.h"

#define REL_TOL 1e-4
/* A float32 forward is off by ~1e-7 .. 1e-6 of a tensor's scale; where an
 * input of a ReLU lies that close to 0 (or two values of a max-pool window
 * that close to each other) our result and the float64 one may take
 * different sides of the kink, and both are right. Every case must keep its
 * data at least this far (relative to the tensor's max |value|) from any
 * kink or tie, or it fails as ill-conditioned (a test bug, not a library
 * one). */
#define MIN_MARGIN 1e-5
#define PATH_LEN 1024
#define MAX_RESULTS 320
#define MAX_CASES 8

#ifndef SL_TEST_SOURCE_DIR
#define SL_TEST_SOURCE_DIR "."
#endif

static char g_root[PATH_LEN];    /* temporary directory of this run */
static char g_python[PATH_LEN];  /* the interpreter with torch */
static char g_script[PATH_LEN];  /* tests/torch_reference.py */

typedef struct tr_result {
    char key[256];
    float *ours;
    size_t count;
} tr_result;

typedef struct tr_case {
    char name[64];
    char dir[PATH_LEN];
    FILE *manifest;
    /* forward_backward cases between fb_prepare and fb_execute */
    sl_net *net;
    sl_shape in;
    float *x, *dy;
    int frozen_bn; /* BatchNorm frozen: compared with PyTorch's eval mode */
    int n_results;
    tr_result results[MAX_RESULTS];
} tr_case;

typedef struct tr_batch {
    char dir[PATH_LEN];
    int n_cases;
    tr_case cases[MAX_CASES];
} tr_batch;

/* ------------------------------------------------------------------ */
/* Files                                                               */
/* ------------------------------------------------------------------ */

/* dst = a/b; fails the test when it does not fit. */
static void path_join(char *dst, size_t len, const char *a, const char *b)
{
    int n = snprintf(dst, len, "%s/%s", a, b);
    ck_assert_msg(n > 0 && (size_t)n < len, "path too long: %s/%s", a, b);
}

static tr_batch *batch_new(const char *test)
{
    tr_batch *b = calloc(1, sizeof *b);
    ck_assert(b);
    path_join(b->dir, sizeof b->dir, g_root, test);
    ck_assert_msg(mkdir(b->dir, 0700) == 0, "mkdir %s failed", b->dir);
    return b;
}

static tr_case *case_new(tr_batch *b, const char *name)
{
    ck_assert(b->n_cases < MAX_CASES);
    tr_case *c = &b->cases[b->n_cases++];
    snprintf(c->name, sizeof c->name, "%s", name);
    char parent[PATH_LEN], path[PATH_LEN];
    memcpy(parent, b->dir, sizeof parent);
    path_join(c->dir, sizeof c->dir, parent, name);
    ck_assert_msg(mkdir(c->dir, 0700) == 0, "mkdir %s failed", c->dir);
    path_join(path, sizeof path, c->dir, "case.txt");
    c->manifest = fopen(path, "w");
    ck_assert_msg(c->manifest != NULL, "cannot write %s", path);
    return c;
}

static void case_line(tr_case *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(c->manifest, fmt, ap);
    va_end(ap);
    fputc('\n', c->manifest);
}

static void write_floats(tr_case *c, const char *file, const float *data, size_t count)
{
    char path[PATH_LEN];
    path_join(path, sizeof path, c->dir, file);
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert(fwrite(data, sizeof(float), count, f) == count); /* x86: little-endian */
    ck_assert(fclose(f) == 0);
}

/* Reads a reference (float64) of exactly count values; NULL with a reason
 * in why when it is missing or has another size. */
static double *read_reference(tr_case *c, const char *key, size_t count, char *why, size_t why_len)
{
    char path[PATH_LEN], file[300];
    ck_assert((size_t)snprintf(file, sizeof file, "ref.%s.bin", key) < sizeof file);
    path_join(path, sizeof path, c->dir, file);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, why_len, "no reference file %s", path);
        return NULL;
    }
    double *ref = malloc((count + 1) * sizeof(double));
    ck_assert(ref);
    size_t got = fread(ref, sizeof(double), count + 1, f);
    fclose(f);
    if (got != count) {
        snprintf(why, why_len, "reference has %zu values, ours %zu", got, count);
        free(ref);
        return NULL;
    }
    return ref;
}

/* Keeps a copy of one of our results under a key. */
static void record(tr_case *c, const char *key, const float *data, size_t count)
{
    ck_assert(c->n_results < MAX_RESULTS);
    tr_result *r = &c->results[c->n_results++];
    snprintf(r->key, sizeof r->key, "%s", key);
    r->ours = malloc(count * sizeof(float));
    ck_assert(r->ours);
    memcpy(r->ours, data, count * sizeof(float));
    r->count = count;
}

/* ------------------------------------------------------------------ */
/* Networks described by spec strings (the same text goes to python)   */
/* ------------------------------------------------------------------ */

static sl_layer *make_layer(const char *spec)
{
    char type[32];
    int a[12], used = 0;
    float m, e;
    ck_assert(sscanf(spec, "%31s%n", type, &used) == 1);
    const char *p = spec + used;
    if (!strcmp(type, "conv2d")) {
        ck_assert(sscanf(p, "%d %d %d %d %d %d %d %d %d %d %d %d", &a[0], &a[1], &a[2], &a[3],
                         &a[4], &a[5], &a[6], &a[7], &a[8], &a[9], &a[10], &a[11]) == 12);
        sl_conv2d_options o = {a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11]};
        return sl_conv2d_with(&o);
    }
    if (!strcmp(type, "conv")) {
        ck_assert(sscanf(p, "%d %d %d %d %d", &a[0], &a[1], &a[2], &a[3], &a[4]) == 5);
        return sl_conv2d(a[0], a[1], a[2], a[3], a[4]);
    }
    if (!strcmp(type, "batchnorm2d")) {
        ck_assert(sscanf(p, "%d", &a[0]) == 1);
        return sl_batchnorm2d(a[0]);
    }
    if (!strcmp(type, "batchnorm2d_ex")) {
        ck_assert(sscanf(p, "%d %f %f", &a[0], &m, &e) == 3);
        return sl_batchnorm2d_with(&(sl_batchnorm2d_options){a[0], m, e});
    }
    if (!strcmp(type, "relu"))
        return sl_relu();
    if (!strcmp(type, "global_avgpool"))
        return sl_global_avgpool();
    if (!strcmp(type, "flatten"))
        return sl_flatten();
    if (!strcmp(type, "maxpool") || !strcmp(type, "maxpool_ceil") || !strcmp(type, "avgpool")) {
        ck_assert(sscanf(p, "%d %d %d", &a[0], &a[1], &a[2]) == 3);
        if (!strcmp(type, "maxpool"))
            return sl_maxpool2d(a[0], a[1], a[2]);
        if (!strcmp(type, "maxpool_ceil"))
            return sl_maxpool2d_with(&(sl_maxpool2d_options){a[0], a[1], a[2], 1});
        return sl_avgpool2d(a[0], a[1], a[2]);
    }
    if (!strcmp(type, "linear")) {
        ck_assert(sscanf(p, "%d %d %d", &a[0], &a[1], &a[2]) == 3);
        return sl_linear(a[0], a[1], a[2]);
    }
    if (!strcmp(type, "basic_block")) {
        ck_assert(sscanf(p, "%d %d %d", &a[0], &a[1], &a[2]) == 3);
        return sl_basic_block(a[0], a[1], a[2]);
    }
    if (!strcmp(type, "bottleneck")) {
        ck_assert(sscanf(p, "%d %d %d", &a[0], &a[1], &a[2]) == 3);
        return sl_bottleneck(a[0], a[1], a[2]);
    }
    if (!strcmp(type, "inception")) {
        ck_assert(sscanf(p, "%d %d %d %d %d %d %d", &a[0], &a[1], &a[2], &a[3], &a[4], &a[5],
                         &a[6]) == 7);
        return sl_inception(a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
    }
    if (!strcmp(type, "conv_bn_relu")) {
        ck_assert(sscanf(p, "%d %d %d %d %d", &a[0], &a[1], &a[2], &a[3], &a[4]) == 5);
        return sl_conv_bn_relu(a[0], a[1], a[2], a[3], a[4]);
    }
    ck_abort_msg("unknown layer spec '%s'", spec);
    return NULL;
}

static void add_layer(tr_case *c, sl_net *net, const char *name, const char *spec)
{
    case_line(c, "layer %s %s", name, spec);
    ck_assert_msg(sl_net_add(net, name, make_layer(spec)) == SL_OK, "%s: %s", spec, sl_last_error());
}

static sl_net *new_net(sl_context *ctx, int in_channels)
{
    sl_net *net = NULL;
    ck_assert_msg(sl_sequential(ctx, in_channels, &net) == SL_OK, "%s", sl_last_error());
    return net;
}

/* A one-layer network: the usual case. */
static sl_net *single_layer_net(tr_case *c, sl_context *ctx, int in_channels, const char *spec)
{
    sl_net *net = new_net(ctx, in_channels);
    add_layer(c, net, "layer", spec);
    return net;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* Moves every BatchNorm away from its identity init (gamma 1, beta 0 and,
 * when running is set, running mean 0 and variance 1) so that a mix-up of
 * these tensors shows. */
static void randomize_batchnorms(sl_net *net, uint64_t seed, int running)
{
    int n = th_param_count(net);
    for (int i = 0; i < n; i++) {
        sl_param_info mean, var, gamma, beta;
        ck_assert(sl_net_param(net, i, &mean) == SL_OK);
        if (!ends_with(mean.name, ".running_mean") && strcmp(mean.name, "running_mean"))
            continue;
        char prefix[256], name[300];
        snprintf(prefix, sizeof prefix, "%.*s", (int)(strlen(mean.name) - strlen("running_mean")),
                 mean.name);
        snprintf(name, sizeof name, "%sweight", prefix);
        ck_assert_msg(sl_net_find_param(net, name, &gamma) == SL_OK, "%s", sl_last_error());
        snprintf(name, sizeof name, "%sbias", prefix);
        ck_assert_msg(sl_net_find_param(net, name, &beta) == SL_OK, "%s", sl_last_error());
        snprintf(name, sizeof name, "%srunning_var", prefix);
        ck_assert_msg(sl_net_find_param(net, name, &var) == SL_OK, "%s", sl_last_error());
        size_t ch = gamma.count;
        th_fill_normal(gamma.data, ch, seed + 4 * (uint64_t)i, 0.25f);
        th_fill_normal(beta.data, ch, seed + 4 * (uint64_t)i + 1, 0.25f);
        for (size_t k = 0; k < ch; k++)
            gamma.data[k] += 1.0f;
        if (running) {
            th_fill_normal(mean.data, ch, seed + 4 * (uint64_t)i + 2, 0.3f);
            th_fill_normal(var.data, ch, seed + 4 * (uint64_t)i + 3, 0.4f);
            for (size_t k = 0; k < ch; k++)
                var.data[k] = 0.6f + fabsf(var.data[k]);
        }
    }
}

/* Writes every named tensor (its value now) and its manifest line. */
static void write_params(tr_case *c, sl_net *net)
{
    int n = th_param_count(net);
    for (int i = 0; i < n; i++) {
        sl_param_info pi;
        ck_assert(sl_net_param(net, i, &pi) == SL_OK);
        char file[300];
        snprintf(file, sizeof file, "param.%s.bin", pi.name);
        write_floats(c, file, pi.data, pi.count);
        fprintf(c->manifest, "param %s %d %d", pi.name, pi.trainable, pi.ndim);
        for (int d = 0; d < pi.ndim; d++)
            fprintf(c->manifest, " %d", pi.dims[d]);
        fputc('\n', c->manifest);
    }
}

/* Records the gradient of every trainable tensor (when grads is set) and
 * the value now of every tensor that is not trainable, or of every tensor
 * (when all_values is set). */
static void record_params(tr_case *c, sl_net *net, int grads, int all_values)
{
    int n = th_param_count(net);
    char key[300];
    for (int i = 0; i < n; i++) {
        sl_param_info pi;
        ck_assert(sl_net_param(net, i, &pi) == SL_OK);
        if (grads && pi.trainable) {
            ck_assert_msg(pi.grad != NULL, "%s has no gradient", pi.name);
            snprintf(key, sizeof key, "grad.%s", pi.name);
            record(c, key, pi.grad, pi.count);
        }
        if (all_values || !pi.trainable) {
            snprintf(key, sizeof key, "after.%s", pi.name);
            record(c, key, pi.data, pi.count);
        }
    }
}

static size_t shape_count(sl_shape s) { return (size_t)s.n * s.c * s.h * s.w; }

static void write_input(tr_case *c, const char *kind, const char *file, const float *x, sl_shape s)
{
    write_floats(c, file, x, shape_count(s));
    case_line(c, "%s %s %d %d %d %d", kind, file, s.n, s.c, s.h, s.w);
}

/* ------------------------------------------------------------------ */
/* Running a case                                                      */
/* ------------------------------------------------------------------ */

/* Training-mode forward and backward from a fixed random dy, in two
 * halves (so that batch_condition can run between them): fb_prepare writes
 * the case, fb_execute runs it and records the output, the input gradient,
 * the parameter gradients and the running statistics after. */
static void fb_prepare(tr_case *c, sl_net *net, sl_shape in, uint64_t seed)
{
    sl_shape out;
    ck_assert_msg(sl_net_output_shape(net, in, &out) == SL_OK, "%s", sl_last_error());
    size_t nx = shape_count(in), ny = shape_count(out);
    c->net = net;
    c->in = in;
    c->x = malloc(nx * sizeof(float));
    c->dy = malloc(ny * sizeof(float));
    ck_assert(c->x && c->dy);
    th_fill_normal(c->x, nx, seed, 1.0f);
    th_fill_normal(c->dy, ny, seed + 1, 1.0f);
    /* a net with frozen BatchNorm is PyTorch's model.eval() with gradients */
    case_line(c, c->frozen_bn ? "mode forward_backward_eval" : "mode forward_backward");
    write_input(c, "input", "x.bin", c->x, in);
    write_input(c, "dy", "dy.bin", c->dy, out);
    write_params(c, net);
}

static void fb_execute(tr_case *c)
{
    sl_shape out;
    ck_assert(sl_net_output_shape(c->net, c->in, &out) == SL_OK);
    size_t nx = shape_count(c->in), ny = shape_count(out);
    float *dx = malloc(nx * sizeof(float)), *y = malloc(ny * sizeof(float));
    ck_assert(dx && y);
    ck_assert_msg(sl_net_forward_backward(c->net, c->x, c->in, c->dy, y, dx) == SL_OK, "%s: %s",
                  c->name, sl_last_error());
    record(c, "out", y, ny);
    record(c, "dx", dx, nx);
    record_params(c, c->net, 1, 0);
    free(dx);
    free(y);
    free(c->x);
    free(c->dy);
    c->x = c->dy = NULL;
    c->net = NULL;
}

static void run_forward_backward(tr_case *c, sl_net *net, sl_shape in, uint64_t seed)
{
    fb_prepare(c, net, in, seed);
    fb_execute(c);
}

/* Evaluation-mode forward (running statistics). */
static void run_predict(tr_case *c, sl_net *net, sl_shape in, uint64_t seed)
{
    sl_shape out;
    ck_assert_msg(sl_net_output_shape(net, in, &out) == SL_OK, "%s", sl_last_error());
    size_t nx = shape_count(in), ny = shape_count(out);
    float *x = malloc(nx * sizeof(float)), *y = malloc(ny * sizeof(float));
    ck_assert(x && y);
    th_fill_normal(x, nx, seed, 1.0f);
    case_line(c, "mode predict");
    write_input(c, "input", "x.bin", x, in);
    write_params(c, net);
    ck_assert_msg(sl_net_predict(net, x, in, y) == SL_OK, "%s: %s", c->name, sl_last_error());
    record(c, "out", y, ny);
    free(x);
    free(y);
}

static void write_labels(tr_case *c, int step, const int *labels, int n)
{
    fprintf(c->manifest, "labels %d", step);
    for (int i = 0; i < n; i++)
        fprintf(c->manifest, " %d", labels[i]);
    fputc('\n', c->manifest);
}

/* Softmax cross-entropy: loss and every parameter gradient. */
static void run_cross_entropy(tr_case *c, sl_net *net, sl_shape in, const int *labels,
                              uint64_t seed)
{
    size_t nx = shape_count(in);
    float *x = malloc(nx * sizeof(float));
    ck_assert(x);
    th_fill_normal(x, nx, seed, 1.0f);
    case_line(c, "mode cross_entropy");
    write_input(c, "input", "x.bin", x, in);
    write_labels(c, 0, labels, in.n);
    write_params(c, net);
    sl_step_result res;
    ck_assert_msg(sl_net_compute_gradients(net, x, in, labels, &res) == SL_OK, "%s: %s", c->name,
                  sl_last_error());
    record(c, "loss", &res.loss, 1);
    record_params(c, net, 1, 0);
    free(x);
}

/* `steps` optimizer steps on different batches: each step's loss and
 * every tensor afterwards. */
static void run_train(tr_case *c, sl_net *net, sl_shape in, int steps,
                      const sl_optimizer_options *opt, int classes, uint64_t seed)
{
    size_t nx = shape_count(in);
    float *x = malloc(nx * sizeof(float));
    int *labels = malloc((size_t)in.n * sizeof(int));
    ck_assert(x && labels);
    case_line(c, "mode train");
    case_line(c, "steps %d", steps);
    if (opt->kind == SL_OPT_SGD)
        case_line(c, "optimizer sgd %.9g %.9g %.9g %d", opt->lr, opt->momentum, opt->weight_decay,
                  opt->nesterov);
    else
        case_line(c, "optimizer adam %.9g %.9g %.9g %.9g %.9g", opt->lr, opt->beta1, opt->beta2,
                  opt->eps, opt->weight_decay);
    write_params(c, net);
    ck_assert_msg(sl_net_set_optimizer(net, opt) == SL_OK, "%s", sl_last_error());
    for (int k = 0; k < steps; k++) {
        char file[32], key[32];
        th_fill_normal(x, nx, seed + (uint64_t)k, 1.0f);
        for (int i = 0; i < in.n; i++)
            labels[i] = (3 * i + 7 * k) % classes;
        snprintf(file, sizeof file, "x.%d.bin", k);
        write_input(c, "input", file, x, in);
        write_labels(c, k, labels, in.n);
        sl_step_result res;
        ck_assert_msg(sl_net_train_step(net, x, in, labels, &res) == SL_OK, "%s step %d: %s",
                      c->name, k, sl_last_error());
        snprintf(key, sizeof key, "loss.%d", k);
        record(c, key, &res.loss, 1);
    }
    ck_assert_int_eq(sl_net_step_count(net), steps);
    record_params(c, net, 0, 1);
    free(x);
    free(labels);
}

/* ------------------------------------------------------------------ */
/* Running the script, comparing                                       */
/* ------------------------------------------------------------------ */

/* Runs torch_reference.py [option] on the batch directory, echoing what it
 * prints; fails the test with its last line when it fails. */
static void run_script(tr_batch *b, const char *option)
{
    for (int i = 0; i < b->n_cases; i++)
        ck_assert(fflush(b->cases[i].manifest) == 0);
    fflush(stdout);
    char cmd[4 * PATH_LEN];
    int n = snprintf(cmd, sizeof cmd, "'%s' '%s' %s '%s' 2>&1", g_python, g_script, option, b->dir);
    ck_assert(n > 0 && (size_t)n < sizeof cmd);
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "cannot run %s", cmd);
    char line[1024], last[1024] = "";
    while (fgets(line, sizeof line, p)) {
        fputs(line, stdout);
        if (line[0] != '\n')
            memcpy(last, line, sizeof last);
    }
    int status = pclose(p);
    fflush(stdout);
    ck_assert_msg(status == 0, "torch_reference.py %s failed (status %d): %s", option, status,
                  last);
}

/* Reads every named tensor of the network back from param.<name>.bin. */
static void reload_params(tr_case *c, sl_net *net)
{
    int n = th_param_count(net);
    for (int i = 0; i < n; i++) {
        sl_param_info pi;
        ck_assert(sl_net_param(net, i, &pi) == SL_OK);
        char file[300], path[PATH_LEN];
        ck_assert((size_t)snprintf(file, sizeof file, "param.%s.bin", pi.name) < sizeof file);
        path_join(path, sizeof path, c->dir, file);
        FILE *f = fopen(path, "rb");
        ck_assert_msg(f != NULL, "cannot read %s", path);
        ck_assert_msg(fread(pi.data, sizeof(float), pi.count, f) == pi.count, "%s is short", path);
        fclose(f);
    }
}

/* For deep networks, between fb_prepare and fb_execute of every case: with
 * ~10^6 ReLU inputs, some always lie within float32 rounding of 0, where
 * our float32 result and the float64 reference may take different sides
 * of the kink (in resnet20 one input sat 1.2e-6 from 0, and the reference
 * itself moved by 3% of a gradient tensor when the input moved by 1e-6).
 * The script's conditioning pass shifts the bias of the BatchNorm feeding
 * such a channel by a little (~1e-3) so that every ReLU input is at least
 * 4e-5 (relative) from 0, and rewrites the biases; they are loaded here. */
static void batch_condition(tr_batch *b)
{
    run_script(b, "--condition");
    for (int i = 0; i < b->n_cases; i++)
        if (b->cases[i].net)
            reload_params(&b->cases[i], b->cases[i].net);
}

/* Runs the script on every case of the batch, compares every recorded
 * tensor with its reference, prints the error of each, frees the batch and
 * fails (after printing everything) if any tensor is off. */
static void batch_finish(tr_batch *b)
{
    run_script(b, "");
    for (int i = 0; i < b->n_cases; i++)
        ck_assert(fclose(b->cases[i].manifest) == 0);

    int failures = 0;
    char first_failure[2048] = "";
    for (int i = 0; i < b->n_cases; i++) {
        tr_case *c = &b->cases[i];
        double case_worst = 0, margin = NAN;
        char bad[PATH_LEN + 400] = "";
        double *m = read_reference(c, "margin", 1, bad, sizeof bad);
        if (m) {
            margin = *m;
            free(m);
            if (!(margin >= MIN_MARGIN))
                snprintf(bad, sizeof bad,
                         "ill-conditioned data: a ReLU input or max-pool tie within %.2e "
                         "(relative) of its kink, below %.0e; choose other data",
                         margin, MIN_MARGIN);
        }
        if (!(margin >= MIN_MARGIN)) {
            printf("  %-28s FAIL: %s\n", c->name, bad);
            if (failures++ == 0)
                snprintf(first_failure, sizeof first_failure, "%s: %s", c->name, bad);
        }
        for (int k = 0; k < c->n_results; k++) {
            tr_result *r = &c->results[k];
            char why[PATH_LEN + 400] = "";
            double *ref = read_reference(c, r->key, r->count, why, sizeof why);
            double worst = INFINITY, ref_max = 0, diff_max = 0;
            size_t at = 0;
            if (ref) {
                for (size_t j = 0; j < r->count; j++) {
                    double d = fabs((double)r->ours[j] - ref[j]);
                    if (fabs(ref[j]) > ref_max)
                        ref_max = fabs(ref[j]);
                    if (d > diff_max || isnan(d)) {
                        diff_max = d;
                        at = j;
                    }
                }
                worst = diff_max / fmax(ref_max, 1e-6);
                snprintf(why, sizeof why, "at [%zu] ours %.9g ref %.9g", at, (double)r->ours[at],
                         ref[at]);
            }
            int ok = worst <= REL_TOL; /* false for NaN */
            printf("  %-28s %-40s rel err %.3e  (max|ref| %.3e)%s%s\n", c->name, r->key, worst,
                   ref_max, ok ? "" : "  FAIL: ", ok ? "" : why);
            if (!ok && failures++ == 0)
                snprintf(first_failure, sizeof first_failure, "%s %s: rel err %.3e > %.0e, %s",
                         c->name, r->key, worst, REL_TOL, why);
            if (worst > case_worst)
                case_worst = worst;
            free(ref);
            free(r->ours);
        }
        printf("%-30s worst rel err %.3e over %d tensors (kink margin %.1e)\n", c->name,
               case_worst, c->n_results, margin);
    }
    fflush(stdout);
    free(b);
    ck_assert_msg(failures == 0, "%d check(s) against PyTorch failed; first: %s", failures,
                  first_failure);
}

/* ------------------------------------------------------------------ */
/* Cases                                                               */
/* ------------------------------------------------------------------ */

typedef struct layer_case {
    const char *name;
    const char *spec;
    sl_shape in;
} layer_case;

/* forward_backward of one layer per case, all in one batch. */
static void check_layers(const char *test, const layer_case *cases, int n)
{
    tr_batch *b = batch_new(test);
    sl_context *ctx = th_context(11);
    for (int i = 0; i < n; i++) {
        tr_case *c = case_new(b, cases[i].name);
        sl_net *net = single_layer_net(c, ctx, cases[i].in.c, cases[i].spec);
        randomize_batchnorms(net, 100 + (uint64_t)i, 1);
        run_forward_backward(c, net, cases[i].in, 1000 + 10 * (uint64_t)i);
        sl_net_free(net);
    }
    sl_context_free(ctx);
    batch_finish(b);
}

START_TEST(test_conv2d)
{
    static const layer_case cases[] = {
        {"conv_3x3_s1_p1", "conv 3 4 3 1 1", {2, 3, 8, 8, SL_LAYOUT_NCHW}},
        {"conv_3x3_s2_p1_bias", "conv2d 3 5 3 3 2 2 1 1 1 1 1 1", {2, 3, 9, 9, SL_LAYOUT_NCHW}},
        {"conv_3x3_dilation2", "conv2d 3 4 3 3 1 1 2 2 2 2 1 1", {2, 3, 9, 8, SL_LAYOUT_NCHW}},
        {"conv_3x3_groups2", "conv2d 4 6 3 3 1 1 1 1 1 1 2 1", {2, 4, 7, 7, SL_LAYOUT_NCHW}},
        {"conv_1x1_s2", "conv 5 6 1 2 0", {2, 5, 7, 7, SL_LAYOUT_NCHW}},
        {"conv_7x7_s2_p3", "conv 3 8 7 2 3", {2, 3, 16, 16, SL_LAYOUT_NCHW}},
    };
    check_layers("conv2d", cases, (int)(sizeof cases / sizeof cases[0]));
}
END_TEST

START_TEST(test_batchnorm2d)
{
    tr_batch *b = batch_new("batchnorm2d");
    sl_context *ctx = th_context(12);

    tr_case *c = case_new(b, "bn_train");
    sl_net *net = single_layer_net(c, ctx, 4, "batchnorm2d 4");
    randomize_batchnorms(net, 200, 1);
    run_forward_backward(c, net, sl_shape_nchw(4, 4, 5, 5), 2000);
    sl_net_free(net);

    c = case_new(b, "bn_train_momentum_eps");
    net = single_layer_net(c, ctx, 3, "batchnorm2d_ex 3 0.3 0.001");
    randomize_batchnorms(net, 210, 1);
    run_forward_backward(c, net, sl_shape_nchw(3, 3, 4, 6), 2010);
    sl_net_free(net);

    c = case_new(b, "bn_frozen_backward");
    net = single_layer_net(c, ctx, 4, "batchnorm2d_ex 4 0.1 0.001");
    randomize_batchnorms(net, 230, 1);
    ck_assert_msg(sl_net_set_batchnorm_frozen(net, 1, NULL) == SL_OK, "%s", sl_last_error());
    c->frozen_bn = 1;
    run_forward_backward(c, net, sl_shape_nchw(3, 4, 5, 5), 2030);
    sl_net_free(net);

    c = case_new(b, "bn_eval");
    net = single_layer_net(c, ctx, 4, "batchnorm2d 4");
    randomize_batchnorms(net, 220, 1);
    run_predict(c, net, sl_shape_nchw(3, 4, 5, 5), 2020);
    sl_net_free(net);

    sl_context_free(ctx);
    batch_finish(b);
}
END_TEST

START_TEST(test_pooling)
{
    static const layer_case cases[] = {
        {"maxpool_3_2_1", "maxpool 3 2 1", {2, 3, 9, 9, SL_LAYOUT_NCHW}},
        {"maxpool_ceil_3_2_0", "maxpool_ceil 3 2 0", {2, 3, 8, 8, SL_LAYOUT_NCHW}},
        {"avgpool_3_2_1", "avgpool 3 2 1", {2, 3, 8, 9, SL_LAYOUT_NCHW}},
        {"avgpool_2_2_0", "avgpool 2 2 0", {2, 3, 8, 8, SL_LAYOUT_NCHW}},
        {"global_avgpool", "global_avgpool", {2, 3, 5, 4, SL_LAYOUT_NCHW}},
    };
    check_layers("pooling", cases, (int)(sizeof cases / sizeof cases[0]));
}
END_TEST

START_TEST(test_linear_relu)
{
    static const layer_case cases[] = {
        {"linear_bias", "linear 12 5 1", {3, 12, 1, 1, SL_LAYOUT_NCHW}},
        {"linear_no_bias_spatial", "linear 18 4 0", {3, 2, 3, 3, SL_LAYOUT_NCHW}},
        {"relu", "relu", {2, 3, 4, 4, SL_LAYOUT_NCHW}},
    };
    check_layers("linear_relu", cases, (int)(sizeof cases / sizeof cases[0]));
}
END_TEST

START_TEST(test_blocks)
{
    static const layer_case cases[] = {
        {"basic_block_identity", "basic_block 8 8 1", {2, 8, 6, 6, SL_LAYOUT_NCHW}},
        {"basic_block_projection_s2", "basic_block 4 8 2", {2, 4, 8, 8, SL_LAYOUT_NCHW}},
        {"bottleneck_projection_s2", "bottleneck 8 4 2", {2, 8, 8, 8, SL_LAYOUT_NCHW}},
        {"inception", "inception 8 4 3 6 2 4 4", {2, 8, 6, 6, SL_LAYOUT_NCHW}},
        {"conv_bn_relu", "conv_bn_relu 3 6 3 1 1", {2, 3, 6, 6, SL_LAYOUT_NCHW}},
    };
    check_layers("blocks", cases, (int)(sizeof cases / sizeof cases[0]));
}
END_TEST

START_TEST(test_softmax_cross_entropy)
{
    tr_batch *b = batch_new("cross_entropy");
    sl_context *ctx = th_context(13);
    static const int labels[4] = {0, 3, 4, 3};

    tr_case *c = case_new(b, "ce_conv_gap_linear");
    sl_net *net = new_net(ctx, 3);
    add_layer(c, net, "conv", "conv2d 3 6 3 3 1 1 1 1 1 1 1 1");
    add_layer(c, net, "relu", "relu");
    add_layer(c, net, "avgpool", "global_avgpool");
    add_layer(c, net, "flatten", "flatten");
    add_layer(c, net, "fc", "linear 6 5 1");
    run_cross_entropy(c, net, sl_shape_nchw(4, 3, 6, 6), labels, 3000);
    sl_net_free(net);

    c = case_new(b, "ce_linear_only");
    net = new_net(ctx, 6);
    add_layer(c, net, "fc", "linear 6 5 1");
    run_cross_entropy(c, net, sl_shape_nchw(4, 6, 1, 1), labels, 3010);
    sl_net_free(net);

    sl_context_free(ctx);
    batch_finish(b);
}
END_TEST

/* conv + BN + ReLU + global pool + Linear, trained 3 steps. */
static void train_case(tr_batch *b, sl_context *ctx, const char *name,
                       const sl_optimizer_options *opt, uint64_t seed)
{
    tr_case *c = case_new(b, name);
    sl_net *net = new_net(ctx, 3);
    add_layer(c, net, "conv", "conv 3 6 3 1 1");
    add_layer(c, net, "bn", "batchnorm2d 6");
    add_layer(c, net, "relu", "relu");
    add_layer(c, net, "avgpool", "global_avgpool");
    add_layer(c, net, "flatten", "flatten");
    add_layer(c, net, "fc", "linear 6 5 1");
    randomize_batchnorms(net, seed, 1);
    run_train(c, net, sl_shape_nchw(4, 3, 8, 8), 3, opt, 5, seed + 1);
    sl_net_free(net);
}

START_TEST(test_optimizers)
{
    tr_batch *b = batch_new("optimizers");
    sl_context *ctx = th_context(14);
    sl_optimizer_options sgd = sl_optimizer_sgd(0.1f, 0.9f, 1e-3f, 0);
    sl_optimizer_options nesterov = sl_optimizer_sgd(0.1f, 0.9f, 1e-3f, 1);
    sl_optimizer_options adam = sl_optimizer_adam(0.01f, 0.9f, 0.999f, 1e-8f, 1e-3f);
    /* Seeds with every ReLU input of the 3 steps >= MIN_MARGIN from 0. */
    train_case(b, ctx, "sgd_momentum_wd", &sgd, 4000);
    train_case(b, ctx, "sgd_nesterov_wd", &nesterov, 4300);
    train_case(b, ctx, "adam_wd", &adam, 4200);
    sl_context_free(ctx);
    batch_finish(b);
}
END_TEST

/* resnet20 as sl_model_build makes it against the CIFAR ResNet-20 built
 * in torch_reference.py, plain and under the sqrt(N) checkpoint schedule
 * (whose BN momentum rescaling must give the same running statistics). */
START_TEST(test_resnet20)
{
    tr_batch *b = batch_new("resnet20");
    sl_context *ctx = th_context(15);
    sl_net *nets[2];
    for (int sublinear = 0; sublinear < 2; sublinear++) {
        tr_case *c = case_new(b, sublinear ? "resnet20_sqrt_checkpoint" : "resnet20");
        sl_net *net = NULL;
        if (sublinear)
            ck_assert(sl_sublinear(ctx, 3, SL_SCHEDULE_SQRT, &net) == SL_OK);
        else
            ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
        ck_assert_msg(sl_model_build(net, "resnet20", 10, 32) == SL_OK, "%s", sl_last_error());
        case_line(c, "model resnet20 10");
        randomize_batchnorms(net, 500, 1);
        fb_prepare(c, net, sl_shape_nchw(4, 3, 32, 32), 5000);
        nets[sublinear] = net;
    }
    batch_condition(b);
    for (int i = 0; i < 2; i++) {
        fb_execute(&b->cases[i]);
        sl_net_free(nets[i]);
    }
    sl_context_free(ctx);
    batch_finish(b);
}
END_TEST

/* ------------------------------------------------------------------ */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int torch_available(void)
{
    char cmd[2 * PATH_LEN];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torch, numpy' >/dev/null 2>&1", g_python);
    return access(g_python, X_OK) == 0 && system(cmd) == 0;
}

int main(void)
{
    const char *py = getenv("SL_TEST_PYTHON");
    snprintf(g_python, sizeof g_python, "%s", py && *py ? py : "/usr/bin/python3");
    snprintf(g_script, sizeof g_script, "%s/torch_reference.py", SL_TEST_SOURCE_DIR);
    if (!torch_available()) {
        printf("SKIPPED: python3-torch not importable (%s)\n", g_python);
        return EXIT_SUCCESS;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(g_root, sizeof g_root, "%s/sl_torchref_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_root)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }

    Suite *s = suite_create("torch_reference");
    TCase *tc = tcase_create("torch");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_conv2d);
    tcase_add_test(tc, test_batchnorm2d);
    tcase_add_test(tc, test_pooling);
    tcase_add_test(tc, test_linear_relu);
    tcase_add_test(tc, test_blocks);
    tcase_add_test(tc, test_softmax_cross_entropy);
    tcase_add_test(tc, test_optimizers);
    tcase_add_test(tc, test_resnet20);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);

    if (!getenv("SL_TEST_KEEP_TMP"))
        nftw(g_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    else
        printf("kept %s\n", g_root);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
