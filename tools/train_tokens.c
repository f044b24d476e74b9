/*
 * train_tokens.c — the token batch source of `sublinear train --model
 * gpt2`: a language model on llm.c token shards (`sublinear tokenize`
 * writes them), trained with sl_net_train_step_tokens and scored by the
 * held-out loss on --val, beside what a unigram model of the training
 * tokens scores.
 *
 * Batch i is batch x seq positions of the shard with the next token as
 * target, as llm.c's loader cuts them (sl_token_shard_batch), so a run
 * resumed from a snapshot sees the batches an uninterrupted run would.
 * --save-model writes the directory Hugging Face's from_pretrained reads.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

typedef struct tokens {
    sl_token_shard *train, *val;
    int32_t *ids, *targets;
    double val_loss, unigram_loss; /* NaN: not measured */
    int val_batches;
} tokens;

static int tokens_open(train_run *r)
{
    const cli_options *o = r->o;
    tokens *s = r->data;
    s->val_loss = s->unigram_loss = NAN;
    if (sl_token_shard_open(o->data_dir, &s->train) != SL_OK)
        return cli_fail("reading the training tokens (--data)");
    if (o->val_data && sl_token_shard_open(o->val_data, &s->val) != SL_OK)
        return cli_fail("reading the held-out tokens (--val)");
    /* Every id below the vocabulary, checked now: a bad one would
     * otherwise stop the run when a batch reaches it (for --val, after
     * all the training). */
    if (sl_token_shard_check_vocab(s->train, o->vocab) != SL_OK)
        return cli_fail("checking the training tokens (--data)");
    if (s->val && sl_token_shard_check_vocab(s->val, o->vocab) != SL_OK)
        return cli_fail("checking the held-out tokens (--val)");
    if (sl_token_shard_batch_count(s->train, o->batch, o->seq) < 1) {
        fprintf(stderr, "sublinear train: %s has %zu tokens, fewer than one batch of %d x %d + 1\n",
                o->data_dir, sl_token_shard_count(s->train), o->batch, o->seq);
        return CLI_EXIT_FAIL;
    }
    r->shape = sl_shape_seq(o->batch, o->seq, 1);
    r->units_per_batch = (int64_t)o->batch * o->seq;
    r->batch_bytes = (uint64_t)r->units_per_batch * 2 * sizeof(int32_t); /* ids and targets */
    return 0;
}

static int tokens_allocate(train_run *r)
{
    const cli_options *o = r->o;
    tokens *s = r->data;
    s->ids = malloc((size_t)r->units_per_batch * sizeof *s->ids);
    s->targets = malloc((size_t)r->units_per_batch * sizeof *s->targets);
    if (!s->ids || !s->targets) {
        fprintf(stderr, "sublinear train: out of memory for a batch of %d x %d\n", o->batch, o->seq);
        return CLI_EXIT_FAIL;
    }
    return 0;
}

static sl_status tokens_fetch(train_run *r, int64_t index)
{
    tokens *s = r->data;
    return sl_token_shard_batch(s->train, index, r->o->batch, r->o->seq, s->ids, s->targets);
}

static sl_status tokens_step(train_run *r, sl_step_result *res)
{
    tokens *s = r->data;
    return sl_net_train_step_tokens(r->net, s->ids, s->targets, r->o->batch, r->o->seq, res);
}

/* The mean loss over the first --eval sequences of --val (whole batches). */
static int tokens_held_out_loss(train_run *r)
{
    const cli_options *o = r->o;
    tokens *s = r->data;
    if (!s->val || o->eval_samples == 0)
        return 0;
    int64_t have = sl_token_shard_batch_count(s->val, o->batch, o->seq);
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
        if (sl_token_shard_batch(s->val, k, o->batch, o->seq, s->ids, s->targets) != SL_OK ||
            sl_net_evaluate_tokens(r->net, s->ids, s->targets, o->batch, o->seq, &res) != SL_OK)
            return cli_fail("evaluating");
        sum += (double)res.loss * res.counted;
        counted += res.counted;
    }
    s->val_loss = counted ? sum / (double)counted : NAN;
    s->val_batches = (int)n;
    return 0;
}

/* The held-out loss of a unigram model of the training tokens (counts
 * with add-one smoothing over the vocabulary): what a model that ignores
 * the context scores, the bar a language model must clear. */
static int tokens_unigram_baseline(train_run *r)
{
    const cli_options *o = r->o;
    tokens *s = r->data;
    if (!s->val || !isfinite(s->val_loss))
        return 0;
    size_t nt = sl_token_shard_count(s->train), nv = sl_token_shard_count(s->val);
    size_t most = nt > nv ? nt : nv;
    double *counts = calloc((size_t)o->vocab, sizeof *counts);
    int32_t *ids = malloc(most * sizeof *ids), *next = malloc(most * sizeof *next);
    int rc = 0;
    /* One batch of every token but the last: ids, and next (the targets)
     * shifted by one; the first token and every target are all tokens. */
    if (!counts || !ids || !next) {
        fprintf(stderr, "sublinear train: out of memory for the unigram baseline\n");
        rc = CLI_EXIT_FAIL;
    } else if (sl_token_shard_batch(s->train, 0, 1, (int)(nt - 1), ids, next) != SL_OK) {
        rc = cli_fail("reading the training tokens for the unigram baseline");
    } else {
        counts[ids[0] % o->vocab] += 1;
        for (size_t i = 0; i + 1 < nt; i++)
            counts[next[i] % o->vocab] += 1;
        if (sl_token_shard_batch(s->val, 0, 1, (int)(nv - 1), ids, next) != SL_OK) {
            rc = cli_fail("reading the held-out tokens for the unigram baseline");
        } else {
            double total = (double)nt + o->vocab, sum = 0;
            for (size_t i = 0; i + 1 < nv; i++)
                sum -= log((counts[next[i] % o->vocab] + 1.0) / total);
            s->unigram_loss = sum / (double)(nv - 1);
        }
    }
    free(counts);
    free(ids);
    free(next);
    return rc;
}

static int tokens_evaluate(train_run *r)
{
    int rc = tokens_held_out_loss(r);
    return rc ? rc : tokens_unigram_baseline(r);
}

static sl_status tokens_save_model(const train_run *r)
{
    sl_gpt2_config cfg = cli_gpt2_config(r->o);
    return sl_gpt2_save_pretrained(r->net, &cfg, r->o->save_model);
}

static void tokens_print_what(const train_run *r)
{
    const cli_options *o = r->o;
    const tokens *s = r->data;
    printf("training %s (%d layers, %d channels, %d heads, vocabulary %d, context %d) on %s "
           "(%zu tokens), batch %d x %d tokens", o->model, o->layers, o->embd, o->heads, o->vocab,
           o->context, o->data_dir, sl_token_shard_count(s->train), o->batch, o->seq);
}

static void tokens_print_json(const train_run *r, train_json_part part)
{
    const cli_options *o = r->o;
    const tokens *s = r->data;
    if (part == TRAIN_JSON_DATA) {
        printf(",\"layers\":%d,\"embd\":%d,\"heads\":%d,\"vocab\":%d,\"context\":%d,\"data\":",
               o->layers, o->embd, o->heads, o->vocab, o->context);
        cli_json_string(stdout, o->data_dir);
    } else if (part == TRAIN_JSON_BATCH) {
        printf(",\"seq\":%d", o->seq);
    } else {
        printf(",\"val_loss\":");
        cli_json_number(s->val_loss);
        printf(",\"unigram_loss\":");
        cli_json_number(s->unigram_loss);
    }
}

static void tokens_print_held_out(const train_run *r)
{
    const cli_options *o = r->o;
    const tokens *s = r->data;
    if (isfinite(s->val_loss))
        printf("held-out loss: %.4f (perplexity %.1f) on %d x %d x %d tokens of %s; a unigram "
               "model of the training tokens scores %.4f, a uniform guess %.4f\n", s->val_loss,
               exp(s->val_loss), s->val_batches, o->batch, o->seq, o->val_data, s->unigram_loss,
               log((double)o->vocab));
    else
        printf("held-out loss: not measured (%s)\n", o->val_data ? "--eval 0" : "no --val FILE");
}

static void tokens_print_saved_model(const train_run *r, const sl_memory_report *m)
{
    (void)m;
    printf("saved the model to %s/ (model.safetensors and config.json, as Hugging Face's "
           "save_pretrained writes them)\n", r->o->save_model);
}

static void tokens_free(train_run *r)
{
    tokens *s = r->data;
    free(s->ids);
    free(s->targets);
    sl_token_shard_free(s->train);
    sl_token_shard_free(s->val);
}

const train_source train_tokens = {
    .state_size = sizeof(tokens),
    .rate_unit = "tok/s",
    .rate_width = 8,
    .rate_noun = "tokens",
    .classifies = 0,
    .open = tokens_open,
    .allocate = tokens_allocate,
    .fetch = tokens_fetch,
    .step = tokens_step,
    .evaluate = tokens_evaluate,
    .save_model = tokens_save_model,
    .print_what = tokens_print_what,
    .print_json = tokens_print_json,
    .print_held_out = tokens_print_held_out,
    .print_saved_model = tokens_print_saved_model,
    .free = tokens_free,
};
