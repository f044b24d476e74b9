/*
 * sublinear.c — the `sublinear` command: train a model on the built-in
 * dataset with a checkpointing schedule, or print the planned memory of a
 * model without running a kernel.
 *
 *   sublinear train [--model resnet20] [--steps 300] [--batch 32] [--schedule sqrt] ...
 *   sublinear plan --model resnet152 --batch 16 --res 224 --schedule sqrt [--json]
 *   sublinear dot --model resnet20 --res 32 --batch 8 -o net.dot [--no-reuse]
 *   sublinear memplot --model resnet152 --schedules none,sqrt -o timeline.svg
 *
 * Bad arguments print a usage message and exit with status 2.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sublinear.h"

typedef struct options {
    const char *model;
    int steps, batch, res, classes, threads, json, eval_samples;
    float lr;
    uint64_t seed;
    sl_schedule schedule;
    char schedule_text[64];
    sl_mode mode;
    int no_reuse;
    const char *output;
    const char *schedules;
    const char *optimizer;
} options;

static void usage(FILE *f, const char *cmd)
{
    if (!cmd || strcmp(cmd, "train") == 0)
        fprintf(f,
                "usage: sublinear train [--model NAME] [--steps N] [--batch N] [--res N]\n"
                "                       [--classes N] [--lr X] [--schedule S] [--seed N]\n"
                "                       [--threads N] [--eval N] [--json]\n"
                "  Trains a model on the built-in synthetic dataset and prints loss,\n"
                "  accuracy and the memory saved against keeping every activation.\n");
    if (!cmd || strcmp(cmd, "plan") == 0)
        fprintf(f,
                "usage: sublinear plan --model NAME [--batch N] [--res N] [--classes N]\n"
                "                      [--schedule S] [--mode train|infer] [--no-reuse]\n"
                "                      [--optimizer sgd|adam|none] [--json]\n"
                "  Prints the planned memory of one step, by category, and the recomputed\n"
                "  fraction of FLOPs. No kernel runs. --no-reuse plans every tensor in\n"
                "  storage of its own (what a plain framework does).\n");
    if (!cmd || strcmp(cmd, "dot") == 0)
        fprintf(f,
                "usage: sublinear dot --model NAME -o FILE.dot [--batch N] [--res N]\n"
                "                     [--schedule S] [--mode train|infer] [--no-reuse]\n"
                "  Writes the network as a Graphviz graph; equal colour = shared storage.\n");
    if (!cmd || strcmp(cmd, "memplot") == 0)
        fprintf(f,
                "usage: sublinear memplot --model NAME -o FILE.svg [--schedules S1,S2,...]\n"
                "                         [--batch N] [--res N] [--mode train|infer] [--json]\n"
                "  Draws live memory per program step for each schedule on one SVG.\n");
    if (!cmd)
        fprintf(f, "\nschedules: none, sqrt, segments:K, budget:SIZE (bytes or with KiB/MiB/GiB)\n"
                   "models:");
    if (!cmd)
        for (const char *const *m = sl_model_names(); *m; m++)
            fprintf(f, " %s", *m);
    if (!cmd)
        fprintf(f, "\n");
}

static int parse_int(const char *s, int lo, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > 1000000000L)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0))
        return -1;
    double mult = 1;
    if (!*end || strcmp(end, "B") == 0)
        mult = 1;
    else if (strcmp(end, "KiB") == 0 || strcmp(end, "K") == 0)
        mult = 1024.0;
    else if (strcmp(end, "MiB") == 0 || strcmp(end, "M") == 0)
        mult = 1024.0 * 1024.0;
    else if (strcmp(end, "GiB") == 0 || strcmp(end, "G") == 0)
        mult = 1024.0 * 1024.0 * 1024.0;
    else
        return -1;
    *out = (uint64_t)(v * mult);
    return 0;
}

static int parse_schedule(const char *s, sl_schedule *out)
{
    int k;
    uint64_t bytes;
    if (strcmp(s, "none") == 0)
        *out = SL_CKPT_NONE;
    else if (strcmp(s, "sqrt") == 0)
        *out = SL_CKPT_SQRT;
    else if (strncmp(s, "segments:", 9) == 0 && parse_int(s + 9, 1, &k) == 0)
        *out = SL_CKPT_SEGMENTS(k);
    else if (strncmp(s, "budget:", 7) == 0 && parse_size(s + 7, &bytes) == 0)
        *out = SL_CKPT_BUDGET(bytes);
    else
        return -1;
    return 0;
}

/* Returns 0 on success, 2 on a bad argument (message printed). */
static int parse_args(const char *cmd, int argc, char **argv, options *o)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout, cmd);
            exit(0);
        } else if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        } else if (strcmp(a, "--no-reuse") == 0) {
            o->no_reuse = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "sublinear %s: %s needs a value\n", cmd, a);
            usage(stderr, cmd);
            return 2;
        }
        if (strcmp(a, "--model") == 0)
            o->model = v;
        else if (strcmp(a, "--steps") == 0)
            bad = parse_int(v, 1, &o->steps);
        else if (strcmp(a, "--batch") == 0)
            bad = parse_int(v, 1, &o->batch);
        else if (strcmp(a, "--res") == 0)
            bad = parse_int(v, 8, &o->res);
        else if (strcmp(a, "--classes") == 0)
            bad = parse_int(v, 2, &o->classes);
        else if (strcmp(a, "--threads") == 0)
            bad = parse_int(v, 0, &o->threads);
        else if (strcmp(a, "--eval") == 0)
            bad = parse_int(v, 1, &o->eval_samples);
        else if (strcmp(a, "--seed") == 0) {
            int s;
            bad = parse_int(v, 0, &s);
            o->seed = (uint64_t)s;
        } else if (strcmp(a, "--lr") == 0) {
            char *end;
            o->lr = strtof(v, &end);
            bad = *end || !(o->lr > 0);
        } else if (strcmp(a, "--schedule") == 0) {
            bad = parse_schedule(v, &o->schedule);
            snprintf(o->schedule_text, sizeof o->schedule_text, "%s", v);
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            o->output = v;
        } else if (strcmp(a, "--schedules") == 0) {
            o->schedules = v;
        } else if (strcmp(a, "--optimizer") == 0) {
            o->optimizer = v;
            bad = strcmp(v, "sgd") && strcmp(v, "adam") && strcmp(v, "none");
        } else if (strcmp(a, "--mode") == 0) {
            if (strcmp(v, "train") == 0)
                o->mode = SL_MODE_TRAIN;
            else if (strcmp(v, "infer") == 0)
                o->mode = SL_MODE_INFER;
            else
                bad = 1;
        } else {
            fprintf(stderr, "sublinear %s: unknown option %s\n", cmd, a);
            usage(stderr, cmd);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "sublinear %s: bad value '%s' for %s\n", cmd, v, a);
            usage(stderr, cmd);
            return 2;
        }
        i++;
    }
    return 0;
}

static int fail(const char *what)
{
    fprintf(stderr, "sublinear: %s: %s\n", what, sl_last_error());
    return 1;
}

static int build(const options *o, sl_context **ctx, sl_net **net)
{
    sl_context_options co = sl_context_defaults();
    co.threads = o->threads;
    co.seed = o->seed;
    if (sl_context_create(&co, ctx) != SL_OK)
        return fail("creating the context");
    if (sl_sublinear(*ctx, 3, o->schedule, net) != SL_OK)
        return fail("creating the network");
    if (sl_model_build(*net, o->model, o->classes, o->res) != SL_OK)
        return fail("building the model");
    if (o->no_reuse && sl_net_set_memory_reuse(*net, 0) != SL_OK)
        return fail("turning memory reuse off");
    if (o->optimizer && strcmp(o->optimizer, "none") != 0) {
        sl_optimizer_options opt = strcmp(o->optimizer, "adam") == 0
                                       ? sl_adam(1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f)
                                       : sl_sgd(o->lr, 0.9f, 5e-4f, 0);
        if (sl_net_set_optimizer(*net, &opt) != SL_OK)
            return fail("setting the optimizer");
    }
    return 0;
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static void print_report(const sl_memory_report *r)
{
    printf("  outputs       %10.2f MiB\n", mib(r->outputs));
    printf("  gradInputs    %10.2f MiB\n", mib(r->grad_inputs));
    printf("  buffers       %10.2f MiB\n", mib(r->buffers));
    printf("  activation arena (peak of the three, shared) %.2f MiB\n", mib(r->arena_bytes));
    printf("  parameters    %10.2f MiB\n", mib(r->params));
    printf("  param grads   %10.2f MiB\n", mib(r->param_grads));
    printf("  optimizer     %10.2f MiB\n", mib(r->optimizer));
    printf("  total         %10.2f MiB\n", mib(r->total));
}

static void json_report(const sl_memory_report *r)
{
    char buf[1024];
    if (sl_memory_report_json(r, buf, sizeof buf) == SL_OK)
        fputs(buf, stdout);
}

static int cmd_dot(options *o)
{
    sl_context *ctx = NULL;
    sl_net *net = NULL;
    int rc = build(o, &ctx, &net);
    sl_shape in = {o->batch, 3, o->res, o->res};
    if (!rc && sl_net_write_dot(net, in, o->mode, o->output) != SL_OK)
        rc = fail("writing the graph");
    if (!rc)
        printf("wrote %s (%s plan, %s)\n", o->output, o->mode == SL_MODE_TRAIN ? "training" : "inference",
               o->no_reuse ? "no reuse" : "memory reuse on");
    sl_net_free(net);
    sl_context_free(ctx);
    return rc;
}

static int cmd_memplot(options *o)
{
    char list[512];
    snprintf(list, sizeof list, "%s", o->schedules ? o->schedules : "none,sqrt");
    sl_memory_timeline tl[8];
    const sl_memory_timeline *series[8];
    const char *labels[8];
    int n = 0, rc = 0;
    sl_context *ctx = NULL;
    sl_net *net = NULL;
    rc = build(o, &ctx, &net);
    sl_shape in = {o->batch, 3, o->res, o->res};
    for (char *tok = strtok(list, ","); !rc && tok; tok = strtok(NULL, ",")) {
        sl_schedule s;
        if (n == 8 || parse_schedule(tok, &s) != 0) {
            fprintf(stderr, "sublinear memplot: bad schedule '%s' (at most 8)\n", tok);
            usage(stderr, "memplot");
            rc = 2;
            break;
        }
        if (sl_net_set_schedule(net, s) != SL_OK ||
            sl_net_memory_timeline(net, in, o->mode, &tl[n]) != SL_OK) {
            rc = fail("planning");
            break;
        }
        series[n] = &tl[n];
        labels[n] = tok;
        n++;
    }
    if (!rc && sl_memory_timeline_svg(o->output, series, labels, n) != SL_OK)
        rc = fail("writing the plot");
    if (!rc && o->json) {
        printf("{\"output\":\"%s\",\"series\":[", o->output);
        for (int i = 0; i < n; i++)
            printf("%s{\"schedule\":\"%s\",\"steps\":%d,\"arena\":%llu}", i ? "," : "", labels[i],
                   tl[i].steps, (unsigned long long)tl[i].arena_bytes);
        printf("]}\n");
    } else if (!rc) {
        for (int i = 0; i < n; i++)
            printf("%-20s %5d steps, arena %.2f MiB\n", labels[i], tl[i].steps,
                   mib(tl[i].arena_bytes));
        printf("wrote %s\n", o->output);
    }
    for (int i = 0; i < n; i++)
        sl_memory_timeline_free(&tl[i]);
    sl_net_free(net);
    sl_context_free(ctx);
    return rc;
}

static int cmd_plan(options *o)
{
    sl_context *ctx = NULL;
    sl_net *net = NULL;
    int rc = build(o, &ctx, &net);
    sl_memory_report r;
    sl_shape in = {o->batch, 3, o->res, o->res};
    if (!rc && sl_net_memory_report(net, in, o->mode, &r) != SL_OK)
        rc = fail("planning");
    if (!rc && o->json) {
        printf("{\"model\":\"%s\",\"batch\":%d,\"res\":%d,\"mode\":\"%s\",\"schedule\":\"%s\","
               "\"reuse\":%s,\"planned_bytes\":{\"outputs\":%llu,\"grad_inputs\":%llu,"
               "\"buffers\":%llu,\"params\":%llu,\"param_grads\":%llu,\"optimizer\":%llu,"
               "\"total\":%llu,\"arena\":%llu},\"recompute_fraction\":%.6f}\n",
               o->model, o->batch, o->res, o->mode == SL_MODE_TRAIN ? "train" : "infer",
               o->schedule_text, o->no_reuse ? "false" : "true", (unsigned long long)r.outputs,
               (unsigned long long)r.grad_inputs, (unsigned long long)r.buffers,
               (unsigned long long)r.params, (unsigned long long)r.param_grads,
               (unsigned long long)r.optimizer, (unsigned long long)r.total,
               (unsigned long long)r.arena_bytes, r.recompute_fraction);
    } else if (!rc) {
        printf("%s, batch %d, %dx%d, %s, schedule %s\n", o->model, o->batch, o->res, o->res,
               o->mode == SL_MODE_TRAIN ? "training" : "inference", o->schedule_text);
        print_report(&r);
        printf("  recomputed FLOPs: %.1f%% of one plain step\n", 100.0 * r.recompute_fraction);
    }
    sl_net_free(net);
    sl_context_free(ctx);
    return rc;
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float evaluate(sl_net *net, sl_dataset *ds, const options *o, float *x, int *labels,
                      float *logits)
{
    int correct = 0, seen = 0;
    sl_shape s = {o->batch, 3, o->res, o->res};
    for (int64_t i = 0; seen < o->eval_samples; i += o->batch) {
        if (sl_dataset_batch(ds, SL_SPLIT_TEST, i, o->batch, x, labels) != SL_OK ||
            sl_net_predict(net, x, s, logits) != SL_OK)
            return -1.0f;
        for (int b = 0; b < o->batch && seen < o->eval_samples; b++, seen++) {
            const float *row = logits + (size_t)b * o->classes;
            int best = 0;
            for (int c = 1; c < o->classes; c++)
                if (row[c] > row[best])
                    best = c;
            correct += best == labels[b];
        }
    }
    return (float)correct / (float)seen;
}

static int cmd_train(options *o)
{
    sl_context *ctx = NULL;
    sl_net *net = NULL;
    sl_dataset *ds = NULL;
    int rc = build(o, &ctx, &net);
    sl_shape s = {o->batch, 3, o->res, o->res};
    size_t per = (size_t)3 * o->res * o->res;
    float *x = malloc(per * o->batch * sizeof(float));
    int *labels = malloc(o->batch * sizeof(int));
    float *logits = malloc((size_t)o->batch * o->classes * sizeof(float));
    sl_memory_report mine, plain;
    if (!rc && (!x || !labels || !logits))
        rc = (fprintf(stderr, "sublinear: out of memory\n"), 1);
    if (!rc && sl_dataset_synthetic(o->classes, 3, o->res, o->res, o->seed, &ds) != SL_OK)
        rc = fail("creating the dataset");
    sl_optimizer_options opt = sl_sgd(o->lr, 0.9f, 5e-4f, 0);
    if (!rc && sl_net_set_optimizer(net, &opt) != SL_OK)
        rc = fail("setting the optimizer");
    if (!rc && sl_net_memory_report(net, s, SL_MODE_TRAIN, &mine) != SL_OK)
        rc = fail("planning");
    if (!rc && (sl_net_set_schedule(net, SL_CKPT_NONE) != SL_OK ||
                sl_net_memory_report(net, s, SL_MODE_TRAIN, &plain) != SL_OK ||
                sl_net_set_schedule(net, o->schedule) != SL_OK))
        rc = fail("planning the keep-everything baseline");
    if (!rc && !o->json)
        printf("training %s on the built-in dataset (%d classes, %dx%d), batch %d, schedule %s\n"
               "activation memory: %.2f MiB planned (keep-everything: %.2f MiB), recompute %.1f%%\n",
               o->model, o->classes, o->res, o->res, o->batch, o->schedule_text,
               mib(mine.arena_bytes), mib(plain.arena_bytes), 100.0 * mine.recompute_fraction);
    double t0 = now_seconds(), loss_avg = 0;
    int correct = 0, seen = 0;
    for (int step = 0; !rc && step < o->steps; step++) {
        sl_step_result res;
        if (sl_dataset_batch(ds, SL_SPLIT_TRAIN, (int64_t)step * o->batch, o->batch, x, labels) !=
                SL_OK ||
            sl_net_train_step(net, x, s, labels, &res) != SL_OK) {
            rc = fail("training");
            break;
        }
        if (o->steps > 10 && step == o->steps / 2)
            sl_net_set_lr(net, o->lr * 0.1f);
        loss_avg = step ? 0.9 * loss_avg + 0.1 * res.loss : res.loss;
        correct += res.correct;
        seen += o->batch;
        if (!o->json && ((step + 1) % 10 == 0 || step + 1 == o->steps)) {
            double dt = now_seconds() - t0;
            printf("\rstep %5d/%d  loss %.4f  train acc %5.1f%%  %.1f img/s   ", step + 1, o->steps,
                   loss_avg, 100.0 * correct / seen, (step + 1) * o->batch / dt);
            fflush(stdout);
            correct = seen = 0;
        }
    }
    double seconds = now_seconds() - t0;
    float acc = rc ? 0 : evaluate(net, ds, o, x, labels, logits);
    if (!rc && acc < 0)
        rc = fail("evaluating");
    if (!rc && o->json) {
        printf("{\"model\":\"%s\",\"steps\":%d,\"batch\":%d,\"schedule\":\"%s\",\"loss\":%.6f,"
               "\"test_accuracy\":%.4f,\"images_per_second\":%.2f,\"memory\":",
               o->model, o->steps, o->batch, o->schedule_text, loss_avg, acc,
               o->steps * o->batch / seconds);
        json_report(&mine);
        printf(",\"baseline_memory\":");
        json_report(&plain);
        printf("}\n");
    } else if (!rc) {
        printf("\nheld-out accuracy: %.1f%% on %d samples (chance: %.1f%%)\n", 100.0 * acc,
               o->eval_samples, 100.0 / o->classes);
        printf("planned memory, schedule %s:\n", o->schedule_text);
        print_report(&mine);
        printf("activation memory saved against keep-everything: %.2f MiB -> %.2f MiB (%.1f%% less)\n",
               mib(plain.arena_bytes), mib(mine.arena_bytes),
               100.0 * (1.0 - (double)mine.arena_bytes / (double)plain.arena_bytes));
    }
    free(x);
    free(labels);
    free(logits);
    sl_dataset_free(ds);
    sl_net_free(net);
    sl_context_free(ctx);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout, NULL);
        return argc < 2 ? 2 : 0;
    }
    options o = {"resnet20", 300, 32, 32, 10, 0, 0, 1000, 0.05f, 1, SL_CKPT_SQRT, "sqrt",
                 SL_MODE_TRAIN, 0, NULL, NULL, NULL};
    const char *cmd = argv[1];
    int is_plan = strcmp(cmd, "plan") == 0, is_dot = strcmp(cmd, "dot") == 0,
        is_memplot = strcmp(cmd, "memplot") == 0;
    if (strcmp(cmd, "train") != 0 && !is_plan && !is_dot && !is_memplot) {
        fprintf(stderr, "sublinear: unknown command '%s'\n", cmd);
        usage(stderr, NULL);
        return 2;
    }
    if (is_plan || is_dot || is_memplot) {
        o.model = NULL;
        o.batch = 16;
        o.res = 224;
        o.classes = 1000;
        o.optimizer = "sgd";
    }
    int rc = parse_args(cmd, argc - 2, argv + 2, &o);
    if (rc)
        return rc;
    if (!o.model) {
        fprintf(stderr, "sublinear %s: --model is required\n", cmd);
        usage(stderr, cmd);
        return 2;
    }
    if ((is_dot || is_memplot) && !o.output) {
        fprintf(stderr, "sublinear %s: -o FILE is required\n", cmd);
        usage(stderr, cmd);
        return 2;
    }
    if (is_plan)
        return cmd_plan(&o);
    if (is_dot)
        return cmd_dot(&o);
    if (is_memplot)
        return cmd_memplot(&o);
    return cmd_train(&o);
}
