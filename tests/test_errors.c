/*
 * test_errors.c — bad input returns an error with a message a person can
 * act on, and leaves the network usable: NULL handles, zero batch, a shape
 * a layer cannot take, mismatched channels when appending, invalid layer
 * options, duplicate names, labels out of range, use before an optimizer;
 * file bytes quoted in messages are escaped; config.json must be UTF-8
 * and a regular file.
 */
#define _DEFAULT_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "harness.h"

/* A small working network: conv -> relu -> gap -> fc. */
static sl_net *small_net(sl_context *ctx)
{
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    ck_assert(sl_net_add(net, "conv", sl_conv2d(3, 4, 3, 1, 1)) == SL_OK);
    ck_assert(sl_net_add(net, "relu", sl_relu()) == SL_OK);
    ck_assert(sl_net_add(net, "pool", sl_global_avgpool()) == SL_OK);
    ck_assert(sl_net_add(net, "fc", sl_linear(4, 3, 1)) == SL_OK);
    return net;
}

/* The network still trains after the errors. */
static void assert_usable(sl_net *net)
{
    float x[2 * 3 * 6 * 6];
    int labels[2] = {0, 2};
    th_fill_normal(x, sizeof x / sizeof *x, 1, 1.0f);
    sl_optimizer_options o = sl_optimizer_sgd(0.1f, 0.9f, 0.0f, 0);
    ck_assert_msg(sl_net_set_optimizer(net, &o) == SL_OK, "%s", sl_last_error());
    sl_step_result r;
    ck_assert_msg(sl_net_train_step(net, x, sl_shape_nchw(2, 3, 6, 6), labels, &r) == SL_OK, "%s",
                  sl_last_error());
    ck_assert(r.loss > 0.0f);
}

START_TEST(test_schedule_texts)
{
    sl_schedule s;
    ck_assert(sl_schedule_parse("none", &s) == SL_OK && s.kind == SL_SCHEDULE_KIND_NONE);
    ck_assert(sl_schedule_parse("sqrt", &s) == SL_OK && s.kind == SL_SCHEDULE_KIND_SQRT);
    ck_assert(sl_schedule_parse("segments:7", &s) == SL_OK);
    ck_assert(s.kind == SL_SCHEDULE_KIND_SEGMENTS && s.segments == 7);
    ck_assert(sl_schedule_parse("budget:1.5GiB", &s) == SL_OK);
    ck_assert(s.kind == SL_SCHEDULE_KIND_BUDGET && s.budget_bytes == 3ull << 29);
    ck_assert(sl_schedule_parse("ops:800M", &s) == SL_OK);
    ck_assert(s.kind == SL_SCHEDULE_KIND_BUDGET_OPS && s.budget_bytes == 800ull << 20);
    ck_assert(sl_schedule_parse("budget:4096", &s) == SL_OK && s.budget_bytes == 4096);
    static const char *const bad[] = {"", "bogus", "segments:0", "segments:", "segments:3x",
                                      "segments:1000001", "budget:", "budget:-3M", "budget:12XB",
                                      "ops:0", "budget:nan", "budget:1e30"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sl_schedule before = SL_SCHEDULE_SEGMENTS(3), got = before;
        th_assert_error(sl_schedule_parse(bad[i], &got), SL_ERR_INVALID_ARG, "is not a schedule");
        ck_assert_msg(memcmp(&got, &before, sizeof got) == 0, "'%s' changed the output", bad[i]);
    }
    th_assert_error(sl_schedule_parse(NULL, &s), SL_ERR_INVALID_ARG, "NULL");
}
END_TEST

START_TEST(test_null_handles)
{
    th_assert_error(sl_sequential(NULL, 3, NULL), SL_ERR_INVALID_ARG, "out is NULL");
    sl_net *net = NULL;
    th_assert_error(sl_sequential(NULL, 3, &net), SL_ERR_INVALID_ARG, "context is NULL");
    ck_assert_ptr_null(net);
    th_assert_error(sl_net_add(NULL, "x", sl_relu()), SL_ERR_INVALID_ARG, "network is NULL");
    th_assert_error(sl_net_predict(NULL, NULL, sl_shape_nchw(1, 1, 1, 1), NULL), SL_ERR_INVALID_ARG,
                 "NULL");
    th_assert_error(sl_context_create(NULL, NULL), SL_ERR_INVALID_ARG, "out is NULL");
    sl_context_options bad = sl_context_defaults();
    bad.gpu = -1; /* a device ordinal is checked whatever the device */
    sl_context *ctx = NULL;
    th_assert_error(sl_context_create(&bad, &ctx), SL_ERR_INVALID_ARG, "gpu is -1");
    ck_assert_ptr_null(ctx);
    th_assert_error(sl_net_set_batchnorm_frozen(NULL, 1, NULL), SL_ERR_INVALID_ARG,
                    "network is NULL");
    sl_net_free(NULL);
    sl_context_free(NULL);
    sl_layer_free(NULL);
    sl_dataset_free(NULL);
}
END_TEST

START_TEST(test_zero_batch_and_wrong_input)
{
    sl_context *ctx = th_context(1);
    sl_net *net = small_net(ctx);
    float x[3 * 6 * 6] = {0};
    float logits[3];
    th_assert_error(sl_net_predict(net, x, sl_shape_nchw(0, 3, 6, 6), logits), SL_ERR_SHAPE, "batch");
    th_assert_error(sl_net_predict(net, x, sl_shape_nchw(1, 4, 6, 6), logits), SL_ERR_SHAPE,
                 "4 channels");
    assert_usable(net);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_shape_a_layer_cannot_take)
{
    sl_context *ctx = th_context(1);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    ck_assert(sl_net_add(net, "conv", sl_conv2d(3, 4, 5, 1, 0)) == SL_OK);
    ck_assert(sl_net_add(net, "flatten", sl_flatten()) == SL_OK);
    ck_assert(sl_net_add(net, "fc", sl_linear(16, 2, 1)) == SL_OK);
    float x[3 * 3 * 3] = {0}, logits[2];
    /* 3x3 input, 5x5 kernel */
    th_assert_error(sl_net_predict(net, x, sl_shape_nchw(1, 3, 3, 3), logits), SL_ERR_SHAPE,
                 "smaller than its 5x5 kernel");
    /* 6x6 input gives 4 x 2 x 2 = 16 features: fine; 7x7 gives 36 */
    float y[3 * 7 * 7] = {0};
    th_assert_error(sl_net_predict(net, y, sl_shape_nchw(1, 3, 7, 7), logits), SL_ERR_SHAPE,
                 "expects 16 input features but receives 36");
    float z[3 * 6 * 6] = {0};
    ck_assert_msg(sl_net_predict(net, z, sl_shape_nchw(1, 3, 6, 6), logits) == SL_OK, "%s",
                  sl_last_error());
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_mismatched_channels_on_append)
{
    sl_context *ctx = th_context(1);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    th_assert_error(sl_net_add(net, "conv", sl_conv2d(4, 8, 3, 1, 1)), SL_ERR_SHAPE,
                 "expects 4 input channels but receives 3");
    ck_assert_int_eq(sl_net_layer_count(net), 0);
    ck_assert(sl_net_add(net, "conv", sl_conv2d(3, 8, 3, 1, 1)) == SL_OK);
    th_assert_error(sl_net_add(net, "bn", sl_batchnorm2d(4)), SL_ERR_SHAPE, "expects 4 input channels");
    th_assert_error(sl_net_add(net, "block", sl_basic_block(16, 16, 1)), SL_ERR_SHAPE, "16");
    th_assert_error(sl_net_add(net, "conv", sl_relu()), SL_ERR_INVALID_ARG, "already exists");
    th_assert_error(sl_net_add(net, "fc_bad", sl_linear(12, 3, 1)), SL_ERR_SHAPE,
                 "expects 12 input features, which 8 input channels cannot give");
    ck_assert_int_eq(sl_net_layer_count(net), 1);
    ck_assert(sl_net_add(net, "relu", sl_relu()) == SL_OK);
    ck_assert(sl_net_add(net, "pool", sl_global_avgpool()) == SL_OK);
    ck_assert(sl_net_add(net, "fc", sl_linear(8, 3, 1)) == SL_OK);
    assert_usable(net);
    th_assert_error(sl_net_add(net, "late", sl_relu()), SL_ERR_STATE, "before the first run");
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_invalid_layer_options)
{
    ck_assert_ptr_null(sl_conv2d(3, 4, 0, 1, 0));
    ck_assert_msg(strstr(sl_last_error(), "sl_conv2d") != NULL, "%s", sl_last_error());
    sl_conv2d_options o = {4, 6, 3, 3, 1, 1, 1, 1, 1, 1, 4, 0};
    ck_assert_ptr_null(sl_conv2d_with(&o));
    ck_assert_msg(strstr(sl_last_error(), "groups 4 must divide") != NULL, "%s", sl_last_error());
    ck_assert_ptr_null(sl_dropout(1.0f));
    ck_assert_ptr_null(sl_batchnorm2d(0));
    ck_assert_ptr_null(sl_maxpool2d(2, 0, 0));
    ck_assert_ptr_null(sl_linear(0, 3, 1));
    ck_assert_ptr_null(sl_inception(4, 0, 1, 1, 1, 1, 1));
    /* The variants taking an options struct: NULL options, and the plain
     * form's checks. */
    ck_assert_ptr_null(sl_conv2d_with(NULL));
    ck_assert_msg(strstr(sl_last_error(), "sl_conv2d_with: options are NULL"), "%s", sl_last_error());
    ck_assert_ptr_null(sl_batchnorm2d_with(NULL));
    ck_assert_msg(strstr(sl_last_error(), "sl_batchnorm2d_with: options are NULL"), "%s",
                  sl_last_error());
    ck_assert_ptr_null(sl_batchnorm2d_with(&(sl_batchnorm2d_options){4, 1.5f, 1e-5f}));
    ck_assert_msg(strstr(sl_last_error(), "momentum 1.5 in [0, 1]"), "%s", sl_last_error());
    ck_assert_ptr_null(sl_maxpool2d_with(NULL));
    ck_assert_msg(strstr(sl_last_error(), "sl_maxpool2d_with: options are NULL"), "%s",
                  sl_last_error());
    ck_assert_ptr_null(sl_maxpool2d_with(&(sl_maxpool2d_options){3, 2, 2, 1}));
    ck_assert_msg(strstr(sl_last_error(), "padding 2 in [0, kernel/2]"), "%s", sl_last_error());
    /* The constructor's message survives into sl_net_add's. */
    sl_context *ctx = th_context(1);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    th_assert_error(sl_net_add(net, "d", sl_dropout(-0.5f)), SL_ERR_INVALID_ARG,
                 "constructor failed: sl_dropout: probability -0.5");
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_labels_and_state)
{
    sl_context *ctx = th_context(1);
    sl_net *net = small_net(ctx);
    float x[2 * 3 * 6 * 6] = {0};
    int bad[2] = {0, 3};
    sl_shape s = sl_shape_nchw(2, 3, 6, 6);
    th_assert_error(sl_net_update(net), SL_ERR_STATE, "no optimizer");
    th_assert_error(sl_net_train_step(net, x, s, bad, NULL), SL_ERR_STATE, "no optimizer");
    th_assert_error(sl_net_compute_gradients(net, x, s, bad, NULL), SL_ERR_INVALID_ARG,
                 "label 3 of sample 1 is outside [0, 3)");
    th_assert_error(sl_net_compute_gradients(net, x, s, NULL, NULL), SL_ERR_INVALID_ARG,
                 "labels is NULL");
    sl_optimizer_options o = sl_optimizer_sgd(-1.0f, 0.0f, 0.0f, 0);
    th_assert_error(sl_net_set_optimizer(net, &o), SL_ERR_INVALID_ARG, "lr -1");
    o = sl_optimizer_adam(0.1f, 1.5f, 0.9f, 1e-8f, 0.0f);
    th_assert_error(sl_net_set_optimizer(net, &o), SL_ERR_INVALID_ARG, "betas");
    sl_param_info pi;
    th_assert_error(sl_net_find_param(net, "conv.nothing", &pi), SL_ERR_NOT_FOUND, "conv.nothing");
    th_assert_error(sl_net_param(net, 99, &pi), SL_ERR_INVALID_ARG, "out of range");
    assert_usable(net);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_models_and_dataset_arguments)
{
    sl_context *ctx = th_context(1);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    th_assert_error(sl_model_build(net, "resnet9000", 10, 32), SL_ERR_NOT_FOUND, "resnet20");
    th_assert_error(sl_model_build(net, "resnet20", 0, 32), SL_ERR_INVALID_ARG, "");
    ck_assert_int_eq(sl_net_layer_count(net), 0);
    ck_assert_msg(sl_model_build(net, "resnet20", 10, 32) == SL_OK, "%s", sl_last_error());
    sl_net_free(net);
    sl_dataset *ds = NULL;
    th_assert_error(sl_dataset_synthetic(1, 3, 8, 8, 0, &ds), SL_ERR_INVALID_ARG, "");
    ck_assert(sl_dataset_synthetic(4, 3, 8, 8, 0, &ds) == SL_OK);
    float x[3 * 8 * 8];
    int y;
    th_assert_error(sl_dataset_batch(ds, SL_SPLIT_TRAIN, -1, 1, x, &y), SL_ERR_INVALID_ARG, "");
    th_assert_error(sl_dataset_batch(ds, SL_SPLIT_TRAIN, 0, 0, x, &y), SL_ERR_INVALID_ARG, "");
    sl_dataset_free(ds);
    sl_context_free(ctx);
}
END_TEST

/* Bytes from a file are quoted in messages escaped: printable ASCII and
 * valid UTF-8 kept, controls (C1 and DEL too) as \u00XX, a backslash
 * doubled, anything not UTF-8 (overlong forms, surrogates, truncated
 * sequences, 0xFF) as \xHH; cut with "..." to fit. */
START_TEST(test_messages_escape_the_file_bytes_they_quote)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain.name", "plain.name"},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
        {"a\x01" "b\x7f", "a\\u0001b\\u007f"},
        {"\xc2\x85", "\\u0085"},
        {"back\\slash", "back\\\\slash"},
        {"\xff\xfe", "\\xff\\xfe"},
        {"\xc0\xa1", "\\xc0\\xa1"},         /* overlong "!" */
        {"\xed\xa0\x80", "\\xed\\xa0\\x80"}, /* a surrogate */
        {"x\xe2\x82", "x\\xe2\\x82"},        /* truncated */
    };
    char buf[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_printable(buf, sizeof buf, cases[i].in, strlen(cases[i].in));
        ck_assert_msg(strcmp(buf, cases[i].out) == 0, "case %zu: '%s'", i, buf);
    }
    sl_printable(buf, sizeof buf, "a\0b", 3);
    ck_assert_str_eq(buf, "a\\u0000b");
    sl_printable(buf, 12, "0123456789abcdef", 16);
    ck_assert_str_eq(buf, "01234567...");
}
END_TEST

static const char *write_config(char *dir, const char *text, size_t n)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    ck_assert(f && fwrite(text, 1, n, f) == n && fclose(f) == 0);
    return path;
}

/* config.json is checked for UTF-8 like any JSON the library reads: an
 * overlong "2" in "gpt2" used to read as "gpt2", and a raw 0xFF key was
 * accepted. A FIFO in its place is refused without waiting for a writer. */
START_TEST(test_config_json_must_be_utf8_and_a_regular_file)
{
    char dir[] = "/tmp/sl_cfg_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    static const char *const texts[] = {
        "{\"model_type\": \"gpt\xc0\xb2\", \"n_layer\": 3, \"n_embd\": 96, \"n_head\": 6, "
        "\"vocab_size\": 1000, \"n_positions\": 128}",
        "{\"model_type\": \"gpt2\", \"\xff\": 1, \"n_layer\": 3, \"n_embd\": 96, \"n_head\": 6, "
        "\"vocab_size\": 1000, \"n_positions\": 128}",
    };
    sl_gpt2_config c;
    for (size_t i = 0; i < 2; i++) {
        const char *path = write_config(dir, texts[i], strlen(texts[i]));
        th_assert_error(sl_gpt2_read_config(path, &c), SL_ERR_FORMAT, "invalid UTF-8");
        ck_assert_ptr_nonnull(strstr(sl_last_error(), path));
    }
    const char *path = write_config(dir, "", 0);
    ck_assert(unlink(path) == 0 && mkfifo(path, 0600) == 0);
    alarm(20); /* a hang fails the test instead of stalling the suite */
    th_assert_error(sl_gpt2_read_config(path, &c), SL_ERR_IO, "FIFO");
    alarm(0);
    ck_assert(unlink(path) == 0 && rmdir(dir) == 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, test_schedule_texts);
    tcase_add_test(tc, test_null_handles);
    tcase_add_test(tc, test_zero_batch_and_wrong_input);
    tcase_add_test(tc, test_shape_a_layer_cannot_take);
    tcase_add_test(tc, test_mismatched_channels_on_append);
    tcase_add_test(tc, test_invalid_layer_options);
    tcase_add_test(tc, test_labels_and_state);
    tcase_add_test(tc, test_models_and_dataset_arguments);
    tcase_add_test(tc, test_messages_escape_the_file_bytes_they_quote);
    tcase_add_test(tc, test_config_json_must_be_utf8_and_a_regular_file);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
