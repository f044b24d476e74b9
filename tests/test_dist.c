/*
 * test_dist.c — data-parallel training over MPI (src/dist), run by ctest
 * under `mpirun -np 2` (every test is collective: both ranks run the same
 * tests in the same order, in one process each, CK_FORK=no). Checks:
 * parameters bit-identical across ranks after every step; 2 ranks x batch
 * B equal to one process x batch 2B (frozen BatchNorm and no BatchNorm,
 * keep-everything and sqrt schedules); checkpointed == plain bit for bit
 * on each rank; a rank with a bad batch makes every rank fail at once; a
 * rank that never comes makes the other fail after the timeout; files
 * written by rank 0 only; resuming a snapshot on 2 ranks and on 1; the
 * buckets follow the segments; the memory report's communication line.
 * ZeRO-1 (shard 1): parameters bit-identical to shard 0's after every step
 * for SGD with momentum, Adam, AdamW and clipped AdamW, one parameter split
 * between the ranks, optimizer bytes per rank half of the whole (the
 * slices summing to it); a sharded snapshot is the unsharded run's file,
 * resumes on 1 rank, and a 1-rank snapshot resumes on 2 sharded ranks,
 * both continuing bit for bit; unknown stages refused; a failed step
 * leaves parameters and every rank's state unchanged.
 * ZeRO-2 (shard 2, with and without the update in backward): parameters
 * bit-identical to shard 0's after every step for SGD with momentum, Adam
 * and AdamW, the planned fixed part holding half the gradients (none
 * updating in backward), measured == planned, snapshots the unsharded
 * run's file; clipping, accumulation and the update in backward under
 * shard 1 refused; a failed step changes nothing.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "sublinear/models.h"
#include "dist/dist.h"

enum { B = 4, RES = 8, CLASSES = 5, STEPS = 3 };
enum { MODEL_BN, MODEL_FROZEN_BN, MODEL_NO_BN };

static int world_rank(void)
{
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

#define OK(call) ck_assert_msg((call) == SL_OK, "%s: %s", #call, sl_last_error())

static sl_context *one_thread_context(uint64_t seed)
{
    sl_context_options o = sl_context_defaults();
    o.threads = 1;
    o.seed = seed;
    sl_context *ctx = NULL;
    OK(sl_context_create(&o, &ctx));
    return ctx;
}

/* A small network with 7 (BatchNorm) or 10 (no BatchNorm) top layers, SGD
 * with momentum and weight decay. */
static sl_net *make_net(sl_context *ctx, int model, sl_schedule s)
{
    sl_net *net;
    OK(sl_sublinear(ctx, 3, s, &net));
    if (model == MODEL_NO_BN) {
        OK(sl_net_add(net, "conv1", sl_conv2d(3, 8, 3, 1, 1)));
        OK(sl_net_add(net, "relu1", sl_relu()));
        OK(sl_net_add(net, "conv2", sl_conv2d(8, 8, 3, 1, 1)));
        OK(sl_net_add(net, "relu2", sl_relu()));
        OK(sl_net_add(net, "pool", sl_maxpool2d(2, 2, 0)));
        OK(sl_net_add(net, "conv3", sl_conv2d(8, 16, 3, 1, 1)));
        OK(sl_net_add(net, "relu3", sl_relu()));
        OK(sl_net_add(net, "gap", sl_global_avgpool()));
        OK(sl_net_add(net, "flat", sl_flatten()));
        OK(sl_net_add(net, "fc", sl_linear(16, CLASSES, 1)));
    } else {
        OK(sl_net_add(net, "conv1", sl_conv2d(3, 8, 3, 1, 1)));
        OK(sl_net_add(net, "bn1", sl_batchnorm2d(8)));
        OK(sl_net_add(net, "relu", sl_relu()));
        OK(sl_net_add(net, "layer1", sl_basic_block(8, 16, 2)));
        OK(sl_net_add(net, "gap", sl_global_avgpool()));
        OK(sl_net_add(net, "flat", sl_flatten()));
        OK(sl_net_add(net, "fc", sl_linear(16, CLASSES, 1)));
        if (model == MODEL_FROZEN_BN)
            ck_assert_int_eq(th_freeze_batchnorms(net), 4);
    }
    sl_optimizer_options opt = sl_optimizer_sgd(0.05f, 0.9f, 1e-4f, 0);
    OK(sl_net_set_optimizer(net, &opt));
    return net;
}

static sl_dist_options test_options(double timeout)
{
    sl_dist_options o = sl_dist_defaults();
    o.timeout_seconds = timeout;
    o.bucket_bytes = 2048; /* several buckets inside a segment */
    return o;
}

/* The global batch of a step: 2B images and labels. */
static void global_batch(int step, float *x, int *labels)
{
    th_fill_normal(x, (size_t)2 * B * 3 * RES * RES, 1000 + (uint64_t)step, 1.0f);
    for (int i = 0; i < 2 * B; i++)
        labels[i] = (i * 7 + step) % CLASSES;
}

static const sl_shape rank_shape = {B, 3, RES, RES, SL_LAYOUT_NCHW};
static const sl_shape global_shape = {2 * B, 3, RES, RES, SL_LAYOUT_NCHW};

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* A hash of every tensor (parameters and running statistics). */
static uint64_t net_hash(sl_net *net)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < th_param_count(net); i++) {
        sl_param_info p;
        OK(sl_net_param(net, i, &p));
        float *v = malloc(p.count * sizeof(float));
        ck_assert(v);
        OK(sl_net_param_read(net, i, v));
        h = fnv1a(h, v, p.count * sizeof(float));
        free(v);
    }
    return h;
}

static void assert_same_on_every_rank(uint64_t h, const char *what, int step)
{
    uint64_t all[64];
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ck_assert(size <= 64);
    MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int r = 1; r < size; r++)
        ck_assert_msg(all[r] == all[0], "%s differ between rank 0 and rank %d after step %d", what,
                      r, step);
}

START_TEST(test_dist_parameters_bit_identical_across_ranks_every_step)
{
    /* Different seeds per rank: the join must broadcast rank 0's network. */
    int rank = world_rank();
    sl_context *ctx = one_thread_context(11 + (uint64_t)rank);
    sl_net *net = make_net(ctx, MODEL_BN, SL_SCHEDULE_SQRT);
    sl_dist *d;
    sl_dist_options o = test_options(60);
    OK(sl_dist_join(net, &o, &d));
    ck_assert_int_eq(sl_dist_size(d), 2);
    ck_assert_int_eq(sl_dist_rank(d), rank);
    assert_same_on_every_rank(net_hash(net), "parameters", 0);
    float *x = malloc(sizeof(float) * 2 * B * 3 * RES * RES);
    int labels[2 * B];
    uint64_t before = net_hash(net);
    for (int step = 1; step <= STEPS; step++) {
        global_batch(step, x, labels);
        sl_step_result res;
        /* Each rank its own half: different gradients before averaging. */
        OK(sl_net_train_step(net, x + (size_t)rank * B * 3 * RES * RES, rank_shape,
                             labels + rank * B, &res));
        assert_same_on_every_rank(net_hash(net), "parameters", step);
    }
    ck_assert(net_hash(net) != before);
    sl_dist_stats st;
    OK(sl_dist_get_stats(d, &st));
    ck_assert_int_eq(st.steps, STEPS);
    ck_assert_msg(st.buckets >= 2 * STEPS, "%lld buckets", (long long)st.buckets);
    free(x);
    sl_dist_free(d);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* max |a - b| / max |b| over one tensor */
static double relative_error(const float *a, const float *b, size_t n)
{
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - (double)b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    return scale > 0 ? diff / scale : diff;
}

/* Worst relative error over every tensor (grads: trainable gradients). */
static double worst_error(sl_net *a, sl_net *b, int grads, char *which, size_t n)
{
    double worst = 0;
    for (int i = 0; i < th_param_count(a); i++) {
        sl_param_info p;
        OK(sl_net_param(a, i, &p));
        if (grads && !p.trainable)
            continue;
        float *va = malloc(p.count * sizeof(float)), *vb = malloc(p.count * sizeof(float));
        ck_assert(va && vb);
        OK(grads ? sl_net_param_read_grad(a, i, va) : sl_net_param_read(a, i, va));
        OK(grads ? sl_net_param_read_grad(b, i, vb) : sl_net_param_read(b, i, vb));
        double e = relative_error(va, vb, p.count);
        if (e >= worst) {
            worst = e;
            snprintf(which, n, "%s", p.name);
        }
        free(va);
        free(vb);
    }
    return worst;
}

static void check_equals_double_batch(int model, sl_schedule s)
{
    int rank = world_rank();
    sl_context *ctx = one_thread_context(5);
    sl_net *net = make_net(ctx, model, s), *single = make_net(ctx, model, s);
    sl_dist *d;
    sl_dist_options o = test_options(60);
    OK(sl_dist_join(net, &o, &d));
    float *x = malloc(sizeof(float) * 2 * B * 3 * RES * RES);
    int labels[2 * B];
    char which[160];
    for (int step = 1; step <= STEPS; step++) {
        global_batch(step, x, labels);
        OK(sl_net_compute_gradients(net, x + (size_t)rank * B * 3 * RES * RES, rank_shape,
                                    labels + rank * B, NULL));
        OK(sl_net_compute_gradients(single, x, global_shape, labels, NULL));
        double e = worst_error(net, single, 1, which, sizeof which);
        ck_assert_msg(e <= 1e-5, "model %d schedule %d step %d: gradient of %s off by %g relative",
                      model, (int)s.kind, step, which, e);
        OK(sl_net_update(net));
        OK(sl_net_update(single));
        e = worst_error(net, single, 0, which, sizeof which);
        ck_assert_msg(e <= 1e-5, "model %d schedule %d step %d: %s off by %g relative", model,
                      (int)s.kind, step, which, e);
    }
    free(x);
    sl_dist_free(d);
    sl_net_free(net);
    sl_net_free(single);
    sl_context_free(ctx);
}

START_TEST(test_dist_two_ranks_equal_one_process_double_batch)
{
    const int models[2] = {MODEL_FROZEN_BN, MODEL_NO_BN};
    const sl_schedule schedules[2] = {SL_SCHEDULE_NONE, SL_SCHEDULE_SQRT};
    for (int m = 0; m < 2; m++)
        for (int s = 0; s < 2; s++)
            check_equals_double_batch(models[m], schedules[s]);
}
END_TEST

/* Bitwise equality of every tensor and gradient of two networks. */
static void assert_bitwise_equal(sl_net *a, sl_net *b, int step)
{
    char which[160];
    ck_assert_msg(worst_error(a, b, 0, which, sizeof which) == 0, "step %d: %s differs", step,
                  which);
    ck_assert_msg(worst_error(a, b, 1, which, sizeof which) == 0, "step %d: gradient of %s differs",
                  step, which);
}

START_TEST(test_dist_checkpointed_equals_plain_bitwise_on_each_rank)
{
    int rank = world_rank();
    sl_context *ctx = one_thread_context(7);
    sl_net *plain = make_net(ctx, MODEL_BN, SL_SCHEDULE_NONE);
    sl_net *ckpt = make_net(ctx, MODEL_BN, SL_SCHEDULE_SQRT);
    sl_dist *dp, *dc;
    sl_dist_options o = test_options(60);
    OK(sl_dist_join(plain, &o, &dp));
    OK(sl_dist_join(ckpt, &o, &dc));
    float *x = malloc(sizeof(float) * 2 * B * 3 * RES * RES);
    int labels[2 * B];
    for (int step = 1; step <= STEPS; step++) {
        global_batch(step, x, labels);
        const float *mine = x + (size_t)rank * B * 3 * RES * RES;
        OK(sl_net_train_step(plain, mine, rank_shape, labels + rank * B, NULL));
        OK(sl_net_train_step(ckpt, mine, rank_shape, labels + rank * B, NULL));
        assert_bitwise_equal(plain, ckpt, step);
    }
    free(x);
    sl_dist_free(dp);
    sl_dist_free(dc);
    sl_net_free(plain);
    sl_net_free(ckpt);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_dist_bad_batch_on_one_rank_fails_every_rank)
{
    int rank = world_rank();
    sl_context *ctx = one_thread_context(3);
    sl_net *net = make_net(ctx, MODEL_BN, SL_SCHEDULE_SQRT);
    sl_dist *d;
    const double timeout = 20;
    sl_dist_options o = test_options(timeout);
    OK(sl_dist_join(net, &o, &d));
    float *x = malloc(sizeof(float) * 2 * B * 3 * RES * RES);
    int labels[2 * B];
    global_batch(1, x, labels);
    uint64_t before = net_hash(net);
    /* Rank 1's batch has 4 channels where the network takes 3. */
    sl_shape shape = rank_shape;
    if (rank == 1)
        shape.c = 4;
    double t0 = MPI_Wtime();
    sl_status st = sl_net_train_step(net, x, shape, labels, NULL);
    double took = MPI_Wtime() - t0;
    ck_assert_int_eq(st, rank == 1 ? SL_ERR_SHAPE : SL_ERR_STATE);
    if (rank == 0)
        ck_assert_msg(strstr(sl_last_error(), "rank 1 of 2 failed") != NULL, "%s", sl_last_error());
    ck_assert_msg(took < timeout, "rank %d took %.1f s to fail", rank, took);
    ck_assert(net_hash(net) == before);
    /* Both ranks stay usable: the next good step runs everywhere. */
    OK(sl_net_train_step(net, x + (size_t)rank * B * 3 * RES * RES, rank_shape, labels + rank * B,
                         NULL));
    assert_same_on_every_rank(net_hash(net), "parameters", 1);
    free(x);
    sl_dist_free(d);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_dist_files_written_by_rank0_and_resumed_on_two_and_one_ranks)
{
    int rank = world_rank();
    char model_path[] = "/tmp/sl_dist_model_XXXXXX", snap_path[] = "/tmp/sl_dist_snap_XXXXXX";
    if (rank == 0) {
        int f1 = mkstemp(model_path), f2 = mkstemp(snap_path);
        ck_assert(f1 >= 0 && f2 >= 0);
        close(f1);
        close(f2);
    }
    MPI_Bcast(model_path, sizeof model_path, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Bcast(snap_path, sizeof snap_path, MPI_CHAR, 0, MPI_COMM_WORLD);
    sl_context *ctx = one_thread_context(9);
    sl_net *net = make_net(ctx, MODEL_FROZEN_BN, SL_SCHEDULE_SQRT);
    sl_dist *d;
    sl_dist_options o = test_options(60);
    OK(sl_dist_join(net, &o, &d));
    float *x = malloc(sizeof(float) * 2 * B * 3 * RES * RES);
    int labels[2 * B];
    const size_t half = (size_t)B * 3 * RES * RES;
    for (int step = 1; step <= 2; step++) {
        global_batch(step, x, labels);
        OK(sl_net_train_step(net, x + rank * half, rank_shape, labels + rank * B, NULL));
    }
    OK(sl_save_model(net, model_path));
    OK(sl_save_snapshot(net, snap_path));
    /* A model file as single-process training writes it: loads strictly
     * into a plain network and gives this network's tensors. */
    sl_net *loaded = make_net(ctx, MODEL_FROZEN_BN, SL_SCHEDULE_NONE);
    OK(sl_load_model(loaded, model_path, NULL, NULL));
    char which[160];
    ck_assert_msg(worst_error(loaded, net, 0, which, sizeof which) == 0, "%s", which);
    sl_net_free(loaded);
    /* Step 3 on 2 ranks. */
    global_batch(3, x, labels);
    OK(sl_net_train_step(net, x + rank * half, rank_shape, labels + rank * B, NULL));
    /* Resumed on 2 ranks: bit for bit. */
    sl_net *again = make_net(ctx, MODEL_FROZEN_BN, SL_SCHEDULE_SQRT);
    OK(sl_load_snapshot(again, snap_path));
    sl_dist *d2;
    OK(sl_dist_join(again, &o, &d2));
    OK(sl_net_train_step(again, x + rank * half, rank_shape, labels + rank * B, NULL));
    ck_assert_int_eq(sl_net_step_count(again), 3);
    assert_bitwise_equal(again, net, 3);
    sl_dist_free(d2);
    sl_net_free(again);
    /* Resumed on 1 rank (a communicator of each rank alone) with the
     * global batch: equal within rounding. */
    MPI_Comm alone;
    MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &alone);
    sl_net *one = make_net(ctx, MODEL_FROZEN_BN, SL_SCHEDULE_NONE);
    OK(sl_load_snapshot(one, snap_path));
    sl_dist_options o1 = o;
    o1.mpi_comm = &alone;
    sl_dist *d1;
    OK(sl_dist_join(one, &o1, &d1));
    ck_assert_int_eq(sl_dist_size(d1), 1);
    OK(sl_net_train_step(one, x, global_shape, labels, NULL));
    double e = worst_error(one, net, 0, which, sizeof which);
    ck_assert_msg(e <= 1e-5, "resumed on one rank: %s off by %g", which, e);
    sl_dist_free(d1);
    sl_net_free(one);
    MPI_Comm_free(&alone);
    /* A file rank 0 cannot write: every rank gets rank 0's error. */
    ck_assert_int_eq(sl_save_model(net, "/nonexistent-dir/m.safetensors"), SL_ERR_IO);
    if (rank == 1)
        ck_assert_msg(strstr(sl_last_error(), "sl_save_model: rank 0 failed: ") != NULL, "%s",
                      sl_last_error());
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        unlink(model_path);
        unlink(snap_path);
    }
    free(x);
    sl_dist_free(d);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_dist_buckets_follow_segments_and_cover_gradients_once)
{
    sl_context *ctx = one_thread_context(1);
    sl_net *net = make_net(ctx, MODEL_NO_BN, SL_SCHEDULE_SQRT);
    ck_assert(th_param_count(net) > 0);
    /* sqrt segments with unbounded buckets; one segment with 1 KiB ones. */
    for (int cap = 0; cap < 2; cap++) {
        OK(sl_net_set_schedule(net, cap ? SL_SCHEDULE_NONE : SL_SCHEDULE_SQRT));
        sl_run_cache *c;
        OK(sl_net_plan_cached(net, rank_shape, SL_MODE_TRAIN, 0, &c));
        ck_assert(cap ? c->seg.n == 1 : c->seg.n >= 3);
        sl_bucket_plan plan;
        memset(&plan, 0, sizeof plan);
        OK(sl_buckets_build(net, c, cap ? 1024 : ((size_t)1 << 30), &plan));
        /* Contiguous, descending, covering [0, grad_floats) once. */
        size_t end = net->grad_floats;
        for (int i = 0; i < plan.n; i++) {
            ck_assert(plan.b[i].count > 0);
            ck_assert_uint_eq(plan.b[i].first + plan.b[i].count, end);
            end = plan.b[i].first;
            if (i)
                ck_assert(plan.b[i].launch_step >= plan.b[i - 1].launch_step);
        }
        ck_assert_uint_eq(end, 0);
        /* Every segment boundary is a bucket boundary. */
        for (int j = 0; j < c->seg.n; j++) {
            size_t at = plan.top_first[c->seg.start[j]];
            int boundary = at == 0 || at == net->grad_floats;
            for (int i = 0; i < plan.n; i++)
                boundary |= plan.b[i].first == at;
            ck_assert_msg(boundary, "segment %d starts inside a bucket", j);
        }
        /* Before every re-forward, the bucket of the segment behind it
         * has started (when that segment has gradients): a re-forward
         * never waits on communication. */
        int refwd_followed = 0;
        for (int s = 0; s + 1 < c->prog.n_steps; s++)
            if (c->prog.steps[s].kind == SL_STEP_BWD && c->prog.steps[s + 1].kind == SL_STEP_REFWD) {
                int t = net->graph.nodes[c->prog.steps[s].node].top, j = 0;
                while (c->seg.start[j] != t)
                    j++;
                size_t floats = plan.top_first[c->seg.start[j + 1]] - plan.top_first[t];
                int launched_here = 0;
                for (int i = 0; i < plan.n; i++)
                    launched_here |= plan.b[i].launch_step == s;
                ck_assert_msg(launched_here || floats == 0,
                              "no bucket starts before the re-forward at step %d", s + 1);
                refwd_followed += launched_here;
            }
        ck_assert(cap ? refwd_followed == 0 : refwd_followed >= 1);
        for (int i = 0; i < plan.n; i++)
            ck_assert(c->prog.steps[plan.b[i].launch_step].kind == SL_STEP_BWD);
        if (!cap)
            ck_assert(plan.n <= c->seg.n);
        else
            ck_assert_msg(plan.n >= 3, "%d buckets of at most 1 KiB", plan.n);
        sl_buckets_release(&plan);
    }
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_dist_memory_report_counts_communication)
{
    sl_context *ctx = one_thread_context(2);
    sl_net *net = make_net(ctx, MODEL_BN, SL_SCHEDULE_SQRT);
    sl_memory_report alone, joined;
    OK(sl_net_memory_report(net, rank_shape, SL_MODE_TRAIN, &alone));
    ck_assert_uint_eq(alone.communication, 0);
    sl_dist *d;
    sl_dist_options o = test_options(60);
    OK(sl_dist_join(net, &o, &d));
    OK(sl_net_memory_report(net, rank_shape, SL_MODE_TRAIN, &joined));
    /* The packed running statistics: 4 BatchNorms (8, 16, 16, 16 channels) x 2. */
    ck_assert_uint_eq(joined.communication, 2 * (8 + 16 + 16 + 16) * sizeof(float));
    ck_assert_uint_eq(joined.total, alone.total + joined.communication);
    char json[1024];
    OK(sl_memory_report_json(&joined, json, sizeof json));
    ck_assert(strstr(json, "\"communication\":448") != NULL);
    sl_dist_free(d);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_dist_join_checks_every_rank_has_the_same_network)
{
    int rank = world_rank();
    sl_context *ctx = one_thread_context(4);
    sl_net *net = make_net(ctx, rank == 0 ? MODEL_BN : MODEL_NO_BN, SL_SCHEDULE_NONE);
    sl_dist *d = NULL;
    sl_dist_options o = test_options(60);
    ck_assert_int_eq(sl_dist_join(net, &o, &d), SL_ERR_INVALID_ARG);
    ck_assert(strstr(sl_last_error(), "networks differ") != NULL);
    ck_assert(d == NULL);
    o.timeout_seconds = 0;
    ck_assert_int_eq(sl_dist_join(net, &o, &d), SL_ERR_INVALID_ARG);
    ck_assert_int_eq(sl_dist_join(NULL, NULL, &d), SL_ERR_INVALID_ARG);
    sl_dist_free(NULL);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* NCCL: one rank per GPU on what this machine has. Without a device (or
 * without CUDA / NCCL in this build) it says so and checks nothing. With
 * one, rank 0 alone joins a one-rank communicator (two ranks cannot share
 * a GPU under NCCL) and must train exactly as the same network alone. */
START_TEST(test_dist_nccl_one_rank_per_gpu_equals_plain_run)
{
    int rank = world_rank();
    sl_context_options co = sl_context_defaults();
    co.device = SL_DEVICE_CUDA;
    co.seed = 8;
    sl_context *ctx = NULL;
    int have = rank == 0 && sl_context_create(&co, &ctx) == SL_OK;
    if (rank == 0 && !have)
        printf("test_dist_nccl_one_rank_per_gpu_equals_plain_run: SKIPPED, no CUDA device: %s\n",
               sl_last_error());
    MPI_Comm gpus;
    MPI_Comm_split(MPI_COMM_WORLD, have ? 0 : MPI_UNDEFINED, rank, &gpus);
    if (have) {
        sl_net *net = make_net(ctx, MODEL_BN, SL_SCHEDULE_SQRT), *plain = make_net(ctx, MODEL_BN,
                                                                                  SL_SCHEDULE_SQRT);
        sl_dist *d;
        sl_dist_options o = test_options(120);
        o.mpi_comm = &gpus;
        sl_status st = sl_dist_join(net, &o, &d);
        if (st == SL_ERR_UNSUPPORTED) {
            printf("test_dist_nccl_one_rank_per_gpu_equals_plain_run: SKIPPED: %s\n",
                   sl_last_error());
        } else {
            ck_assert_msg(st == SL_OK, "%s", sl_last_error());
            float *x = malloc(sizeof(float) * 2 * B * 3 * RES * RES);
            int labels[2 * B];
            for (int step = 1; step <= STEPS; step++) {
                global_batch(step, x, labels);
                OK(sl_net_train_step(net, x, rank_shape, labels, NULL));
                OK(sl_net_train_step(plain, x, rank_shape, labels, NULL));
                assert_bitwise_equal(net, plain, step);
            }
            printf("NCCL on the GPU: %d steps in a row bit-identical to the network alone\n",
                   STEPS);
            free(x);
            sl_dist_free(d);
        }
        sl_net_free(net);
        sl_net_free(plain);
        MPI_Comm_free(&gpus);
    }
    sl_context_free(ctx);
    MPI_Barrier(MPI_COMM_WORLD);
}
END_TEST

/* Last: leaves a broken membership behind on rank 0. */
START_TEST(test_dist_absent_rank_times_out_the_others)
{
    int rank = world_rank();
    sl_context *ctx = one_thread_context(6);
    sl_net *net = make_net(ctx, MODEL_NO_BN, SL_SCHEDULE_NONE);
    sl_dist *d;
    const double timeout = 1.5;
    sl_dist_options o = test_options(timeout);
    OK(sl_dist_join(net, &o, &d));
    float *x = malloc(sizeof(float) * 2 * B * 3 * RES * RES);
    int labels[2 * B];
    global_batch(1, x, labels);
    if (rank == 0) {
        double t0 = MPI_Wtime();
        ck_assert_int_eq(sl_net_train_step(net, x, rank_shape, labels, NULL), SL_ERR_BACKEND);
        double took = MPI_Wtime() - t0;
        ck_assert_msg(took >= timeout && took < timeout + 5, "failed after %.2f s", took);
        ck_assert(strstr(sl_last_error(), "timeout") != NULL);
        /* Unusable from now on, with a clear message. */
        ck_assert_int_eq(sl_net_train_step(net, x, rank_shape, labels, NULL), SL_ERR_STATE);
        ck_assert(strstr(sl_last_error(), "failed earlier") != NULL);
    }
    /* Rank 1 never calls; both meet again outside the library. */
    MPI_Barrier(MPI_COMM_WORLD);
    free(x);
    sl_dist_free(d);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* ---- ZeRO-1 (sl_dist_options.shard 1) ---- */

enum { OPT_SGD_MOMENTUM, OPT_ADAM, OPT_ADAMW, OPT_ADAMW_CLIPPED, OPT_CASES };

static sl_net *make_shard_net(sl_context *ctx, int which)
{
    sl_net *net = make_net(ctx, MODEL_BN, SL_SCHEDULE_SQRT);
    sl_optimizer_options opt =
        which == OPT_SGD_MOMENTUM ? sl_optimizer_sgd(0.05f, 0.9f, 1e-4f, 1)
        : which == OPT_ADAM       ? sl_optimizer_adam(0.01f, 0.9f, 0.999f, 1e-8f, 1e-4f)
                                  : sl_optimizer_adamw(0.01f, 0.9f, 0.999f, 1e-8f, 0.05f);
    OK(sl_net_set_optimizer(net, &opt));
    if (which == OPT_ADAMW_CLIPPED)
        OK(sl_net_set_grad_clip(net, 0.05f)); /* below the gradient norm: it cuts */
    return net;
}

static sl_dist_options shard_options(int shard)
{
    sl_dist_options o = test_options(60);
    o.shard = shard;
    return o;
}

/* Bytes of a whole file (rank-local read). */
static unsigned char *read_whole(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len + 1);
    ck_assert(buf && fread(buf, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static void assert_same_file(const char *a, const char *b, const char *what)
{
    size_t na, nb;
    unsigned char *fa = read_whole(a, &na), *fb = read_whole(b, &nb);
    ck_assert_msg(na == nb && memcmp(fa, fb, na) == 0, "%s: %zu and %zu bytes, contents differ",
                  what, na, nb);
    free(fa);
    free(fb);
}

/* A temporary path made by rank 0, known to every rank. */
static void shared_temp(char *path, size_t n)
{
    if (world_rank() == 0) {
        int f = mkstemp(path);
        ck_assert(f >= 0);
        close(f);
    }
    MPI_Bcast(path, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD);
}

/* Stages: ZeRO-1, ZeRO-2, and ZeRO-2 with the update in backward. */
enum { STAGE_1, STAGE_2, STAGE_2_UIB, STAGE_CASES };

START_TEST(test_dist_shard_parameters_bit_identical_to_unsharded)
{
    /* Every optimizer: ZeRO-1 (ZeRO-2, ZeRO-2 updating in backward) and
     * plain data parallel take the same steps from the same start, each
     * rank with its own half batch. */
    int rank = world_rank();
    int which = _i % OPT_CASES, stage = _i / OPT_CASES;
    if (stage != STAGE_1 && which == OPT_ADAMW_CLIPPED)
        return; /* refused: test_dist_shard_refusals */
    sl_context *cp = one_thread_context(21 + (uint64_t)rank);
    sl_context *cs = one_thread_context(21 + (uint64_t)rank);
    sl_net *plain = make_shard_net(cp, which), *sharded = make_shard_net(cs, which);
    if (stage == STAGE_2_UIB)
        OK(sl_net_set_update_in_backward(sharded, 1));
    sl_dist *dp, *ds;
    sl_dist_options op = shard_options(0), os = shard_options(stage == STAGE_1 ? 1 : 2);
    OK(sl_dist_join(plain, &op, &dp));
    OK(sl_dist_join(sharded, &os, &ds));
    float *x = malloc(sizeof(float) * 2 * B * 3 * RES * RES);
    int labels[2 * B];
    for (int step = 1; step <= 4; step++) {
        global_batch(step, x, labels);
        const float *mine = x + (size_t)rank * B * 3 * RES * RES;
        OK(sl_net_train_step(plain, mine, rank_shape, labels + rank * B, NULL));
        OK(sl_net_train_step(sharded, mine, rank_shape, labels + rank * B, NULL));
        if (stage == STAGE_1) {
            assert_bitwise_equal(sharded, plain, step);
        } else { /* ZeRO-2 keeps no whole gradient to compare */
            char which_t[160];
            ck_assert_msg(worst_error(sharded, plain, 0, which_t, sizeof which_t) == 0,
                          "shard 2%s, step %d: %s differs", stage == STAGE_2_UIB ? " + update in backward" : "", step, which_t);
        }
        assert_same_on_every_rank(net_hash(sharded), "sharded parameters", step);
    }
    /* The split puts the boundary inside a parameter: both ranks update
     * a piece of it. */
    int split = 0;
    for (int t = 0; t < ds->n_gather; t++)
        split += ds->gather_count[2 * t] > 0 && ds->gather_count[2 * t + 1] > 0;
    ck_assert_int_eq(split, 1);
    if (which == OPT_ADAMW_CLIPPED) {
        float norm;
        OK(sl_net_last_grad_norm(sharded, &norm));
        ck_assert_msg(norm > 0.05f, "the clip never cut (norm %g)", (double)norm);
    }
    /* Memory: this rank's slice of the state; the slices add up to the
     * whole state, and each is about half of it. */
    sl_memory_report rp, rs;
    OK(sl_net_memory_report(plain, rank_shape, SL_MODE_TRAIN, &rp));
    OK(sl_net_memory_report(sharded, rank_shape, SL_MODE_TRAIN, &rs));
    double sum = (double)rs.optimizer;
    OK(sl_dist_sum(ds, &sum, 1));
    ck_assert_msg(sum == (double)rp.optimizer, "slices %g bytes, whole state %llu", sum,
                  (unsigned long long)rp.optimizer);
    int per = which == OPT_SGD_MOMENTUM ? 1 : 2;
    const double slack = (double)per * 16 * sizeof(float); /* one boundary's alignment */
    ck_assert_msg(fabs((double)rs.optimizer - (double)rp.optimizer / 2) <= slack,
                  "rank %d holds %llu of %llu optimizer bytes", rank,
                  (unsigned long long)rs.optimizer, (unsigned long long)rp.optimizer);
    ck_assert_uint_eq(rs.measured_optimizer, rs.optimizer);
    if (stage == STAGE_1) {
        ck_assert_uint_eq(rs.total + (rp.optimizer - rs.optimizer), rp.total);
    } else {
        /* ZeRO-2: the gradients are arena values reduced layer by layer;
         * the fixed part keeps this rank's slice of them (none when the
         * update runs in backward); the run uses what was planned. */
        ck_assert(rs.param_grads_in_arena);
        uint64_t grad_slice = rs.fixed - rs.params - rs.optimizer;
        if (stage == STAGE_2_UIB)
            ck_assert_uint_eq(grad_slice, 0);
        else
            ck_assert_msg(fabs((double)grad_slice - (double)rp.param_grads / 2) <= 16 * sizeof(float),
                          "rank %d holds %llu of %llu gradient bytes", rank,
                          (unsigned long long)grad_slice, (unsigned long long)rp.param_grads);
        ck_assert_uint_lt(rs.total, rp.total - rp.param_grads / 3);
        ck_assert_uint_eq(rs.arena_measured, rs.arena_bytes);
        ck_assert_uint_eq(rs.measured_total, rs.total);
        /* Planned without joining (sl_net_set_plan_ranks), the rank with the
         * largest slice (the last) gets this very plan. */
        sl_context *cq = one_thread_context(21);
        sl_net *q = make_shard_net(cq, which);
        if (stage == STAGE_2_UIB)
            OK(sl_net_set_update_in_backward(q, 1));
        OK(sl_net_set_plan_ranks(q, 2, 2));
        sl_memory_report rq;
        OK(sl_net_memory_report(q, rank_shape, SL_MODE_TRAIN, &rq));
        if (rank == 1) {
            ck_assert_uint_eq(rq.fixed, rs.fixed);
            ck_assert_uint_eq(rq.arena_bytes, rs.arena_bytes);
            ck_assert_uint_eq(rq.param_grads, rs.param_grads);
        }
        ck_assert_int_eq(sl_net_train_step(q, x, rank_shape, labels, NULL), SL_ERR_STATE);
        OK(sl_net_set_plan_ranks(q, 1, 0));
        OK(sl_net_memory_report(q, rank_shape, SL_MODE_TRAIN, &rq));
        ck_assert_uint_eq(rq.optimizer, rp.optimizer);
        sl_net_free(q);
        sl_context_free(cq);
        if (which == OPT_ADAMW) { /* snapshots gather: the unsharded run's file */
            char sp[] = "/tmp/sl_zero2_p_XXXXXX", ss[] = "/tmp/sl_zero2_s_XXXXXX";
            shared_temp(sp, sizeof sp);
            shared_temp(ss, sizeof ss);
            OK(sl_save_snapshot(plain, sp));
            OK(sl_save_snapshot(sharded, ss));
            if (rank == 0) {
                assert_same_file(sp, ss, "snapshots of shard 2 and shard 0");
                unlink(sp);
                unlink(ss);
            }
        }
    }
    if (rank == 0)
        printf("shard %d%s, optimizer %d: rank 0 of 2 plans %llu bytes, %llu of them optimizer "
               "(unsharded %llu, %llu)\n", stage == STAGE_1 ? 1 : 2,
               stage == STAGE_2_UIB ? " + update in backward" : "", which,
               (unsigned long long)rs.total, (unsigned long long)rs.optimizer,
               (unsigned long long)rp.total, (unsigned long long)rp.optimizer);
    free(x);
    sl_dist_free(dp);
    sl_dist_free(ds);
    sl_net_free(plain);
    sl_net_free(sharded);
    sl_context_free(cp);
    sl_context_free(cs);
}
END_TEST

/* Both ranks train on the same batch (the first half of the step's global
 * batch): the mean of two equal gradients is that gradient exactly, so a
 * run on 2 ranks and one on 1 rank are bit-identical, and snapshots can be
 * compared across rank counts bit for bit. */
static void same_batch_steps(sl_net *net, int from, int to, float *x, int *labels)
{
    for (int step = from; step <= to; step++) {
        global_batch(step, x, labels);
        OK(sl_net_train_step(net, x, rank_shape, labels, NULL));
    }
}

START_TEST(test_dist_shard_snapshot_resumes_on_one_rank_and_back)
{
    int rank = world_rank();
    char snap_shard[] = "/tmp/sl_zero_s_XXXXXX", snap_plain[] = "/tmp/sl_zero_p_XXXXXX";
    char snap_one[] = "/tmp/sl_zero_o_XXXXXX";
    shared_temp(snap_shard, sizeof snap_shard);
    shared_temp(snap_plain, sizeof snap_plain);
    shared_temp(snap_one, sizeof snap_one);
    float *x = malloc(sizeof(float) * 2 * B * 3 * RES * RES);
    int labels[2 * B];
    sl_dist_options os = shard_options(1), op = shard_options(0);
    sl_context *ctx = one_thread_context(5);

    /* Uninterrupted: 4 steps on 2 ranks, sharded. */
    sl_net *whole = make_shard_net(ctx, OPT_ADAMW);
    sl_dist *dw;
    OK(sl_dist_join(whole, &os, &dw));
    same_batch_steps(whole, 1, 4, x, labels);

    /* 2 steps sharded, snapshot; 2 steps unsharded, snapshot: the same file. */
    sl_net *a = make_shard_net(ctx, OPT_ADAMW), *b = make_shard_net(ctx, OPT_ADAMW);
    sl_dist *da, *db;
    OK(sl_dist_join(a, &os, &da));
    OK(sl_dist_join(b, &op, &db));
    same_batch_steps(a, 1, 2, x, labels);
    same_batch_steps(b, 1, 2, x, labels);
    /* A rank's slice cannot be replaced on its own; sl_save_snapshot,
     * called by every rank, gathers it and rank 0 writes. */
    OK(sl_save_snapshot(a, snap_shard));
    OK(sl_save_snapshot(b, snap_plain));
    ck_assert_int_eq(sl_load_snapshot(a, snap_shard), SL_ERR_STATE);
    assert_same_file(snap_shard, snap_plain, "snapshots of shard 1 and shard 0");

    /* Resumed on 1 rank, not joined: steps 3 and 4 as the whole run's. */
    sl_net *one = make_shard_net(ctx, OPT_ADAMW);
    OK(sl_load_snapshot(one, snap_shard));
    same_batch_steps(one, 3, 4, x, labels);
    assert_bitwise_equal(one, whole, 4);
    ck_assert_int_eq(sl_net_step_count(one), 4);

    /* The reverse: 2 steps on 1 rank, snapshot, resumed sharded on 2. */
    sl_net *alone = make_shard_net(ctx, OPT_ADAMW);
    same_batch_steps(alone, 1, 2, x, labels);
    if (rank == 0)
        OK(sl_save_snapshot(alone, snap_one));
    MPI_Barrier(MPI_COMM_WORLD);
    assert_same_file(snap_one, snap_plain, "snapshots of 1 rank and of 2");
    sl_net *back = make_shard_net(ctx, OPT_ADAMW);
    if (rank == 0) /* rank 0 only: the join gives rank 1 its slice */
        OK(sl_load_snapshot(back, snap_one));
    sl_dist *dk;
    OK(sl_dist_join(back, &os, &dk));
    same_batch_steps(back, 3, 4, x, labels);
    assert_bitwise_equal(back, whole, 4);
    ck_assert_int_eq(sl_net_step_count(back), 4);

    /* After leaving, a rank holds a slice only: the update says so. */
    sl_dist_free(da);
    ck_assert_int_eq(sl_net_train_step(a, x, rank_shape, labels, NULL), SL_ERR_STATE);
    ck_assert_msg(strstr(sl_last_error(), "sharded") != NULL, "%s", sl_last_error());

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        unlink(snap_shard);
        unlink(snap_plain);
        unlink(snap_one);
    }
    free(x);
    sl_dist_free(dw);
    sl_dist_free(db);
    sl_dist_free(dk);
    sl_net_free(whole);
    sl_net_free(a);
    sl_net_free(b);
    sl_net_free(one);
    sl_net_free(alone);
    sl_net_free(back);
    sl_context_free(ctx);
}
END_TEST

/* ZeRO-2 on a GPT-2 with dropout: the embedding tied to the head gets
 * gradient in the loss step and in its own backward, and is reduced and
 * updated after the last; with and without the update in backward,
 * parameters equal unsharded data parallel's bit for bit. */
START_TEST(test_dist_shard_2_gpt2_tied_head)
{
    enum { GB = 2, GT = 16 };
    int rank = world_rank();
    sl_gpt2_config c = sl_gpt2_defaults();
    c.layers = 2;
    c.embd = 32;
    c.heads = 4;
    c.vocab = 128;
    c.context = 32;
    c.dropout = 0.1f;
    sl_context *cp = one_thread_context(31 + (uint64_t)rank), *cs = one_thread_context(31 + (uint64_t)rank);
    sl_net *plain = th_gpt2(cp, &c, SL_SCHEDULE_SQRT), *sharded = th_gpt2(cs, &c, SL_SCHEDULE_SQRT);
    sl_optimizer_options o = sl_optimizer_adamw(0.01f, 0.9f, 0.95f, 1e-8f, 0.1f);
    OK(sl_net_set_optimizer(plain, &o));
    OK(sl_net_set_optimizer(sharded, &o));
    if (_i)
        OK(sl_net_set_update_in_backward(sharded, 1));
    sl_dist *dp, *ds;
    sl_dist_options op = shard_options(0), os = shard_options(2);
    OK(sl_dist_join(plain, &op, &dp));
    OK(sl_dist_join(sharded, &os, &ds));
    int32_t ids[GB * GT], targets[GB * GT];
    char which[160];
    for (int step = 1; step <= 3; step++) {
        for (int i = 0; i < GB * GT; i++) {
            ids[i] = (int32_t)((i * 29 + step * 7 + rank * 13) % 128);
            targets[i] = (int32_t)((i * 31 + step * 3 + rank) % 128);
        }
        OK(sl_net_train_step_tokens(plain, ids, targets, GB, GT, NULL));
        OK(sl_net_train_step_tokens(sharded, ids, targets, GB, GT, NULL));
        ck_assert_msg(worst_error(sharded, plain, 0, which, sizeof which) == 0,
                      "update in backward %d, step %d: %s differs", _i, step, which);
        assert_same_on_every_rank(net_hash(sharded), "GPT-2 parameters", step);
    }
    sl_dist_free(dp);
    sl_dist_free(ds);
    sl_net_free(plain);
    sl_net_free(sharded);
    sl_context_free(cp);
    sl_context_free(cs);
}
END_TEST

START_TEST(test_dist_shard_refusals)
{
    sl_context *ctx = one_thread_context(4);
    sl_net *net = make_shard_net(ctx, OPT_ADAMW_CLIPPED);
    sl_dist *d = NULL;
    /* ZeRO-2 keeps no rank's gradients whole: no global-norm clipping */
    sl_dist_options o = shard_options(2);
    ck_assert_int_eq(sl_dist_join(net, &o, &d), SL_ERR_STATE);
    ck_assert_msg(strstr(sl_last_error(), "clipping") != NULL, "%s", sl_last_error());
    ck_assert_ptr_null(d);
    OK(sl_net_set_grad_clip(net, 0.0f));
    OK(sl_net_set_grad_accumulation(net, 2));
    ck_assert_int_eq(sl_dist_join(net, &o, &d), SL_ERR_STATE);
    ck_assert_msg(strstr(sl_last_error(), "accumulation") != NULL, "%s", sl_last_error());
    OK(sl_net_set_grad_accumulation(net, 1));
    /* the update in backward joins with shard 2 only */
    OK(sl_net_set_update_in_backward(net, 1));
    o.shard = 1;
    ck_assert_int_eq(sl_dist_join(net, &o, &d), SL_ERR_STATE);
    ck_assert_msg(strstr(sl_last_error(), "shard 2") != NULL, "%s", sl_last_error());
    /* joined with shard 2: clipping and accumulation refused, the update
     * in backward fixed */
    o.shard = 2;
    OK(sl_dist_join(net, &o, &d));
    ck_assert_int_eq(sl_net_set_grad_clip(net, 1.0f), SL_ERR_STATE);
    ck_assert_int_eq(sl_net_set_grad_accumulation(net, 2), SL_ERR_STATE);
    ck_assert_int_eq(sl_net_set_update_in_backward(net, 0), SL_ERR_STATE);
    ck_assert_msg(strstr(sl_last_error(), "before sl_dist_join") != NULL, "%s", sl_last_error());
    sl_dist_free(d);
    d = NULL;
    o.shard = 3;
    ck_assert_int_eq(sl_dist_join(net, &o, &d), SL_ERR_INVALID_ARG);
    o.shard = -1;
    ck_assert_int_eq(sl_dist_join(net, &o, &d), SL_ERR_INVALID_ARG);
    ck_assert_ptr_null(d);
    ck_assert_int_eq(sl_dist_defaults().shard, 0);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_dist_shard_failed_step_changes_nothing)
{
    /* _i: 1 ZeRO-1, 2 ZeRO-2 with the update in backward */
    int rank = world_rank();
    char before[] = "/tmp/sl_zero_b_XXXXXX", after[] = "/tmp/sl_zero_a_XXXXXX";
    shared_temp(before, sizeof before);
    shared_temp(after, sizeof after);
    sl_context *ctx = one_thread_context(8);
    sl_net *net = make_shard_net(ctx, OPT_ADAM);
    if (_i == 2)
        OK(sl_net_set_update_in_backward(net, 1));
    sl_dist *d;
    sl_dist_options o = shard_options(_i);
    OK(sl_dist_join(net, &o, &d));
    float *x = malloc(sizeof(float) * 2 * B * 3 * RES * RES);
    int labels[2 * B];
    const size_t half = (size_t)B * 3 * RES * RES;
    global_batch(1, x, labels);
    OK(sl_net_train_step(net, x + rank * half, rank_shape, labels + rank * B, NULL));
    uint64_t hash = net_hash(net);
    OK(sl_save_snapshot(net, before)); /* every rank's slice of the state */
    sl_shape shape = rank_shape;
    if (rank == 1)
        shape.c = 4;
    global_batch(2, x, labels);
    ck_assert_int_eq(sl_net_train_step(net, x, shape, labels, NULL),
                     rank == 1 ? SL_ERR_SHAPE : SL_ERR_STATE);
    ck_assert(net_hash(net) == hash);
    ck_assert_int_eq(sl_net_step_count(net), 1);
    OK(sl_save_snapshot(net, after));
    assert_same_file(before, after, "snapshots before and after the failed step");
    OK(sl_net_train_step(net, x + rank * half, rank_shape, labels + rank * B, NULL));
    ck_assert(net_hash(net) != hash);
    assert_same_on_every_rank(net_hash(net), "parameters", 2);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        unlink(before);
        unlink(after);
    }
    free(x);
    sl_dist_free(d);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

int main(void)
{
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    setenv("CK_FORK", "no", 1); /* MPI processes must not fork */
    Suite *s = suite_create("dist");
    TCase *tc = tcase_create("mpi");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_dist_join_checks_every_rank_has_the_same_network);
    tcase_add_test(tc, test_dist_parameters_bit_identical_across_ranks_every_step);
    tcase_add_test(tc, test_dist_two_ranks_equal_one_process_double_batch);
    tcase_add_test(tc, test_dist_checkpointed_equals_plain_bitwise_on_each_rank);
    tcase_add_test(tc, test_dist_bad_batch_on_one_rank_fails_every_rank);
    tcase_add_test(tc, test_dist_files_written_by_rank0_and_resumed_on_two_and_one_ranks);
    tcase_add_test(tc, test_dist_buckets_follow_segments_and_cover_gradients_once);
    tcase_add_test(tc, test_dist_memory_report_counts_communication);
    tcase_add_test(tc, test_dist_nccl_one_rank_per_gpu_equals_plain_run);
    tcase_add_loop_test(tc, test_dist_shard_parameters_bit_identical_to_unsharded, 0,
                        OPT_CASES * STAGE_CASES);
    tcase_add_test(tc, test_dist_shard_snapshot_resumes_on_one_rank_and_back);
    tcase_add_test(tc, test_dist_shard_refusals);
    tcase_add_loop_test(tc, test_dist_shard_2_gpt2_tied_head, 0, 2);
    tcase_add_loop_test(tc, test_dist_shard_failed_step_changes_nothing, 1, 3);
    tcase_add_test(tc, test_dist_absent_rank_times_out_the_others);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    MPI_Finalize();
    return failed ? 1 : 0;
}
