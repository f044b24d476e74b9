/*
 * cmd_train.c — `sublinear train`: the whole pipeline of the library from
 * the outside, in one training loop over a batch source (train.h): images
 * (train_images.c) or, with --model gpt2, token shards (train_tokens.c).
 * It plans the chosen schedule and the keep-everything baseline (no kernel
 * runs), trains with a progress line, measures the source's held-out
 * figure, and prints the memory report with the saving against
 * keep-everything; --save-model writes the model, --snapshot a snapshot to
 * resume from with --resume.
 *
 * Step s always trains on batches s*K .. s*K+K-1 of the source (K =
 * --accum; the last micro-batch updates) at the learning rate of step s,
 * so a run resumed from a snapshot ends with the parameters of a run that
 * never stopped. With --distributed (under mpirun) each rank reads its own
 * share of every batch (train_images.c) and rank 0 prints and writes files.
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
#include <unistd.h>

#include "train.h"

static const char g_train_help[] =
    "usage: sublinear train [options]\n"
    "  Trains a model and prints a progress bar (step, loss, accuracy, images/s,\n"
    "  memory), then held-out accuracy, the memory report and the activation\n"
    "  memory saved against keeping every activation.\n"
    "options:\n"
    "  --model NAME          model to build (resnet20)\n"
    "  --dataset KIND        synthetic (built in, no download), mnist or cifar10\n"
    "  --data DIR            directory of the files of mnist / cifar10:\n"
    "                          mnist: train-images-idx3-ubyte, train-labels-idx1-ubyte\n"
    "                            and optionally t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte\n"
    "                            (uncompressed IDX; grey images are fed as 3 equal channels)\n"
    "                          cifar10: data_batch_1.bin .. data_batch_5.bin (at least one)\n"
    "                            and optionally test_batch.bin (the binary version)\n"
    "  --steps N             total optimizer steps (300); the learning rate drops\n"
    "                        10x at half of them when N > 10\n"
    "  --batch N             images per step (32)\n"
    "  --res N               image size of the synthetic dataset (32)\n"
    "  --classes N           classes of the synthetic dataset (10)\n"
    "  --lr X                learning rate (0.05 for sgd, 0.001 for adam, adamw)\n"
    "  --optimizer KIND      sgd (momentum 0.9, weight decay 5e-4), adam, or adamw\n"
    "                        (betas 0.9, 0.999, decoupled weight decay 0.01 of the\n"
    "                        >= 2-d weights only, as GPT-2 training)\n"
    "  --clip NORM           clip the global gradient norm to NORM (off)\n"
    "  --warmup N            learning rate: linear warmup over N steps, then cosine\n"
    "                        decay to --lr-min at the last step (instead of the 10x drop)\n"
    "  --lr-min X            the cosine's final learning rate (a tenth of --lr)\n"
    "  --accum K             accumulate the gradients of K batches per optimizer\n"
    "                        step (1): as one batch of K * --batch images\n"
    "  --update-in-backward  update each layer as soon as its gradients are complete;\n"
    "                        gradients then live in the activation arena for their\n"
    "                        short lives (no gradient block): the same weights, less\n"
    "                        memory (not with --clip, --accum or --distributed)\n"
    "GPT-2 (--model gpt2; AdamW betas (0.9, 0.95), decay 0.1 on matrices, lr 6e-4):\n"
    "  --data FILE           the training tokens: an llm.c shard (sublinear tokenize)\n"
    "  --val FILE            held-out tokens; --eval N sequences of them are scored\n"
    "  --seq T               tokens per sequence (1024); --batch sequences per step\n"
    "  --layers N --embd C --heads H --vocab V --context N\n"
    "                        the shape (GPT-2 small: 12, 768, 12, 50257, 1024)\n"
    "  --dropout P           GPT-2's three dropouts (0)\n"
    "  --load-model FILE     start from a model file (sublinear's or Hugging Face's\n"
    "                        model.safetensors of the same shape)\n"
    "  --save-model DIR      gpt2 saves DIR/model.safetensors and DIR/config.json, the\n"
    "                        directory Hugging Face's from_pretrained and `sublinear\n"
    "                        sample --config` read\n"
    "  --schedule S          checkpointing schedule (sqrt); see below\n"
    "  --bn-rescale          memonger's BatchNorm momentum rescale under re-forward\n"
    "  --precision f32|bf16  activations stored in float, or in bf16 with float math,\n"
    "                        float parameters and optimizer state (f32)\n"
    "  --seed N              seeds weights, data order and dropout (1)\n"
    "  --device cpu|cuda     where kernels run (cpu); cuda needs a build with the\n"
    "                        CUDA toolkit and cuDNN, and a GPU\n"
    "  --gpu N               CUDA device ordinal (0; with --distributed the rank's\n"
    "                        index on its node, so one GPU per rank)\n"
    "  --tf32                CUDA: let convolutions and GEMMs use TF32 tensor cores\n"
    "                        (PyTorch's default for convolutions); off: true FP32\n"
    "  --threads N           CPU threads, 0 = all cores (0)\n"
    "  --distributed         data-parallel over the ranks of `mpirun -np N sublinear\n"
    "                        train ...` (MPI on the CPU, NCCL on CUDA: one GPU per\n"
    "                        rank): --batch images per rank, rank r reading every\n"
    "                        N-th sample of the training order from r; rank 0 prints\n"
    "                        and writes the files; images/s are over all ranks\n"
    "  --shard 0|1|2         with --distributed: 1 = ZeRO-1, each rank holds the\n"
    "                        optimizer state of its 1/N of the parameters; 2 =\n"
    "                        ZeRO-2, and of the reduced gradients (CPU ranks; no\n"
    "                        --clip or --accum; --update-in-backward needs it) (0)\n"
    "  --eval N              held-out samples to measure accuracy on (1000)\n"
    "  --log-every N         progress every N steps (10)\n"
    "  --quiet               no progress bar\n"
    "  --save-model PATH     save the trained model (thin .safetensors: parameters\n"
    "                        and BatchNorm statistics only)\n"
    "  --dtype f32|bf16|f16  the saved model's float type (f32); bf16 and f16 round\n"
    "                        to nearest, ties to even, and halve the file\n"
    "  --no-memory-check     skip comparing the planned memory with the memory\n"
    "                        available before allocating (a step too large for\n"
    "                        memory then fails when allocating, or is killed)\n"
    "  --snapshot PATH       save a snapshot (model + optimizer state + step) at the end\n"
    "  --snapshot-every N    also save the snapshot every N steps\n"
    "  --resume PATH         resume from a snapshot and train on to --steps\n"
    "  --allow-nonfinite     load a --resume snapshot or --load-model file whose\n"
    "                        tensors hold NaN or infinite values (refused by default;\n"
    "                        a step whose loss is not finite still stops the run)\n"
    "  --json                print one JSON object at the end (loss, accuracy, images/s,\n"
    "                        memory reports) and nothing else on stdout\n";

/* Sums over the ranks (a no-op for one process). */
static int sum_over_ranks(train_run *r, double *v, int n)
{
    if (r->dist && sl_dist_sum(r->dist, v, n) != SL_OK)
        return cli_fail("summing over the ranks");
    return 0;
}

/* cli_fail(what) after a failed load, adding that --allow-nonfinite
 * loads the file when NaN or inf values were what it refused. */
static int load_failed(const char *what)
{
    int rc = cli_fail(what);
    if (strstr(sl_last_error(), "allow_nonfinite")) /* the library's refusal of NaN or inf */
        fprintf(stderr, "sublinear: --allow-nonfinite loads such a file anyway\n");
    return rc;
}

/* The step is checked with the batch buffers before they are allocated:
 * a step too large for the machine is refused at once. With
 * --distributed the ranks agree, so that none waits on one that left. */
static int allocate_batch(train_run *r)
{
    sl_status st = sl_net_check_step_memory(r->net, r->shape, SL_MODE_TRAIN, r->batch_bytes);
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
    return r->source->allocate(r);
}

static int setup(train_run *r)
{
    cli_options *o = r->o;
    r->data = calloc(1, r->source->state_size);
    if (!r->data) {
        fprintf(stderr, "sublinear train: out of memory\n");
        return CLI_EXIT_FAIL;
    }
    int rc = r->source->open(r);
    if (!rc)
        rc = cli_build(o, &r->ctx, &r->net);
    if (rc)
        return rc;
    sl_load_options load = sl_load_defaults();
    load.allow_nonfinite = o->allow_nonfinite;
    if (o->load_model && sl_load_model(r->net, o->load_model, &load, NULL) != SL_OK)
        return load_failed("loading the model (--load-model)");
    if (o->resume && sl_load_snapshot_with(r->net, o->resume, &load) != SL_OK)
        return load_failed("resuming from the snapshot");
    sl_dist_options dist_options = sl_dist_defaults();
    dist_options.shard = o->shard;
    if (o->distributed && sl_dist_join(r->net, &dist_options, &r->dist) != SL_OK)
        return cli_fail("joining the ranks (--distributed)");
    r->rank = sl_dist_rank(r->dist);
    r->ranks = sl_dist_size(r->dist);
    r->first_step = sl_net_step_count(r->net);
    rc = cli_plan_with_baseline(r->net, r->shape, o->schedule, &r->planned, &r->baseline);
    return rc ? rc : allocate_batch(r);
}

static void print_header(const train_run *r)
{
    const cli_options *o = r->o;
    r->source->print_what(r);
    printf(", schedule %s, %s lr %g, %s%s\n", o->schedule_text, o->optimizer, (double)o->lr,
           o->device == SL_DEVICE_CUDA ? "CUDA" : "CPU",
           o->precision == SL_PRECISION_BF16 ? ", bf16 activations" : "");
    if (r->dist)
        printf("data-parallel over %d ranks: batch %d per rank, %d per step\n", r->ranks,
               o->batch, o->batch * r->ranks);
    if (r->dist && o->shard)
        printf("ZeRO-1: each rank holds the optimizer state of its 1/%d of the parameters\n",
               r->ranks);
    if (o->load_model)
        printf("starting from %s\n", o->load_model);
    if (r->first_step)
        printf("resumed from %s at step %lld\n", o->resume, (long long)r->first_step);
    printf("planned activation memory %.2f MiB (keep-everything %.2f MiB), recompute %.1f%% of "
           "a step; total planned %.2f MiB\n",
           cli_mib(r->planned.arena_bytes), cli_mib(r->baseline.arena_bytes),
           100.0 * r->planned.recompute_fraction, cli_mib(r->planned.total));
}

/* Images or tokens a second over the first `seconds` of the run (all
 * ranks together). */
static double rate(const train_run *r, double seconds)
{
    return (double)r->steps_run * r->units_per_batch * r->o->accum * r->ranks / seconds;
}

/* One progress line: on a terminal a bar redrawn in place, otherwise a
 * line per report so logs stay readable. acc < 0: not shown. */
static void print_progress(const train_run *r, int64_t step, double acc, double per_second,
                           uint64_t mem_bytes)
{
    char bar[CLI_BAR_WIDTH + 1];
    cli_progress_bar(bar, step, r->o->steps);
    printf("%sstep %6lld/%d [%s] loss %.4f  ", r->tty ? "\r" : "", (long long)step, r->o->steps,
           bar, r->loss_avg);
    if (acc >= 0)
        printf("acc %5.1f%%  ", 100.0 * acc);
    printf("%*.1f %s  mem %.2f MiB%s", r->source->rate_width, per_second, r->source->rate_unit,
           cli_mib(mem_bytes), r->tty ? "  " : "\n");
    fflush(stdout);
}

/* How the library's messages name a value that is not finite. */
static const char *nonfinite_name(double v)
{
    return isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf";
}

/* After a training run failed at (0-based) step: says on stderr what
 * --snapshot holds now (the last snapshot the run wrote, or the file as it
 * was when it wrote none); returns CLI_EXIT_FAIL. */
static int stopped(const train_run *r, int64_t step)
{
    const cli_options *o = r->o;
    if (o->snapshot && r->snapshot_step >= 0)
        fprintf(stderr, "sublinear: stopped at step %lld; %s holds the last snapshot, of step "
                "%lld (resume with --resume %s)\n", (long long)step + 1, o->snapshot,
                (long long)r->snapshot_step, o->snapshot);
    else if (o->snapshot)
        fprintf(stderr, "sublinear: stopped at step %lld; this run wrote no snapshot, %s is as "
                "it was\n", (long long)step + 1, o->snapshot);
    return CLI_EXIT_FAIL;
}

/* 0 when every tensor of net is finite; else prints "sublinear: WHAT:
 * tensor ... holds ..." and returns CLI_EXIT_FAIL (before saving: no file
 * of a diverged run replaces a good one). */
static int check_params_finite(sl_net *net, const char *what)
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

/* One optimizer step: K micro-batches (the last one updates). Returns 0,
 * or CLI_EXIT_FAIL after saying why. */
static int train_step(train_run *r, int64_t step, sl_step_result *res)
{
    const cli_options *o = r->o;
    *res = (sl_step_result){0.0f, 0, 0};
    if (sl_net_set_lr(r->net, cli_lr_at(o, step)) != SL_OK)
        return cli_fail("preparing a step");
    for (int m = 0; m < o->accum; m++) {
        sl_step_result micro;
        if (r->source->fetch(r, step * o->accum + m) != SL_OK)
            return cli_fail("preparing a step");
        if (r->source->step(r, &micro) != SL_OK) {
            cli_fail("training");
            return stopped(r, step);
        }
        res->loss += micro.loss / (float)o->accum;
        res->correct += micro.correct;
    }
    if (r->dist && agree_loss_finite(r, res->loss, step))
        return stopped(r, step);
    return 0;
}

static int train_loop(train_run *r)
{
    cli_options *o = r->o;
    double t0 = cli_now_seconds();
    int64_t window_correct = 0, window_seen = 0, samples = (int64_t)o->batch * o->accum;
    uint64_t mem = 0;
    int show = !o->json && !o->quiet && r->rank == 0;
    for (int64_t step = r->first_step; step < o->steps; step++) {
        sl_step_result res;
        int rc = train_step(r, step, &res);
        if (rc)
            return rc;
        r->last_loss = res.loss;
        r->loss_avg = r->steps_run ? 0.9 * r->loss_avg + 0.1 * res.loss : res.loss;
        if (r->steps_run++ == 0) {
            sl_memory_report m;
            r->first_loss = res.loss;
            if (sl_net_memory_report(r->net, r->shape, SL_MODE_TRAIN, &m) == SL_OK)
                mem = m.measured_total;
        }
        r->correct += res.correct;
        r->seen += samples;
        window_correct += res.correct;
        window_seen += samples;
        if (o->snapshot_every && (step + 1) % o->snapshot_every == 0) {
            if (check_params_finite(r->net, "saving the snapshot"))
                return stopped(r, step);
            if (sl_save_snapshot(r->net, o->snapshot) != SL_OK) /* collective in --distributed */
                return cli_fail("saving the snapshot");
            r->snapshot_step = step + 1;
        }
        if ((step + 1) % o->log_every == 0 || step + 1 == o->steps) {
            double window[2] = {(double)window_correct, (double)window_seen};
            if (sum_over_ranks(r, window, 2))
                return CLI_EXIT_FAIL;
            if (show)
                print_progress(r, step + 1, r->source->classifies ? window[0] / window[1] : -1,
                               rate(r, cli_now_seconds() - t0), mem);
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

/* In a communicator (--distributed) rank 0 writes, every rank calls. */
static int save(const train_run *r)
{
    const char *model = r->o->save_model, *snapshot = r->o->snapshot;
    if ((model || snapshot) && r->steps_run &&
        check_params_finite(r->net, model ? "saving the model" : "saving the snapshot"))
        return stopped(r, sl_net_step_count(r->net) - 1);
    if (model && r->source->save_model(r) != SL_OK)
        return cli_fail("saving the model");
    if (snapshot && sl_save_snapshot(r->net, snapshot) != SL_OK)
        return cli_fail("saving the snapshot");
    return 0;
}

static void print_json(const train_run *r, const sl_memory_report *m)
{
    const cli_options *o = r->o;
    const train_source *src = r->source;
    int ran = r->steps_run > 0;
    printf("{\"model\":");
    cli_json_string(stdout, o->model);
    src->print_json(r, TRAIN_JSON_DATA);
    printf(",\"device\":\"%s\",\"precision\":\"%s\",\"schedule\":",
           o->device == SL_DEVICE_CUDA ? "cuda" : "cpu",
           o->precision == SL_PRECISION_BF16 ? "bf16" : "f32");
    cli_json_string(stdout, o->schedule_text);
    printf(",\"batch\":%d", o->batch);
    src->print_json(r, TRAIN_JSON_BATCH);
    printf(",\"steps\":%d,\"first_step\":%lld,\"steps_run\":%d,\"loss\":", o->steps,
           (long long)r->first_step, r->steps_run);
    cli_json_number(ran ? r->loss_avg : NAN);
    printf(",\"first_loss\":");
    cli_json_number(ran ? r->first_loss : NAN);
    printf(",\"last_loss\":");
    cli_json_number(ran ? r->last_loss : NAN);
    if (src->classifies) {
        printf(",\"train_accuracy\":");
        cli_json_number(ran ? (double)r->correct / (double)r->seen : NAN);
    }
    src->print_json(r, TRAIN_JSON_HELD_OUT);
    printf(",\"%s_per_second\":", src->rate_noun);
    cli_json_number(ran ? rate(r, r->seconds) : NAN);
    printf(",\"seconds\":");
    cli_json_number(r->seconds);
    cli_json_memory_end(o, m, &r->baseline);
}

static void print_summary(const train_run *r, const sl_memory_report *m)
{
    const cli_options *o = r->o;
    if (r->steps_run && r->source->classifies)
        printf("done: %d steps in %.1f s, %.1f %s/s, train accuracy %.1f%%\n", r->steps_run,
               r->seconds, rate(r, r->seconds), r->source->rate_noun,
               100.0 * (double)r->correct / (double)r->seen);
    else if (r->steps_run)
        printf("done: %d steps in %.1f s, %.1f %s/s, loss %.4f -> %.4f\n", r->steps_run,
               r->seconds, rate(r, r->seconds), r->source->rate_noun, r->first_loss,
               r->last_loss);
    else
        printf("nothing to train: the snapshot is at step %lld of %d\n", (long long)r->first_step,
               o->steps);
    r->source->print_held_out(r);
    printf("memory, schedule %s (planned; measured over the run):\n", o->schedule_text);
    cli_print_report(stdout, m);
    cli_print_saving(&r->baseline, m);
    if (o->save_model)
        r->source->print_saved_model(r, m);
    if (m->device_used)
        printf("device memory in use (cudaMemGetInfo): %.2f MiB\n", cli_mib(m->device_used));
    if (o->snapshot)
        printf("saved a snapshot to %s (resume with --resume %s)\n", o->snapshot, o->snapshot);
}

static int run_train(void *opts)
{
    cli_options *o = opts;
    train_run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.source = cli_is_lm(o) ? &train_tokens : &train_images;
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
        rc = r.source->evaluate(&r);
    sl_memory_report measured = r.planned;
    if (!rc && sl_net_memory_report(r.net, r.shape, SL_MODE_TRAIN, &measured) != SL_OK)
        rc = cli_fail("reporting memory");
    if (!rc && o->json && r.rank == 0)
        print_json(&r, &measured);
    else if (!rc && r.rank == 0)
        print_summary(&r, &measured);
    if (r.data)
        r.source->free(&r);
    free(r.data);
    sl_dist_free(r.dist);
    sl_net_free(r.net);
    sl_context_free(r.ctx);
    return rc;
}

const cli_command cli_train_command = {
    .name = "train",
    .summary = "train a model on the built-in dataset, MNIST or CIFAR-10",
    .usage = g_train_help,
    .run = run_train,
    CLI_NET_COMMAND(CLI_TRAIN),
};
