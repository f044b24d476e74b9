/*
 * cuda_conv_graph.h — one convolution pass through cuDNN's graph API
 * (run stage on a GPU): the backend descriptors of a geometry, an
 * execution plan per pass chosen from cuDNN's engine heuristics, and
 * running it. cuda_conv.cu decides when to use it and caches what it
 * builds per geometry; cuda_conv_graph.cu implements it. Only .cu files
 * include it.
 */
#ifndef SL_CUDA_CONV_GRAPH_H
#define SL_CUDA_CONV_GRAPH_H

#include <stdint.h>

#include "base/conv_engine.h"
#include "cuda/cuda_common.h"

/* C linkage: the archive's extern symbols keep the sl_ prefix unmangled
 * (tests/test_symbols.sh). */
extern "C" {

/* A geometry's float NCHW tensors and convolution descriptor, shared by
 * its passes' operations. The x-shaped tensor is x (forward, backward
 * filter) or dx (backward data), the w-shaped one w or dw, the y-shaped
 * one y or dy. align: the bytes each operand's address is promised to be
 * a multiple of (x, w, y), from the geometry (see cuda_conv_graph.cu). */
typedef struct sl_cuda_conv_tensors {
    cudnnBackendDescriptor_t x, w, y, conv;
    int64_t align[3];
} sl_cuda_conv_tensors;

/* One pass's choice: the operation, its graph, the engine configuration
 * and the execution plan made from it (all owned), the plan's workspace,
 * and what the log says of it. */
typedef struct sl_cuda_conv_plan {
    cudnnBackendDescriptor_t op, graph, cfg, plan;
    size_t ws_bytes;
    int64_t engine; /* cuDNN's global engine index */
    char knobs[96]; /* " [k2=3 k13=1]": its knob choices (with engine, what tells two apart) */
    int tuned;      /* 1: taken by timing among several (SL_CUDA_CONV_TUNE) */
    char how[320];  /* "engine 12 [k2=3 k13=1] tensor-core (heuristics A, 4096 B)" */
} sl_cuda_conv_plan;

/* Engine tuning (SL_CUDA_CONV_TUNE): instead of the first allowed engine,
 * up to `candidates` allowed configurations of heuristics A and B (the
 * fallback list only where they have none), each distinct engine and
 * knobs once, are timed on the instance's stream over scratch operands of
 * the geometry's shapes (x, w, y: device memory the caller owns, their
 * contents any floats), and base/conv_engine.h's sl_engine_pick_timed
 * takes one. The workspace for the timing is allocated here for the
 * largest candidate and freed before returning. The queue must not be
 * being captured into a CUDA graph. */
typedef struct sl_cuda_conv_tuning {
    int candidates;
    void *x, *w, *y;
} sl_cuda_conv_tuning;

/* The tensors of geometry d into *t; false with a reason in why (why_len
 * bytes) when cuDNN refuses one, with nothing left made. */
bool sl_cuda_conv_tensors_make(const sl_conv_desc *d, sl_cuda_conv_tensors *t, char *why,
                               size_t why_len);
/* Releases what t holds (a zeroed t is fine) and zeroes it. */
void sl_cuda_conv_tensors_free(sl_cuda_conv_tensors *t);

/* The execution plan of `pass` over t with output scale beta (0: the
 * result overwrites, 1: it is added), from the first engine configuration
 * of cuDNN's heuristics (mode A, then B, then the fallback list) that
 * rules r allow (base/conv_engine.h), that finalizes into a plan on the
 * instance's handle and whose workspace the cap allows; with tune (NULL:
 * none), the one tuning takes among several such (when timing is not
 * possible, the first, and p->how says why). False, with why (the last
 * refusal and how many engines were offered), when none passes; nothing
 * is then left made. */
bool sl_cuda_conv_plan_make(sl_cuda_state *s, const sl_cuda_conv_tensors *t, sl_conv_pass pass,
                            float beta, const sl_engine_rules *r, const sl_cuda_conv_tuning *tune,
                            sl_cuda_conv_plan *p, char *why, size_t why_len);
/* Releases what p holds (a zeroed p is fine) and zeroes it. */
void sl_cuda_conv_plan_free(sl_cuda_conv_plan *p);

/* Runs plan p on the instance's stream: the pass's x-, w- and y-shaped
 * operands (x, w, y forward; dx, w, dy backward data; x, dw, dy backward
 * filter) and its planned workspace (p->ws_bytes of it). A failure is
 * recorded in s, an operand off the alignment t promised included. */
void sl_cuda_conv_plan_run(sl_cuda_state *s, const sl_cuda_conv_tensors *t,
                           const sl_cuda_conv_plan *p, const void *x_like, const void *w_like,
                           const void *y_like, void *workspace);
}

#endif
