/*
 * cmd_train_lm.c — `sublinear train --model gpt2`: a language model on
 * llm.c token shards (`sublinear tokenize` writes them). Step s trains on
 * batches s*K .. s*K+K-1 of the shard (K = --accum; batch x seq positions
 * each, the next token as target, as llm.c's loader cuts them), so a run
 * resumed from a snapshot sees the batches an uninterrupted run would. It prints a progress bar with the
 * loss and tokens/s, the held-out loss on --val, the memory report and
 * the activation memory saved against keeping every activation. A step
 * whose loss is not finite stops the run before anything is saved, as
 * in cmd_train.c.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

typedef struct lm_run {
    cli_options *o;
    sl_token_shard *train, *val;
    sl_context *ctx;
    sl_net *net;
    sl_shape shape;
    int32_t *ids, *targets;
    sl_memory_report planned, baseline;
    int64_t first_step;
    int64_t snapshot_step; /* of the last snapshot this run wrote; -1: none */
    int steps_run;
    double seconds, loss_avg, first_loss, last_loss, val_loss, unigram_loss;
    int64_t tokens;
    int val_batches;
    int tty;
} lm_run;

static int setup(lm_run *r)
{
    cli_options *o = r->o;
    if (sl_token_shard_open(o->data_dir, &r->train) != SL_OK)
        return cli_fail("reading the training tokens (--data)");
    if (o->val_data && sl_token_shard_open(o->val_data, &r->val) != SL_OK)
        return cli_fail("reading the held-out tokens (--val)");
    /* Every id below the vocabulary, checked now: a bad one would
     * otherwise stop the run when a batch reaches it (for --val, after
     * all the training). */
    if (sl_token_shard_check_vocab(r->train, o->vocab) != SL_OK)
        return cli_fail("checking the training tokens (--data)");
    if (r->val && sl_token_shard_check_vocab(r->val, o->vocab) != SL_OK)
        return cli_fail("checking the held-out tokens (--val)");
    if (sl_token_shard_batch_count(r->train, o->batch, o->seq) < 1) {
        fprintf(stderr, "sublinear train: %s has %zu tokens, fewer than one batch of %d x %d + 1\n",
                o->data_dir, sl_token_shard_count(r->train), o->batch, o->seq);
        return CLI_EXIT_FAIL;
    }
    r->shape = (sl_shape){o->batch, 1, o->seq, 1};
    int rc = cli_build(o, &r->ctx, &r->net);
    if (rc)
        return rc;
    sl_load_options load = sl_load_defaults();
    load.allow_nonfinite = o->allow_nonfinite;
    if (o->load_model && sl_load_model(r->net, o->load_model, &load, NULL) != SL_OK)
        return cli_load_failed("loading the model (--load-model)");
    if (o->resume && sl_load_snapshot_with(r->net, o->resume, &load) != SL_OK)
        return cli_load_failed("resuming from the snapshot");
    r->first_step = sl_net_step_count(r->net);
    rc = cli_plan_with_baseline(r->net, r->shape, o->schedule, &r->planned, &r->baseline);
    if (rc)
        return rc;
    /* The step with its batch (ids and targets) is checked before the
     * batch is allocated, as the image command does. */
    size_t n = (size_t)o->batch * (size_t)o->seq;
    if (sl_net_check_step_memory(r->net, r->shape, SL_MODE_TRAIN,
                                 (uint64_t)n * 2 * sizeof(int32_t)) != SL_OK)
        return cli_fail("checking the step's memory before allocating the batch");
    r->ids = malloc(n * sizeof *r->ids);
    r->targets = malloc(n * sizeof *r->targets);
    if (!r->ids || !r->targets) {
        fprintf(stderr, "sublinear train: out of memory for a batch of %d x %d\n", o->batch, o->seq);
        return CLI_EXIT_FAIL;
    }
    return 0;
}

static void print_header(const lm_run *r)
{
    const cli_options *o = r->o;
    printf("training %s (%d layers, %d channels, %d heads, vocabulary %d, context %d) on %s "
           "(%zu tokens), batch %d x %d tokens, schedule %s, %s lr %g, %s\n",
           o->model, o->layers, o->embd, o->heads, o->vocab, o->context, o->data_dir,
           sl_token_shard_count(r->train), o->batch, o->seq, o->schedule_text, o->optimizer,
           (double)o->lr, o->device == SL_DEVICE_CUDA ? "CUDA" : "CPU");
    if (o->load_model)
        printf("starting from %s\n", o->load_model);
    if (r->first_step)
        printf("resumed from %s at step %lld\n", o->resume, (long long)r->first_step);
    printf("planned activation memory %.2f MiB (keep-everything %.2f MiB), recompute %.1f%% of "
           "a step; total planned %.2f MiB\n",
           cli_mib(r->planned.arena_bytes), cli_mib(r->baseline.arena_bytes),
           100.0 * r->planned.recompute_fraction, cli_mib(r->planned.total));
}

static void print_progress(const lm_run *r, int64_t step, double tokens_per_s, uint64_t mem)
{
    char bar[CLI_BAR_WIDTH + 1];
    cli_progress_bar(bar, step, r->o->steps);
    printf("%sstep %6lld/%d [%s] loss %.4f  %8.1f tok/s  mem %.2f MiB%s", r->tty ? "\r" : "",
           (long long)step, r->o->steps, bar, r->loss_avg, tokens_per_s, cli_mib(mem),
           r->tty ? "  " : "\n");
    fflush(stdout);
}

static int train_loop(lm_run *r)
{
    cli_options *o = r->o;
    double t0 = cli_now_seconds();
    uint64_t mem = 0;
    int show = !o->json && !o->quiet;
    for (int64_t step = r->first_step; step < o->steps; step++) {
        sl_step_result res = {0, 0, 0};
        if (sl_net_set_lr(r->net, cli_lr_at(o, step)) != SL_OK)
            return cli_fail("preparing a step");
        for (int m = 0; m < o->accum; m++) { /* the last micro-batch updates */
            sl_step_result micro;
            if (sl_token_shard_batch(r->train, step * o->accum + m, o->batch, o->seq, r->ids,
                                     r->targets) != SL_OK)
                return cli_fail("preparing a step");
            if (sl_net_train_step_tokens(r->net, r->ids, r->targets, o->batch, o->seq, &micro) !=
                SL_OK) {
                cli_fail("training");
                return cli_train_stopped(o, r->snapshot_step, step);
            }
            res.loss += micro.loss / (float)o->accum;
        }
        r->last_loss = res.loss;
        r->loss_avg = r->steps_run ? 0.9 * r->loss_avg + 0.1 * res.loss : res.loss;
        r->tokens += (int64_t)o->batch * o->seq * o->accum;
        if (r->steps_run++ == 0) {
            sl_memory_report m;
            r->first_loss = res.loss;
            if (sl_net_memory_report(r->net, r->shape, SL_MODE_TRAIN, &m) == SL_OK)
                mem = m.measured_total;
        }
        if (o->snapshot_every && (step + 1) % o->snapshot_every == 0) {
            if (cli_check_params_finite(r->net, "saving the snapshot"))
                return cli_train_stopped(o, r->snapshot_step, step);
            if (sl_save_snapshot(r->net, o->snapshot) != SL_OK)
                return cli_fail("saving the snapshot");
            r->snapshot_step = step + 1;
        }
        if (show && ((step + 1) % o->log_every == 0 || step + 1 == o->steps))
            print_progress(r, step + 1, (double)r->tokens / (cli_now_seconds() - t0), mem);
    }
    r->seconds = cli_now_seconds() - t0;
    if (show && r->tty && r->steps_run)
        printf("\n");
    return 0;
}

/* The mean loss over the first --eval sequences of --val (whole batches). */
static int evaluate(lm_run *r)
{
    const cli_options *o = r->o;
    r->val_loss = NAN;
    if (!r->val || o->eval_samples == 0)
        return 0;
    int64_t have = sl_token_shard_batch_count(r->val, o->batch, o->seq);
    int64_t want = (o->eval_samples + o->batch - 1) / o->batch;
    int64_t n = want < have ? want : have;
    if (n < 1) {
        fprintf(stderr, "sublinear train: %s is shorter than one batch of %d x %d + 1; no "
                        "held-out loss\n", o->val_data, o->batch, o->seq);
        return 0;
    }
    double sum = 0;
    int64_t counted = 0;
    for (int64_t k = 0; k < n; k++) {
        sl_step_result res;
        if (sl_token_shard_batch(r->val, k, o->batch, o->seq, r->ids, r->targets) != SL_OK ||
            sl_net_evaluate_tokens(r->net, r->ids, r->targets, o->batch, o->seq, &res) != SL_OK)
            return cli_fail("evaluating");
        sum += (double)res.loss * res.counted;
        counted += res.counted;
    }
    r->val_loss = counted ? sum / (double)counted : NAN;
    r->val_batches = (int)n;
    return 0;
}

/* The held-out loss of a unigram model of the training tokens (counts
 * with add-one smoothing over the vocabulary): what a model that ignores
 * the context scores, the bar a language model must clear. */
static int unigram_baseline(lm_run *r)
{
    const cli_options *o = r->o;
    r->unigram_loss = NAN;
    if (!r->val || !isfinite(r->val_loss))
        return 0;
    size_t nt = sl_token_shard_count(r->train), nv = sl_token_shard_count(r->val);
    size_t most = nt > nv ? nt : nv;
    double *counts = calloc((size_t)o->vocab, sizeof *counts);
    int32_t *ids = malloc(most * sizeof *ids), *next = malloc(most * sizeof *next);
    int rc = 0;
    /* One batch of every token but the last: ids, and next (the targets)
     * shifted by one; the first token and every target are all tokens. */
    if (!counts || !ids || !next) {
        fprintf(stderr, "sublinear train: out of memory for the unigram baseline\n");
        rc = CLI_EXIT_FAIL;
    } else if (sl_token_shard_batch(r->train, 0, 1, (int)(nt - 1), ids, next) != SL_OK) {
        rc = cli_fail("reading the training tokens for the unigram baseline");
    } else {
        counts[ids[0] % o->vocab] += 1;
        for (size_t i = 0; i + 1 < nt; i++)
            counts[next[i] % o->vocab] += 1;
        if (sl_token_shard_batch(r->val, 0, 1, (int)(nv - 1), ids, next) != SL_OK) {
            rc = cli_fail("reading the held-out tokens for the unigram baseline");
        } else {
            double total = (double)nt + o->vocab, sum = 0;
            for (size_t i = 0; i + 1 < nv; i++)
                sum -= log((counts[next[i] % o->vocab] + 1.0) / total);
            r->unigram_loss = sum / (double)(nv - 1);
        }
    }
    free(counts);
    free(ids);
    free(next);
    return rc;
}

static int save(const lm_run *r)
{
    const cli_options *o = r->o;
    sl_gpt2_config cfg = cli_gpt2_config(o);
    if ((o->save_model || o->snapshot) && r->steps_run &&
        cli_check_params_finite(r->net, o->save_model ? "saving the model" : "saving the snapshot"))
        return cli_train_stopped(o, r->snapshot_step, sl_net_step_count(r->net) - 1);
    if (o->save_model && sl_gpt2_save_pretrained(r->net, &cfg, o->save_model) != SL_OK)
        return cli_fail("saving the model");
    if (o->snapshot && sl_save_snapshot(r->net, o->snapshot) != SL_OK)
        return cli_fail("saving the snapshot");
    return 0;
}



static void print_json(const lm_run *r, const sl_memory_report *m)
{
    const cli_options *o = r->o;
    int ran = r->steps_run > 0;
    printf("{\"model\":");
    cli_json_string(stdout, o->model);
    printf(",\"layers\":%d,\"embd\":%d,\"heads\":%d,\"vocab\":%d,\"context\":%d,\"data\":", o->layers,
           o->embd, o->heads, o->vocab, o->context);
    cli_json_string(stdout, o->data_dir);
    printf(",\"device\":\"%s\",\"schedule\":", o->device == SL_DEVICE_CUDA ? "cuda" : "cpu");
    cli_json_string(stdout, o->schedule_text);
    printf(",\"batch\":%d,\"seq\":%d,\"steps\":%d,\"first_step\":%lld,\"steps_run\":%d,\"loss\":",
           o->batch, o->seq, o->steps, (long long)r->first_step, r->steps_run);
    cli_json_number(ran ? r->loss_avg : NAN);
    printf(",\"first_loss\":");
    cli_json_number(ran ? r->first_loss : NAN);
    printf(",\"last_loss\":");
    cli_json_number(ran ? r->last_loss : NAN);
    printf(",\"val_loss\":");
    cli_json_number(r->val_loss);
    printf(",\"unigram_loss\":");
    cli_json_number(r->unigram_loss);
    printf(",\"tokens_per_second\":");
    cli_json_number(ran ? (double)r->tokens / r->seconds : NAN);
    printf(",\"seconds\":");
    cli_json_number(r->seconds);
    cli_json_memory_end(o, m, &r->baseline);
}

static void print_summary(const lm_run *r, const sl_memory_report *m)
{
    const cli_options *o = r->o;
    if (r->steps_run)
        printf("done: %d steps in %.1f s, %.1f tokens/s, loss %.4f -> %.4f\n", r->steps_run,
               r->seconds, (double)r->tokens / r->seconds, r->first_loss, r->last_loss);
    else
        printf("nothing to train: the snapshot is at step %lld of %d\n", (long long)r->first_step,
               o->steps);
    if (isfinite(r->val_loss))
        printf("held-out loss: %.4f (perplexity %.1f) on %d x %d x %d tokens of %s; a unigram "
               "model of the training tokens scores %.4f, a uniform guess %.4f\n", r->val_loss,
               exp(r->val_loss), r->val_batches, o->batch, o->seq, o->val_data, r->unigram_loss,
               log((double)o->vocab));
    else
        printf("held-out loss: not measured (%s)\n", o->val_data ? "--eval 0" : "no --val FILE");
    printf("memory, schedule %s (planned; measured over the run):\n", o->schedule_text);
    cli_print_report(stdout, m);
    cli_print_saving(&r->baseline, m);
    if (o->save_model)
        printf("saved the model to %s/ (model.safetensors and config.json, as Hugging Face's "
               "save_pretrained writes them)\n", o->save_model);
    if (o->snapshot)
        printf("saved a snapshot to %s (resume with --resume %s)\n", o->snapshot, o->snapshot);
}

int cli_cmd_train_lm(cli_options *o)
{
    lm_run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.snapshot_step = -1;
    r.tty = isatty(STDOUT_FILENO);
    int rc = setup(&r);
    if (!rc && !o->json)
        print_header(&r);
    if (!rc)
        rc = train_loop(&r);
    if (!rc) /* before evaluating: a failed evaluation never loses the run */
        rc = save(&r);
    if (!rc)
        rc = evaluate(&r);
    if (!rc)
        rc = unigram_baseline(&r);
    sl_memory_report measured = r.planned;
    if (!rc && sl_net_memory_report(r.net, r.shape, SL_MODE_TRAIN, &measured) != SL_OK)
        rc = cli_fail("reporting memory");
    if (!rc && o->json)
        print_json(&r, &measured);
    else if (!rc)
        print_summary(&r, &measured);
    free(r.ids);
    free(r.targets);
    sl_net_free(r.net);
    sl_context_free(r.ctx);
    sl_token_shard_free(r.train);
    sl_token_shard_free(r.val);
    return rc;
}
