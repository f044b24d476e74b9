/*
 * test_cli_lm.c — `sublinear train --model gpt2` and `sublinear plan
 * --model gpt2`: a small GPT-2 learns a repeating token sequence from an
 * llm.c shard and scores well on held-out tokens; the plan's fixed part is
 * GPT-2's parameter count; a run resumed from a snapshot ends with the
 * model of a run that never stopped; --load-model starts from a saved
 * model; bad combinations are usage errors; a model with a NaN weight is
 * refused unless --allow-nonfinite, and a run whose loss or weights stop
 * being finite stops, keeping the last good --snapshot; a token outside
 * the vocabulary is refused before training, by file and offset.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "harness.h"

#define SHAPE "--layers 2 --embd 32 --heads 2 --vocab 64 --context 32"

/* A shard of n tokens cycling through a fixed sequence of 13 ids. */
static const char *write_shard(const char *name, size_t n)
{
    size_t bytes = 1024 + 2 * n;
    unsigned char *buf = calloc(1, bytes);
    ck_assert(buf);
    int32_t header[3] = {20240520, 1, (int32_t)n};
    memcpy(buf, header, sizeof header);
    static const int cycle[13] = {5, 17, 3, 40, 8, 8, 21, 63, 0, 11, 30, 2, 19};
    for (size_t i = 0; i < n; i++) {
        uint16_t t = (uint16_t)cycle[i % 13];
        memcpy(buf + 1024 + 2 * i, &t, 2);
    }
    const char *path = cr_write(name, buf, bytes);
    free(buf);
    return path;
}

START_TEST(test_learns_a_sequence)
{
    char train[512], val[512];
    snprintf(train, sizeof train, "%s", write_shard("train.bin", 20000));
    snprintf(val, sizeof val, "%s", write_shard("val.bin", 2000));
    cr_result r = cr_run(SL_CLI_PATH, "train --model gpt2 " SHAPE " --data %s --val %s --seq 16 "
                         "--batch 4 --steps 80 --lr 1e-2 --warmup 5 --eval 8 --schedule sqrt --json",
                         train, val);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    double first = cr_num(j, "first_loss"), last = cr_num(j, "last_loss"), held = cr_num(j, "val_loss");
    printf("gpt2 on a cycle: loss %.3f -> %.3f, held-out %.3f\n", first, last, held);
    ck_assert(first > 3.5);                   /* about log(64) = 4.16 at the start */
    ck_assert_msg(last < 0.2, "last loss %g", last);
    ck_assert_msg(held < 0.2, "held-out loss %g", held);
    ck_assert(cr_num(j, "saving.arena_fraction") > 0.0); /* sqrt keeps less than none */
    ck_assert(cr_num(j, "tokens_per_second") > 0);
    cJSON_Delete(j);
    cr_free(&r);
}
END_TEST

/* The plan's fixed part: GPT-2's parameters, their gradients and AdamW's
 * two moments, each the parameter count times 4 bytes (64-byte aligned per
 * tensor). */
START_TEST(test_plan_fixed_part)
{
    cr_result r = cr_run(SL_CLI_PATH, "plan --model gpt2 " SHAPE " --seq 32 --batch 2 "
                         "--optimizer adamw --schedule none --json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    const long C = 32, L = 2, V = 64, T = 32;
    long count = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
    double params = cr_num(j, "planned_bytes.params");
    ck_assert_msg(params >= 4.0 * count && params < 4.0 * count + 64.0 * 64, "params %g for %ld",
                  params, count);
    ck_assert(cr_num(j, "planned_bytes.param_grads") == params);
    ck_assert(cr_num(j, "planned_bytes.optimizer") == 2 * params);
    ck_assert(cr_num(j, "planned_bytes.total") == cr_num(j, "planned_bytes.arena") + 4 * params);
    cJSON_Delete(j);
    cr_free(&r);
    r = cr_run(SL_CLI_PATH, "plan --model gpt2 " SHAPE " --seq 32 --batch 2");
    ck_assert_msg(r.status == 0 && strstr(r.out, "32 tokens"), "%s%s", r.out, r.err);
    cr_free(&r);
}
END_TEST

/* 5 steps, then 5 more from the snapshot, equal 10 steps in one run, with
 * dropout (its counter travels in the snapshot). Runs of at most 10 steps
 * keep one learning rate, so the halves see the whole run's rates. */
START_TEST(test_resume_exact)
{
    char train[512], dir[512];
    snprintf(train, sizeof train, "%s", write_shard("resume.bin", 5000));
    snprintf(dir, sizeof dir, "%s", cr_dir());
    const char *common = "train --model gpt2 " SHAPE " --seq 16 --batch 2 --lr 1e-3 "
                         "--quiet --eval 0 --dropout 0.1 --schedule sqrt";
    cr_result r = cr_run(SL_CLI_PATH, "%s --data %s --steps 10 --save-model %s/whole",
                         common, train, dir);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cr_free(&r);
    r = cr_run(SL_CLI_PATH, "%s --data %s --steps 5 --snapshot %s/half.snap", common, train, dir);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cr_free(&r);
    r = cr_run(SL_CLI_PATH, "%s --data %s --steps 10 --resume %s/half.snap --save-model "
               "%s/resumed", common, train, dir, dir);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cr_free(&r);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/whole/model.safetensors", dir);
    snprintf(b, sizeof b, "%s/resumed/model.safetensors", dir);
    size_t na, nb;
    char *fa = cr_read(a, &na), *fb = cr_read(b, &nb);
    ck_assert(fa && fb);
    ck_assert_msg(na == nb && memcmp(fa, fb, na) == 0, "resumed model differs");
    free(fa);
    free(fb);
    /* --load-model starts from the trained weights: the first loss is far
     * below a fresh model's. */
    r = cr_run(SL_CLI_PATH, "train --model gpt2 " SHAPE " --seq 16 --batch 2 --steps 1 --eval 0 "
               "--data %s --load-model %s --json", train, a);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    double loaded = cr_num(j, "first_loss");
    cJSON_Delete(j);
    cr_free(&r);
    r = cr_run(SL_CLI_PATH, "train --model gpt2 " SHAPE " --seq 16 --batch 2 --steps 1 --eval 0 "
               "--data %s --json", train);
    ck_assert_msg(r.status == 0, "%s", r.err);
    j = cr_json(&r);
    double fresh = cr_num(j, "first_loss");
    cJSON_Delete(j);
    cr_free(&r);
    ck_assert_msg(loaded < fresh - 0.5, "loaded %g fresh %g", loaded, fresh);
}
END_TEST

/* args with its word SHARD (if any) replaced by the path shard, into out. */
static void with_shard(const char *args, const char *shard, char *out, size_t n)
{
    const char *at = strstr(args, "SHARD");
    if (at)
        snprintf(out, n, "%.*s%s%s", (int)(at - args), args, shard, at + 5);
    else
        snprintf(out, n, "%s", args);
}

START_TEST(test_usage_errors)
{
    const char *shard = write_shard("u.bin", 3000);
    struct {
        const char *args, *says;
    } cases[] = {
        {"train --model gpt2 " SHAPE " --seq 16", "needs --data"},
        {"train --model gpt2 " SHAPE " --seq 64 --data SHARD", "longer than the context"},
        {"train --model gpt2 " SHAPE " --res 32 --data SHARD", "do not apply to gpt2"},
        {"train --model resnet20 --seq 16", "apply to --model gpt2"},
        {"plan --model gpt2 --embd 30 --heads 4", "multiple of --heads"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512];
        with_shard(cases[i].args, shard, args, sizeof args);
        cr_result r = cr_run(SL_CLI_PATH, "%s", args);
        ck_assert_msg(r.status == 2 && strstr(r.err, cases[i].says), "%s: status %d, %s", args,
                      r.status, r.err);
        cr_free(&r);
    }
    /* A shard shorter than one batch is a failure (exit 1) that says so. */
    const char *tiny = write_shard("tiny.bin", 10);
    cr_result r = cr_run(SL_CLI_PATH, "train --model gpt2 " SHAPE " --seq 16 --data %s", tiny);
    ck_assert_msg(r.status == 1 && strstr(r.err, "fewer than one batch"), "%s", r.err);
    cr_free(&r);
}
END_TEST

/* A bad shape flag names its bound; products of the flags are checked
 * before anything is built; a train run of a GPT-2 too large for memory
 * is refused by sl_model_gpt2 before its first layer, while plan, which
 * allocates no model, still plans it. */
START_TEST(test_shape_flags_and_model_size_are_checked_first)
{
    const char *shard = write_shard("big.bin", 3000);
    struct {
        const char *args, *says;
        int status;
    } cases[] = {
        {"plan --model gpt2 --layers 1001", "bad value '1001' for --layers: an integer from 1 to 1000", 2},
        {"plan --model gpt2 --embd 65537", "for --embd: an integer from 1 to 65536", 2},
        {"plan --model gpt2 --vocab 65537", "for --vocab: an integer from 2 to 65536", 2},
        {"plan --model gpt2 --seq 4096 --context 4096 --batch 65536",
         "--batch 65536 x --seq 4096 = 268435456 tokens per step; at most 2147483647", 0},
        {"plan --model gpt2 --layers 1000 --embd 65536 --heads 4096 --vocab 65536 --context 1048576 "
         "--seq 1048576 --batch 65536 --schedule none --json",
         "--batch 65536 x --seq 1048576 = 68719476736 tokens per step; at most 2147483647", 2},
        {"plan --model gpt2 --layers 1000 --embd 65536 --heads 4096 --vocab 65536 --context 1048576 "
         "--seq 1048576 --batch 2047 --schedule none --json",
         "more than 2^56 bytes (64 PiB)", 1},
        {"plan --model resnet20 --batch 65536 --res 8192",
         "--batch 65536 x --res 8192 x 8192 = 4398046511104 pixel positions per step", 2},
        {"train --model gpt2 --layers 1000 --embd 65536 --heads 64 --seq 16 --data SHARD",
         "sl_model_gpt2: the network needs", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512];
        with_shard(cases[i].args, shard, args, sizeof args);
        cr_result r = cr_run(SL_CLI_PATH, "%s", args);
        if (cases[i].status == 0) /* within the bound: no such message */
            ck_assert_msg(!strstr(r.err, "tokens per step"), "%s: %s", args, r.err);
        else
            ck_assert_msg(r.status == cases[i].status && strstr(r.err, cases[i].says),
                          "%s: status %d, %s", args, r.status, r.err);
        cr_free(&r);
    }
    /* 4 layers of embd 65536 (768 GiB of weights) plan on any machine. */
    cr_result r = cr_run(SL_CLI_PATH, "plan --model gpt2 --layers 4 --embd 65536 --heads 64 "
                         "--seq 2 --context 2 --batch 1 --schedule none --json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    ck_assert(cr_num(j, "planned_bytes.params") > 768.0 * (1 << 30));
    cJSON_Delete(j);
    cr_free(&r);
    /* A step of about 2^69 FLOPs: the sqrt schedule re-forwards about a
     * third of it, not the 117 plain steps a wrapped count read. */
    r = cr_run(SL_CLI_PATH, "plan --model gpt2 --layers 1000 --embd 65536 --heads 64 --seq 2048 "
               "--context 2048 --batch 1024 --schedule sqrt --json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    j = cr_json(&r);
    double f = cr_num(j, "recompute_fraction");
    ck_assert_msg(f > 0.2 && f < 0.5, "recompute fraction %g", f);
    cJSON_Delete(j);
    cr_free(&r);
}
END_TEST

/* The byte offset of the data of tensor `name` in a safetensors file. */
static size_t tensor_offset(const char *file, size_t n, const char *name)
{
    uint64_t header = 0;
    ck_assert(n >= 8);
    memcpy(&header, file, 8);
    ck_assert(header <= n - 8);
    cJSON *j = cJSON_ParseWithLength(file + 8, (size_t)header);
    ck_assert(j);
    cJSON *off = cJSON_GetObjectItem(cJSON_GetObjectItem(j, name), "data_offsets");
    ck_assert_msg(cJSON_IsArray(off), "no tensor %s", name);
    size_t at = 8 + (size_t)header + (size_t)cJSON_GetArrayItem(off, 0)->valuedouble;
    cJSON_Delete(j);
    return at;
}

static int exists(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

START_TEST(test_nonfinite_weights_and_loss_stop_the_run)
{
    char train[512], dir[512], path[700], snap[700], out[700];
    snprintf(train, sizeof train, "%s", write_shard("nf.bin", 3000));
    snprintf(dir, sizeof dir, "%s", cr_dir());
    const char *common = "train --model gpt2 " SHAPE " --seq 16 --batch 2 --eval 0 --quiet";
    cr_result r = cr_run(SL_CLI_PATH, "%s --data %s --steps 2 --save-model %s/nf_good", common,
                         train, dir);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cr_free(&r);
    /* transformer.ln_f.weight[3] = NaN in a copy of the saved model. */
    snprintf(path, sizeof path, "%s/nf_good/model.safetensors", dir);
    size_t n = 0;
    char *file = cr_read(path, &n);
    ck_assert(file);
    float nan_value = NAN;
    memcpy(file + tensor_offset(file, n, "transformer.ln_f.weight") + 3 * 4, &nan_value, 4);
    snprintf(path, sizeof path, "%s", cr_write("nf_bad.safetensors", file, n));
    free(file);

    r = cr_run(SL_CLI_PATH, "%s --data %s --steps 2 --load-model %s", common, train, path);
    ck_assert_msg(r.status == 1 && strstr(r.err, "tensor 'transformer.ln_f.weight' holds NaN at "
                                          "element 3 (index [3]) of 32") &&
                      strstr(r.err, "--allow-nonfinite loads such a file anyway"),
                  "status %d: %s", r.status, r.err);
    cr_free(&r);

    /* Allowed, the NaN weight makes the first loss NaN: the run stops and
     * writes nothing. */
    snprintf(snap, sizeof snap, "%s/nf.snap", dir);
    snprintf(out, sizeof out, "%s/nf_out", dir);
    r = cr_run(SL_CLI_PATH, "%s --data %s --steps 3 --load-model %s --allow-nonfinite --snapshot %s "
               "--snapshot-every 1 --save-model %s", common, train, path, snap, out);
    ck_assert_msg(r.status == 1 && strstr(r.err, "the loss is NaN at step 1:") &&
                      strstr(r.err, "this run wrote no snapshot"),
                  "status %d: %s", r.status, r.err);
    ck_assert(!exists(snap) && !exists(out));
    cr_free(&r);

    /* A learning rate that blows the weights up: the run stops at the
     * first step whose loss or weights are not finite, and --snapshot
     * keeps the last good step's, which resumes. */
    r = cr_run(SL_CLI_PATH, "%s --data %s --steps 8 --optimizer sgd --lr 1e10 --snapshot %s "
               "--snapshot-every 1 --save-model %s", common, train, snap, out);
    const char *kept = strstr(r.err, "holds the last snapshot, of step ");
    ck_assert_msg(r.status == 1 && kept && strstr(r.err, "stopped at step "), "status %d: %s",
                  r.status, r.err);
    int good = atoi(kept + strlen("holds the last snapshot, of step "));
    ck_assert_msg(good >= 1 && good < 8, "%s", r.err);
    ck_assert(!exists(out));
    cr_free(&r);
    r = cr_run(SL_CLI_PATH, "%s --data %s --steps %d --optimizer sgd --resume %s", common, train,
               good, snap);
    ck_assert_msg(r.status == 0 && strstr(r.out, "nothing to train"), "%s", r.err);
    cr_free(&r);
}
END_TEST

/* write_shard's tokens with token `at` replaced by `id`. */
static const char *write_shard_with(const char *name, size_t n, size_t at, uint16_t id)
{
    const char *path = write_shard(name, n);
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert(fseek(f, (long)(1024 + 2 * at), SEEK_SET) == 0 && fwrite(&id, 2, 1, f) == 1);
    ck_assert(fclose(f) == 0);
    return path;
}

/* A token id outside the vocabulary is found when the shard is opened,
 * named by file and offset, before any step: in --val it used to stop the
 * run after all the training, and --save-model and --snapshot were never
 * written. */
START_TEST(test_token_out_of_vocabulary_is_refused_before_training)
{
    char train[512], val[512];
    snprintf(train, sizeof train, "%s", write_shard("oov_train.bin", 4000));
    snprintf(val, sizeof val, "%s", write_shard_with("oov_val.bin", 2000, 1500, 64));
    cr_result r = cr_run(SL_CLI_PATH, "train --model gpt2 " SHAPE " --data %s --val %s --seq 16 "
                         "--batch 4 --steps 20 --eval 2000 --save-model %s/oov_model --snapshot "
                         "%s/oov.snap", train, val, cr_dir(), cr_dir());
    ck_assert_msg(r.status == 1, "status %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "--val") && strstr(r.err, val) && strstr(r.err, "id 64 at token 1500") &&
                      strstr(r.err, "byte 4024") && strstr(r.err, "vocabulary of 64"),
                  "%s", r.err);
    ck_assert_msg(strstr(r.out, "step") == NULL, "it trained first: %s", r.out);
    cr_free(&r);

    /* In --data the same, with the offset in the file, not in a batch. */
    snprintf(train, sizeof train, "%s", write_shard_with("oov_train.bin", 4000, 3333, 65535));
    r = cr_run(SL_CLI_PATH, "train --model gpt2 " SHAPE " --data %s --seq 16 --batch 4 --steps 20",
               train);
    ck_assert_msg(r.status == 1 && strstr(r.err, "--data") && strstr(r.err, train) &&
                      strstr(r.err, "id 65535 at token 3333") && strstr(r.err, "byte 7690"),
                  "status %d: %s", r.status, r.err);
    cr_free(&r);
}
END_TEST

int main(void)
{
    cr_init();
    Suite *s = suite_create("cli_lm");
    TCase *t = tcase_create("cli_lm");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_learns_a_sequence);
    tcase_add_test(t, test_plan_fixed_part);
    tcase_add_test(t, test_resume_exact);
    tcase_add_test(t, test_usage_errors);
    tcase_add_test(t, test_shape_flags_and_model_size_are_checked_first);
    tcase_add_test(t, test_nonfinite_weights_and_loss_stop_the_run);
    tcase_add_test(t, test_token_out_of_vocabulary_is_refused_before_training);
    suite_add_tcase(s, t);
    int failed = th_run_suite(s);
    cr_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
