/*
 * conv_engine.h — which of cuDNN's engines may run a float convolution
 * (run stage, CUDA backend: cuda/cuda_conv_graph.cu asks it of every
 * engine configuration cuDNN's heuristics offer, in their order, and
 * takes the first it allows). A pure rule over plain bits, so that the
 * CPU tests (test_conv_engine) check it without cuDNN: the CUDA file
 * turns an engine's cuDNN numerical and behaviour notes into the
 * SL_ENGINE_* bits below, this header decides.
 *
 *   unsigned notes = SL_ENGINE_TENSOR_CORE;
 *   sl_engine_rules r = {.deterministic = 1, .tf32 = 0, .workspace_cap = 512u << 20};
 *   const char *no = sl_engine_refusal(notes, 0, &r); // "tensor cores (TF32) ..."
 */
#ifndef SL_CONV_ENGINE_H
#define SL_CONV_ENGINE_H

#include <stddef.h>

/* What an engine says of itself, as bits. */
enum {
    /* Runs on tensor cores: for float data, inputs rounded to TF32. */
    SL_ENGINE_TENSOR_CORE = 1u << 0,
    /* Converts its inputs to a narrower type (half) before the products. */
    SL_ENGINE_DOWN_CONVERTS = 1u << 1,
    /* Sums in a narrower type than float. */
    SL_ENGINE_REDUCED_PRECISION_SUM = 1u << 2,
    /* May give different bits run to run (atomics, split reductions). */
    SL_ENGINE_NONDETERMINISTIC = 1u << 3,
    /* Wants its filter or bias reordered into int8x32 first: data this
     * library never prepares. */
    SL_ENGINE_NEEDS_REORDERED_DATA = 1u << 4,
    /* Compiled at run time when its plan is made (seconds, not
     * microseconds): never a rule's reason, but tuning times such an
     * engine only where it is the first allowed one. */
    SL_ENGINE_RUNTIME_COMPILED = 1u << 5,
};

/* What one backend instance allows. */
typedef struct sl_engine_rules {
    int deterministic;    /* results must repeat bit for bit run to run */
    int tf32;             /* TF32 tensor-core math allowed (--tf32) */
    size_t workspace_cap; /* the most workspace bytes one pass may plan */
} sl_engine_rules;

/* NULL when an engine with `notes` (SL_ENGINE_* bits; unknown bits are
 * ignored) whose plan needs workspace_bytes may run a float convolution
 * under rules r; otherwise why not (static text, for the log). Before its
 * plan is made pass 0 bytes: the notes alone are judged, so an engine its
 * notes rule out costs no plan. The rules are the legacy path's (FMA
 * math only unless TF32 is allowed, never half-precision inputs,
 * deterministic algorithms only in a deterministic instance, the same
 * workspace cap), written for cuDNN's engine notes. */
static inline const char *sl_engine_refusal(unsigned notes, size_t workspace_bytes,
                                            const sl_engine_rules *r)
{
    if (notes & SL_ENGINE_NEEDS_REORDERED_DATA)
        return "needs int8x32-reordered filter or bias";
    if (notes & SL_ENGINE_DOWN_CONVERTS)
        return "converts float inputs to a narrower type";
    if (notes & SL_ENGINE_REDUCED_PRECISION_SUM)
        return "sums in reduced precision";
    if ((notes & SL_ENGINE_TENSOR_CORE) && !r->tf32)
        return "tensor cores (TF32) without --tf32";
    if ((notes & SL_ENGINE_NONDETERMINISTIC) && r->deterministic)
        return "non-deterministic in a deterministic instance";
    if (workspace_bytes > r->workspace_cap)
        return "workspace over the cap";
    return NULL;
}

/* Engine tuning (SL_CUDA_CONV_TUNE): the heuristics' allowed engines
 * for a pass, timed on the GPU, are ms[0..n) in the heuristics' order (a
 * time that is negative, infinite or NaN: that engine failed to run).
 * Taken: the first whose time is within `margin` (a fraction: 0.03 is
 * 3 %) of the fastest's, so that near-equal times keep the heuristics'
 * order and timing noise alone rarely changes the choice between two
 * processes; -1 when none ran. */
static inline int sl_engine_pick_timed(const float *ms, int n, float margin)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (ms[i] >= 0.0f && ms[i] <= 3.4e38f && (best < 0 || ms[i] < ms[best]))
            best = i;
    if (best < 0)
        return -1;
    const float limit = ms[best] * (1.0f + (margin > 0.0f ? margin : 0.0f));
    for (int i = 0; i < best; i++)
        if (ms[i] >= 0.0f && ms[i] <= 3.4e38f && ms[i] <= limit)
            return i;
    return best;
}

/* The value of v when it is digits alone (no sign, space or other
 * character) and at most max; -1 otherwise, NULL and "" included. Read
 * without overflow for any max up to LONG_MAX / 10. */
static inline long sl_decimal_at_most(const char *v, long max)
{
    if (!v || !*v)
        return -1;
    long n = 0;
    for (const char *c = v; *c; c++) {
        if (*c < '0' || *c > '9' || n > max)
            return -1;
        n = n * 10 + (*c - '0');
    }
    return n <= max ? n : -1;
}

/* The most engines tuning times per pass: SL_CUDA_CONV_TUNE's value v
 * ("on" or "1": 8; "off", "0", empty or NULL: 0, no tuning; a count from
 * 2 to 64 in decimal without leading zeros: that many), or -1 when v is
 * none of these (the backend then refuses to start, naming the
 * variable). */
static inline int sl_engine_tune_count(const char *v)
{
    if (!v || !*v || (v[0] == '0' && !v[1]))
        return 0;
    if ((v[0] == 'o' && v[1] == 'n' && !v[2]) || (v[0] == '1' && !v[1]))
        return 8;
    if (v[0] == 'o' && v[1] == 'f' && v[2] == 'f' && !v[3])
        return 0;
    if (v[0] == '0')
        return -1; /* "0" alone is off; "02" is not a count */
    long n = sl_decimal_at_most(v, 64);
    return n >= 2 ? (int)n : -1;
}

#endif
