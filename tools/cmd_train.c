/*
 * cmd_train.c — `sublinear train`: the whole pipeline of the library from
 * the outside. It plans the chosen schedule and the keep-everything
 * baseline (no kernel runs), trains with a progress bar, measures
 * held-out accuracy, and prints the memory report with the saving against
 * keep-everything; --save-model writes a thin model file, --snapshot a
 * snapshot to resume from with --resume.
 *
 * Step s of a run always trains on samples s*batch .. s*batch+batch-1 of
 * the (seeded) training order and at the learning rate of step s, so a
 * run resumed from a snapshot ends with the parameters of a run that never
 * stopped. With --distributed (under mpirun) each of N ranks takes batch
 * samples per step, rank r the stream positions (s*batch+b)*N + r
 * (DistributedSampler's rule: every N-th sample from r), so one step of N
 * ranks sees the samples of one single-process step of batch N*batch;
 * rank 0 prints and writes files. With --accum K a step is K batches
 * (micro-batches): step s trains on the batches s*K .. s*K+K-1.
 *
 * A step whose loss is not finite stops the run (the library refuses it;
 * --distributed ranks agree on it through the summed loss), and nothing
 * is saved after it: --snapshot keeps the last snapshot the run wrote,
 * and no snapshot or model is written whose parameters hold NaN or inf.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

typedef struct train_run {
    cli_options *o;
    sl_dataset *data;
    sl_dataset_info info;
    sl_context *ctx;
    sl_net *net;
    sl_dist *dist; /* --distributed */
    int rank, ranks;
    sl_shape shape;
    float *x, *logits;
    int *labels;
    sl_memory_report planned, baseline;
    int64_t first_step; /* the step count at the start (non-zero after --resume) */
    int64_t snapshot_step; /* of the last snapshot this run wrote; -1: none */
    int steps_run;
    double seconds, loss_avg, first_loss, last_loss;
    int64_t correct, seen;
    double test_accuracy; /* < 0: not measured */
    int tty;
} train_run;

/* Sums over the ranks (a no-op for one process). */
static int sum_over_ranks(train_run *r, double *v, int n)
{
    if (r->dist && sl_dist_sum(r->dist, v, n) != SL_OK)
        return cli_fail("summing over the ranks");
    return 0;
}

/* The step is checked with the batch buffers before they are allocated
 * (a batch of 64 ResNet inputs at 4096x4096 is 12 GiB, filled before the
 * first step): a step too large for the machine is refused at once. With
 * --distributed the ranks agree, so that none waits on one that left. */
static int allocate_batch(train_run *r)
{
    const cli_options *o = r->o;
    uint64_t image = (uint64_t)3 * (uint64_t)o->res * (uint64_t)o->res;
    uint64_t bytes = (uint64_t)o->batch * (image + 1 + (uint64_t)o->classes) * sizeof(float);
    sl_status st = sl_net_check_step_memory(r->net, r->shape, SL_MODE_TRAIN, bytes);
    double failed[1] = {st != SL_OK};
    if (st != SL_OK)
        cli_fail("checking the step's memory before allocating the batch");
    if (sum_over_ranks(r, failed, 1))
        return CLI_EXIT_FAIL;
    if (failed[0] > 0) {
        if (st == SL_OK)
            fprintf(stderr, "sublinear train: another rank has no memory for the step and its "
                            "batch\n");
        return CLI_EXIT_FAIL;
    }
    r->x = malloc((size_t)(image * (uint64_t)o->batch * sizeof(float)));
    r->labels = malloc((size_t)o->batch * sizeof(int));
    r->logits = malloc((size_t)o->batch * (size_t)o->classes * sizeof(float));
    if (!r->x || !r->labels || !r->logits) {
        fprintf(stderr, "sublinear train: out of memory for a batch of %d\n", o->batch);
        return CLI_EXIT_FAIL;
    }
    return 0;
}

int cli_load_failed(const char *what)
{
    int rc = cli_fail(what);
    if (strstr(sl_last_error(), "allow_nonfinite")) /* the library's refusal of NaN or inf */
        fprintf(stderr, "sublinear: --allow-nonfinite loads such a file anyway\n");
    return rc;
}

static int setup(train_run *r)
{
    cli_options *o = r->o;
    sl_status st;
    if (strcmp(o->dataset, "synthetic") == 0)
        st = sl_dataset_synthetic(o->classes, 3, o->res, o->res, o->seed, &r->data);
    else if (strcmp(o->dataset, "mnist") == 0)
        st = sl_dataset_mnist(o->data_dir, 3, o->seed, &r->data);
    else if (strcmp(o->dataset, "cifar10") == 0)
        st = sl_dataset_cifar10(o->data_dir, o->seed, &r->data);
    else
        st = sl_set_error(SL_ERR_INVALID_ARG, "unknown dataset '%s'", o->dataset);
    if (st == SL_OK)
        st = sl_dataset_get_info(r->data, &r->info);
    if (st != SL_OK) {
        fprintf(stderr, "sublinear train: %s%s\n",
                strcmp(o->dataset, "synthetic") == 0 ? "the built-in dataset: " : "",
                sl_last_error());
        return CLI_EXIT_FAIL;
    }
    o->classes = r->info.classes;
    o->res = r->info.height;
    r->shape = (sl_shape){o->batch, 3, o->res, o->res};
    int rc = cli_build(o, &r->ctx, &r->net);
    if (rc)
        return rc;
    sl_load_options load = sl_load_defaults();
    load.allow_nonfinite = o->allow_nonfinite;
    if (o->resume && sl_load_snapshot_with(r->net, o->resume, &load) != SL_OK)
        return cli_load_failed("resuming from the snapshot");
    sl_dist_options dist_options = sl_dist_defaults();
    dist_options.shard = o->shard;
    if (o->distributed && sl_dist_join(r->net, &dist_options, &r->dist) != SL_OK)
        return cli_fail("joining the ranks (--distributed)");
    r->rank = sl_dist_rank(r->dist);
    r->ranks = sl_dist_size(r->dist);
    r->first_step = sl_net_step_count(r->net);
    rc = cli_plan_with_baseline(r->net, r->shape, o->schedule, &r->planned, &r->baseline);
    if (rc)
        return rc;
    return allocate_batch(r);
}

static void print_header(const train_run *r)
{
    const cli_options *o = r->o;
    printf("training %s on %s (%d classes, %dx%d), batch %d, schedule %s, %s lr %g, %s\n",
           o->model, r->info.name, o->classes, o->res, o->res, o->batch, o->schedule_text,
           o->optimizer, (double)o->lr, o->device == SL_DEVICE_CUDA ? "CUDA" : "CPU");
    if (r->dist)
        printf("data-parallel over %d ranks: batch %d per rank, %d per step\n", r->ranks,
               o->batch, o->batch * r->ranks);
    if (r->dist && o->shard)
        printf("ZeRO-1: each rank holds the optimizer state of its 1/%d of the parameters\n",
               r->ranks);
    if (r->first_step)
        printf("resumed from %s at step %lld\n", o->resume, (long long)r->first_step);
    printf("planned activation memory %.2f MiB (keep-everything %.2f MiB), recompute %.1f%% of "
           "a step\n",
           cli_mib(r->planned.arena_bytes), cli_mib(r->baseline.arena_bytes),
           100.0 * r->planned.recompute_fraction);
}

/* One progress line: on a terminal a bar redrawn in place, otherwise a
 * line per report so logs stay readable. */
static void print_progress(const train_run *r, int64_t step, double acc, double images_per_s,
                           uint64_t mem_bytes)
{
    char bar[CLI_BAR_WIDTH + 1];
    cli_progress_bar(bar, step, r->o->steps);
    printf("%sstep %6lld/%d [%s] loss %.4f  acc %5.1f%%  %7.1f img/s  mem %.2f MiB%s",
           r->tty ? "\r" : "", (long long)step, r->o->steps, bar, r->loss_avg, 100.0 * acc,
           images_per_s, cli_mib(mem_bytes), r->tty ? "  " : "\n");
    fflush(stdout);
}

/* The batch of this rank at a step (see the top of the file). */
static sl_status fetch_batch(train_run *r, int64_t step)
{
    int n = r->o->batch;
    if (r->ranks == 1)
        return sl_dataset_batch(r->data, SL_SPLIT_TRAIN, step * n, n, r->x, r->labels);
    size_t image = (size_t)3 * r->o->res * r->o->res;
    for (int b = 0; b < n; b++) {
        int64_t at = (step * n + b) * r->ranks + r->rank;
        sl_status st = sl_dataset_batch(r->data, SL_SPLIT_TRAIN, at, 1, r->x + b * image,
                                        r->labels + b);
        if (st != SL_OK)
            return st;
    }
    return SL_OK;
}

/* How the library's messages name a value that is not finite. */
static const char *nonfinite_name(double v)
{
    return isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf";
}

int cli_train_stopped(const cli_options *o, int64_t snapshot_step, int64_t step)
{
    if (o->snapshot && snapshot_step >= 0)
        fprintf(stderr, "sublinear: stopped at step %lld; %s holds the last snapshot, of step "
                "%lld (resume with --resume %s)\n", (long long)step + 1, o->snapshot,
                (long long)snapshot_step, o->snapshot);
    else if (o->snapshot)
        fprintf(stderr, "sublinear: stopped at step %lld; this run wrote no snapshot, %s is as "
                "it was\n", (long long)step + 1, o->snapshot);
    return CLI_EXIT_FAIL;
}

int cli_check_params_finite(sl_net *net, const char *what)
{
    int n = 0;
    if (sl_net_param_count(net, &n) != SL_OK)
        return cli_fail(what);
    size_t most = 0;
    for (int i = 0; i < n; i++) {
        sl_param_info p;
        if (sl_net_param(net, i, &p) != SL_OK)
            return cli_fail(what);
        most = p.count > most ? p.count : most;
    }
    float *v = malloc((most ? most : 1) * sizeof *v);
    if (!v) {
        fprintf(stderr, "sublinear: %s: out of memory checking the parameters\n", what);
        return CLI_EXIT_FAIL;
    }
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        sl_param_info p;
        if (sl_net_param(net, i, &p) != SL_OK || sl_net_param_read(net, i, v) != SL_OK) {
            rc = cli_fail(what);
            break;
        }
        for (size_t k = 0; k < p.count; k++)
            if (!isfinite(v[k])) {
                fprintf(stderr, "sublinear: %s: tensor '%s' holds %s at element %zu after step "
                        "%lld (training diverged); not saving it\n", what, p.name,
                        nonfinite_name(v[k]), k, (long long)sl_net_step_count(net));
                rc = CLI_EXIT_FAIL;
                break;
            }
    }
    free(v);
    return rc;
}

/* --distributed: the library leaves the loss check to the ranks, which
 * must stop together; the sum of their losses is finite only when every
 * rank's is. Collective. */
static int agree_loss_finite(train_run *r, float loss, int64_t step)
{
    double sum = loss;
    if (sum_over_ranks(r, &sum, 1))
        return CLI_EXIT_FAIL;
    if (isfinite(sum))
        return 0;
    double bad = isfinite(loss) ? sum : (double)loss;
    fprintf(stderr, "sublinear: training: the loss is %s at step %lld on %s: training diverged "
            "(a learning rate too high?) or a weight or input is NaN or infinite\n",
            nonfinite_name(bad), (long long)step + 1,
            isfinite(loss) ? "another rank" : "this rank");
    return CLI_EXIT_FAIL;
}

static int train_loop(train_run *r)
{
    cli_options *o = r->o;
    double t0 = cli_now_seconds();
    int64_t window_correct = 0, window_seen = 0;
    uint64_t mem = 0;
    int show = !o->json && !o->quiet && r->rank == 0;
    for (int64_t step = r->first_step; step < o->steps; step++) {
        sl_step_result res = {0.0f, 0, 0};
        if (sl_net_set_lr(r->net, cli_lr_at(o, step)) != SL_OK)
            return cli_fail("preparing a step");
        for (int m = 0; m < o->accum; m++) { /* the last micro-batch updates */
            sl_step_result micro;
            if (fetch_batch(r, step * o->accum + m) != SL_OK)
                return cli_fail("preparing a step");
            if (sl_net_train_step(r->net, r->x, r->shape, r->labels, &micro) != SL_OK) {
                cli_fail("training");
                return cli_train_stopped(o, r->snapshot_step, step);
            }
            res.loss += micro.loss / (float)o->accum;
            res.correct += micro.correct;
        }
        if (r->dist && agree_loss_finite(r, res.loss, step))
            return cli_train_stopped(o, r->snapshot_step, step);
        r->last_loss = res.loss;
        r->loss_avg = r->steps_run ? 0.9 * r->loss_avg + 0.1 * res.loss : res.loss;
        if (r->steps_run++ == 0) {
            sl_memory_report m;
            r->first_loss = res.loss;
            if (sl_net_memory_report(r->net, r->shape, SL_MODE_TRAIN, &m) == SL_OK)
                mem = m.measured_total;
        }
        r->correct += res.correct;
        r->seen += (int64_t)o->batch * o->accum;
        window_correct += res.correct;
        window_seen += (int64_t)o->batch * o->accum;
        if (o->snapshot_every && (step + 1) % o->snapshot_every == 0) {
            if (cli_check_params_finite(r->net, "saving the snapshot"))
                return cli_train_stopped(o, r->snapshot_step, step);
            if (sl_save_snapshot(r->net, o->snapshot) != SL_OK) /* collective in --distributed */
                return cli_fail("saving the snapshot");
            r->snapshot_step = step + 1;
        }
        if ((step + 1) % o->log_every == 0 || step + 1 == o->steps) {
            double dt = cli_now_seconds() - t0, window[2] = {(double)window_correct, (double)window_seen};
            if (sum_over_ranks(r, window, 2))
                return CLI_EXIT_FAIL;
            if (show)
                print_progress(r, step + 1, window[0] / window[1],
                               (double)r->steps_run * o->batch * o->accum * r->ranks / dt, mem);
            window_correct = window_seen = 0;
        }
    }
    r->seconds = cli_now_seconds() - t0;
    double totals[2] = {(double)r->correct, (double)r->seen};
    if (sum_over_ranks(r, totals, 2))
        return CLI_EXIT_FAIL;
    r->correct = (int64_t)totals[0];
    r->seen = (int64_t)totals[1];
    if (show && r->tty && r->steps_run)
        printf("\n");
    return 0;
}

static int evaluate(train_run *r)
{
    const cli_options *o = r->o;
    int64_t samples = o->eval_samples;
    r->test_accuracy = -1;
    /* Every rank holds the same network: rank 0 alone measures. */
    if (r->info.samples[SL_SPLIT_TEST] == 0 || samples == 0 || r->rank != 0)
        return 0;
    if (samples > r->info.samples[SL_SPLIT_TEST])
        samples = r->info.samples[SL_SPLIT_TEST];
    int64_t correct = 0, seen = 0;
    for (int64_t i = 0; seen < samples; i += o->batch) {
        if (sl_dataset_batch(r->data, SL_SPLIT_TEST, i, o->batch, r->x, r->labels) != SL_OK ||
            sl_net_predict(r->net, r->x, r->shape, r->logits) != SL_OK)
            return cli_fail("evaluating");
        for (int b = 0; b < o->batch && seen < samples; b++, seen++) {
            const float *row = r->logits + (size_t)b * o->classes;
            int best = 0;
            for (int c = 1; c < o->classes; c++)
                if (row[c] > row[best])
                    best = c;
            correct += best == r->labels[b];
        }
    }
    r->test_accuracy = (double)correct / (double)seen;
    r->o->eval_samples = (int)seen;
    return 0;
}

static int save(const train_run *r)
{
    const char *model = r->o->save_model, *snapshot = r->o->snapshot;
    if ((model || snapshot) && r->steps_run &&
        cli_check_params_finite(r->net, model ? "saving the model" : "saving the snapshot"))
        return cli_train_stopped(r->o, r->snapshot_step, sl_net_step_count(r->net) - 1);
    /* In a communicator (--distributed) rank 0 writes, every rank calls. */
    sl_save_options save = {.dtype = r->o->save_dtype};
    if (model && sl_save_model_with(r->net, model, &save) != SL_OK)
        return cli_fail("saving the model");
    if (snapshot && sl_save_snapshot(r->net, snapshot) != SL_OK)
        return cli_fail("saving the snapshot");
    return 0;
}



static void print_json(const train_run *r, const sl_memory_report *m)
{
    const cli_options *o = r->o;
    int ran = r->steps_run > 0;
    printf("{\"model\":");
    cli_json_string(stdout, o->model);
    printf(",\"dataset\":\"%s\",\"device\":\"%s\",\"schedule\":", r->info.name,
           o->device == SL_DEVICE_CUDA ? "cuda" : "cpu");
    cli_json_string(stdout, o->schedule_text);
    printf(",\"batch\":%d,\"ranks\":%d,\"shard\":%d,\"res\":%d,\"classes\":%d,\"steps\":%d,"
           "\"first_step\":%lld,\"steps_run\":%d,\"loss\":", o->batch, r->ranks, o->shard, o->res,
           o->classes, o->steps, (long long)r->first_step, r->steps_run);
    cli_json_number(ran ? r->loss_avg : NAN);
    printf(",\"first_loss\":");
    cli_json_number(ran ? r->first_loss : NAN);
    printf(",\"last_loss\":");
    cli_json_number(ran ? r->last_loss : NAN);
    printf(",\"train_accuracy\":");
    cli_json_number(ran ? (double)r->correct / (double)r->seen : NAN);
    printf(",\"test_accuracy\":");
    cli_json_number(r->test_accuracy >= 0 ? r->test_accuracy : NAN);
    printf(",\"eval_samples\":%d,\"images_per_second\":", r->test_accuracy >= 0 ? o->eval_samples : 0);
    cli_json_number(ran ? (double)r->steps_run * o->batch * o->accum * r->ranks / r->seconds : NAN);
    printf(",\"seconds\":");
    cli_json_number(r->seconds);
    cli_json_memory_end(o, m, &r->baseline);
}

static void print_summary(const train_run *r, const sl_memory_report *m)
{
    const cli_options *o = r->o;
    if (r->steps_run)
        printf("done: %d steps in %.1f s, %.1f images/s, train accuracy %.1f%%\n", r->steps_run,
               r->seconds, (double)r->steps_run * o->batch * o->accum * r->ranks / r->seconds,
               100.0 * (double)r->correct / (double)r->seen);
    else
        printf("nothing to train: the snapshot is at step %lld of %d\n", (long long)r->first_step,
               o->steps);
    if (r->test_accuracy >= 0)
        printf("held-out accuracy: %.1f%% on %d samples (chance: %.1f%%)\n",
               100.0 * r->test_accuracy, o->eval_samples, 100.0 / o->classes);
    else
        printf("held-out accuracy: not measured (%s)\n",
               o->eval_samples ? "the dataset has no test split" : "--eval 0");
    printf("memory, schedule %s (planned; measured over the run):\n", o->schedule_text);
    cli_print_report(stdout, m);
    cli_print_saving(&r->baseline, m);
    struct stat st;
    if (o->save_model && stat(o->save_model, &st) == 0)
        printf("saved the model to %s (%.2f MiB; parameters %.2f MiB)\n", o->save_model,
               cli_mib((uint64_t)st.st_size), cli_mib(m->params));
    if (m->device_used)
        printf("device memory in use (cudaMemGetInfo): %.2f MiB\n", cli_mib(m->device_used));
    if (o->snapshot)
        printf("saved a snapshot to %s (resume with --resume %s)\n", o->snapshot, o->snapshot);
}

int cli_cmd_train(cli_options *o)
{
    if (cli_is_lm(o))
        return cli_cmd_train_lm(o);
    train_run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.ranks = 1;
    r.snapshot_step = -1;
    r.tty = isatty(STDOUT_FILENO);
    int rc = setup(&r);
    if (!rc && !o->json && r.rank == 0)
        print_header(&r);
    if (!rc)
        rc = train_loop(&r);
    if (!rc) /* before evaluating: a failed evaluation never loses the run */
        rc = save(&r);
    if (!rc)
        rc = evaluate(&r);
    sl_memory_report measured = r.planned;
    if (!rc && sl_net_memory_report(r.net, r.shape, SL_MODE_TRAIN, &measured) != SL_OK)
        rc = cli_fail("reporting memory");
    if (!rc && o->json && r.rank == 0)
        print_json(&r, &measured);
    else if (!rc && r.rank == 0)
        print_summary(&r, &measured);
    free(r.x);
    free(r.labels);
    free(r.logits);
    sl_dist_free(r.dist);
    sl_net_free(r.net);
    sl_context_free(r.ctx);
    sl_dataset_free(r.data);
    return rc;
}
