/*
 * test_alloc_failure.c — every allocation failure is a clean SL_ERR_NOMEM.
 * One run (a scenario: a list of stages) builds a checkpointed network,
 * trains it, saves its files, loads them into a second network and trains
 * and predicts on: a ResNet from the model registry with a model file and
 * a snapshot, and a GPT-2 (sl_model_gpt2) with its Hugging Face directory
 * (sl_gpt2_save_pretrained, sl_gpt2_read_config, the token runs). First
 * the run is counted without faults; then, for every N, the run is
 * repeated with the N-th allocation of the library failing
 * (sl_test_alloc_fail_at, the hook of the library's own allocator). The
 * one call that meets the failure must return SL_ERR_NOMEM with a message
 * that says "out of memory"; it is then retried, and the run must end
 * with parameters, predictions and file bytes equal bit for bit to the
 * fault-free run: the failed call left every object as it was. The same
 * for the tokenizer's path (load, encode, write a token shard, read it
 * back). Then the C library's own allocations (libc_faults.c: fopen's
 * FILE, a stream's buffer...) and snprintf fail in turn under saving and
 * loading models, snapshots and shards: the status must still be
 * SL_ERR_NOMEM and the message say out of memory. Leaks are ASan's to
 * find (the CI runs this test under it).
 */
#define _DEFAULT_SOURCE
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "bpe_files.h"
#include "harness.h"
#include "libc_faults.h"

#define BATCH 2
#define RES 8
#define CLASSES 3
#define PATH_LEN 512
/* GPT-2's run: a tiny model, a batch of LM_BATCH sequences of LM_SEQ tokens. */
#define LM_BATCH 2
#define LM_SEQ 4
#define LM_VOCAB 16
#define LOGITS (LM_BATCH * LM_SEQ * LM_VOCAB) /* more than BATCH * CLASSES */

typedef struct run_state {
    sl_context *ctx[2];
    sl_net *net[2];
    float x[BATCH * 3 * RES * RES];
    int labels[BATCH];
    int32_t ids[LM_BATCH * LM_SEQ], targets[LM_BATCH * LM_SEQ];
    sl_gpt2_config read_back; /* the config.json GPT-2's run reads */
    float logits[LOGITS];
    /* the two files compared with the fault-free run: a model and a
     * snapshot, or GPT-2's model.safetensors and config.json */
    char model_path[PATH_LEN], snap_path[PATH_LEN], gpt2_dir[PATH_LEN - 32];
} run_state;

typedef struct run_result {
    float *params; /* of the second network */
    size_t n_floats;
    float logits[LOGITS];
    uint8_t *model_file, *snap_file;
    size_t model_bytes, snap_bytes;
    int failures;  /* calls that met the injected failure */
    char stage[64];
} run_result;

static char g_dir[256];

static sl_status make_context(run_state *s, int i)
{
    sl_context_options o = sl_context_defaults();
    o.threads = 1;
    o.seed = 11 + (uint64_t)i;
    return sl_context_create(&o, &s->ctx[i]);
}

static sl_status make_net(run_state *s, int i)
{
    return sl_sublinear(s->ctx[i], 3, SL_SCHEDULE_SQRT, &s->net[i]);
}

static sl_status build(run_state *s, int i)
{
    return sl_model_build(s->net[i], "resnet20", CLASSES, RES);
}

static sl_status set_optimizer(run_state *s, int i)
{
    sl_optimizer_options o = sl_optimizer_sgd(0.05f, 0.9f, 1e-4f, 0);
    return sl_net_set_optimizer(s->net[i], &o);
}

static sl_status train(run_state *s, int i)
{
    sl_step_result r;
    sl_shape sh = sl_shape_nchw(BATCH, 3, RES, RES);
    return sl_net_train_step(s->net[i], s->x, sh, s->labels, &r);
}

static sl_status save_model(run_state *s, int i) { return sl_save_model(s->net[i], s->model_path); }
static sl_status save_snapshot(run_state *s, int i)
{
    return sl_save_snapshot(s->net[i], s->snap_path);
}

static sl_status load_model(run_state *s, int i)
{
    sl_load_report rep;
    return sl_load_model(s->net[i], s->model_path, NULL, &rep);
}

static sl_status load_snapshot(run_state *s, int i) { return sl_load_snapshot(s->net[i], s->snap_path); }

static sl_status predict(run_state *s, int i)
{
    sl_shape sh = sl_shape_nchw(BATCH, 3, RES, RES);
    return sl_net_predict(s->net[i], s->x, sh, s->logits);
}

static sl_status report(run_state *s, int i)
{
    sl_memory_report r;
    sl_shape sh = sl_shape_nchw(BATCH, 3, RES, RES);
    return sl_net_memory_report(s->net[i], sh, SL_MODE_TRAIN, &r);
}

typedef struct stage {
    const char *name;
    sl_status (*fn)(run_state *, int);
    int net;
} stage;

static const stage resnet_stages[] = {
    {"context 0", make_context, 0}, {"net 0", make_net, 0},
    {"build 0", build, 0},
    {"optimizer 0", set_optimizer, 0}, {"report 0", report, 0},
    {"train 0", train, 0},          {"train 0 again", train, 0},
    {"save model", save_model, 0},  {"save snapshot", save_snapshot, 0},
    {"context 1", make_context, 1}, {"net 1", make_net, 1},
    {"build 1", build, 1},          {"load model", load_model, 1},
    {"load snapshot", load_snapshot, 1}, {"train 1", train, 1},
    {"predict 1", predict, 1},
};

/* ---- GPT-2's stages ---- */

static sl_gpt2_config lm_config(void)
{
    sl_gpt2_config c = sl_gpt2_defaults();
    c.layers = 2;
    c.embd = 8;
    c.heads = 2;
    c.vocab = LM_VOCAB;
    c.context = 8;
    return c;
}

static sl_status make_lm_net(run_state *s, int i)
{
    return sl_sublinear(s->ctx[i], 1, SL_SCHEDULE_SQRT, &s->net[i]);
}

/* Network 0 from the config in code, network 1 from the config.json read back. */
static sl_status build_gpt2(run_state *s, int i)
{
    sl_gpt2_config c = i == 0 ? lm_config() : s->read_back;
    return sl_model_gpt2(s->net[i], &c);
}

static sl_status set_adamw(run_state *s, int i)
{
    sl_optimizer_options o = sl_optimizer_adamw(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f);
    return sl_net_set_optimizer(s->net[i], &o);
}

static sl_status lm_report(run_state *s, int i)
{
    sl_memory_report r;
    sl_shape sh = sl_shape_seq(LM_BATCH, LM_SEQ, 1);
    return sl_net_memory_report(s->net[i], sh, SL_MODE_TRAIN, &r);
}

static sl_status train_tokens(run_state *s, int i)
{
    sl_step_result r;
    return sl_net_train_step_tokens(s->net[i], s->ids, s->targets, LM_BATCH, LM_SEQ, &r);
}

static sl_status save_pretrained(run_state *s, int i)
{
    sl_gpt2_config c = lm_config();
    return sl_gpt2_save_pretrained(s->net[i], &c, s->gpt2_dir);
}

static sl_status read_config(run_state *s, int i)
{
    (void)i;
    return sl_gpt2_read_config(s->snap_path, &s->read_back);
}

static sl_status predict_tokens(run_state *s, int i)
{
    return sl_net_predict_tokens(s->net[i], s->ids, LM_BATCH, LM_SEQ, s->logits);
}

static const stage gpt2_stages[] = {
    {"context 0", make_context, 0},     {"net 0", make_lm_net, 0},
    {"gpt2 0", build_gpt2, 0},          {"optimizer 0", set_adamw, 0},
    {"report 0", lm_report, 0},         {"train 0", train_tokens, 0},
    {"train 0 again", train_tokens, 0}, {"save pretrained", save_pretrained, 0},
    {"read config", read_config, 1},    {"context 1", make_context, 1},
    {"net 1", make_lm_net, 1},          {"gpt2 1", build_gpt2, 1},
    {"load model", load_model, 1},      {"optimizer 1", set_adamw, 1},
    {"train 1", train_tokens, 1},       {"predict 1", predict_tokens, 1},
};

typedef struct scenario {
    const char *name;
    const stage *stages;
    size_t n_stages;
    int lm; /* GPT-2's files and inputs */
} scenario;

static const scenario resnet_run = {"resnet20", resnet_stages,
                                    sizeof resnet_stages / sizeof *resnet_stages, 0};
static const scenario gpt2_run = {"gpt2", gpt2_stages, sizeof gpt2_stages / sizeof *gpt2_stages, 1};

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len + 1);
    ck_assert(b && fread(b, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void set_paths(run_state *s, const scenario *sc)
{
    th_fill_normal(s->x, sizeof s->x / sizeof s->x[0], 5, 1.0f);
    for (int b = 0; b < BATCH; b++)
        s->labels[b] = b % CLASSES;
    for (int t = 0; t < LM_BATCH * LM_SEQ; t++) {
        s->ids[t] = (7 * t + 3) % LM_VOCAB;
        s->targets[t] = (5 * t + 1) % LM_VOCAB;
    }
    if (sc->lm) {
        snprintf(s->gpt2_dir, sizeof s->gpt2_dir, "%s/gpt2", g_dir);
        snprintf(s->model_path, sizeof s->model_path, "%s/model.safetensors", s->gpt2_dir);
        snprintf(s->snap_path, sizeof s->snap_path, "%s/config.json", s->gpt2_dir);
    } else {
        snprintf(s->model_path, sizeof s->model_path, "%s/model.safetensors", g_dir);
        snprintf(s->snap_path, sizeof s->snap_path, "%s/snap.safetensors", g_dir);
    }
}

/* One run of sc with the fail_at-th allocation failing (0: none). */
static void one_run(const scenario *sc, long fail_at, run_result *out)
{
    run_state *s = calloc(1, sizeof *s);
    ck_assert(s);
    set_paths(s, sc);
    const stage *stages = sc->stages;
    memset(out, 0, sizeof *out);
    sl_test_alloc_fail_at(fail_at ? fail_at : -1);
    for (size_t k = 0; k < sc->n_stages; k++) {
        sl_status st = stages[k].fn(s, stages[k].net);
        if (st != SL_OK) {
            /* The status and the message of the failure itself, whatever
             * layer of the library it passed through on its way up. */
            ck_assert_msg(st == SL_ERR_NOMEM, "%s, allocation %ld, %s: %s (%s)", sc->name, fail_at,
                          stages[k].name, sl_status_name(st), sl_last_error());
            ck_assert_msg(strstr(sl_last_error(), "out of memory") != NULL,
                          "%s, allocation %ld, %s: message '%s' does not say out of memory",
                          sc->name, fail_at, stages[k].name, sl_last_error());
            out->failures++;
            snprintf(out->stage, sizeof out->stage, "%s", stages[k].name);
            st = stages[k].fn(s, stages[k].net); /* the retry, fault-free */
            ck_assert_msg(st == SL_OK, "%s, allocation %ld, %s: the retry failed: %s", sc->name,
                          fail_at, stages[k].name, sl_last_error());
        }
    }
    long counted = sl_test_alloc_count();
    sl_test_alloc_fail_at(0);
    if (!fail_at)
        out->failures = (int)counted; /* the fault-free run reports its count */
    int n = th_param_count(s->net[1]);
    for (int i = 0; i < n; i++) {
        sl_param_info pi;
        ck_assert(sl_net_param(s->net[1], i, &pi) == SL_OK);
        out->params = realloc(out->params, (out->n_floats + pi.count) * sizeof(float));
        memcpy(out->params + out->n_floats, pi.data, pi.count * sizeof(float));
        out->n_floats += pi.count;
    }
    memcpy(out->logits, s->logits, sizeof out->logits);
    out->model_file = read_file(s->model_path, &out->model_bytes);
    out->snap_file = read_file(s->snap_path, &out->snap_bytes);
    for (int i = 0; i < 2; i++) {
        sl_net_free(s->net[i]);
        sl_context_free(s->ctx[i]);
    }
    free(s);
}

static void free_result(run_result *r)
{
    free(r->params);
    free(r->model_file);
    free(r->snap_file);
}

/* Every allocation of sc's run failing in turn: the call that meets it
 * says SL_ERR_NOMEM, "out of memory", and its retry ends the run as the
 * fault-free run ends. */
static void every_allocation_failure(const scenario *sc)
{
    run_result clean, faulty;
    one_run(sc, 0, &clean);
    long total = clean.failures;
    ck_assert_int_gt(total, 100);
    /* Under SL_TEST_QUICK (the sanitizer run), every third allocation. */
    long step = getenv("SL_TEST_QUICK") ? 3 : 1;
    int failed_calls = 0;
    for (long n = 1; n <= total; n += step) {
        one_run(sc, n, &faulty);
        ck_assert_msg(faulty.failures == 1, "allocation %ld of %ld met no call (%d)", n, total,
                      faulty.failures);
        failed_calls++;
        ck_assert_msg(faulty.n_floats == clean.n_floats &&
                          memcmp(faulty.params, clean.params, clean.n_floats * sizeof(float)) == 0,
                      "allocation %ld (%s): parameters differ from the fault-free run", n,
                      faulty.stage);
        ck_assert_msg(memcmp(faulty.logits, clean.logits, sizeof clean.logits) == 0,
                      "allocation %ld (%s): predictions differ", n, faulty.stage);
        ck_assert_msg(faulty.model_bytes == clean.model_bytes &&
                          memcmp(faulty.model_file, clean.model_file, clean.model_bytes) == 0,
                      "allocation %ld (%s): the model file differs", n, faulty.stage);
        ck_assert_msg(faulty.snap_bytes == clean.snap_bytes &&
                          memcmp(faulty.snap_file, clean.snap_file, clean.snap_bytes) == 0,
                      "allocation %ld (%s): the snapshot differs", n, faulty.stage);
        free_result(&faulty);
    }
    printf("%s: %ld allocations in a run; %d runs with one failing, each SL_ERR_NOMEM, retried "
           "to the fault-free result\n", sc->name, total, failed_calls);
    free_result(&clean);
}

START_TEST(test_every_allocation_failure_is_nomem_and_changes_nothing)
{
    every_allocation_failure(&resnet_run);
}
END_TEST

/* Building GPT-2 (blocks of blocks), its token runs and its Hugging Face
 * directory: the status and message of every failure reach the caller. */
START_TEST(test_every_allocation_failure_of_gpt2_is_nomem_and_changes_nothing)
{
    every_allocation_failure(&gpt2_run);
}
END_TEST

/* A half-built model is undone: the retry of sl_model_build succeeds. */
START_TEST(test_model_build_failure_leaves_the_network_empty)
{
    sl_context *ctx = th_context(1);
    sl_net *net;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    sl_test_alloc_fail_at(40);
    sl_status st = sl_model_build(net, "resnet20", 10, 32);
    sl_test_alloc_fail_at(0);
    ck_assert_msg(st == SL_ERR_NOMEM, "%s: %s", sl_status_name(st), sl_last_error());
    ck_assert_int_eq(sl_net_layer_count(net), 0);
    ck_assert_msg(sl_model_build(net, "resnet20", 10, 32) == SL_OK, "%s", sl_last_error());
    ck_assert_int_gt(sl_net_layer_count(net), 0);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* A layer constructor's allocation failure reaches sl_net_add as NOMEM. */
START_TEST(test_constructor_out_of_memory_is_nomem)
{
    sl_context *ctx = th_context(1);
    sl_net *net;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    sl_test_alloc_fail_at(1);
    sl_layer *l = sl_basic_block(3, 8, 1);
    sl_test_alloc_fail_at(0);
    ck_assert_ptr_null(l);
    ck_assert_int_eq(sl_net_add(net, "block", l), SL_ERR_NOMEM);
    ck_assert_int_eq(sl_net_layer_count(net), 0);
    ck_assert_int_eq(sl_net_add(net, "block", sl_basic_block(3, 8, 1)), SL_OK);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* ---- the tokenizer's path: load, encode, write a shard, read it back ---- */

typedef struct text_run {
    sl_tokenizer *tok;
    int32_t ids[64];
    uint16_t tokens[64];
    size_t n;
    sl_token_shard *shard;
    char json[PATH_LEN], bpe[PATH_LEN], shard_path[PATH_LEN];
} text_run;

static const char g_text[] = "hello world, hello \xff\xfe world aaa";

static sl_status text_load(text_run *t)
{
    sl_tokenizer_free(t->tok);
    t->tok = NULL;
    return sl_tokenizer_load(t->json, t->bpe, &t->tok);
}

static sl_status text_encode(text_run *t)
{
    sl_status st = sl_tokenizer_encode(t->tok, g_text, sizeof g_text - 1, t->ids, 64, &t->n);
    for (size_t i = 0; st == SL_OK && i < t->n; i++)
        t->tokens[i] = (uint16_t)t->ids[i];
    return st;
}

static sl_status text_write(text_run *t) { return sl_token_shard_write(t->shard_path, t->tokens, t->n); }

static sl_status text_open(text_run *t)
{
    sl_token_shard_free(t->shard);
    t->shard = NULL;
    return sl_token_shard_open(t->shard_path, &t->shard);
}

static sl_status text_check(text_run *t)
{
    return sl_token_shard_check_vocab(t->shard, sl_tokenizer_vocab_size(t->tok));
}

static const struct {
    const char *name;
    sl_status (*fn)(text_run *);
} text_stages[] = {
    {"tokenizer load", text_load}, {"encode", text_encode}, {"shard write", text_write},
    {"shard open", text_open},     {"check vocab", text_check},
};

/* One pass of the tokenizer's path with the fail_at-th allocation of the
 * library failing (0: none); returns the calls that met it. */
static int text_one_run(long fail_at, text_run *t, long *counted)
{
    memset(t, 0, sizeof *t);
    snprintf(t->json, sizeof t->json, "%s/small.json", g_dir);
    snprintf(t->bpe, sizeof t->bpe, "%s/small.bpe", g_dir);
    snprintf(t->shard_path, sizeof t->shard_path, "%s/text.bin", g_dir);
    int failures = 0;
    sl_test_alloc_fail_at(fail_at ? fail_at : -1);
    for (size_t k = 0; k < sizeof text_stages / sizeof text_stages[0]; k++) {
        sl_status st = text_stages[k].fn(t);
        if (st == SL_OK)
            continue;
        ck_assert_msg(st == SL_ERR_NOMEM, "allocation %ld, %s: %s (%s)", fail_at,
                      text_stages[k].name, sl_status_name(st), sl_last_error());
        ck_assert_msg(strstr(sl_last_error(), "out of memory") != NULL,
                      "allocation %ld, %s: message '%s' does not say out of memory", fail_at,
                      text_stages[k].name, sl_last_error());
        failures++;
        st = text_stages[k].fn(t);
        ck_assert_msg(st == SL_OK, "allocation %ld, %s: the retry failed: %s", fail_at,
                      text_stages[k].name, sl_last_error());
    }
    *counted = sl_test_alloc_count();
    sl_test_alloc_fail_at(0);
    ck_assert_uint_eq(sl_token_shard_count(t->shard), t->n);
    return failures;
}

static void text_free(text_run *t)
{
    sl_tokenizer_free(t->tok);
    sl_token_shard_free(t->shard);
}

START_TEST(test_tokenizer_path_every_allocation_failure_is_nomem_with_a_message)
{
    char json[PATH_LEN], bpe[PATH_LEN];
    snprintf(json, sizeof json, "%s/small.json", g_dir);
    snprintf(bpe, sizeof bpe, "%s/small.bpe", g_dir);
    bf_write_small(json, bpe, "", "");
    text_run clean, faulty;
    long total, counted;
    ck_assert_int_eq(text_one_run(0, &clean, &total), 0);
    ck_assert_int_gt(total, 10);
    size_t clean_bytes, faulty_bytes;
    uint8_t *clean_file = read_file(clean.shard_path, &clean_bytes);
    for (long n = 1; n <= total; n++) {
        ck_assert_msg(text_one_run(n, &faulty, &counted) == 1, "allocation %ld of %ld met no call", n,
                      total);
        ck_assert_uint_eq(faulty.n, clean.n);
        ck_assert(memcmp(faulty.tokens, clean.tokens, clean.n * sizeof clean.tokens[0]) == 0);
        uint8_t *file = read_file(faulty.shard_path, &faulty_bytes);
        ck_assert_msg(faulty_bytes == clean_bytes && memcmp(file, clean_file, clean_bytes) == 0,
                      "allocation %ld: the shard differs", n);
        free(file);
        text_free(&faulty);
    }
    printf("tokenizer path: %ld allocations, each failure SL_ERR_NOMEM saying out of memory\n", total);
    free(clean_file);
    text_free(&clean);
}
END_TEST

/* ---- the C library's own failures ---- */

typedef struct libc_case {
    const char *name;
    sl_status (*fn)(run_state *, int);
    const char *file; /* the file the call writes, compared after a success */
} libc_case;

static char g_shard_path[PATH_LEN];

static sl_status libc_write_shard(run_state *s, int i)
{
    (void)s, (void)i;
    static const uint16_t tokens[] = {1, 2, 3, 500, 7};
    return sl_token_shard_write(g_shard_path, tokens, 5);
}

static sl_status libc_open_shard(run_state *s, int i)
{
    (void)s, (void)i;
    sl_token_shard *shard = NULL; /* set only on success */
    sl_status st = sl_token_shard_open(g_shard_path, &shard);
    sl_token_shard_free(shard);
    return st;
}

/* Every malloc, calloc and realloc of each call failing in turn, the C
 * library's on the call's behalf included: SL_OK where the library copes
 * (a stream without its buffer writes unbuffered), else SL_ERR_NOMEM with
 * a message that says so, never "Success" or a stale errno's text; a
 * retry then succeeds and a written file equals the fault-free one. */
START_TEST(test_c_library_allocation_failure_is_nomem_with_a_message)
{
    if (!lf_available()) {
        printf("test_c_library_allocation_failure_is_nomem_with_a_message: skipped (a sanitizer "
               "owns malloc)\n");
        return;
    }
    run_state *s = calloc(1, sizeof *s);
    ck_assert(s);
    snprintf(s->model_path, sizeof s->model_path, "%s/libc_model.safetensors", g_dir);
    snprintf(s->snap_path, sizeof s->snap_path, "%s/libc_snap.safetensors", g_dir);
    snprintf(g_shard_path, sizeof g_shard_path, "%s/libc_shard.bin", g_dir);
    ck_assert(make_context(s, 0) == SL_OK && make_net(s, 0) == SL_OK && build(s, 0) == SL_OK &&
              set_optimizer(s, 0) == SL_OK && train(s, 0) == SL_OK);
    const libc_case cases[] = {
        {"save model", save_model, s->model_path},  {"load model", load_model, NULL},
        {"save snapshot", save_snapshot, s->snap_path}, {"load snapshot", load_snapshot, NULL},
        {"write shard", libc_write_shard, g_shard_path}, {"open shard", libc_open_shard, NULL},
    };
    int points = 0, nomem = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        lf_fail_malloc_at(-1);
        ck_assert_msg(cases[c].fn(s, 0) == SL_OK, "%s: %s", cases[c].name, sl_last_error());
        long total = lf_malloc_count();
        lf_fail_malloc_at(0);
        size_t clean_bytes = 0, bytes;
        uint8_t *clean = cases[c].file ? read_file(cases[c].file, &clean_bytes) : NULL;
        for (long n = 1; n <= total; n++, points++) {
            errno = ENOENT; /* what a stat before the failing call leaves */
            lf_fail_malloc_at(n);
            sl_status st = cases[c].fn(s, 0);
            lf_fail_malloc_at(0);
            if (st != SL_OK) {
                ck_assert_msg(st == SL_ERR_NOMEM, "%s, allocation %ld of %ld: %s (%s)", cases[c].name,
                              n, total, sl_status_name(st), sl_last_error());
                ck_assert_msg(strstr(sl_last_error(), "out of memory") &&
                                  !strstr(sl_last_error(), "Success") &&
                                  !strstr(sl_last_error(), "No such file"),
                              "%s, allocation %ld: message '%s'", cases[c].name, n, sl_last_error());
                nomem++;
                ck_assert_msg(cases[c].fn(s, 0) == SL_OK, "%s, allocation %ld: the retry failed: %s",
                              cases[c].name, n, sl_last_error());
            }
            if (clean) {
                uint8_t *file = read_file(cases[c].file, &bytes);
                ck_assert_msg(bytes == clean_bytes && memcmp(file, clean, bytes) == 0,
                              "%s, allocation %ld: the file differs", cases[c].name, n);
                free(file);
            }
        }
        free(clean);
    }
    ck_assert_int_gt(nomem, 10);
    printf("C library: %d allocation points, %d refused with SL_ERR_NOMEM, the rest coped\n", points,
           nomem);
    sl_net_free(s->net[0]);
    sl_context_free(s->ctx[0]);
    free(s);
}
END_TEST

/* snprintf fails only when the C library lacks memory: the report says
 * so, not that the caller's buffer is too small. */
START_TEST(test_memory_report_json_out_of_memory_is_nomem)
{
    sl_memory_report r;
    memset(&r, 0, sizeof r);
    r.total = 12345;
    char buf[1024];
    if (lf_available()) {
        lf_fail_snprintf(1);
        sl_status st = sl_memory_report_json(&r, buf, sizeof buf);
        lf_fail_snprintf(0);
        th_assert_error(st, SL_ERR_NOMEM, "out of memory");
        ck_assert_ptr_null(strstr(sl_last_error(), "too small"));
    }
    th_assert_error(sl_memory_report_json(&r, buf, 40), SL_ERR_INVALID_ARG, "too small");
    ck_assert_msg(sl_memory_report_json(&r, buf, sizeof buf) == SL_OK, "%s", sl_last_error());
    ck_assert_ptr_nonnull(strstr(buf, "\"total\":12345"));
}
END_TEST

int main(void)
{
    /* tmpfs where there is one: the run saves two files (with fsync) per N. */
    snprintf(g_dir, sizeof g_dir, "%s/sl_alloc_XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(g_dir))
        return EXIT_FAILURE;
    Suite *s = suite_create("alloc_failure");
    TCase *tc = tcase_create("alloc_failure");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_model_build_failure_leaves_the_network_empty);
    tcase_add_test(tc, test_constructor_out_of_memory_is_nomem);
    tcase_add_test(tc, test_every_allocation_failure_is_nomem_and_changes_nothing);
    tcase_add_test(tc, test_every_allocation_failure_of_gpt2_is_nomem_and_changes_nothing);
    tcase_add_test(tc, test_tokenizer_path_every_allocation_failure_is_nomem_with_a_message);
    tcase_add_test(tc, test_c_library_allocation_failure_is_nomem_with_a_message);
    tcase_add_test(tc, test_memory_report_json_out_of_memory_is_nomem);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    char cmd[PATH_LEN + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
