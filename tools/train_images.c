/*
 * train_images.c — the image batch source of `sublinear train`: the
 * built-in synthetic dataset, MNIST or CIFAR-10 (sl_dataset_*), trained
 * with sl_net_train_step and scored by held-out accuracy.
 *
 * Batch i is samples i*batch .. i*batch+batch-1 of the (seeded) training
 * order. With --distributed each of N ranks takes batch samples per
 * batch, rank r the stream positions (i*batch+b)*N + r
 * (DistributedSampler's rule: every N-th sample from r), so one step of N
 * ranks sees the samples of one single-process step of batch N*batch.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train.h"

typedef struct images {
    sl_dataset *data;
    sl_dataset_info info;
    float *x, *logits;
    int *labels;
    double test_accuracy; /* < 0: not measured */
    int eval_samples; /* that it was measured on */
} images;

static int images_open(train_run *r)
{
    cli_options *o = r->o;
    images *s = r->data;
    s->test_accuracy = -1;
    sl_status st;
    if (strcmp(o->dataset, "synthetic") == 0)
        st = sl_dataset_synthetic(o->classes, 3, o->res, o->res, o->seed, &s->data);
    else if (strcmp(o->dataset, "mnist") == 0)
        st = sl_dataset_mnist(o->data_dir, 3, o->seed, &s->data);
    else if (strcmp(o->dataset, "cifar10") == 0)
        st = sl_dataset_cifar10(o->data_dir, o->seed, &s->data);
    else
        st = sl_set_error(SL_ERR_INVALID_ARG, "unknown dataset '%s'", o->dataset);
    if (st == SL_OK)
        st = sl_dataset_get_info(s->data, &s->info);
    if (st != SL_OK) {
        fprintf(stderr, "sublinear train: %s%s\n",
                strcmp(o->dataset, "synthetic") == 0 ? "the built-in dataset: " : "",
                sl_last_error());
        return CLI_EXIT_FAIL;
    }
    o->classes = s->info.classes;
    o->res = s->info.height;
    r->shape = sl_shape_nchw(o->batch, 3, o->res, o->res);
    r->units_per_batch = o->batch;
    /* A batch of 64 ResNet inputs at 4096x4096 is 12 GiB, filled before
     * the first step: the loop checks it with the step. */
    uint64_t image = (uint64_t)3 * (uint64_t)o->res * (uint64_t)o->res;
    r->batch_bytes = (uint64_t)o->batch * (image + 1 + (uint64_t)o->classes) * sizeof(float);
    return 0;
}

static int images_allocate(train_run *r)
{
    const cli_options *o = r->o;
    images *s = r->data;
    s->x = malloc((size_t)3 * o->res * o->res * (size_t)o->batch * sizeof(float));
    s->labels = malloc((size_t)o->batch * sizeof(int));
    s->logits = malloc((size_t)o->batch * (size_t)o->classes * sizeof(float));
    if (!s->x || !s->labels || !s->logits) {
        fprintf(stderr, "sublinear train: out of memory for a batch of %d\n", o->batch);
        return CLI_EXIT_FAIL;
    }
    return 0;
}

static sl_status images_fetch(train_run *r, int64_t index)
{
    images *s = r->data;
    int n = r->o->batch;
    if (r->ranks == 1)
        return sl_dataset_batch(s->data, SL_SPLIT_TRAIN, index * n, n, s->x, s->labels);
    size_t image = (size_t)3 * r->o->res * r->o->res;
    for (int b = 0; b < n; b++) {
        int64_t at = (index * n + b) * r->ranks + r->rank;
        sl_status st = sl_dataset_batch(s->data, SL_SPLIT_TRAIN, at, 1, s->x + b * image,
                                        s->labels + b);
        if (st != SL_OK)
            return st;
    }
    return SL_OK;
}

static sl_status images_step(train_run *r, sl_step_result *res)
{
    images *s = r->data;
    return sl_net_train_step(r->net, s->x, r->shape, s->labels, res);
}

/* Accuracy on the first --eval test samples. Every rank holds the same
 * network: rank 0 alone measures. */
static int images_evaluate(train_run *r)
{
    const cli_options *o = r->o;
    images *s = r->data;
    int64_t samples = o->eval_samples;
    if (s->info.samples[SL_SPLIT_TEST] == 0 || samples == 0 || r->rank != 0)
        return 0;
    if (samples > s->info.samples[SL_SPLIT_TEST])
        samples = s->info.samples[SL_SPLIT_TEST];
    int64_t correct = 0, seen = 0;
    for (int64_t i = 0; seen < samples; i += o->batch) {
        if (sl_dataset_batch(s->data, SL_SPLIT_TEST, i, o->batch, s->x, s->labels) != SL_OK ||
            sl_net_predict(r->net, s->x, r->shape, s->logits) != SL_OK)
            return cli_fail("evaluating");
        for (int b = 0; b < o->batch && seen < samples; b++, seen++) {
            const float *row = s->logits + (size_t)b * o->classes;
            int best = 0;
            for (int c = 1; c < o->classes; c++)
                if (row[c] > row[best])
                    best = c;
            correct += best == s->labels[b];
        }
    }
    s->test_accuracy = (double)correct / (double)seen;
    s->eval_samples = (int)seen;
    return 0;
}

static sl_status images_save_model(const train_run *r)
{
    return sl_save_model_with(r->net, r->o->save_model, &(sl_save_options){r->o->save_dtype});
}

static void images_print_what(const train_run *r)
{
    const cli_options *o = r->o;
    const images *s = r->data;
    printf("training %s on %s (%d classes, %dx%d), batch %d", o->model, s->info.name, o->classes,
           o->res, o->res, o->batch);
}

static void images_print_json(const train_run *r, train_json_part part)
{
    const cli_options *o = r->o;
    const images *s = r->data;
    if (part == TRAIN_JSON_DATA) {
        printf(",\"dataset\":\"%s\"", s->info.name);
    } else if (part == TRAIN_JSON_BATCH) {
        printf(",\"ranks\":%d,\"shard\":%d,\"res\":%d,\"classes\":%d", r->ranks, o->shard, o->res,
               o->classes);
    } else {
        printf(",\"test_accuracy\":");
        cli_json_number(s->test_accuracy >= 0 ? s->test_accuracy : NAN);
        printf(",\"eval_samples\":%d", s->test_accuracy >= 0 ? s->eval_samples : 0);
    }
}

static void images_print_held_out(const train_run *r)
{
    const cli_options *o = r->o;
    const images *s = r->data;
    if (s->test_accuracy >= 0)
        printf("held-out accuracy: %.1f%% on %d samples (chance: %.1f%%)\n",
               100.0 * s->test_accuracy, s->eval_samples, 100.0 / o->classes);
    else
        printf("held-out accuracy: not measured (%s)\n",
               o->eval_samples ? "the dataset has no test split" : "--eval 0");
}

static void images_print_saved_model(const train_run *r, const sl_memory_report *m)
{
    struct stat st;
    if (stat(r->o->save_model, &st) == 0)
        printf("saved the model to %s (%.2f MiB; parameters %.2f MiB)\n", r->o->save_model,
               cli_mib((uint64_t)st.st_size), cli_mib(m->params));
}

static void images_free(train_run *r)
{
    images *s = r->data;
    free(s->x);
    free(s->labels);
    free(s->logits);
    sl_dataset_free(s->data);
}

const train_source train_images = {
    .state_size = sizeof(images),
    .rate_unit = "img/s",
    .rate_width = 7,
    .rate_noun = "images",
    .classifies = 1,
    .open = images_open,
    .allocate = images_allocate,
    .fetch = images_fetch,
    .step = images_step,
    .evaluate = images_evaluate,
    .save_model = images_save_model,
    .print_what = images_print_what,
    .print_json = images_print_json,
    .print_held_out = images_print_held_out,
    .print_saved_model = images_print_saved_model,
    .free = images_free,
};
