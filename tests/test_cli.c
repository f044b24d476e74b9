/*
 * test_cli.c — the `sublinear` command end to end: every subcommand runs on
 * a small model with exit status 0 and output that parses (JSON where
 * asked); every bad argument exits with 2 and a usage message; a run
 * resumed from a snapshot saves the model of a run that never stopped.
 * The dataset files are tested in test_cli_data.c.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "harness.h"

#ifndef SL_CLI_PATH
#error "SL_CLI_PATH must name the sublinear executable"
#endif

/* Small and quick: ResNet-20 at batch 4 for 3 steps on 2 threads. */
#define TINY_TRAIN "train --model resnet20 --batch 4 --steps 3 --eval 8 --threads 2"

static cr_result cli(const char *fmt, const char *arg)
{
    return cr_run(SL_CLI_PATH, fmt, arg);
}

START_TEST(test_cli_help_of_every_subcommand_exits_0)
{
    /* Every entry of the command table, version included. */
    static const char *const cmds[] = {"train", "plan",     "dot",    "memplot",
                                       "bench", "tokenize", "sample", "version"};
    cr_result r = cli("%s", "--help");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: sublinear COMMAND"));
    ck_assert_ptr_nonnull(strstr(r.out, "resnet152"));
    cr_free(&r);
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        char want[64];
        snprintf(want, sizeof want, "usage: sublinear %s", cmds[i]);
        r = cli("%s --help", cmds[i]);
        ck_assert_msg(r.status == 0, "%s --help: status %d", cmds[i], r.status);
        ck_assert_msg(strstr(r.out, want), "%s --help printed:\n%s", cmds[i], r.out);
        cr_free(&r);
        r = cli("help %s", cmds[i]);
        ck_assert_int_eq(r.status, 0);
        ck_assert_ptr_nonnull(strstr(r.out, want));
        cr_free(&r);
    }
    r = cli("%s", "bench optnet --help");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: sublinear bench optnet"));
    cr_free(&r);
    r = cli("%s", "bench conv --help");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "bench_conv"));
    cr_free(&r);
    r = cli("%s", "version");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "sublinear 0."));
    cr_free(&r);
}
END_TEST

START_TEST(test_cli_bad_arguments_exit_2_with_usage)
{
    static const char *const bad[] = {
        "",
        "frobnicate",
        "help frobnicate",
        "train --steps",
        "train --steps 0",
        "train --steps abc",
        "train --steps 3x",
        "train --steps 99999999999999999999",
        "train --batch -1",
        "train --batch 100000000",
        "train --res 4",
        "train --lr abc",
        "train --lr -1",
        "train --lr nan",
        "train --seed -5",
        "train --schedule bogus",
        "train --schedule segments:0",
        "train --schedule budget:",
        "train --schedule budget:12XB",
        "train --schedule budget:-3M",
        "train --model nosuchnet",
        "train --optimizer none",
        "train --dataset imagenet",
        "train --dataset mnist",
        "train --data /tmp",
        "train --dataset mnist --data /tmp --res 32",
        "train --dataset cifar10 --data /tmp --classes 5",
        "train --snapshot-every 5",
        "train --save-model ''",
        "train --json=1",
        "train --steps=",
        "train --mode infer",
        "train --device gpu",
        "train --gpu -1",
        "train --gpu x",
        "train --tf32 1",
        "train --bogus",
        "train stray",
        "train --optimizer adamx",
        "train --clip 0",
        "train --clip -1",
        "train --warmup -1",
        "train --lr-min 0.1",
        "train --warmup 2 --lr-min -1",
        "train --accum 0",
        "plan",
        "plan --model resnet20 --steps 3",
        "plan --model resnet20 --mode eval",
        "plan --model resnet20 --optimizer rmsprop",
        "plan --model resnet20 --schedules none",
        "dot --model resnet20",
        "dot --model resnet20 -o",
        "memplot --model resnet20",
        "memplot --model resnet20 -o x.svg --schedules none,bogus",
        "memplot --model resnet20 -o x.svg --schedules none,sqrt,none,sqrt,none,sqrt,none,sqrt,none",
        "memplot --model resnet20 -o x.svg --schedules ,",
        "memplot --model resnet20 -o x.svg --schedule sqrt",
        "bench",
        "bench nosuch",
        "bench optnet --bogus",
        "bench list --bogus",
        "version --bogus",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_result r = cli("%s", bad[i]);
        ck_assert_msg(r.status == 2, "'sublinear %s': status %d (signal %d), stderr:\n%s", bad[i],
                      r.status, r.signal, r.err);
        ck_assert_msg(strstr(r.err, "usage: sublinear"), "'sublinear %s': no usage in:\n%s",
                      bad[i], r.err);
        ck_assert_msg(strncmp(r.err, "usage:", 6) == 0 || strncmp(r.err, "sublinear", 9) == 0,
                      "'sublinear %s': no message before the usage:\n%s", bad[i], r.err);
        ck_assert_msg(r.out[0] == '\0', "'sublinear %s' wrote to stdout:\n%s", bad[i], r.out);
        cr_free(&r);
    }
}
END_TEST

/* The fixed part of ResNet-152 at batch 16 (SGD with momentum) under the
 * least-memory schedule: the update in backward, and per rank of 2 under
 * ZeRO-1 and ZeRO-2 (issue 23's figures). */
static double least_peak_mib(const char *extra)
{
    cr_result r = cli("plan --model resnet152 --batch 16 --res 224 --schedule budget:1 %s", extra);
    ck_assert_int_eq(r.status, 1);
    const char *at = strstr(r.err, "the smallest planned peak is ");
    ck_assert_msg(at != NULL, "%s", r.err);
    double bytes = strtod(at + strlen("the smallest planned peak is "), NULL);
    cr_free(&r);
    return bytes / 1048576.0;
}

START_TEST(test_cli_plan_fixed_part_per_rank_and_update_in_backward)
{
    double plain = least_peak_mib(""), uib = least_peak_mib("--update-in-backward");
    double z1 = least_peak_mib("--ranks 2 --shard 1"), z2 = least_peak_mib("--ranks 2 --shard 2");
    double z2u = least_peak_mib("--ranks 2 --shard 2 --update-in-backward");
    printf("ResNet-152 b16 least peak: %.1f MiB, update in backward %.1f, per rank of 2: ZeRO-1 "
           "%.1f, ZeRO-2 %.1f, ZeRO-2 + update in backward %.1f\n", plain, uib, z1, z2, z2u);
    ck_assert(uib <= 760.0 && uib < plain - 200.0);
    ck_assert(z1 < plain - 100.0);
    ck_assert(z2 <= 740.0 && z2 < z1);
    ck_assert(z2u <= 640.0 && z2u < z2 && z2u < uib);
    /* The report by kind, as JSON */
    cr_result r = cli("%s", "plan --model resnet152 --batch 16 --res 224 --schedule sqrt --ranks 2 "
                            "--shard 2 --update-in-backward --json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    ck_assert(cr_num(j, "ranks") == 2 && cr_num(j, "shard") == 2);
    ck_assert(cr_num(j, "planned_bytes.fixed") ==
              cr_num(j, "planned_bytes.params") + cr_num(j, "planned_bytes.optimizer"));
    ck_assert(cr_num(j, "planned_bytes.param_grads") > 0);
    cJSON_Delete(j);
    cr_free(&r);
    r = cli("%s", "plan --model resnet20 --shard 2");
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--ranks"));
    cr_free(&r);
    r = cli("%s", "plan --model resnet20 --ranks 2 --shard 1 --update-in-backward");
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "shard 2"));
    cr_free(&r);
}
END_TEST

START_TEST(test_cli_plan_json_resnet152_sqrt_below_keep_everything)
{
    cr_result r = cli("%s", "plan --model resnet152 --batch 16 --res 224 --schedule sqrt --json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *sqrt_plan = cr_json(&r);
    cr_free(&r);
    r = cli("%s", "plan --model resnet152 --batch 16 --res 224 --schedule none --json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *none_plan = cr_json(&r);
    cr_free(&r);
    double arena_sqrt = cr_num(sqrt_plan, "planned_bytes.arena");
    double arena_none = cr_num(none_plan, "planned_bytes.arena");
    ck_assert(arena_sqrt > 0 && arena_sqrt < 0.5 * arena_none);
    ck_assert(cr_num(sqrt_plan, "recompute_fraction") > 0);
    ck_assert(cr_num(none_plan, "recompute_fraction") == 0);
    ck_assert(cr_num(sqrt_plan, "planned_bytes.params") == cr_num(none_plan, "planned_bytes.params"));
    ck_assert(cr_num(sqrt_plan, "planned_bytes.total") >= arena_sqrt);
    cJSON_Delete(sqrt_plan);
    cJSON_Delete(none_plan);

    r = cli("%s", "plan --model resnet20 --batch 8 --res 32 --classes 10 --mode infer --json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *infer = cr_json(&r);
    ck_assert(cr_num(infer, "planned_bytes.param_grads") == 0);
    cJSON_Delete(infer);
    cr_free(&r);

    r = cli("%s", "plan --model resnet20 --batch 8 --res 32 --classes 10 --no-reuse");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "total"));
    ck_assert_ptr_nonnull(strstr(r.out, "of one plain step's FLOPs"));
    cr_free(&r);
}
END_TEST

/* plan --explain: one row per top-level unit with its costs, what it holds
 * under each keep, and what the schedule does with it. */
START_TEST(test_cli_plan_explain_lists_every_unit)
{
    cr_result r = cli("%s", "plan --model resnet20 --batch 8 --res 32 --classes 10 "
                            "--schedule ops:11MiB --explain --json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *plan = cr_json(&r);
    cr_free(&r);
    const cJSON *units = cJSON_GetObjectItemCaseSensitive(plan, "units");
    ck_assert(cJSON_IsArray(units));
    ck_assert_int_eq(cJSON_GetArraySize(units), 15); /* conv1 bn1 relu, 9 blocks, pool flatten fc */
    int conv = 0, keeps_less = 0;
    const cJSON *u;
    cJSON_ArrayForEach(u, units)
    {
        const char *action = cJSON_GetObjectItemCaseSensitive(u, "action")->valuestring;
        ck_assert(strcmp(action, "keep all") == 0 || strcmp(action, "keep conv") == 0 ||
                  strcmp(action, "checkpoint") == 0 || strcmp(action, "recompute") == 0);
        conv += strcmp(action, "keep conv") == 0;
        ck_assert(cr_num(u, "forwards") >= 1);
        ck_assert(cr_num(u, "keep_all_bytes") >= cr_num(u, "keep_conv_bytes"));
        keeps_less += cr_num(u, "keep_conv_bytes") < cr_num(u, "keep_all_bytes");
    }
    ck_assert_int_gt(conv, 0);
    ck_assert_int_ge(keeps_less, 9); /* every block drops its BatchNorm/ReLU outputs */
    ck_assert(cr_num(plan, "recompute_time_fraction") > 0);
    cJSON_Delete(plan);
    r = cli("%s", "plan --model resnet20 --batch 8 --res 32 --classes 10 --schedule sqrt --explain");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "layer3.2"));
    ck_assert_ptr_nonnull(strstr(r.out, "keep all"));
    ck_assert_ptr_nonnull(strstr(r.out, "checkpoint"));
    cr_free(&r);
}
END_TEST

START_TEST(test_cli_plan_unmeetable_budget_exits_1_naming_smallest)
{
    cr_result r = cli("%s", "plan --model resnet20 --batch 4 --res 32 --classes 10 --schedule budget:1K");
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "smallest planned peak"), "%s", r.err);
    cr_free(&r);
}
END_TEST

START_TEST(test_cli_dot_writes_a_graph)
{
    char path[512];
    snprintf(path, sizeof path, "%s/net.dot", cr_dir());
    cr_result r = cli("dot --model resnet20 --batch 2 --res 32 --classes 10 -o '%s' --json", path);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    ck_assert_str_eq(cJSON_GetObjectItem(j, "output")->valuestring, path);
    ck_assert(cr_num(j, "layers") > 5);
    cJSON_Delete(j);
    cr_free(&r);
    char *dot = cr_read(path, NULL);
    ck_assert_ptr_nonnull(dot);
    ck_assert_ptr_nonnull(strstr(dot, "digraph"));
    free(dot);
    r = cli("dot --model resnet20 --batch 2 --res 32 --classes 10 -o '%s' --no-reuse --mode infer",
            path);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "wrote"));
    cr_free(&r);
}
END_TEST

START_TEST(test_cli_memplot_draws_each_schedule)
{
    char path[512];
    snprintf(path, sizeof path, "%s/timeline.svg", cr_dir());
    cr_result r = cli("memplot --model resnet20 --batch 4 --res 32 --classes 10 "
                      "--schedules none,sqrt,segments:3 -o '%s' --json", path);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    cJSON *series = cJSON_GetObjectItem(j, "series");
    ck_assert_int_eq(cJSON_GetArraySize(series), 3);
    double none = cr_num(cJSON_GetArrayItem(series, 0), "arena");
    double sqrt_arena = cr_num(cJSON_GetArrayItem(series, 1), "arena");
    ck_assert(sqrt_arena < none);
    ck_assert(cr_num(cJSON_GetArrayItem(series, 1), "steps") >
              cr_num(cJSON_GetArrayItem(series, 0), "steps")); /* re-forward steps */
    cJSON_Delete(j);
    cr_free(&r);
    char *svg = cr_read(path, NULL);
    ck_assert_ptr_nonnull(svg);
    ck_assert_ptr_nonnull(strstr(svg, "<svg"));
    free(svg);
}
END_TEST

START_TEST(test_cli_train_json_reports_loss_accuracy_speed_memory)
{
    cr_result r = cli("%s --json", TINY_TRAIN);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    ck_assert(isfinite(cr_num(j, "loss")) && cr_num(j, "loss") > 0);
    double acc = cr_num(j, "test_accuracy");
    ck_assert(acc >= 0 && acc <= 1);
    ck_assert(cr_num(j, "eval_samples") == 8);
    ck_assert(cr_num(j, "images_per_second") > 0);
    ck_assert(cr_num(j, "steps_run") == 3);
    ck_assert(cr_num(j, "memory.total") > cr_num(j, "memory.arena"));
    ck_assert(cr_num(j, "memory.arena_measured") > 0);
    ck_assert(cr_num(j, "memory.arena_measured") <= cr_num(j, "memory.arena"));
    ck_assert(cr_num(j, "baseline_memory.arena") > cr_num(j, "memory.arena"));
    ck_assert(cr_num(j, "saving.arena_fraction") > 0);
    ck_assert(cr_is_null(j, "saved_model"));
    cJSON_Delete(j);
    cr_free(&r);
}
END_TEST

START_TEST(test_cli_train_prints_progress_and_saving)
{
    cr_result r = cli("%s --log-every 1 --schedule segments:2 --optimizer adam", TINY_TRAIN);
    ck_assert_msg(r.status == 0, "%s", r.err);
    for (int step = 1; step <= 3; step++) {
        char want[32];
        snprintf(want, sizeof want, "step %6d/3", step);
        ck_assert_msg(strstr(r.out, want), "no '%s' in:\n%s", want, r.out);
    }
    ck_assert_ptr_nonnull(strstr(r.out, "img/s"));
    ck_assert_ptr_nonnull(strstr(r.out, "mem "));
    ck_assert_ptr_nonnull(strstr(r.out, "held-out accuracy"));
    const char *s = strstr(r.out, "saved against keep-everything");
    ck_assert_msg(s, "%s", r.out);
    double before, after, less;
    ck_assert_int_eq(sscanf(s, "saved against keep-everything: %lf MiB -> %lf MiB (%lf%% less)",
                            &before, &after, &less), 3);
    ck_assert(after < before && less > 0);
    cr_free(&r);
}
END_TEST

/* AdamW, clipping, warmup + cosine and accumulation together. */
START_TEST(test_cli_train_gpt2_style_options)
{
    cr_result r = cli("%s --optimizer adamw --clip 1 --warmup 1 --lr-min 1e-4 --accum 2 --json",
                      TINY_TRAIN);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    ck_assert(isfinite(cr_num(j, "loss")) && cr_num(j, "loss") > 0);
    ck_assert(cr_num(j, "steps_run") == 3);
    cJSON_Delete(j);
    cr_free(&r);
}
END_TEST

START_TEST(test_cli_train_on_cuda_runs_or_says_why_not)
{
    /* a GPU no machine has: never a run, always a reason */
    cr_result bad = cli("%s --device cuda --gpu 4000 --tf32 --json", TINY_TRAIN);
    ck_assert_msg(bad.status == 1, "status %d, stderr:\n%s", bad.status, bad.err);
    ck_assert_msg(strstr(bad.err, "CUDA"), "%s", bad.err);
    cr_free(&bad);
    cr_result r = cli("%s --device cuda --json", TINY_TRAIN);
    if (r.status == 0) { /* a CUDA build on a machine with a GPU */
        cJSON *j = cr_json(&r);
        ck_assert_str_eq(cJSON_GetObjectItem(j, "device")->valuestring, "cuda");
        ck_assert(isfinite(cr_num(j, "loss")));
        cJSON_Delete(j);
    } else {
        ck_assert_msg(r.status == 1, "status %d, stderr:\n%s", r.status, r.err);
        ck_assert_msg(strstr(r.err, "CUDA"), "%s", r.err);
        ck_assert(r.out[0] == '\0');
    }
    cr_free(&r);
}
END_TEST

static long file_size(const char *path)
{
    size_t n;
    char *data = cr_read(path, &n);
    ck_assert_msg(data, "%s missing", path);
    free(data);
    return (long)n;
}

/* A learning rate that blows the weights up: the run stops (exit 1) at
 * the first step whose loss or weights are not finite, writes no model,
 * and --snapshot keeps the last good step's, which loads again. */
START_TEST(test_cli_diverged_run_stops_and_keeps_the_last_good_snapshot)
{
    char snap[512], model[512];
    snprintf(snap, sizeof snap, "%s/diverged.snap", cr_dir());
    snprintf(model, sizeof model, "%s/diverged.safetensors", cr_dir());
    const char *base = "train --model resnet20 --batch 4 --res 8 --eval 0 --threads 2 --quiet "
                       "--optimizer sgd";
    cr_result r = cr_run(SL_CLI_PATH, "%s --steps 6 --lr 1e10 --snapshot '%s' --snapshot-every 1 "
                         "--save-model '%s'", base, snap, model);
    const char *kept = strstr(r.err, "holds the last snapshot, of step ");
    ck_assert_msg(r.status == 1 && kept && strstr(r.err, "training diverged"), "status %d: %s",
                  r.status, r.err);
    int good = atoi(kept + strlen("holds the last snapshot, of step "));
    ck_assert_msg(good >= 1 && good < 6, "%s", r.err);
    size_t n;
    char *none = cr_read(model, &n);
    ck_assert_msg(!none, "a diverged run saved its model");
    cr_free(&r);
    r = cr_run(SL_CLI_PATH, "%s --steps %d --resume '%s'", base, good, snap);
    ck_assert_msg(r.status == 0 && strstr(r.out, "nothing to train"), "%s", r.err);
    cr_free(&r);
}
END_TEST

/* Mixed precision: a bf16 run resumed from its snapshot saves the model
 * of the bf16 run that never stopped, and that model is not the float
 * run's. */
START_TEST(test_cli_bf16_resumes_exactly)
{
    char f32[512], whole[512], snap[512], resumed[512];
    snprintf(f32, sizeof f32, "%s/f32.safetensors", cr_dir());
    snprintf(whole, sizeof whole, "%s/bf16-whole.safetensors", cr_dir());
    snprintf(snap, sizeof snap, "%s/bf16-snap.safetensors", cr_dir());
    snprintf(resumed, sizeof resumed, "%s/bf16-resumed.safetensors", cr_dir());
    const char *base = "train --model resnet20 --batch 4 --eval 0 --threads 2 --quiet";
    cr_result r = cr_run(SL_CLI_PATH, "%s --steps 3 --save-model '%s'", base, f32);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cr_free(&r);
    r = cr_run(SL_CLI_PATH, "%s --precision bf16 --steps 3 --save-model '%s' --json", base, whole);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    ck_assert_str_eq(cJSON_GetObjectItem(j, "precision")->valuestring, "bf16");
    cJSON_Delete(j);
    cr_free(&r);
    r = cr_run(SL_CLI_PATH, "%s --precision bf16 --steps 1 --snapshot '%s'", base, snap);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cr_free(&r);
    r = cr_run(SL_CLI_PATH, "%s --precision bf16 --steps 3 --resume '%s' --save-model '%s'", base,
               snap, resumed);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cr_free(&r);
    size_t n1, n2, n3;
    char *a = cr_read(whole, &n1), *b = cr_read(resumed, &n2), *c = cr_read(f32, &n3);
    ck_assert(a && b && c);
    ck_assert_msg(n1 == n2 && memcmp(a, b, n1) == 0, "resumed bf16 model differs from uninterrupted");
    ck_assert_msg(n1 == n3 && memcmp(a, c, n1) != 0, "the bf16 run saved the float run's model");
    free(a);
    free(b);
    free(c);
    r = cr_run(SL_CLI_PATH, "%s --precision f16 --steps 1", base);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--precision"));
    cr_free(&r);
}
END_TEST

START_TEST(test_cli_resumed_run_saves_the_model_of_an_uninterrupted_one)
{
    char whole[512], half[512], snap[512], resumed[512];
    snprintf(whole, sizeof whole, "%s/whole.safetensors", cr_dir());
    snprintf(half, sizeof half, "%s/half.safetensors", cr_dir());
    snprintf(snap, sizeof snap, "%s/snap.safetensors", cr_dir());
    snprintf(resumed, sizeof resumed, "%s/resumed.safetensors", cr_dir());
    const char *base = "train --model resnet20 --batch 4 --eval 0 --threads 2 --quiet";
    cr_result r = cr_run(SL_CLI_PATH, "%s --steps 4 --save-model '%s' --json", base, whole);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    double params = cr_num(j, "memory.params");
    ck_assert(cr_is_null(j, "test_accuracy"));
    cJSON_Delete(j);
    cr_free(&r);
    /* Thin: parameters and BN statistics plus a header, nothing else. */
    long bytes = file_size(whole);
    ck_assert_msg(bytes >= params && bytes < params + 64 * 1024, "model %ld bytes, params %.0f",
                  bytes, params);

    r = cr_run(SL_CLI_PATH, "%s --steps 2 --snapshot '%s' --save-model '%s'", base, snap, half);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "saved a snapshot"));
    cr_free(&r);
    r = cr_run(SL_CLI_PATH, "%s --steps 4 --resume '%s' --save-model '%s' --json", base, snap,
               resumed);
    ck_assert_msg(r.status == 0, "%s", r.err);
    j = cr_json(&r);
    ck_assert(cr_num(j, "first_step") == 2 && cr_num(j, "steps_run") == 2);
    cJSON_Delete(j);
    cr_free(&r);

    size_t n1, n2;
    char *a = cr_read(whole, &n1), *b = cr_read(resumed, &n2);
    ck_assert(a && b);
    ck_assert_msg(n1 == n2 && memcmp(a, b, n1) == 0, "resumed model differs from uninterrupted");
    free(b);
    b = cr_read(half, &n2);
    ck_assert(n1 == n2 && memcmp(a, b, n1) != 0); /* and training did change it */
    free(a);
    free(b);

    r = cr_run(SL_CLI_PATH, "%s --steps 4 --resume '%s/missing.safetensors'", base, cr_dir());
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "resuming"));
    cr_free(&r);
}
END_TEST

/* ---- bench ------------------------------------------------------------ */

START_TEST(test_cli_bench_optnet_json_shares_memory)
{
    cr_result r = cli("%s", "bench optnet --json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    static const char *const tables[] = {"inference", "training"};
    static const char *const saved[] = {"outputs_saved", "grad_inputs_saved"};
    for (int t = 0; t < 2; t++) {
        cJSON *rows = cJSON_GetObjectItem(cJSON_GetObjectItem(j, tables[t]), "rows");
        ck_assert_int_eq(cJSON_GetArraySize(rows), 4);
        for (int i = 0; i < 4; i++) {
            cJSON *row = cJSON_GetArrayItem(rows, i);
            ck_assert(cr_num(row, "after.total") < cr_num(row, "before.total"));
            ck_assert(cr_num(row, saved[t]) > 0 && cr_num(row, saved[t]) < 1);
        }
    }
    cJSON_Delete(j);
    cr_free(&r);
    r = cli("%s", "bench optnet");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "| resnet110 |"));
    cr_free(&r);
}
END_TEST

START_TEST(test_cli_bench_lists_and_runs_the_programs)
{
    cr_result r = cli("%s", "bench list --json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    cr_free(&r);
    cJSON *benches = cJSON_GetObjectItem(j, "benches"), *b;
    ck_assert_int_eq(cJSON_GetArraySize(benches), 3);
    cJSON_ArrayForEach(b, benches)
    {
        const char *name = cJSON_GetObjectItem(b, "name")->valuestring;
        if (strcmp(name, "resnet152") != 0 || !cJSON_IsTrue(cJSON_GetObjectItem(b, "available")))
            continue;
        /* The ResNet-152 bench, planning only: its JSON comes through. */
        r = cli("%s", "bench resnet152 --plan-only --batch 2 --res 64 --json");
        ck_assert_msg(r.status == 0, "%s", r.err);
        cJSON *plan = cr_json(&r);
        ck_assert(cr_num(plan, "planned_total") > 0);
        cJSON_Delete(plan);
        cr_free(&r);
    }
    cJSON_Delete(j);
    /* A copy of the command with no bench/ beside it finds no program. */
    char copy[512];
    snprintf(copy, sizeof copy, "%s/lone/sublinear", cr_dir());
    cr_write("lone/.keep", "", 0);
    r = cr_run("/bin/cp", "'%s' '%s'", SL_CLI_PATH, copy);
    ck_assert_int_eq(r.status, 0);
    cr_free(&r);
    r = cr_run("/usr/bin/env", "-u SL_BENCH_DIR '%s' bench conv --threads 1", copy);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "bench_conv not found"), "%s", r.err);
    cr_free(&r);
    r = cr_run(copy, "%s", "bench optnet --json"); /* built in: works anywhere */
    ck_assert_int_eq(r.status, 0);
    cr_free(&r);
}
END_TEST

int main(void)
{
    cr_init();
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_cli_help_of_every_subcommand_exits_0);
    tcase_add_test(tc, test_cli_bad_arguments_exit_2_with_usage);
    tcase_add_test(tc, test_cli_plan_json_resnet152_sqrt_below_keep_everything);
    tcase_add_test(tc, test_cli_plan_fixed_part_per_rank_and_update_in_backward);
    tcase_add_test(tc, test_cli_plan_explain_lists_every_unit);
    tcase_add_test(tc, test_cli_plan_unmeetable_budget_exits_1_naming_smallest);
    tcase_add_test(tc, test_cli_dot_writes_a_graph);
    tcase_add_test(tc, test_cli_memplot_draws_each_schedule);
    tcase_add_test(tc, test_cli_train_json_reports_loss_accuracy_speed_memory);
    tcase_add_test(tc, test_cli_train_prints_progress_and_saving);
    tcase_add_test(tc, test_cli_train_on_cuda_runs_or_says_why_not);
    tcase_add_test(tc, test_cli_resumed_run_saves_the_model_of_an_uninterrupted_one);
    tcase_add_test(tc, test_cli_bf16_resumes_exactly);
    tcase_add_test(tc, test_cli_diverged_run_stops_and_keeps_the_last_good_snapshot);
    tcase_add_test(tc, test_cli_bench_optnet_json_shares_memory);
    tcase_add_test(tc, test_cli_bench_lists_and_runs_the_programs);
    tcase_add_test(tc, test_cli_train_gpt2_style_options);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    cr_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
