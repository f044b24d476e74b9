/*
 * cpu_onednn.c — the CPU backend's use of oneDNN (run stage, with plans
 * made at plan time): convolution primitives per geometry and pass, and
 * oneDNN's sgemm for GEMM tiles. Built when oneDNN is found
 * (cmake/onednn.cmake); otherwise every choice below is "im2col" /
 * "OpenBLAS" and nothing else changes.
 *
 * Which engine runs what, decided once and the same for every network of
 * the process (so that two networks, a forward and its re-forward, or a
 * run and its resumed run, compute the same bits):
 *   - GEMM tiles: oneDNN's sgemm when oneDNN's CPU dispatch reaches
 *     AVX-512 (avx512_core or above); OpenBLAS otherwise. Debian's OpenBLAS
 *     is held to its Haswell (AVX2) kernels on AVX-512 machines, where
 *     oneDNN's single-threaded sgemm runs about twice as fast
 *     (bench/bench_gemm.c). SL_CPU_GEMM=openblas|onednn overrides.
 *   - Convolutions: im2col + the GEMM above, except where oneDNN has a
 *     direct (jit) kernel for a kernel wider than 1x1 on an AVX-512 CPU:
 *     those run through oneDNN, which on this kind of machine is about
 *     twice as fast as im2col + GEMM for 3x3 convolutions. For 1x1
 *     convolutions (GEMMs already) and for oneDNN's own gemm-based
 *     convolutions, im2col + the GEMM above measured as fast or faster
 *     with less workspace. SL_CPU_CONV=im2col|onednn overrides.
 *   SL_CPU_KERNELS_LOG=1 prints each decision (and each convolution's
 *   oneDNN implementation) to stderr as it is made.
 *
 * A convolution pass through oneDNN: the library's tensors stay NCHW
 * (weights OIHW) and oneDNN picks its own (blocked) layouts; what differs
 * is staged in the layer's planned workspace: inputs reordered in (weights
 * once a pass), outputs reordered out, or added into the caller's tensor
 * (dst += staged: weight gradients always accumulate, backward data when
 * asked). The scratchpad is in user mode, so it is part of the planned
 * workspace too. The pass runs over chunks of `chunk` images, the largest
 * divisor of the batch whose workspace stays within twice the im2col
 * path's (a geometry where even one image does not fit stays on im2col),
 * so choosing oneDNN at most doubles a layer's workspace. The bias and its
 * gradient are cpu_conv.c's loops on both paths.
 *
 * Primitives run on the backend's team size (the context's threads),
 * fixed when they are made; oneDNN's CPU primitives split their work by
 * shape and team size only and sum without atomics, so a pass given the
 * same inputs returns the same bits, and a re-forward equals its forward.
 */
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"

#ifdef SL_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

/* ---- process-wide choices ---- */

#ifdef SL_HAVE_ONEDNN
static int env_choice(const char *name, const char *a, const char *b)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return -1;
    if (strcmp(v, a) == 0)
        return 0;
    if (strcmp(v, b) == 0)
        return 1;
    return -1;
}
#endif

int sl_cpu_kernels_log(void)
{
    const char *v = getenv("SL_CPU_KERNELS_LOG");
    return v && *v && strcmp(v, "0") != 0;
}

#ifdef SL_HAVE_ONEDNN
static int isa_has_avx512(void)
{
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    return isa != dnnl_cpu_isa_all &&
           (isa & (unsigned)dnnl_cpu_isa_avx512_core) == (unsigned)dnnl_cpu_isa_avx512_core;
}

/* bf16 dot products in hardware (avx512_core_bf16, AMX): where oneDNN's
 * bf16 convolutions outrun its float ones. */
static int isa_has_bf16(void)
{
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    unsigned want = (unsigned)dnnl_cpu_isa_avx512_core_bf16;
    return isa != dnnl_cpu_isa_all && (isa & want) == want;
}

static const char *isa_name(void)
{
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "unknown";
    }
}
#endif

typedef struct cpu_choices {
    int gemm_onednn, conv_onednn;
} cpu_choices;

static cpu_choices g_choices;
static pthread_once_t g_choices_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
#ifdef SL_HAVE_ONEDNN
    int fast = isa_has_avx512();
    int g = env_choice("SL_CPU_GEMM", "openblas", "onednn");
    int c = env_choice("SL_CPU_CONV", "im2col", "onednn");
    g_choices.gemm_onednn = g >= 0 ? g : fast;
    g_choices.conv_onednn = c >= 0 ? c : fast;
    if (sl_cpu_kernels_log())
        fprintf(stderr,
                "sublinear: CPU kernels: oneDNN %d.%d.%d dispatches to %s; GEMM tiles: %s; "
                "convolutions: %s\n",
                dnnl_version()->major, dnnl_version()->minor, dnnl_version()->patch, isa_name(),
                g_choices.gemm_onednn ? "oneDNN sgemm" : "OpenBLAS",
                g_choices.conv_onednn
                    ? "oneDNN's direct kernels where wider than 1x1, else im2col + GEMM"
                    : "im2col + GEMM");
#else
    if (sl_cpu_kernels_log())
        fprintf(stderr, "sublinear: CPU kernels: built without oneDNN; GEMM tiles: OpenBLAS; "
                        "convolutions: im2col + GEMM\n");
#endif
}

static const cpu_choices *choices(void)
{
    pthread_once(&g_choices_once, choose);
    return &g_choices;
}

int sl_cpu_gemm_onednn(void) { return choices()->gemm_onednn; }

void sl_cpu_kernels_force(int gemm_onednn, int conv_onednn)
{
    choices();
#ifdef SL_HAVE_ONEDNN
    g_choices.gemm_onednn = gemm_onednn != 0;
    g_choices.conv_onednn = conv_onednn != 0;
#else
    (void)gemm_onednn;
    (void)conv_onednn;
#endif
}

int sl_cpu_have_onednn(void)
{
#ifdef SL_HAVE_ONEDNN
    return 1;
#else
    return 0;
#endif
}

int sl_cpu_conv_onednn(void) { return choices()->conv_onednn; }

int sl_cpu_has_bf16_dot(void)
{
#ifdef SL_HAVE_ONEDNN
    return isa_has_bf16();
#else
    return 0;
#endif
}

const char *sl_cpu_kernels_describe(char *buf, size_t n)
{
#ifdef SL_HAVE_ONEDNN
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, n, "oneDNN %d.%d.%d (%s); GEMM tiles: %s; convolutions: %s; bf16 convolutions: %s",
             v->major, v->minor, v->patch, isa_name(),
             sl_cpu_gemm_onednn() ? "oneDNN sgemm" : "OpenBLAS",
             sl_cpu_conv_onednn() ? "oneDNN's direct kernels where wider than 1x1, else im2col + GEMM"
                                  : "im2col + GEMM",
             sl_cpu_conv_onednn() && isa_has_bf16() ? "oneDNN in bf16" : "float copies");
#else
    snprintf(buf, n, "no oneDNN; GEMM tiles: OpenBLAS; convolutions: im2col + GEMM");
#endif
    return buf;
}

/* ---- GEMM ---- */

#ifdef SL_HAVE_ONEDNN
/* omp_set_num_threads is per thread: the caller's own setting is put back. */
static int team_push(int threads)
{
    if (omp_in_parallel())
        return -1;
    int old = omp_get_max_threads();
    if (old != threads)
        omp_set_num_threads(threads);
    return old;
}

static void team_pop(int old)
{
    if (old > 0 && omp_get_max_threads() != old)
        omp_set_num_threads(old);
}

void sl_cpu_sgemm_onednn(int trans_a, int trans_b, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc)
{
    /* One thread: inside a team each thread has its tile; outside one the
     * caller asked for a single-threaded product. */
    int old = team_push(1);
    dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c,
               ldc);
    team_pop(old);
}
#endif

/* ---- the backend's state ---- */

#ifdef SL_HAVE_ONEDNN
/* A convolution's three tensors: source (or its gradient), weights (or
 * theirs) and destination (or its gradient). */
enum { T_X, T_W, T_Y, N_T };

/* One tensor of a pass through oneDNN. The caller's is plain (NCHW, OIHW);
 * the primitive's may be blocked, and is then staged in the workspace:
 * inputs reordered in, outputs reordered out (or added: dst += staged). */
typedef struct conv_tensor {
    int out;         /* written by the pass */
    int per_image;   /* X and Y go by chunks of images, W whole */
    int staged;      /* has room in the workspace (in the primitive's layout) */
    int plain_layout; /* the primitive's layout is the caller's */
    size_t offset;   /* its bytes in the workspace when staged */
    dnnl_memory_t arg;       /* the primitive's argument */
    dnnl_memory_t user;      /* the caller's plain tensor */
    dnnl_primitive_t copy;   /* user -> staged (inputs), staged -> user (outputs) */
    dnnl_primitive_t add;    /* outputs: user += staged */
} conv_tensor;

typedef struct conv_plan {
    sl_conv_desc d;
    sl_conv_pass pass;
    int onednn; /* 0: this geometry and pass run im2col */
    int chunk;  /* images per primitive call */
    dnnl_data_type_t dt[N_T];  /* the caller's tensors' (see tensor_types) */
    dnnl_data_type_t adt[N_T]; /* the primitive's */
    size_t scratch_bytes, ws_bytes;
    dnnl_primitive_t prim;
    dnnl_memory_t scratch;
    conv_tensor t[N_T];
    char impl[64];
} conv_plan;
#endif

struct sl_cpu_state {
    int threads;
    sl_status failed; /* the first failed execution, for the next sync */
    char failed_msg[256];
#ifdef SL_HAVE_ONEDNN
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    conv_plan *plans;
    int n_plans, cap_plans;
    struct mm_plan *mms; /* gemm_bf16's, by geometry */
    int n_mms, cap_mms;
#endif
};

#ifdef SL_HAVE_ONEDNN
static void plan_release(conv_plan *p)
{
    for (int t = 0; t < N_T; t++) {
        conv_tensor *c = &p->t[t];
        if (c->arg)
            dnnl_memory_destroy(c->arg);
        if (c->user)
            dnnl_memory_destroy(c->user);
        if (c->copy)
            dnnl_primitive_destroy(c->copy);
        if (c->add)
            dnnl_primitive_destroy(c->add);
    }
    if (p->scratch)
        dnnl_memory_destroy(p->scratch);
    if (p->prim)
        dnnl_primitive_destroy(p->prim);
    memset(p->t, 0, sizeof p->t);
    p->scratch = NULL;
    p->prim = NULL;
}
#endif

#ifdef SL_HAVE_ONEDNN
static void mm_plans_free(sl_cpu_state *s);
#endif

sl_status sl_cpu_state_create(int threads, sl_cpu_state **out)
{
    sl_cpu_state *s = sl_zalloc(sizeof *s, "the CPU backend's state");
    if (!s)
        return SL_ERR_NOMEM;
    s->threads = threads > 0 ? threads : 1;
    *out = s;
    return SL_OK;
}

void sl_cpu_state_free(sl_cpu_state *s)
{
    if (!s)
        return;
#ifdef SL_HAVE_ONEDNN
    for (int i = 0; i < s->n_plans; i++)
        plan_release(&s->plans[i]);
    free(s->plans);
    mm_plans_free(s);
    if (s->stream)
        dnnl_stream_destroy(s->stream);
    if (s->engine)
        dnnl_engine_destroy(s->engine);
#endif
    free(s);
}

sl_status sl_cpu_state_sync(sl_cpu_state *s)
{
    if (s && s->failed != SL_OK) {
        sl_status st = s->failed;
        s->failed = SL_OK;
        return sl_set_error(st, "%s", s->failed_msg);
    }
    return SL_OK;
}

void sl_cpu_state_fail(sl_cpu_state *s, const char *what)
{
    if (!s || s->failed != SL_OK)
        return;
    s->failed = SL_ERR_BACKEND;
    snprintf(s->failed_msg, sizeof s->failed_msg, "%s", what);
}

/* ---- convolutions ---- */

#ifdef SL_HAVE_ONEDNN

static size_t round_up(size_t b) { return (b + SL_ALIGN - 1) / SL_ALIGN * SL_ALIGN; }

static sl_status dnnl_fail(dnnl_status_t st, const char *what)
{
    if (st == dnnl_out_of_memory)
        return sl_set_error(SL_ERR_NOMEM, "out of memory (oneDNN, %s)", what);
    return sl_set_error(SL_ERR_BACKEND, "oneDNN could not %s (status %d)", what, (int)st);
}

/* The data types of a pass's tensors: the caller's (dt) and the
 * primitive's (adt). Float: all f32. bf16 (d->bf16): the activations are
 * bf16 on both sides; the weights are the caller's float masters, which
 * the forward and backward data read as bf16 (the staging reorder rounds
 * them, to nearest even), and backward filter writes its float gradient
 * straight (bf16 products summed in float). */
static void tensor_types(const sl_conv_desc *d, sl_conv_pass pass, dnnl_data_type_t dt[N_T],
                         dnnl_data_type_t adt[N_T])
{
    dnnl_data_type_t act = d->bf16 ? dnnl_bf16 : dnnl_f32;
    dt[T_X] = adt[T_X] = act;
    dt[T_Y] = adt[T_Y] = act;
    dt[T_W] = dnnl_f32;
    adt[T_W] = pass == SL_CONV_BWD_FILTER ? dnnl_f32 : act;
}

/* The plain descriptors of the caller's tensors, over `images` images,
 * in data types dt. */
static dnnl_status_t plain_mds(const sl_conv_desc *d, int images, const dnnl_data_type_t dt[N_T],
                               dnnl_memory_desc_t md[N_T])
{
    dnnl_dims_t xd = {images, d->c, d->h, d->w}, yd = {images, d->k, d->oh, d->ow};
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(&md[T_X], 4, xd, dt[T_X], dnnl_nchw);
    if (st == dnnl_success)
        st = dnnl_memory_desc_init_by_tag(&md[T_Y], 4, yd, dt[T_Y], dnnl_nchw);
    if (st != dnnl_success)
        return st;
    if (d->groups == 1) {
        dnnl_dims_t wd = {d->k, d->c, d->kh, d->kw};
        return dnnl_memory_desc_init_by_tag(&md[T_W], 4, wd, dt[T_W], dnnl_oihw);
    }
    dnnl_dims_t wd = {d->groups, d->k / d->groups, d->c / d->groups, d->kh, d->kw};
    return dnnl_memory_desc_init_by_tag(&md[T_W], 5, wd, dt[T_W], dnnl_goihw);
}

/* The primitive descriptor of one pass over `images` images, every layout
 * left to oneDNN ("any"), scratchpad in user mode. */
static dnnl_status_t pass_desc(sl_cpu_state *s, const conv_plan *p, int images,
                               dnnl_primitive_desc_t *out)
{
    const sl_conv_desc *d = &p->d;
    sl_conv_pass pass = p->pass;
    *out = NULL;
    dnnl_memory_desc_t plain[N_T], any[N_T], wfwd;
    dnnl_status_t st = plain_mds(d, images, p->dt, plain);
    for (int t = 0; t < N_T && st == dnnl_success; t++)
        st = dnnl_memory_desc_init_by_tag(&any[t], plain[t].ndims, plain[t].dims, p->adt[t],
                                          dnnl_format_tag_any);
    /* the forward (the hint of a backward pass) reads the weights as the
     * activations' type */
    if (st == dnnl_success)
        st = dnnl_memory_desc_init_by_tag(&wfwd, plain[T_W].ndims, plain[T_W].dims,
                                          p->adt[T_X], dnnl_format_tag_any);
    if (st != dnnl_success)
        return st;
    dnnl_dims_t stride = {d->sh, d->sw}, dil = {d->dh - 1, d->dw - 1}, pad = {d->ph, d->pw};
    /* right padding that gives oneDNN the library's output size */
    dnnl_dims_t pad_r = {
        (dnnl_dim_t)(d->oh - 1) * d->sh + (dnnl_dim_t)(d->kh - 1) * d->dh + 1 - d->h - d->ph,
        (dnnl_dim_t)(d->ow - 1) * d->sw + (dnnl_dim_t)(d->kw - 1) * d->dw + 1 - d->w - d->pw};
    dnnl_primitive_attr_t attr = NULL;
    st = dnnl_primitive_attr_create(&attr);
    if (st == dnnl_success)
        st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    dnnl_convolution_desc_t fd, bd;
    dnnl_primitive_desc_t fwd = NULL;
    if (st == dnnl_success)
        st = dnnl_dilated_convolution_forward_desc_init(
            &fd, dnnl_forward_training, dnnl_convolution_direct, &any[T_X], &wfwd, NULL,
            &any[T_Y], stride, dil, pad, pad_r);
    if (st == dnnl_success)
        st = dnnl_primitive_desc_create(&fwd, &fd, attr, s->engine, NULL);
    if (st == dnnl_success && pass == SL_CONV_FWD) {
        *out = fwd;
        fwd = NULL;
    } else if (st == dnnl_success) {
        if (pass == SL_CONV_BWD_DATA)
            st = dnnl_dilated_convolution_backward_data_desc_init(
                &bd, dnnl_convolution_direct, &any[T_X], &any[T_W], &any[T_Y], stride, dil, pad,
                pad_r);
        else
            st = dnnl_dilated_convolution_backward_weights_desc_init(
                &bd, dnnl_convolution_direct, &any[T_X], &any[T_W], NULL, &any[T_Y], stride, dil,
                pad, pad_r);
        if (st == dnnl_success)
            st = dnnl_primitive_desc_create(out, &bd, attr, s->engine, fwd);
    }
    if (fwd)
        dnnl_primitive_desc_destroy(fwd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return st;
}

static const dnnl_memory_desc_t *pass_md(const_dnnl_primitive_desc_t pd, sl_conv_pass pass, int t)
{
    dnnl_query_t q;
    if (t == T_X)
        q = pass == SL_CONV_BWD_DATA ? dnnl_query_diff_src_md : dnnl_query_src_md;
    else if (t == T_W)
        q = pass == SL_CONV_BWD_FILTER ? dnnl_query_diff_weights_md : dnnl_query_weights_md;
    else
        q = pass == SL_CONV_FWD ? dnnl_query_dst_md : dnnl_query_diff_dst_md;
    return dnnl_primitive_desc_query_md(pd, q, 0);
}

static int tensor_out(sl_conv_pass pass, int t)
{
    return (pass == SL_CONV_FWD && t == T_Y) || (pass == SL_CONV_BWD_DATA && t == T_X) ||
           (pass == SL_CONV_BWD_FILTER && t == T_W);
}

/* Whether a tensor is staged: its layout is not the caller's, or it is an
 * output that is added into the caller's (weight gradients accumulate;
 * backward data accumulates when asked, so it is planned for). */
static int tensor_staged(sl_conv_pass pass, int t, const dnnl_memory_desc_t *plain,
                         const dnnl_memory_desc_t *chosen)
{
    if (!dnnl_memory_desc_equal(plain, chosen))
        return 1;
    return tensor_out(pass, t) && pass != SL_CONV_FWD;
}

/* The workspace of a pass over chunks of `images` images: scratchpad, then
 * the staged tensors. */
static size_t pass_workspace(sl_conv_pass pass, const_dnnl_primitive_desc_t pd,
                             const dnnl_memory_desc_t plain[N_T], size_t offsets[N_T])
{
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t bytes = round_up(sp ? dnnl_memory_desc_get_size(sp) : 0);
    for (int t = 0; t < N_T; t++) {
        const dnnl_memory_desc_t *md = pass_md(pd, pass, t);
        offsets[t] = SIZE_MAX;
        if (md && tensor_staged(pass, t, &plain[t], md)) {
            offsets[t] = bytes;
            bytes += round_up(dnnl_memory_desc_get_size(md));
        }
    }
    return bytes;
}

/* Reorder between two layouts (sum: dst += src), scratchpad none. */
static dnnl_status_t make_reorder(sl_cpu_state *s, const dnnl_memory_desc_t *from,
                                  const dnnl_memory_desc_t *to, int sum, dnnl_primitive_t *out)
{
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st = dnnl_primitive_attr_create(&attr);
    if (st == dnnl_success && sum) {
        st = dnnl_post_ops_create(&po);
        if (st == dnnl_success)
            st = dnnl_post_ops_append_sum(po, 1.0f);
        if (st == dnnl_success)
            st = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    if (st == dnnl_success)
        st = dnnl_reorder_primitive_desc_create(&pd, from, s->engine, to, s->engine, attr);
    if (st == dnnl_success) {
        const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        if (sp && dnnl_memory_desc_get_size(sp) != 0)
            st = dnnl_unimplemented; /* a reorder that needs its own scratch: not planned */
    }
    if (st == dnnl_success)
        st = dnnl_primitive_create(out, pd);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return st;
}

/* 1x1 convolutions may go to oneDNN on planes of at most this many outputs
 * (14x14 and below), where one image's GEMM is narrow. A stride-1 1x1
 * convolution has no im2col workspace, so the rule below keeps it on the
 * GEMM; the strided ones (ResNet's downsampling) can fit. A floor under
 * that rule (32 MiB, so that whole batches fit) measured 5 % faster on
 * ResNet-50's convolutions but raised ResNet-110's least planned arena by
 * half: not worth it. */
#define SMALL_PLANE 196

/* The most workspace a pass through oneDNN may take: twice the im2col
 * path's, so choosing oneDNN at most doubles a layer's workspace. In bf16
 * also what the path replaces or must add: the float copies of the input
 * and output the executor would otherwise widen them into, the weights
 * (or their gradient) in oneDNN's layout, and 1 MiB for the scratchpads
 * of small geometries (planes of 7x7 and below, where weights outweigh
 * activations). */
static size_t workspace_limit(const sl_conv_desc *d)
{
    size_t limit = 2 * sl_cpu_im2col_bytes(d);
    if (d->bf16) {
        size_t act = ((size_t)d->c * d->h * d->w + (size_t)d->k * d->oh * d->ow) * (size_t)d->n;
        size_t w = (size_t)d->k * (size_t)(d->c / d->groups) * d->kh * d->kw;
        limit += (act + w) * sizeof(float) + ((size_t)1 << 20);
    }
    return limit;
}

/* oneDNN's optimised kernels: jit, and (bf16 on AMX) brgemm-based ones;
 * not its gemm-based or reference ones, for which im2col with the chosen
 * GEMM is as fast. */
static int impl_wanted(const conv_plan *p)
{
    return strncmp(p->impl, "jit", 3) == 0 || (p->d.bf16 && strncmp(p->impl, "brg", 3) == 0);
}

/* Images per call: the largest divisor of n whose workspace stays within
 * workspace_limit, with its primitive descriptor in *out (the caller's) and
 * its implementation's name in p->impl; 0 when not even one image fits, or
 * oneDNN has no kernel impl_wanted takes for the pass. */
static int choose_chunk(sl_cpu_state *s, conv_plan *p, dnnl_primitive_desc_t *out)
{
    const sl_conv_desc *d = &p->d;
    size_t limit = workspace_limit(d);
    *out = NULL;
    for (int c = d->n; c >= 1; c--) {
        if (d->n % c != 0)
            continue;
        dnnl_primitive_desc_t pd;
        if (pass_desc(s, p, c, &pd) != dnnl_success)
            return 0;
        const char *name = "";
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name);
        snprintf(p->impl, sizeof p->impl, "%s", name ? name : "");
        dnnl_memory_desc_t plain[N_T];
        size_t offsets[N_T], bytes = SIZE_MAX;
        if (plain_mds(d, c, p->dt, plain) == dnnl_success)
            bytes = pass_workspace(p->pass, pd, plain, offsets);
        if (!impl_wanted(p)) {
            dnnl_primitive_desc_destroy(pd);
            return 0;
        }
        if (bytes <= limit) {
            *out = pd;
            return c;
        }
        dnnl_primitive_desc_destroy(pd);
    }
    return 0;
}

/* Which convolutions may go to oneDNN: in bf16 all (the im2col path
 * computes in float only); in float those with a kernel wider than 1x1
 * (a 1x1 convolution is a GEMM already, and im2col + the chosen GEMM runs
 * it as fast); for backward data, inputs of at least 16 channels per group
 * (the stem's 3 are padded to a block of 16 and run slower). */
static int conv_wants_onednn(const sl_conv_desc *d, sl_conv_pass pass)
{
    if (d->bf16)
        return 1;
    if (d->kh * d->kw <= 1 && d->oh * d->ow > SMALL_PLANE)
        return 0;
    if (pass == SL_CONV_BWD_DATA && d->c / d->groups < 16)
        return 0;
    return 1;
}

/* Makes the primitive and reorders of one pass over chunks of p->chunk
 * from pd, choose_chunk's (released here). */
static sl_status make_plan(sl_cpu_state *s, conv_plan *p, dnnl_primitive_desc_t pd)
{
    const sl_conv_desc *d = &p->d;
    dnnl_memory_desc_t plain[N_T];
    size_t offsets[N_T];
    dnnl_status_t st = plain_mds(d, p->chunk, p->dt, plain);
    if (st == dnnl_success) {
        p->ws_bytes = pass_workspace(p->pass, pd, plain, offsets);
        const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        p->scratch_bytes = sp ? dnnl_memory_desc_get_size(sp) : 0;
        if (p->scratch_bytes)
            st = dnnl_memory_create(&p->scratch, sp, s->engine, DNNL_MEMORY_NONE);
    }
    for (int t = 0; t < N_T && st == dnnl_success; t++) {
        conv_tensor *c = &p->t[t];
        const dnnl_memory_desc_t *md = pass_md(pd, p->pass, t);
        c->out = tensor_out(p->pass, t);
        c->per_image = t != T_W;
        c->staged = offsets[t] != SIZE_MAX;
        c->plain_layout = dnnl_memory_desc_equal(md, &plain[t]);
        c->offset = c->staged ? offsets[t] : 0;
        st = dnnl_memory_create(&c->arg, md, s->engine, DNNL_MEMORY_NONE);
        if (st == dnnl_success && c->staged)
            st = dnnl_memory_create(&c->user, &plain[t], s->engine, DNNL_MEMORY_NONE);
        if (st == dnnl_success && c->staged && !c->out)
            st = make_reorder(s, &plain[t], md, 0, &c->copy);
        if (st == dnnl_success && c->staged && c->out) {
            st = make_reorder(s, md, &plain[t], 1, &c->add);
            if (st == dnnl_success && !c->plain_layout)
                st = make_reorder(s, md, &plain[t], 0, &c->copy);
        }
    }
    if (st == dnnl_success)
        st = dnnl_primitive_create(&p->prim, pd);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success) {
        plan_release(p);
        return dnnl_fail(st, "make a convolution");
    }
    p->onednn = 1;
    return SL_OK;
}

static const char *pass_name(sl_conv_pass pass)
{
    return pass == SL_CONV_FWD ? "forward" : pass == SL_CONV_BWD_DATA ? "backward data"
                                                                      : "backward filter";
}

/* Room for one more of a plan table (*items, n used of *cap, elt bytes
 * each); 0, or -1 with the error set. */
static int table_room(void **items, int n, int *cap, size_t elt, const char *what)
{
    if (n < *cap)
        return 0;
    int nc = *cap ? 2 * *cap : 16;
    void *np = sl_realloc(*items, (size_t)nc * elt);
    if (!np) {
        sl_set_error(SL_ERR_NOMEM, "out of memory for the CPU backend's %s", what);
        return -1;
    }
    *items = np;
    *cap = nc;
    return 0;
}

/* The engine and stream every primitive runs on, opened at the first plan. */
static sl_status open_engine(sl_cpu_state *s)
{
    if (s->engine)
        return SL_OK;
    dnnl_status_t e = dnnl_engine_create(&s->engine, dnnl_cpu, 0);
    if (e == dnnl_success)
        e = dnnl_stream_create(&s->stream, s->engine, dnnl_stream_default_flags);
    return e == dnnl_success ? SL_OK : dnnl_fail(e, "open its CPU engine");
}

/* The plan of one geometry and pass, made on first use (at plan time:
 * the layer asks for its workspace); NULL with the error set when it could
 * not be made. */
static conv_plan *conv_plan_get(sl_cpu_state *s, const sl_conv_desc *d, sl_conv_pass pass)
{
    for (int i = 0; i < s->n_plans; i++)
        if (s->plans[i].pass == pass && memcmp(&s->plans[i].d, d, sizeof *d) == 0)
            return &s->plans[i];
    if (table_room((void **)&s->plans, s->n_plans, &s->cap_plans, sizeof *s->plans,
                   "convolution plans"))
        return NULL;
    conv_plan p;
    memset(&p, 0, sizeof p);
    p.d = *d;
    p.pass = pass;
    tensor_types(d, pass, p.dt, p.adt);
    p.ws_bytes = sl_cpu_im2col_bytes(d);
    if (sl_cpu_conv_onednn() && conv_wants_onednn(d, pass) && (!d->bf16 || isa_has_bf16())) {
        int old = team_push(s->threads);
        sl_status st = open_engine(s);
        dnnl_primitive_desc_t pd = NULL;
        if (st == SL_OK)
            p.chunk = choose_chunk(s, &p, &pd);
        if (st == SL_OK && p.chunk > 0)
            st = make_plan(s, &p, pd);
        team_pop(old);
        /* a bf16 pass oneDNN cannot make leaves the convolution to the
         * executor's float copies (conv2d_native_bf16 says 0) */
        if (st != SL_OK && !d->bf16)
            return NULL;
    }
    const char *dt = d->bf16 ? " bf16" : "";
    if (sl_cpu_kernels_log() && p.onednn)
        fprintf(stderr,
                "sublinear: conv%s %dx%dx%dx%d -> %d %dx%d/%d %s: oneDNN %s, %d image%s a call, "
                "workspace %zu bytes\n",
                dt, d->n, d->c, d->h, d->w, d->k, d->kh, d->kw, d->sh, pass_name(pass), p.impl,
                p.chunk, p.chunk == 1 ? "" : "s", p.ws_bytes);
    else if (sl_cpu_kernels_log() && d->bf16)
        fprintf(stderr, "sublinear: conv bf16 %dx%dx%dx%d -> %d %dx%d/%d %s: no oneDNN kernel "
                        "within its workspace (oneDNN offers '%s'); float copies instead\n",
                d->n, d->c, d->h, d->w, d->k, d->kh, d->kw, d->sh, pass_name(pass), p.impl);
    else if (sl_cpu_kernels_log())
        fprintf(stderr, "sublinear: conv %dx%dx%dx%d -> %d %dx%d/%d %s: im2col + GEMM, workspace "
                        "%zu bytes\n",
                d->n, d->c, d->h, d->w, d->k, d->kh, d->kw, d->sh, pass_name(pass), p.ws_bytes);
    s->plans[s->n_plans++] = p;
    return &s->plans[s->n_plans - 1];
}

static void record_failure(sl_cpu_state *s, dnnl_status_t st)
{
    if (s->failed != SL_OK)
        return;
    s->failed = st == dnnl_out_of_memory ? SL_ERR_NOMEM : SL_ERR_BACKEND;
    snprintf(s->failed_msg, sizeof s->failed_msg, "a oneDNN primitive failed (status %d)",
             (int)st);
}

static dnnl_status_t reorder(sl_cpu_state *s, dnnl_primitive_t r, dnnl_memory_t from,
                             dnnl_memory_t to)
{
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    return dnnl_primitive_execute(r, s->stream, 2, args);
}

/* One pass over the chunks. user[t]: the caller's tensor (X and Y from
 * image 0); add: outputs are added into the caller's (weight gradients
 * always, backward data when it accumulates). */
static void run_plan(sl_cpu_state *s, conv_plan *p, const void *user[N_T], int add, char *ws)
{
    const sl_conv_desc *d = &p->d;
    size_t elt = d->bf16 ? sizeof(uint16_t) : sizeof(float);
    size_t image[N_T] = {(size_t)d->c * d->h * d->w * elt, 0, (size_t)d->k * d->oh * d->ow * elt};
    static const int fwd[N_T] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    static const int data[N_T] = {DNNL_ARG_DIFF_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_DST};
    static const int filter[N_T] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_DST};
    const int *names = p->pass == SL_CONV_FWD ? fwd : p->pass == SL_CONV_BWD_DATA ? data : filter;
    int old = team_push(s->threads);
    dnnl_status_t st = dnnl_success;
    if (p->scratch)
        st = dnnl_memory_set_data_handle(p->scratch, ws);
    for (int i = 0; i < d->n && st == dnnl_success; i += p->chunk) {
        dnnl_exec_arg_t args[N_T + 1];
        int via[N_T]; /* 1: through the workspace */
        for (int t = 0; t < N_T && st == dnnl_success; t++) {
            conv_tensor *c = &p->t[t];
            void *mine = (char *)user[t] + (c->per_image ? (size_t)i * image[t] : 0);
            /* an output in the caller's layout that is not added goes
             * straight into the caller's tensor */
            via[t] = c->staged && !(c->out && c->plain_layout && !add);
            st = dnnl_memory_set_data_handle(c->arg, via[t] ? ws + c->offset : mine);
            if (st == dnnl_success && via[t])
                st = dnnl_memory_set_data_handle(c->user, mine);
            /* inputs: the weights once, images chunk by chunk */
            if (st == dnnl_success && via[t] && !c->out && (c->per_image || i == 0))
                st = reorder(s, c->copy, c->user, c->arg);
            args[t].arg = names[t];
            args[t].memory = c->arg;
        }
        int n = N_T;
        if (p->scratch) {
            args[n].arg = DNNL_ARG_SCRATCHPAD;
            args[n].memory = p->scratch;
            n++;
        }
        if (st == dnnl_success)
            st = dnnl_primitive_execute(p->prim, s->stream, n, args);
        for (int t = 0; t < N_T && st == dnnl_success; t++) {
            conv_tensor *c = &p->t[t];
            if (via[t] && c->out)
                st = reorder(s, add ? c->add : c->copy, c->arg, c->user);
        }
    }
    if (st == dnnl_success)
        st = dnnl_stream_wait(s->stream);
    team_pop(old);
    if (st != dnnl_success)
        record_failure(s, st);
}

static sl_cpu_state *state_of(const sl_backend *be) { return (sl_cpu_state *)be->impl; }

size_t sl_cpu_onednn_conv_workspace(const sl_backend *be, const sl_conv_desc *d,
                                    sl_conv_pass pass)
{
    sl_cpu_state *s = state_of(be);
    if (!s)
        return sl_cpu_im2col_bytes(d);
    conv_plan *p = conv_plan_get(s, d, pass);
    return p ? p->ws_bytes : SIZE_MAX;
}

int sl_cpu_onednn_conv_chunk(const sl_backend *be, const sl_conv_desc *d, sl_conv_pass pass)
{
    sl_cpu_state *s = state_of(be);
    conv_plan *p = s ? conv_plan_get(s, d, pass) : NULL;
    return p && p->onednn ? p->chunk : 0;
}

int sl_cpu_conv2d_native_bf16(const sl_backend *be, const sl_conv_desc *d)
{
    if (!d->bf16)
        return 0;
    for (int pass = 0; pass < 3; pass++)
        if (sl_cpu_onednn_conv_chunk(be, d, (sl_conv_pass)pass) == 0)
            return 0;
    return 1;
}

static conv_plan *plan_for(const sl_exec *ex, const sl_conv_desc *d, sl_conv_pass pass)
{
    /* the plan's own choice, made when its workspace was sized */
    sl_cpu_state *s = state_of(ex->be);
    conv_plan *p = s ? conv_plan_get(s, d, pass) : NULL;
    return p && p->onednn ? p : NULL;
}

int sl_cpu_onednn_conv_forward(const sl_exec *ex, const sl_conv_desc *d, const void *x,
                               const float *w, void *y, void *ws)
{
    conv_plan *p = plan_for(ex, d, SL_CONV_FWD);
    if (!p)
        return 0;
    const void *user[N_T] = {x, w, y};
    run_plan(state_of(ex->be), p, user, 0, ws);
    return 1;
}

int sl_cpu_onednn_conv_backward_data(const sl_exec *ex, const sl_conv_desc *d, const float *w,
                                     const void *dy, void *dx, int accumulate, void *ws)
{
    conv_plan *p = plan_for(ex, d, SL_CONV_BWD_DATA);
    if (!p)
        return 0;
    const void *user[N_T] = {dx, w, dy};
    run_plan(state_of(ex->be), p, user, accumulate, ws);
    return 1;
}

int sl_cpu_onednn_conv_backward_filter(const sl_exec *ex, const sl_conv_desc *d, const void *x,
                                       const void *dy, float *dw, void *ws)
{
    conv_plan *p = plan_for(ex, d, SL_CONV_BWD_FILTER);
    if (!p)
        return 0;
    const void *user[N_T] = {x, dw, dy};
    run_plan(state_of(ex->be), p, user, 1, ws); /* parameter gradients accumulate */
    return 1;
}


/* ---- GEMMs on bf16 operands (gemm_bf16): oneDNN's matmul ---- */

/* One geometry's matmul: the caller's row-major tensors described by
 * strides (a transposed operand is the same bytes read column-wise), so
 * nothing is reordered; oneDNN packs what its kernel wants into the
 * scratchpad, which is the call's workspace. ok 0: no plan (the error was
 * set when it was asked for). */
typedef struct mm_plan {
    sl_gemm_bf16_desc d;
    int ok;
    size_t ws_bytes;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, bias, c, scratch;
    char impl[64];
} mm_plan;

static void mm_release(mm_plan *p)
{
    dnnl_memory_t *m[5] = {&p->a, &p->b, &p->bias, &p->c, &p->scratch};
    for (int i = 0; i < 5; i++)
        if (*m[i]) {
            dnnl_memory_destroy(*m[i]);
            *m[i] = NULL;
        }
    if (p->prim)
        dnnl_primitive_destroy(p->prim);
    p->prim = NULL;
}

static void mm_plans_free(sl_cpu_state *s)
{
    for (int i = 0; i < s->n_mms; i++)
        mm_release(&s->mms[i]);
    free(s->mms);
}

/* A 2-d row-major matrix of rows x cols, ld apart, read transposed or not,
 * as oneDNN's logical rows x cols. */
static dnnl_status_t mm_md(dnnl_memory_desc_t *md, int rows, int cols, int ld, int trans,
                           dnnl_data_type_t dt)
{
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
    return dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides);
}

static dnnl_status_t mm_make(sl_cpu_state *s, mm_plan *p)
{
    const sl_gemm_bf16_desc *d = &p->d;
    dnnl_memory_desc_t a, b, c, bias;
    dnnl_status_t st = mm_md(&a, d->m, d->k, d->lda, d->trans_a, dnnl_bf16);
    if (st == dnnl_success)
        st = mm_md(&b, d->k, d->n, d->ldb, d->trans_b, dnnl_bf16);
    if (st == dnnl_success)
        st = mm_md(&c, d->m, d->n, d->ldc, 0, d->c_bf16 ? dnnl_bf16 : dnnl_f32);
    if (st == dnnl_success && d->has_bias)
        st = mm_md(&bias, 1, d->n, d->n, 0, dnnl_f32);
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    if (st == dnnl_success)
        st = dnnl_primitive_attr_create(&attr);
    if (st == dnnl_success)
        st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (st == dnnl_success && d->accumulate) { /* c = product + c, one rounding */
        st = dnnl_post_ops_create(&po);
        if (st == dnnl_success)
            st = dnnl_post_ops_append_sum(po, 1.0f);
        if (st == dnnl_success)
            st = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd = NULL;
    if (st == dnnl_success)
        st = dnnl_matmul_desc_init(&md, &a, &b, d->has_bias ? &bias : NULL, &c);
    if (st == dnnl_success)
        st = dnnl_primitive_desc_create(&pd, &md, attr, s->engine, NULL);
    if (st == dnnl_success) {
        const char *name = "";
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name);
        snprintf(p->impl, sizeof p->impl, "%s", name ? name : "");
        const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        p->ws_bytes = sp ? dnnl_memory_desc_get_size(sp) : 0;
        if (p->ws_bytes)
            st = dnnl_memory_create(&p->scratch, sp, s->engine, DNNL_MEMORY_NONE);
    }
    if (st == dnnl_success)
        st = dnnl_memory_create(&p->a, &a, s->engine, DNNL_MEMORY_NONE);
    if (st == dnnl_success)
        st = dnnl_memory_create(&p->b, &b, s->engine, DNNL_MEMORY_NONE);
    if (st == dnnl_success)
        st = dnnl_memory_create(&p->c, &c, s->engine, DNNL_MEMORY_NONE);
    if (st == dnnl_success && d->has_bias)
        st = dnnl_memory_create(&p->bias, &bias, s->engine, DNNL_MEMORY_NONE);
    if (st == dnnl_success)
        st = dnnl_primitive_create(&p->prim, pd);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        mm_release(p);
    return st;
}

/* The plan of a geometry, made on first use (at plan time: the layer asks
 * for its workspace); NULL with the error set when it cannot be made. */
static mm_plan *mm_plan_get(sl_cpu_state *s, const sl_gemm_bf16_desc *d)
{
    for (int i = 0; i < s->n_mms; i++)
        if (memcmp(&s->mms[i].d, d, sizeof *d) == 0) {
            if (!s->mms[i].ok)
                sl_set_error(SL_ERR_UNSUPPORTED, "oneDNN has no bf16 matmul for this geometry");
            return s->mms[i].ok ? &s->mms[i] : NULL;
        }
    if (table_room((void **)&s->mms, s->n_mms, &s->cap_mms, sizeof *s->mms, "matmul plans"))
        return NULL;
    mm_plan p;
    memset(&p, 0, sizeof p);
    p.d = *d;
    sl_status st = SL_OK;
    if (!isa_has_bf16())
        st = sl_set_error(SL_ERR_UNSUPPORTED, "this CPU has no bf16 dot products for oneDNN");
    int old = team_push(s->threads);
    if (st == SL_OK)
        st = open_engine(s);
    if (st == SL_OK) {
        dnnl_status_t e = mm_make(s, &p);
        if (e != dnnl_success)
            st = dnnl_fail(e, "make a bf16 matmul");
    }
    team_pop(old);
    p.ok = st == SL_OK;
    if (sl_cpu_kernels_log())
        fprintf(stderr, "sublinear: gemm bf16 %dx%dx%d%s%s%s: %s%s, workspace %zu bytes\n", d->m,
                d->n, d->k, d->trans_a ? " a^T" : "", d->trans_b ? " b^T" : "",
                d->accumulate ? " +=" : "", p.ok ? "oneDNN " : "none: ", p.ok ? p.impl : sl_last_error(),
                p.ws_bytes);
    s->mms[s->n_mms++] = p;
    return p.ok ? &s->mms[s->n_mms - 1] : NULL;
}

size_t sl_cpu_gemm_bf16_workspace_bytes(const sl_backend *be, const sl_gemm_bf16_desc *d)
{
    sl_cpu_state *s = state_of(be);
    mm_plan *p = s ? mm_plan_get(s, d) : NULL;
    return p ? p->ws_bytes : SIZE_MAX;
}

void sl_cpu_gemm_bf16(const sl_exec *ex, const sl_gemm_bf16_desc *d, const void *a, const void *b,
                      const float *bias, void *c, void *ws)
{
    sl_cpu_state *s = state_of(ex->be);
    mm_plan *p = s ? mm_plan_get(s, d) : NULL;
    if (!p) {
        sl_cpu_state_fail(s, "gemm_bf16 on a geometry without a oneDNN plan");
        return;
    }
    int old = team_push(s->threads);
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, p->a}, {DNNL_ARG_WEIGHTS, p->b}, {DNNL_ARG_DST, p->c}};
    int n = 3;
    dnnl_status_t st = dnnl_memory_set_data_handle(p->a, (void *)a);
    if (st == dnnl_success)
        st = dnnl_memory_set_data_handle(p->b, (void *)b);
    if (st == dnnl_success)
        st = dnnl_memory_set_data_handle(p->c, c);
    if (st == dnnl_success && p->bias) {
        st = dnnl_memory_set_data_handle(p->bias, (void *)bias);
        args[n].arg = DNNL_ARG_BIAS;
        args[n++].memory = p->bias;
    }
    if (st == dnnl_success && p->scratch) {
        st = dnnl_memory_set_data_handle(p->scratch, ws);
        args[n].arg = DNNL_ARG_SCRATCHPAD;
        args[n++].memory = p->scratch;
    }
    if (st == dnnl_success)
        st = dnnl_primitive_execute(p->prim, s->stream, n, args);
    if (st == dnnl_success)
        st = dnnl_stream_wait(s->stream);
    team_pop(old);
    if (st != dnnl_success)
        record_failure(s, st);
}

#else /* no oneDNN */

int sl_cpu_onednn_conv_chunk(const sl_backend *be, const sl_conv_desc *d, sl_conv_pass pass)
{
    (void)be, (void)d, (void)pass;
    return 0;
}

int sl_cpu_conv2d_native_bf16(const sl_backend *be, const sl_conv_desc *d)
{
    (void)be, (void)d;
    return 0;
}

size_t sl_cpu_onednn_conv_workspace(const sl_backend *be, const sl_conv_desc *d,
                                    sl_conv_pass pass)
{
    (void)be;
    (void)pass;
    return sl_cpu_im2col_bytes(d);
}

int sl_cpu_onednn_conv_forward(const sl_exec *ex, const sl_conv_desc *d, const void *x,
                               const float *w, void *y, void *ws)
{
    (void)ex, (void)d, (void)x, (void)w, (void)y, (void)ws;
    return 0;
}

int sl_cpu_onednn_conv_backward_data(const sl_exec *ex, const sl_conv_desc *d, const float *w,
                                     const void *dy, void *dx, int accumulate, void *ws)
{
    (void)ex, (void)d, (void)w, (void)dy, (void)dx, (void)accumulate, (void)ws;
    return 0;
}

int sl_cpu_onednn_conv_backward_filter(const sl_exec *ex, const sl_conv_desc *d, const void *x,
                                       const void *dy, float *dw, void *ws)
{
    (void)ex, (void)d, (void)x, (void)dy, (void)dw, (void)ws;
    return 0;
}

size_t sl_cpu_gemm_bf16_workspace_bytes(const sl_backend *be, const sl_gemm_bf16_desc *d)
{
    (void)be, (void)d;
    sl_set_error(SL_ERR_UNSUPPORTED, "this build has no oneDNN for bf16 GEMMs");
    return SIZE_MAX;
}

void sl_cpu_gemm_bf16(const sl_exec *ex, const sl_gemm_bf16_desc *d, const void *a, const void *b,
                      const float *bias, void *c, void *ws)
{
    (void)d, (void)a, (void)b, (void)bias, (void)c, (void)ws;
    sl_cpu_state_fail(ex && ex->be ? ex->be->impl : NULL, "gemm_bf16 without oneDNN");
}
#endif
