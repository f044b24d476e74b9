/*
 * test_conv_engine.c — the rule the CUDA backend applies to each cuDNN
 * engine its heuristics offer for a float convolution (base/conv_engine.h),
 * checked on the CPU: no GPU runs here, so what the graph-API path may
 * pick is proved here, note by note and over every combination of notes
 * and instance settings. Also the cut of a 1x1 convolution's filter
 * gradient into cuBLAS GEMMs (base/conv_gemm.h).
 */
#include <check.h>
#include <stdlib.h>

#include "base/conv_engine.h"
#include "base/conv_gemm.h"
#include "harness.h"

static const size_t kCap = (size_t)512 << 20;

static sl_engine_rules rules(int deterministic, int tf32)
{
    sl_engine_rules r = {deterministic, tf32, kCap};
    return r;
}

/* An FMA engine with no notes runs in every kind of instance. */
START_TEST(test_engine_without_notes_runs_in_every_instance)
{
    for (int det = 0; det < 2; det++)
        for (int tf32 = 0; tf32 < 2; tf32++) {
            sl_engine_rules r = rules(det, tf32);
            ck_assert_ptr_null(sl_engine_refusal(0, 0, &r));
            ck_assert_ptr_null(sl_engine_refusal(0, 4096, &r));
        }
}
END_TEST

/* Tensor cores round float inputs to TF32: only with --tf32. */
START_TEST(test_engine_tensor_cores_need_tf32)
{
    sl_engine_rules plain = rules(1, 0), tf32 = rules(1, 1);
    ck_assert_ptr_nonnull(sl_engine_refusal(SL_ENGINE_TENSOR_CORE, 0, &plain));
    ck_assert_ptr_null(sl_engine_refusal(SL_ENGINE_TENSOR_CORE, 0, &tf32));
    plain.deterministic = tf32.deterministic = 0;
    ck_assert_ptr_nonnull(sl_engine_refusal(SL_ENGINE_TENSOR_CORE, 0, &plain));
    ck_assert_ptr_null(sl_engine_refusal(SL_ENGINE_TENSOR_CORE, 0, &tf32));
}
END_TEST

/* Half-precision inputs or sums never run a float convolution, TF32 or
 * not, deterministic or not. */
START_TEST(test_engine_narrower_inputs_or_sums_never_run_float)
{
    static const unsigned narrow[] = {SL_ENGINE_DOWN_CONVERTS, SL_ENGINE_REDUCED_PRECISION_SUM,
                                      SL_ENGINE_DOWN_CONVERTS | SL_ENGINE_TENSOR_CORE,
                                      SL_ENGINE_REDUCED_PRECISION_SUM | SL_ENGINE_TENSOR_CORE};
    for (size_t i = 0; i < sizeof narrow / sizeof *narrow; i++)
        for (int det = 0; det < 2; det++)
            for (int tf32 = 0; tf32 < 2; tf32++) {
                sl_engine_rules r = rules(det, tf32);
                ck_assert_msg(sl_engine_refusal(narrow[i], 0, &r) != NULL,
                              "notes 0x%x allowed (det %d, tf32 %d)", narrow[i], det, tf32);
            }
}
END_TEST

/* A non-deterministic engine runs only where the instance allows it. */
START_TEST(test_engine_nondeterministic_only_outside_deterministic_instances)
{
    for (int tf32 = 0; tf32 < 2; tf32++) {
        sl_engine_rules det = rules(1, tf32), free_ = rules(0, tf32);
        ck_assert_ptr_nonnull(sl_engine_refusal(SL_ENGINE_NONDETERMINISTIC, 0, &det));
        ck_assert_ptr_null(sl_engine_refusal(SL_ENGINE_NONDETERMINISTIC, 0, &free_));
    }
}
END_TEST

/* Engines that want int8x32-reordered weights never run: the library
 * does not reorder. */
START_TEST(test_engine_needing_reordered_data_never_runs)
{
    sl_engine_rules r = rules(0, 1);
    ck_assert_ptr_nonnull(sl_engine_refusal(SL_ENGINE_NEEDS_REORDERED_DATA, 0, &r));
}
END_TEST

/* The cap is inclusive: a plan needing exactly the cap runs, a byte more
 * does not; notes are judged before the workspace is known (0 bytes). */
START_TEST(test_engine_workspace_cap_is_inclusive)
{
    sl_engine_rules r = rules(1, 0);
    ck_assert_ptr_null(sl_engine_refusal(0, kCap, &r));
    ck_assert_ptr_nonnull(sl_engine_refusal(0, kCap + 1, &r));
    ck_assert_ptr_nonnull(sl_engine_refusal(0, (size_t)-1, &r));
    r.workspace_cap = 0;
    ck_assert_ptr_null(sl_engine_refusal(0, 0, &r));
    ck_assert_ptr_nonnull(sl_engine_refusal(0, 1, &r));
}
END_TEST

/* Every combination of the five notes and runtime compilation (which no
 * rule refuses: tuning alone looks at it), both
 * settings and three workspaces, against the rule stated as a table:
 * which notes each kind of instance forbids. */
START_TEST(test_engine_rule_over_every_combination)
{
    const unsigned always =
        SL_ENGINE_DOWN_CONVERTS | SL_ENGINE_REDUCED_PRECISION_SUM | SL_ENGINE_NEEDS_REORDERED_DATA;
    const size_t workspaces[] = {0, kCap, kCap + 1};
    int allowed = 0;
    for (unsigned notes = 0; notes < 64; notes++)
        for (int det = 0; det < 2; det++)
            for (int tf32 = 0; tf32 < 2; tf32++)
                for (size_t k = 0; k < 3; k++) {
                    unsigned forbidden = always | (tf32 ? 0u : SL_ENGINE_TENSOR_CORE) |
                                         (det ? SL_ENGINE_NONDETERMINISTIC : 0u);
                    int expect = !(notes & forbidden) && workspaces[k] <= kCap;
                    sl_engine_rules r = rules(det, tf32);
                    const char *why = sl_engine_refusal(notes, workspaces[k], &r);
                    ck_assert_msg((why == NULL) == expect,
                                  "notes 0x%x det %d tf32 %d workspace %zu: %s", notes, det, tf32,
                                  workspaces[k], why ? why : "allowed");
                    allowed += why == NULL;
                }
    /* counted by hand: of the 64 six-bit values, 2^(6 - forbidden bits)
     * are clear of the forbidden ones: 8 with TF32 in a non-deterministic
     * instance, 4 with TF32 and determinism or with neither, 2 with
     * determinism alone; 18 in all, for each of the two workspaces within
     * the cap */
    ck_assert_int_eq(allowed, 36);
}
END_TEST

/* Tuning takes the fastest engine, unless an earlier one in the
 * heuristics' order is within the margin of it. */
START_TEST(test_engine_tuning_takes_the_fastest_or_an_earlier_near_one)
{
    const float clear[] = {1.00f, 0.50f, 0.80f};
    ck_assert_int_eq(sl_engine_pick_timed(clear, 3, 0.03f), 1);
    const float near[] = {0.51f, 0.50f, 0.80f}; /* 2 % slower: kept */
    ck_assert_int_eq(sl_engine_pick_timed(near, 3, 0.03f), 0);
    ck_assert_int_eq(sl_engine_pick_timed(near, 3, 0.01f), 1);
    ck_assert_int_eq(sl_engine_pick_timed(near, 3, 0.0f), 1);
    ck_assert_int_eq(sl_engine_pick_timed(near, 3, -1.0f), 1); /* no margin below 0 */
    /* the earliest of several within the margin, not the nearest */
    const float several[] = {0.70f, 0.515f, 0.505f, 0.50f};
    ck_assert_int_eq(sl_engine_pick_timed(several, 4, 0.03f), 1);
    /* an equal time later in the order never displaces an earlier one */
    const float equal[] = {0.90f, 0.50f, 0.50f};
    ck_assert_int_eq(sl_engine_pick_timed(equal, 3, 0.0f), 1);
    const float one[] = {2.0f};
    ck_assert_int_eq(sl_engine_pick_timed(one, 1, 0.03f), 0);
    const float zero[] = {0.0f, 0.0f}; /* a time too short to see */
    ck_assert_int_eq(sl_engine_pick_timed(zero, 2, 0.03f), 0);
}
END_TEST

/* An engine that failed to run (a negative, infinite or NaN time) is
 * never taken, nor is its time the one the margin is measured from;
 * none ran: -1. */
START_TEST(test_engine_tuning_skips_engines_that_failed)
{
    const float inf = 1.0f / 0.0f;
    const float nan = 0.0f / 0.0f;
    const float failed_first[] = {-1.0f, 0.9f, 0.5f};
    ck_assert_int_eq(sl_engine_pick_timed(failed_first, 3, 0.03f), 2);
    const float odd[] = {nan, inf, 0.6f, -inf, 0.61f};
    ck_assert_int_eq(sl_engine_pick_timed(odd, 5, 0.03f), 2);
    const float nan_fastest[] = {0.8f, nan, 0.79f};
    ck_assert_int_eq(sl_engine_pick_timed(nan_fastest, 3, 0.03f), 0);
    /* however wide the margin, a failed time is never taken */
    const float wide[] = {inf, 0.5f};
    ck_assert_int_eq(sl_engine_pick_timed(wide, 2, inf), 1);
    ck_assert_int_eq(sl_engine_pick_timed(wide, 2, 3.4e38f), 1);
    const float none[] = {-1.0f, nan, inf};
    ck_assert_int_eq(sl_engine_pick_timed(none, 3, 0.03f), -1);
    ck_assert_int_eq(sl_engine_pick_timed(none, 0, 0.03f), -1);
}
END_TEST

/* SL_CUDA_CONV_TUNE's values: off by default, "on" for 8 engines, a
 * count from 2 to 64, anything else refused. */
START_TEST(test_engine_tune_count_reads_the_switch)
{
    ck_assert_int_eq(sl_engine_tune_count(NULL), 0);
    ck_assert_int_eq(sl_engine_tune_count(""), 0);
    ck_assert_int_eq(sl_engine_tune_count("0"), 0);
    ck_assert_int_eq(sl_engine_tune_count("off"), 0);
    ck_assert_int_eq(sl_engine_tune_count("on"), 8);
    ck_assert_int_eq(sl_engine_tune_count("1"), 8);
    ck_assert_int_eq(sl_engine_tune_count("2"), 2);
    ck_assert_int_eq(sl_engine_tune_count("16"), 16);
    ck_assert_int_eq(sl_engine_tune_count("64"), 64);
    static const char *const bad[] = {"65", "640", "99999999999999999999", "-3", "on ", "yes",
                                      "ON", "2x", " 4", "of", "offf", "00x", "00", "01", "02",
                                      "+4", "4.0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(sl_engine_tune_count(bad[i]) == -1, "\"%s\" read as %d", bad[i],
                      sl_engine_tune_count(bad[i]));
}
END_TEST

/* Which geometries have their backward passes as GEMMs: float 1x1 with
 * no padding, one group, an output of one point per stride step, and
 * nothing else; which of them are strided. */
START_TEST(test_conv_gemm_takes_only_plain_1x1)
{
    /* n c h w  k oh ow  kh kw sh sw ph pw dh dw  groups bf16 */
    const sl_conv_desc ok = {16, 256, 14, 14, 1024, 14, 14, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0};
    ck_assert(sl_conv_gemm_applies(&ok));
    ck_assert(!sl_conv_gemm_strided(&ok));
    sl_conv_desc d = ok;
    d.dh = d.dw = 2; /* moot for 1x1 */
    ck_assert(sl_conv_gemm_applies(&d));
    d = ok;
    d.sh = d.sw = 2, d.oh = d.ow = 7; /* ResNet's downsampling shortcut */
    ck_assert(sl_conv_gemm_applies(&d) && sl_conv_gemm_strided(&d));
    d = ok;
    d.h = 15, d.w = 16, d.sh = 2, d.sw = 3, d.oh = 8, d.ow = 6; /* odd sizes, two strides */
    ck_assert(sl_conv_gemm_applies(&d) && sl_conv_gemm_strided(&d));
    d = ok;
    d.sw = 2, d.ow = 7;
    ck_assert(sl_conv_gemm_applies(&d) && sl_conv_gemm_strided(&d));
    sl_conv_desc bad[11];
    for (int i = 0; i < 11; i++)
        bad[i] = ok;
    bad[0].kh = bad[0].kw = 3, bad[0].ph = bad[0].pw = 1;
    bad[1].kw = 3, bad[1].pw = 1;
    bad[2].sh = bad[2].sw = 2, bad[2].oh = bad[2].ow = 8; /* not the stride's points */
    bad[3].sw = 2;                                         /* ow still 14 */
    bad[10].sh = 2;                                        /* oh still 14 */
    bad[4].ph = bad[4].pw = 1, bad[4].oh = bad[4].ow = 16;
    bad[5].groups = 2;
    bad[6].bf16 = 1;
    bad[7].n = 0;
    bad[8].k = 0;
    bad[9].sh = 0;
    for (int i = 0; i < 11; i++)
        ck_assert_msg(!sl_conv_gemm_applies(&bad[i]), "case %d taken", i);
}
END_TEST

/* ResNet-152 b16 on an H100's 132 multiprocessors: the first stage's
 * 64 x 64 products over 3136 pixels are cut into 32 pieces of 100, the
 * third stage's 1024 x 256 over 196 into 2 of 100, the last stage's
 * 2048 x 512 (64 MiB of partials for 16 images: the cap) not at all,
 * and 32 images of it go in two groups. */
START_TEST(test_conv_gemm_split_of_resnet152)
{
    const size_t cap = (size_t)64 << 20;
    sl_conv_gemm_split sp;
    ck_assert(sl_conv_gemm_plan(16, 64, 64, 3136, 132, cap, &sp));
    ck_assert_int_eq(sp.chunks, 32);
    ck_assert_int_eq(sp.chunk, 100);
    ck_assert_int_eq(sp.group, 16);
    ck_assert_int_eq(sp.groups, 1);
    ck_assert_uint_eq(sp.gather_offset, 0);
    ck_assert_uint_eq(sp.workspace_bytes, (size_t)16 * 32 * 64 * 64 * 4);
    ck_assert(sl_conv_gemm_plan(16, 256, 1024, 196, 132, cap, &sp));
    ck_assert_int_eq(sp.chunks, 2);
    ck_assert_int_eq(sp.chunk, 100);
    ck_assert(sl_conv_gemm_plan(16, 512, 2048, 49, 132, cap, &sp));
    ck_assert_int_eq(sp.chunks, 1);
    ck_assert_int_eq(sp.chunk, 49);
    ck_assert_int_eq(sp.group, 16);
    ck_assert_uint_eq(sp.workspace_bytes, cap);
    ck_assert(sl_conv_gemm_plan(32, 512, 2048, 49, 132, cap, &sp));
    ck_assert_int_eq(sp.group, 16);
    ck_assert_int_eq(sp.groups, 2);
    /* one image's partial past the cap: no split, out untouched */
    sl_conv_gemm_split before = sp;
    ck_assert(!sl_conv_gemm_plan(1, 4096, 4097, 1, 132, cap, &sp));
    ck_assert_mem_eq(&sp, &before, sizeof sp);
}
END_TEST

/* The downsampling shortcut of ResNet-152's second stage, 256 -> 512
 * channels from 56 x 56 to 28 x 28, b16: its filter gradient's 512 x 256
 * products over 784 points are cut into 4 pieces of 196 and its inputs
 * gathered (16 x 256 x 784 floats after 32 MiB of partials); its input
 * gradient's products take 16 x 256 x 784 floats. At stride 1 the input
 * gradient is one group writing dX itself; an image past the cap, or a
 * 3x3 geometry, has no split. */
START_TEST(test_conv_gemm_strided_split_of_resnet152)
{
    const size_t cap = (size_t)64 << 20;
    /* n c h w  k oh ow  kh kw sh sw ph pw dh dw  groups bf16 */
    const sl_conv_desc d = {16, 256, 56, 56, 512, 28, 28, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0};
    sl_conv_gemm_split sp;
    ck_assert(sl_conv_gemm_filter_plan(&d, 132, cap, &sp));
    ck_assert_int_eq(sp.chunks, 4);
    ck_assert_int_eq(sp.chunk, 196);
    ck_assert_int_eq(sp.group, 16);
    ck_assert_int_eq(sp.groups, 1);
    const size_t parts = (size_t)16 * 4 * 512 * 256 * 4;
    ck_assert_uint_eq(sp.gather_offset, parts);
    ck_assert_uint_eq(sp.workspace_bytes, parts + (size_t)16 * 256 * 784 * 4);
    sl_conv_gemm_data_split ds;
    ck_assert(sl_conv_gemm_data_plan(&d, cap, &ds));
    ck_assert_int_eq(ds.group, 16);
    ck_assert_int_eq(ds.groups, 1);
    ck_assert_uint_eq(ds.workspace_bytes, (size_t)16 * 256 * 784 * 4);
    /* a cap of 5 images' products: groups of 5, 5, 5 and 1 */
    ck_assert(sl_conv_gemm_data_plan(&d, (size_t)5 * 256 * 784 * 4 + 3, &ds));
    ck_assert_int_eq(ds.group, 5);
    ck_assert_int_eq(ds.groups, 4);
    ck_assert_uint_eq(ds.workspace_bytes, (size_t)5 * 256 * 784 * 4);
    sl_conv_gemm_data_split before = ds;
    ck_assert(!sl_conv_gemm_data_plan(&d, (size_t)256 * 784 * 4 - 1, &ds));
    ck_assert_mem_eq(&ds, &before, sizeof ds);
    sl_conv_desc s1 = d;
    s1.sh = s1.sw = 1, s1.oh = s1.ow = 56;
    ck_assert(sl_conv_gemm_data_plan(&s1, 1, &ds)); /* dX itself: any cap */
    ck_assert_int_eq(ds.group, 16);
    ck_assert_int_eq(ds.groups, 1);
    ck_assert_uint_eq(ds.workspace_bytes, 0);
    before = ds;
    ck_assert(sl_conv_gemm_filter_plan(&s1, 132, cap, &sp));
    ck_assert_uint_eq(sp.gather_offset, 0); /* stride 1: nothing gathered */
    sl_conv_desc k3 = d;
    k3.kh = k3.kw = 3, k3.ph = k3.pw = 1;
    ck_assert(!sl_conv_gemm_data_plan(&k3, cap, &ds));
    ck_assert_mem_eq(&ds, &before, sizeof ds);
}
END_TEST

/* Over many shapes, device sizes, caps and bytes of gathered input an
 * image: the pieces cover the pixels exactly (none empty), start
 * 16-byte aligned when there are several, number at most 32 and keep 64
 * pixels at least; the partials and gathered inputs fit the cap, the
 * gathered inputs start 256-byte aligned past the partials, and a group
 * holds as many images as fit (all where they do); a product alone on
 * the device is cut until it fills twice its multiprocessors or a piece
 * would get too short. */
START_TEST(test_conv_gemm_split_invariants)
{
    const int ns[] = {1, 2, 3, 8, 16, 33, 438};
    const int chans[] = {1, 3, 64, 127, 129, 256, 2048};
    const int hws[] = {1, 3, 4, 49, 127, 128, 196, 784, 3136, 12544, 50176};
    const int sms[] = {1, 8, 132};
    const size_t caps[] = {(size_t)1 << 10, (size_t)1 << 20, (size_t)64 << 20};
    const size_t extras[] = {0, 12, 4096, (size_t)3 << 20};
    int cases = 0, cut = 0, grouped = 0, gathered = 0;
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof chans / sizeof *chans; b++)
            for (size_t b2 = 0; b2 < sizeof chans / sizeof *chans; b2 += 2)
                for (size_t h = 0; h < sizeof hws / sizeof *hws; h++)
                    for (size_t m = 0; m < sizeof sms / sizeof *sms; m++)
                        for (size_t q = 0; q < sizeof caps / sizeof *caps; q++)
                            for (size_t x = 0; x < sizeof extras / sizeof *extras; x++) {
                                int n = ns[a], k = chans[b], c = chans[b2], hw = hws[h];
                                size_t cap = caps[q], extra = extras[x];
                                size_t part = (size_t)k * c * sizeof(float);
                                size_t pad = extra ? 256 : 0;
                                sl_conv_gemm_split sp;
                                int got = sl_conv_gemm_plan_extra(n, k, c, hw, sms[m], cap,
                                                                  extra, &sp);
                                ck_assert_int_eq(got, part + extra + pad <= cap);
                                if (!got)
                                    continue;
                                cases++;
                                ck_assert(sp.chunks >= 1 && sp.chunks <= 32 && sp.chunk >= 1);
                                ck_assert((long long)(sp.chunks - 1) * sp.chunk < hw);
                                ck_assert((long long)sp.chunks * sp.chunk >= hw);
                                if (sp.chunks > 1) {
                                    cut++;
                                    ck_assert_int_eq(sp.chunk % 4, 0);
                                    ck_assert_int_ge(sp.chunk, 64);
                                }
                                ck_assert(sp.group >= 1 && sp.group <= n);
                                ck_assert_int_eq(sp.groups, (n + sp.group - 1) / sp.group);
                                size_t parts = (size_t)sp.group * sp.chunks * part;
                                if (extra) {
                                    gathered++;
                                    ck_assert_uint_eq(sp.gather_offset % 256, 0);
                                    ck_assert(sp.gather_offset >= parts &&
                                              sp.gather_offset < parts + 256);
                                    ck_assert_uint_eq(sp.workspace_bytes,
                                                      sp.gather_offset + sp.group * extra);
                                } else {
                                    ck_assert_uint_eq(sp.gather_offset, 0);
                                    ck_assert_uint_eq(sp.workspace_bytes, parts);
                                }
                                ck_assert_uint_le(sp.workspace_bytes, cap);
                                size_t per = (size_t)sp.chunks * part + extra;
                                if (sp.group < n) {
                                    grouped++;
                                    ck_assert_uint_gt((size_t)(sp.group + 1) * per + pad, cap);
                                }
                                long long tiles =
                                    (long long)((k + 127) / 128) * ((c + 127) / 128);
                                if (sp.chunks == 1 && 32 * part + extra + pad <= cap &&
                                    hw >= 128)
                                    ck_assert_msg(tiles * n >= 2LL * sms[m],
                                                  "n %d k %d c %d hw %d sms %d left uncut", n,
                                                  k, c, hw, sms[m]);
                            }
    ck_assert(cases > 1000 && cut > 100 && grouped > 100 && gathered > 1000);
}
END_TEST

/* Which passes run as GEMMs, by switch: none with the GEMMs off, or
 * outside a deterministic instance unless "all"; the filter gradient of
 * a stride-1 1x1 geometry, its forward and input gradient too with
 * SL_CUDA_CONV_GEMM_FWD=on; the filter and input gradients of a strided
 * one (never its forward), none of them with SL_CUDA_CONV_GEMM_STRIDED=
 * off; nothing of a 3x3 geometry. */
START_TEST(test_conv_gemm_passes_by_switch)
{
    /* n c h w  k oh ow  kh kw sh sw ph pw dh dw  groups bf16 */
    const sl_conv_desc s1 = {16, 256, 14, 14, 1024, 14, 14, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0};
    const sl_conv_desc s2 = {16, 512, 28, 28, 1024, 14, 14, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0};
    const sl_conv_desc k3 = {16, 256, 14, 14, 256, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0};
    const unsigned F = 1u << SL_CONV_FWD, D = 1u << SL_CONV_BWD_DATA,
                   W = 1u << SL_CONV_BWD_FILTER;
    /* mode, deterministic, strided_on, fwd_on */
    ck_assert_uint_eq(sl_conv_gemm_passes(&s1, 1, 1, 1, 0), W);
    ck_assert_uint_eq(sl_conv_gemm_passes(&s1, 1, 1, 1, 1), F | D | W);
    ck_assert_uint_eq(sl_conv_gemm_passes(&s1, 1, 1, 0, 1), F | D | W);
    ck_assert_uint_eq(sl_conv_gemm_passes(&s1, 1, 0, 1, 1), 0);
    ck_assert_uint_eq(sl_conv_gemm_passes(&s1, 2, 0, 1, 0), W);
    ck_assert_uint_eq(sl_conv_gemm_passes(&s1, 2, 0, 1, 1), F | D | W);
    ck_assert_uint_eq(sl_conv_gemm_passes(&s1, 0, 1, 1, 1), 0);
    ck_assert_uint_eq(sl_conv_gemm_passes(&s2, 1, 1, 1, 0), D | W);
    ck_assert_uint_eq(sl_conv_gemm_passes(&s2, 1, 1, 1, 1), D | W);
    ck_assert_uint_eq(sl_conv_gemm_passes(&s2, 1, 1, 0, 1), 0);
    ck_assert_uint_eq(sl_conv_gemm_passes(&s2, 2, 0, 1, 0), D | W);
    ck_assert_uint_eq(sl_conv_gemm_passes(&s2, 1, 0, 1, 0), 0);
    ck_assert_uint_eq(sl_conv_gemm_passes(&s2, 0, 1, 1, 0), 0);
    for (int m = 0; m <= 2; m++)
        for (int bits = 0; bits < 8; bits++)
            ck_assert_uint_eq(sl_conv_gemm_passes(&k3, m, bits & 1, bits >> 1 & 1, bits >> 2), 0);
}
END_TEST

/* SL_CUDA_CONV_GEMM_CAP_KIB: 64 MiB unset or empty, whole KiB from 1 to
 * 4 GiB, anything else refused (0). */
START_TEST(test_conv_gemm_cap_reads_the_switch)
{
    ck_assert_uint_eq(sl_conv_gemm_cap(NULL), (size_t)64 << 20);
    ck_assert_uint_eq(sl_conv_gemm_cap(""), (size_t)64 << 20);
    ck_assert_uint_eq(sl_conv_gemm_cap("1"), 1024);
    ck_assert_uint_eq(sl_conv_gemm_cap("16"), 16384);
    ck_assert_uint_eq(sl_conv_gemm_cap("65536"), (size_t)64 << 20);
    ck_assert_uint_eq(sl_conv_gemm_cap("4194304"), (size_t)4 << 30);
    static const char *const bad[] = {"0",   "-1",      "16k",  " 16",  "16 ",
                                      "1.5", "4194305", "0x10", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(sl_conv_gemm_cap(bad[i]) == 0, "\"%s\" read as %zu", bad[i],
                      sl_conv_gemm_cap(bad[i]));
}
END_TEST

/* SL_CUDA_CONV_GEMM's values: deterministic instances by default, "all",
 * "off", anything else refused. */
START_TEST(test_conv_gemm_mode_reads_the_switch)
{
    ck_assert_int_eq(sl_conv_gemm_mode(NULL), 1);
    ck_assert_int_eq(sl_conv_gemm_mode(""), 1);
    ck_assert_int_eq(sl_conv_gemm_mode("on"), 1);
    ck_assert_int_eq(sl_conv_gemm_mode("1"), 1);
    ck_assert_int_eq(sl_conv_gemm_mode("all"), 2);
    ck_assert_int_eq(sl_conv_gemm_mode("off"), 0);
    ck_assert_int_eq(sl_conv_gemm_mode("0"), 0);
    static const char *const bad[] = {"ON", "yes", "2", "al", "all ", "of", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(sl_conv_gemm_mode(bad[i]) == -1, "\"%s\" read", bad[i]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conv_engine");
    TCase *tc = tcase_create("conv_engine");
    tcase_add_test(tc, test_engine_without_notes_runs_in_every_instance);
    tcase_add_test(tc, test_engine_tensor_cores_need_tf32);
    tcase_add_test(tc, test_engine_narrower_inputs_or_sums_never_run_float);
    tcase_add_test(tc, test_engine_nondeterministic_only_outside_deterministic_instances);
    tcase_add_test(tc, test_engine_needing_reordered_data_never_runs);
    tcase_add_test(tc, test_engine_workspace_cap_is_inclusive);
    tcase_add_test(tc, test_engine_rule_over_every_combination);
    tcase_add_test(tc, test_engine_tuning_takes_the_fastest_or_an_earlier_near_one);
    tcase_add_test(tc, test_engine_tuning_skips_engines_that_failed);
    tcase_add_test(tc, test_engine_tune_count_reads_the_switch);
    tcase_add_test(tc, test_conv_gemm_takes_only_plain_1x1);
    tcase_add_test(tc, test_conv_gemm_split_of_resnet152);
    tcase_add_test(tc, test_conv_gemm_strided_split_of_resnet152);
    tcase_add_test(tc, test_conv_gemm_split_invariants);
    tcase_add_test(tc, test_conv_gemm_mode_reads_the_switch);
    tcase_add_test(tc, test_conv_gemm_passes_by_switch);
    tcase_add_test(tc, test_conv_gemm_cap_reads_the_switch);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
