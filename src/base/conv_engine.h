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

#endif
