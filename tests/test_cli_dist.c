/*
 * test_cli_dist.c — `mpirun -np 2 sublinear train --distributed` end to
 * end (built when MPI is found): one JSON object from rank 0 with the
 * global figures; files written once, by rank 0; a model file that a plain
 * network loads; a 2-rank run resumed from its snapshot saves the model of
 * a 2-rank run that never stopped, bit for bit; and the snapshot resumes
 * on 1 rank as well.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "harness.h"

#if !defined(SL_CLI_PATH) || !defined(SL_MPIEXEC)
#error "SL_CLI_PATH and SL_MPIEXEC must name the sublinear executable and the MPI launcher"
#endif

#define TWO_RANKS "-np 2 --oversubscribe " SL_CLI_PATH
#define TINY "train --distributed --model resnet20 --batch 4 --eval 8 --threads 1 --json"

/* Asserts that two files hold the same bytes. */
static void assert_same_file(const char *x, const char *y, const char *what)
{
    size_t n1, n2;
    char *a = cr_read(x, &n1), *b = cr_read(y, &n2);
    ck_assert(a && b);
    ck_assert_msg(n1 == n2 && memcmp(a, b, n1) == 0, "%s", what);
    free(a);
    free(b);
}

START_TEST(test_cli_dist_two_ranks_print_once_and_resume_exactly)
{
    char whole[512], half[512], snap[512], resumed[512];
    snprintf(whole, sizeof whole, "%s/whole.safetensors", cr_dir());
    snprintf(half, sizeof half, "%s/half.safetensors", cr_dir());
    snprintf(snap, sizeof snap, "%s/snap.safetensors", cr_dir());
    snprintf(resumed, sizeof resumed, "%s/resumed.safetensors", cr_dir());

    cr_result r = cr_run(SL_MPIEXEC, TWO_RANKS " " TINY " --steps 4 --save-model '%s'", whole);
    ck_assert_msg(r.status == 0, "status %d:\n%s\n%s", r.status, r.out, r.err);
    /* Exactly one object: rank 0 alone prints. */
    const char *first = strstr(r.out, "{\"model\"");
    ck_assert_msg(first && !strstr(first + 1, "{\"model\""), "not one report:\n%s", r.out);
    cJSON *j = cr_json(&r);
    ck_assert(cr_num(j, "ranks") == 2);
    ck_assert(cr_num(j, "batch") == 4);
    ck_assert(cr_num(j, "steps_run") == 4);
    ck_assert(cr_num(j, "images_per_second") > 0);
    ck_assert(cr_num(j, "memory.communication") > 0);
    ck_assert(cr_num(j, "memory.total") ==
              cr_num(j, "memory.arena") + cr_num(j, "memory.params") +
                  cr_num(j, "memory.param_grads") + cr_num(j, "memory.optimizer") +
                  cr_num(j, "memory.communication"));
    cJSON_Delete(j);
    cr_free(&r);

    r = cr_run(SL_MPIEXEC, TWO_RANKS " " TINY " --steps 2 --snapshot '%s' --save-model '%s'", snap,
               half);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cr_free(&r);
    r = cr_run(SL_MPIEXEC, TWO_RANKS " " TINY " --steps 4 --resume '%s' --save-model '%s'", snap,
               resumed);
    ck_assert_msg(r.status == 0, "%s", r.err);
    j = cr_json(&r);
    ck_assert(cr_num(j, "first_step") == 2);
    ck_assert(cr_num(j, "steps_run") == 2);
    cJSON_Delete(j);
    cr_free(&r);
    assert_same_file(whole, resumed, "resumed model differs from uninterrupted");

    /* The same snapshot on one process, at the global batch. */
    r = cr_run(SL_CLI_PATH, "train --model resnet20 --batch 8 --eval 8 --threads 1 --json "
               "--steps 3 --resume '%s'", snap);
    ck_assert_msg(r.status == 0, "%s", r.err);
    j = cr_json(&r);
    ck_assert(cr_num(j, "first_step") == 2);
    ck_assert(cr_num(j, "ranks") == 1);
    cJSON_Delete(j);
    cr_free(&r);

    /* A model file as single-process training writes it. */
    sl_context *ctx = th_context(1);
    sl_net *net;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    ck_assert(sl_model_build(net, "resnet20", 10, 32) == SL_OK);
    ck_assert_msg(sl_load_model(net, whole, NULL, NULL) == SL_OK, "%s", sl_last_error());
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_cli_dist_shard_1_trains_as_unsharded)
{
    char whole[512], snap[512], resumed[512];
    snprintf(whole, sizeof whole, "%s/zero_whole.safetensors", cr_dir());
    snprintf(snap, sizeof snap, "%s/zero_snap.safetensors", cr_dir());
    snprintf(resumed, sizeof resumed, "%s/zero_resumed.safetensors", cr_dir());
    cr_result r = cr_run(SL_MPIEXEC, TWO_RANKS " " TINY " --steps 4 --save-model '%s'", whole);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    double whole_optimizer = cr_num(j, "memory.optimizer");
    ck_assert(cr_num(j, "shard") == 0);
    cJSON_Delete(j);
    cr_free(&r);
    /* ZeRO-1: 2 steps, a snapshot, resumed for 2 more: the model of the
     * unsharded run that never stopped, bit for bit. */
    r = cr_run(SL_MPIEXEC, TWO_RANKS " " TINY " --shard 1 --steps 2 --snapshot '%s'", snap);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cr_free(&r);
    r = cr_run(SL_MPIEXEC, TWO_RANKS " " TINY " --shard 1 --steps 4 --resume '%s' --save-model '%s'",
               snap, resumed);
    ck_assert_msg(r.status == 0, "%s", r.err);
    j = cr_json(&r);
    ck_assert(cr_num(j, "shard") == 1);
    ck_assert(cr_num(j, "first_step") == 2);
    /* Rank 0's half of the optimizer state (boundaries on 16 floats). */
    double mine = cr_num(j, "memory.optimizer");
    ck_assert_msg(mine > 0 && mine <= whole_optimizer / 2 + 64 && mine >= whole_optimizer / 2 - 64,
                  "rank 0 holds %g of %g optimizer bytes", mine, whole_optimizer);
    cJSON_Delete(j);
    cr_free(&r);
    assert_same_file(whole, resumed, "sharded model differs from unsharded");
    /* ZeRO-2 updating in backward: the same model again, with no
     * gradient block outside the arena. */
    r = cr_run(SL_MPIEXEC, TWO_RANKS " " TINY " --shard 2 --update-in-backward --steps 4 "
               "--save-model '%s'", resumed);
    ck_assert_msg(r.status == 0, "%s", r.err);
    j = cr_json(&r);
    ck_assert(cr_num(j, "shard") == 2);
    ck_assert(cr_num(j, "memory.fixed") == cr_num(j, "memory.params") + cr_num(j, "memory.optimizer"));
    ck_assert(cr_num(j, "memory.measured_total") == cr_num(j, "memory.total"));
    cJSON_Delete(j);
    cr_free(&r);
    assert_same_file(whole, resumed, "ZeRO-2 model differs from unsharded");
    /* --shard needs --distributed; stages are 0, 1 and 2; the update in
     * backward runs in a communicator with stage 2 only. */
    r = cr_run(SL_CLI_PATH, "train --model resnet20 --steps 1 --shard 1");
    ck_assert_msg(r.status == 2 && strstr(r.err, "--distributed"), "status %d: %s", r.status, r.err);
    cr_free(&r);
    r = cr_run(SL_CLI_PATH, "train --distributed --model resnet20 --steps 1 --shard 3");
    ck_assert_msg(r.status == 2, "status %d: %s", r.status, r.err);
    cr_free(&r);
    r = cr_run(SL_MPIEXEC, TWO_RANKS " " TINY " --shard 1 --update-in-backward --steps 1%s", "");
    ck_assert_msg(r.status != 0 && strstr(r.err, "shard 2"), "status %d: %s", r.status, r.err);
    cr_free(&r);
}
END_TEST

int main(void)
{
    cr_init();
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    setenv("OMP_NUM_THREADS", "1", 1);
    Suite *s = suite_create("cli_dist");
    TCase *tc = tcase_create("mpirun");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_cli_dist_two_ranks_print_once_and_resume_exactly);
    tcase_add_test(tc, test_cli_dist_shard_1_trains_as_unsharded);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    cr_cleanup();
    return failed ? 1 : 0;
}
