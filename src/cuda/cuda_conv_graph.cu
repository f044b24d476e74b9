/*
 * cuda_conv_graph.cu — a convolution pass through cuDNN's graph API, the
 * C backend descriptors (run stage on a GPU; cuda_conv.cu caches per
 * geometry what this builds and falls back to the legacy API where it
 * fails).
 *
 * A geometry has float NCHW tensors x, w, y (unique ids 'x', 'w', 'y')
 * and a cross-correlation descriptor with float compute. A pass is a
 * one-operation graph (forward, backward data or backward filter, with
 * alpha 1 and the caller's beta) on the instance's cuDNN handle. Its
 * engine: cuDNN's heuristics in mode A, then mode B, then the fallback
 * list, each list in cuDNN's order; the first configuration whose notes
 * base/conv_engine.h allows, that finalizes into an execution plan and
 * whose plan's workspace is within the cap. The list is a function of
 * the graph, the device and the cuDNN version, so the choice is made
 * once per geometry and instance and every call (a re-forward too) runs
 * the same plan: the same bits.
 *
 * Every descriptor made here is destroyed on every path: a builder
 * frees what it made before it returns false, and a kept plan owns its
 * operation, graph and engine configuration (kept alive as long as the
 * plan, as cuDNN's own frontend keeps them).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_conv_graph.h"

typedef cudnnBackendDescriptor_t desc_t;

/* snprintf into a fixed buffer whose text may be cut short (messages). */
static void __attribute__((format(printf, 3, 4)))
say(char *out, size_t len, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    vsnprintf(out, len, format, ap);
    va_end(ap);
}

/* The unique ids of the operands in every graph and variant pack. */
enum : int64_t { UID_X = 'x', UID_W = 'w', UID_Y = 'y' };

/* A run of backend calls that stops at the first failure: STEP skips a
 * call once one failed, and the first failure's words stay in why. */
namespace { /* this file's own: no external symbols */
struct steps {
    char *why;
    size_t len;
    bool ok;
    bool check(cudnnStatus_t st, const char *what)
    {
        if (st == CUDNN_STATUS_SUCCESS)
            return true;
        char detail[160] = "";
        cudnnGetLastErrorString(detail, sizeof detail);
        say(why, len, "%s: %s%s%s", what, cudnnGetErrorString(st), detail[0] ? "; " : "", detail);
        ok = false;
        return false;
    }
};
} // namespace
#define STEP(c, call, what) ((c).ok && (c).check((call), (what)))
#define SET(c, d, attr, type, n, value)                                                            \
    STEP(c, cudnnBackendSetAttribute((d), (attr), (type), (n), (value)), "setting " #attr)

static void destroy(desc_t *d)
{
    if (*d)
        cudnnBackendDestroyDescriptor(*d);
    *d = NULL;
}

/* The largest of 16, 8 and 4 that divides `bytes`: the alignment an
 * operand is promised. Operands start at 64-byte-aligned planned offsets
 * (base/base.h's SL_ALIGN), or a whole number of images past one when
 * the executor runs a step on a chunk of the batch, so an image's bytes
 * bound what can be promised; w is a whole parameter (or gradient). */
static int64_t align_of(uint64_t bytes)
{
    int64_t a = 16;
    while (a > 4 && bytes % (uint64_t)a)
        a /= 2;
    return a;
}

static bool make_tensor(int64_t uid, const int64_t dims[4], int64_t align, desc_t *out, steps &c)
{
    const int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    const cudnnDataType_t type = CUDNN_DATA_FLOAT;
    STEP(c, cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, out),
         "creating a tensor descriptor");
    SET(c, *out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    SET(c, *out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    SET(c, *out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    SET(c, *out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    SET(c, *out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    STEP(c, cudnnBackendFinalize(*out), "finalizing a tensor descriptor");
    return c.ok;
}

/* Groups are not an attribute: cuDNN reads them from x's channels over
 * w's (c / (c / groups)), as the legacy filter descriptor gives them. */
static bool make_conv(const sl_conv_desc *d, desc_t *out, steps &c)
{
    const int64_t spatial = 2, pad[2] = {d->ph, d->pw}, stride[2] = {d->sh, d->sw},
                  dilation[2] = {d->dh, d->dw};
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    STEP(c, cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, out),
         "creating a convolution descriptor");
    SET(c, *out, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    SET(c, *out, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    SET(c, *out, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial);
    SET(c, *out, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
    SET(c, *out, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
    SET(c, *out, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride);
    SET(c, *out, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation);
    STEP(c, cudnnBackendFinalize(*out), "finalizing the convolution descriptor");
    return c.ok;
}

bool sl_cuda_conv_tensors_make(const sl_conv_desc *d, sl_cuda_conv_tensors *t, char *why,
                               size_t why_len)
{
    memset(t, 0, sizeof *t);
    steps c = {why, why_len, true};
    const int64_t xd[4] = {d->n, d->c, d->h, d->w}, wd[4] = {d->k, d->c / d->groups, d->kh, d->kw},
                  yd[4] = {d->n, d->k, d->oh, d->ow};
    t->align[0] = align_of((uint64_t)d->c * (uint64_t)d->h * (uint64_t)d->w * sizeof(float));
    t->align[1] = 16;
    t->align[2] = align_of((uint64_t)d->k * (uint64_t)d->oh * (uint64_t)d->ow * sizeof(float));
    if (make_tensor(UID_X, xd, t->align[0], &t->x, c) &&
        make_tensor(UID_W, wd, t->align[1], &t->w, c) &&
        make_tensor(UID_Y, yd, t->align[2], &t->y, c) && make_conv(d, &t->conv, c))
        return true;
    sl_cuda_conv_tensors_free(t);
    return false;
}

void sl_cuda_conv_tensors_free(sl_cuda_conv_tensors *t)
{
    destroy(&t->x);
    destroy(&t->w);
    destroy(&t->y);
    destroy(&t->conv);
}

/* Each pass's operation type and its attributes' names, by sl_conv_pass;
 * x, w, y name the roles the x-, w- and y-shaped tensors play. */
namespace { /* this file's own: no external symbols */
static const struct op_kind {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t alpha, beta, conv, x, w, y;
    const char *name;
} kOps[3] = {
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
     "forward"},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, "backward data"},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, "backward filter"},
};
} // namespace

/* The pass's operation and its one-operation graph on the handle. */
static bool make_graph(sl_cuda_state *s, const sl_cuda_conv_tensors *t, sl_conv_pass pass,
                       float beta, sl_cuda_conv_plan *p, steps &c)
{
    const op_kind &k = kOps[pass];
    const float alpha = 1.0f;
    STEP(c, cudnnBackendCreateDescriptor(k.type, &p->op), "creating the operation descriptor");
    STEP(c, cudnnBackendSetAttribute(p->op, k.x, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t->x),
         "setting the operation's x (dx)");
    STEP(c, cudnnBackendSetAttribute(p->op, k.w, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t->w),
         "setting the operation's w (dw)");
    STEP(c, cudnnBackendSetAttribute(p->op, k.y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t->y),
         "setting the operation's y (dy)");
    STEP(c, cudnnBackendSetAttribute(p->op, k.conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t->conv),
         "setting the operation's convolution descriptor");
    STEP(c, cudnnBackendSetAttribute(p->op, k.alpha, CUDNN_TYPE_FLOAT, 1, &alpha),
         "setting the operation's alpha");
    STEP(c, cudnnBackendSetAttribute(p->op, k.beta, CUDNN_TYPE_FLOAT, 1, &beta),
         "setting the operation's beta");
    STEP(c, cudnnBackendFinalize(p->op), "finalizing the operation descriptor");
    STEP(c, cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &p->graph),
         "creating the operation graph");
    SET(c, p->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->op);
    SET(c, p->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &s->cudnn);
    STEP(c, cudnnBackendFinalize(p->graph), "finalizing the operation graph");
    return c.ok;
}

/* What an engine says of itself: its global index, its notes as
 * base/conv_engine.h's bits, and the notes the log names. */
namespace { /* this file's own: no external symbols */
struct engine_info {
    int64_t index;
    unsigned notes;
    char names[64];
};
} // namespace

/* cuDNN's notes that matter here: the bit each sets (0: named in the log
 * only). Others (Winograd's tile sizes, NaN propagation, CUDA-graph
 * support, a cuBLASLt dependency) have no bearing on the choice. */
namespace { /* this file's own: no external symbols */
struct note_map {
    int note;
    unsigned bit;
    const char *name;
};
} // namespace
static const note_map kNumerical[] = {
    {CUDNN_NUMERICAL_NOTE_TENSOR_CORE, SL_ENGINE_TENSOR_CORE, "tensor-core"},
    {CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS, SL_ENGINE_DOWN_CONVERTS, "down-convert"},
    {CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION, SL_ENGINE_REDUCED_PRECISION_SUM,
     "reduced-sum"},
    {CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC, SL_ENGINE_NONDETERMINISTIC, "nondeterministic"},
    {CUDNN_NUMERICAL_NOTE_FFT, 0, "fft"},
    {CUDNN_NUMERICAL_NOTE_WINOGRAD, 0, "winograd"},
};
static const note_map kBehaviour[] = {
    {CUDNN_BEHAVIOR_NOTE_REQUIRES_FILTER_INT8x32_REORDER, SL_ENGINE_NEEDS_REORDERED_DATA,
     "reorder-filter"},
    {CUDNN_BEHAVIOR_NOTE_REQUIRES_BIAS_INT8x32_REORDER, SL_ENGINE_NEEDS_REORDERED_DATA,
     "reorder-bias"},
    {CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION, SL_ENGINE_RUNTIME_COMPILED, "runtime-compiled"},
};

static void add_note(engine_info *e, int note, const note_map *map, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (map[i].note == note) {
            size_t used = strlen(e->names);
            e->notes |= map[i].bit;
            snprintf(e->names + used, sizeof e->names - used, " %s", map[i].name);
        }
}

/* Up to `cap` notes of attribute `attr` (type `type`) of engine eng into
 * out (as ints: both note enums are int-sized); the count, or -1. One
 * call with room for every note type (cap is more than either enum's
 * *_TYPE_COUNT), as cuDNN's own frontend reads them. */
static int64_t read_notes(desc_t eng, cudnnBackendAttributeName_t attr,
                          cudnnBackendAttributeType_t type, int *out, int64_t cap, steps &c)
{
    int64_t got = 0;
    if (!STEP(c, cudnnBackendGetAttribute(eng, attr, type, cap, &got, out),
              "reading an engine's notes"))
        return -1;
    return got < cap ? got : cap;
}

static bool engine_of(desc_t cfg, engine_info *e, steps &c)
{
    static_assert(sizeof(cudnnBackendNumericalNote_t) == sizeof(int) &&
                      sizeof(cudnnBackendBehaviorNote_t) == sizeof(int),
                  "cuDNN's note enums are read as ints");
    memset(e, 0, sizeof *e);
    desc_t eng = NULL;
    int64_t got = 0;
    int num[32], beh[32];
    STEP(c, cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng),
         "creating an engine descriptor");
    STEP(c,
         cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                  1, &got, &eng),
         "reading an engine configuration's engine");
    STEP(c,
         cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got,
                                  &e->index),
         "reading an engine's index");
    int64_t n_num = c.ok ? read_notes(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                      CUDNN_TYPE_NUMERICAL_NOTE, num, 32, c)
                         : -1;
    int64_t n_beh = c.ok ? read_notes(eng, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                                      CUDNN_TYPE_BEHAVIOR_NOTE, beh, 32, c)
                         : -1;
    destroy(&eng);
    for (int64_t i = 0; i < n_num; i++)
        add_note(e, num[i], kNumerical, sizeof kNumerical / sizeof *kNumerical);
    for (int64_t i = 0; i < n_beh; i++)
        add_note(e, beh[i], kBehaviour, sizeof kBehaviour / sizeof *kBehaviour);
    return c.ok;
}

/* " [k<type>=<value> ...]": the configuration's knob choices, for the
 * log (nothing when they cannot be read: the choice stands either way). */
static void describe_knobs(desc_t cfg, char *out, size_t len)
{
    enum { MAX_KNOBS = 64 };
    desc_t knobs[MAX_KNOBS] = {};
    int64_t made = 0, got = 0;
    out[0] = '\0';
    while (made < MAX_KNOBS && cudnnBackendCreateDescriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR,
                                                            &knobs[made]) == CUDNN_STATUS_SUCCESS)
        made++;
    if (made > 0 && cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, made, &got,
                                             knobs) == CUDNN_STATUS_SUCCESS) {
        size_t used = (size_t)snprintf(out, len, " [");
        for (int64_t i = 0; i < got && i < made && used < len; i++) {
            cudnnBackendKnobType_t type;
            int64_t value = 0, one = 0;
            if (cudnnBackendGetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                         CUDNN_TYPE_KNOB_TYPE, 1, &one,
                                         &type) != CUDNN_STATUS_SUCCESS ||
                cudnnBackendGetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE,
                                         CUDNN_TYPE_INT64, 1, &one, &value) != CUDNN_STATUS_SUCCESS)
                continue;
            used += (size_t)snprintf(out + used, len - used, "%sk%d=%lld", i ? " " : "", (int)type,
                                     (long long)value);
        }
        if (used < len)
            snprintf(out + used, len - used, "]");
        if (got == 0)
            out[0] = '\0';
    }
    for (int64_t i = 0; i < made; i++)
        destroy(&knobs[i]);
}

/* What the engines offered so far came to: how many, and the last
 * refusal, for the message when none is taken. */
namespace { /* this file's own: no external symbols */
struct tally {
    int offered;
    char last[240];
};
} // namespace

/* Tries configuration cfg: true when it is taken into p (p->cfg, p->plan,
 * p->ws_bytes, p->how); otherwise its refusal goes into the tally. An
 * engine compiled at run time is refused where it would only be another
 * candidate for tuning (`extra`): making its plan costs seconds. */
static bool try_config(sl_cuda_state *s, desc_t cfg, const char *mode, const sl_engine_rules *r,
                       bool extra, sl_cuda_conv_plan *p, tally *t)
{
    t->offered++;
    engine_info e;
    char why[160];
    steps c = {why, sizeof why, true};
    if (!engine_of(cfg, &e, c)) {
        say(t->last, sizeof t->last, "an engine configuration: %s", why);
        return false;
    }
    const char *no = sl_engine_refusal(e.notes, 0, r);
    if (!no && extra && (e.notes & SL_ENGINE_RUNTIME_COMPILED))
        no = "compiled at run time: not timed beside the first";
    if (no) {
        say(t->last, sizeof t->last, "engine %lld:%s: %s", (long long)e.index, e.names, no);
        return false;
    }
    desc_t plan = NULL;
    int64_t ws = 0, got = 0;
    STEP(c, cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan),
         "creating an execution plan");
    SET(c, plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &s->cudnn);
    SET(c, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
    STEP(c, cudnnBackendFinalize(plan), "finalizing the execution plan");
    STEP(c,
         cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                  1, &got, &ws),
         "reading the plan's workspace size");
    if (c.ok && ws < 0) {
        say(why, sizeof why, "a negative workspace (%lld B)", (long long)ws);
        c.ok = false;
    }
    if (c.ok && (no = sl_engine_refusal(e.notes, (size_t)ws, r)) != NULL) {
        say(why, sizeof why, "%s (%lld B)", no, (long long)ws);
        c.ok = false;
    }
    if (!c.ok) {
        say(t->last, sizeof t->last, "engine %lld:%s: %s", (long long)e.index, e.names, why);
        destroy(&plan);
        return false;
    }
    describe_knobs(cfg, p->knobs, sizeof p->knobs);
    p->plan = plan;
    p->cfg = cfg;
    p->ws_bytes = (size_t)ws;
    p->engine = e.index;
    say(p->how, sizeof p->how, "engine %lld%s%s (heuristics %s, %zu B)", (long long)e.index,
        p->knobs, e.names, mode, p->ws_bytes);
    return true;
}

/* The configurations taken so far for one pass: each a plan with only
 * plan, cfg, ws_bytes, engine, knobs and how set (the operation and its
 * graph stay the pass's own), at most cap of them. */
namespace { /* this file's own: no external symbols */
struct picks {
    sl_cuda_conv_plan *c;
    int n, cap;
};
} // namespace

/* Two configurations that run the same engine with the same knobs (heuristics
 * A and B often offer the same ones). */
static bool same_engine(const sl_cuda_conv_plan *a, const sl_cuda_conv_plan *b)
{
    /* knobs that could not be read ("") tell nothing: both are kept */
    return a->engine == b->engine && a->knobs[0] && strcmp(a->knobs, b->knobs) == 0;
}

/* The configurations of heuristics `mode` over `graph` in order, those
 * that pass (and run an engine and knobs not taken yet) appended to k
 * until it holds k->cap. */
static void try_mode(sl_cuda_state *s, cudnnBackendHeurMode_t mode, const char *name,
                     const sl_engine_rules *r, desc_t graph, picks *k, tally *t)
{
    desc_t heur = NULL, *cfgs = NULL;
    int64_t count = 0, got = 0, made = 0;
    char why[200];
    steps c = {why, sizeof why, true};
    STEP(c, cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur),
         "creating the heuristics descriptor");
    SET(c, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    SET(c, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    STEP(c, cudnnBackendFinalize(heur), "finalizing the heuristics descriptor");
    STEP(c,
         cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                  CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL),
         "counting the heuristics' results");
    if (c.ok && count > 0 && !(cfgs = (desc_t *)calloc((size_t)count, sizeof *cfgs))) {
        say(why, sizeof why, "out of memory listing %lld engine configurations", (long long)count);
        c.ok = false;
    }
    for (; c.ok && made < count; made++)
        STEP(c, cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[made]),
             "creating an engine configuration descriptor");
    if (count > 0)
        STEP(c,
             cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, cfgs),
             "reading the heuristics' results");
    int offered = t->offered;
    for (int64_t i = 0; c.ok && k->n < k->cap && i < got && i < count; i++) {
        sl_cuda_conv_plan *slot = &k->c[k->n];
        if (!try_config(s, cfgs[i], name, r, k->n > 0, slot, t))
            continue;
        cfgs[i] = NULL; /* now the slot's */
        bool seen = false;
        for (int j = 0; j < k->n && !seen; j++)
            seen = same_engine(&k->c[j], slot);
        if (seen)
            sl_cuda_conv_plan_free(slot);
        else
            k->n++;
    }
    if (!c.ok && t->offered == offered && k->n == 0) /* the mode itself failed */
        say(t->last, sizeof t->last, "heuristics %s: %s", name, why);
    for (int64_t i = 0; i < made; i++)
        destroy(&cfgs[i]);
    free(cfgs);
    destroy(&heur);
}

/* A variant pack of the operands and workspace (NULL with c's reason
 * when cuDNN refuses one). */
static desc_t make_pack(const void *x_like, const void *w_like, const void *y_like,
                        void *workspace, steps &c)
{
    void *ptrs[3] = {(void *)x_like, (void *)w_like, (void *)y_like};
    static const int64_t uids[3] = {UID_X, UID_W, UID_Y};
    desc_t pack = NULL;
    STEP(c, cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack),
         "creating a variant pack");
    SET(c, pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    SET(c, pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
    SET(c, pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    STEP(c, cudnnBackendFinalize(pack), "finalizing the variant pack");
    if (!c.ok)
        destroy(&pack);
    return pack;
}

/* Runs plan p over the operands (a variant pack made for the call):
 * false with c's reason when cuDNN refuses. */
static bool execute(sl_cuda_state *s, const sl_cuda_conv_plan *p, const void *x_like,
                    const void *w_like, const void *y_like, void *workspace, steps &c)
{
    desc_t pack = make_pack(x_like, w_like, y_like, workspace, c);
    STEP(c, cudnnBackendExecute(s->cudnn, p->plan, pack), "cudnnBackendExecute");
    destroy(&pack);
    return c.ok;
}

/* How many times each candidate runs while timed (after one untimed run),
 * and how close to the fastest an earlier candidate must be to be kept. */
enum { TUNE_RUNS = 5, TUNE_MAX = 64 };
static const float kTuneMargin = 0.03f;

/* Times the n (<= TUNE_MAX) candidates c over tune's operands on the
 * instance's stream; the index sl_engine_pick_timed takes (0 when timing
 * was not possible; *tuned says which), with note (len bytes) saying what the timing found
 * for the log. A failure the device keeps (a fault) is recorded in s for
 * the next sync; a candidate cuDNN refuses to run is left out. */
static int time_candidates(sl_cuda_state *s, const sl_cuda_conv_tuning *tune,
                           const sl_cuda_conv_plan *c, int n, int *tuned, char *note, size_t len)
{
    float ms[TUNE_MAX];
    size_t ws_bytes = 0;
    for (int i = 0; i < n; i++) {
        ms[i] = -1.0f;
        if (c[i].ws_bytes > ws_bytes)
            ws_bytes = c[i].ws_bytes;
    }
    void *ws = NULL;
    cudaEvent_t a = NULL, b = NULL;
    const char *failed = NULL;
    cudaError_t e = cudaSuccess;
    if (ws_bytes && (e = cudaMalloc(&ws, ws_bytes)) != cudaSuccess)
        failed = "allocating the largest workspace";
    else if ((e = cudaEventCreate(&a)) != cudaSuccess || (e = cudaEventCreate(&b)) != cudaSuccess)
        failed = "creating the timing events";
    else if ((e = cudaStreamSynchronize(s->stream)) != cudaSuccess)
        failed = "waiting for the queue";
    char why[200];
    steps st = {why, sizeof why, true};
    /* one pack for every candidate (the same operands and workspace), made
     * before the timing: the runs between the events queue work only */
    desc_t pack = failed ? NULL : make_pack(tune->x, tune->w, tune->y, ws, st);
    if (!failed && !pack)
        failed = "making the variant pack";
    for (int i = 0; i < n && !failed; i++) {
        if (!STEP(st, cudnnBackendExecute(s->cudnn, c[i].plan, pack), "cudnnBackendExecute")) {
            st.ok = true; /* refused by cuDNN (nothing queued): left out */
            continue;
        }
        bool ok = cudaEventRecord(a, s->stream) == cudaSuccess;
        for (int r = 0; r < TUNE_RUNS && ok; r++)
            ok = cudnnBackendExecute(s->cudnn, c[i].plan, pack) == CUDNN_STATUS_SUCCESS;
        ok = cudaEventRecord(b, s->stream) == cudaSuccess && ok;
        if ((e = cudaEventSynchronize(b)) != cudaSuccess) {
            failed = "running a candidate";
            break;
        }
        float total = 0.0f;
        if (ok && cudaEventElapsedTime(&total, a, b) == cudaSuccess)
            ms[i] = total / TUNE_RUNS;
        (void)cudaGetLastError();
    }
    destroy(&pack);
    /* a fault stays with the context (a second read still returns it):
     * the next sync must say so; anything else (memory short, an event
     * not made) only ends the tuning of this pass */
    (void)cudaGetLastError();
    cudaError_t fault = cudaGetLastError();
    if (fault != cudaSuccess) {
        char text[160];
        say(text, sizeof text, "%s while tuning: %s", failed ? failed : "tuning",
            cudaGetErrorString(fault));
        sl_cuda_record(s, __FILE__, __LINE__, "convolution engine tuning", text);
    }
    if (b)
        cudaEventDestroy(b);
    if (a)
        cudaEventDestroy(a);
    if (ws)
        cudaFree(ws);
    if (failed) {
        say(note, len, "; not tuned: %s failed (%s)", failed,
            e != cudaSuccess ? cudaGetErrorString(e) : why);
        return 0;
    }
    int take = sl_engine_pick_timed(ms, n, kTuneMargin);
    if (take < 0) {
        say(note, len, "; not tuned: none of the %d candidates ran", n);
        return 0;
    }
    int ran = 0, fastest = take;
    for (int i = 0; i < n; i++) {
        ran += ms[i] >= 0.0f;
        if (ms[i] >= 0.0f && ms[i] < ms[fastest])
            fastest = i;
    }
    *tuned = 1;
    say(note, len, "; tuned: %.3f ms, candidate %d of %d timed (fastest %.3f ms, heuristics' first %s%.3f ms)",
        ms[take], take + 1, ran, ms[fastest], ms[0] >= 0.0f ? "" : "failed, ",
        ms[0] >= 0.0f ? ms[0] : 0.0f);
    return take;
}

bool sl_cuda_conv_plan_make(sl_cuda_state *s, const sl_cuda_conv_tensors *t, sl_conv_pass pass,
                            float beta, const sl_engine_rules *r, const sl_cuda_conv_tuning *tune,
                            sl_cuda_conv_plan *p, char *why, size_t why_len)
{
    static const struct {
        cudnnBackendHeurMode_t mode;
        const char *name;
    } kModes[] = {
        {CUDNN_HEUR_MODE_A, "A"}, {CUDNN_HEUR_MODE_B, "B"}, {CUDNN_HEUR_MODE_FALLBACK, "fallback"}};
    memset(p, 0, sizeof *p);
    steps c = {why, why_len, true};
    if (!make_graph(s, t, pass, beta, p, c)) {
        sl_cuda_conv_plan_free(p);
        return false;
    }
    int cap = tune && tune->candidates > 1 ? tune->candidates : 1;
    if (cap > TUNE_MAX)
        cap = TUNE_MAX;
    picks k = {(sl_cuda_conv_plan *)calloc((size_t)cap, sizeof(sl_cuda_conv_plan)), 0, cap};
    if (!k.c) {
        say(why, why_len, "out of memory choosing an engine for the %s pass", kOps[pass].name);
        sl_cuda_conv_plan_free(p);
        return false;
    }
    tally tl = {0, "cuDNN offered none"};
    for (size_t m = 0; m < sizeof kModes / sizeof *kModes && k.n < k.cap; m++) {
        if (kModes[m].mode == CUDNN_HEUR_MODE_FALLBACK && k.n > 0)
            break; /* the fallback list only where A and B have nothing */
        try_mode(s, kModes[m].mode, kModes[m].name, r, p->graph, &k, &tl);
    }
    if (k.n == 0) {
        say(why, why_len,
            "none of the %d engine configurations cuDNN offered for the %s pass can be used "
            "(last: %s)",
            tl.offered, kOps[pass].name, tl.last);
        free(k.c);
        sl_cuda_conv_plan_free(p);
        return false;
    }
    char note[160] = "";
    int tuned = 0;
    int take = k.n > 1 ? time_candidates(s, tune, k.c, k.n, &tuned, note, sizeof note) : 0;
    sl_cuda_conv_plan *won = &k.c[take];
    p->plan = won->plan;
    p->cfg = won->cfg;
    p->ws_bytes = won->ws_bytes;
    p->engine = won->engine;
    memcpy(p->knobs, won->knobs, sizeof p->knobs);
    p->tuned = tuned;
    say(p->how, sizeof p->how, "%s%s", won->how, note);
    memset(won, 0, sizeof *won); /* now p's */
    for (int i = 0; i < k.n; i++)
        sl_cuda_conv_plan_free(&k.c[i]);
    free(k.c);
    return true;
}

void sl_cuda_conv_plan_free(sl_cuda_conv_plan *p)
{
    destroy(&p->plan);
    destroy(&p->cfg);
    destroy(&p->graph);
    destroy(&p->op);
    memset(p, 0, sizeof *p);
}

void sl_cuda_conv_plan_run(sl_cuda_state *s, const sl_cuda_conv_tensors *t,
                           const sl_cuda_conv_plan *p, const void *x_like, const void *w_like,
                           const void *y_like, void *workspace)
{
    const void *ptrs[3] = {x_like, w_like, y_like};
    static const char uids[3] = {(char)UID_X, (char)UID_W, (char)UID_Y};
    for (int i = 0; i < 3; i++)
        if ((uintptr_t)ptrs[i] % (uintptr_t)t->align[i]) {
            char text[128];
            say(text, sizeof text, "operand %c at %p is not %lld-byte aligned as its plan assumed",
                uids[i], ptrs[i], (long long)t->align[i]);
            sl_cuda_record(s, __FILE__, __LINE__, "convolution (cuDNN graph API)", text);
            return;
        }
    char why[256];
    steps c = {why, sizeof why, true};
    if (!execute(s, p, x_like, w_like, y_like, workspace, c)) {
        char what[96];
        say(what, sizeof what, "convolution (cuDNN graph API, engine %lld)", (long long)p->engine);
        sl_cuda_record(s, __FILE__, __LINE__, what, why);
    }
}
