/*
 * sublinear/memory.h — what a step holds, known before it runs: the
 * planned (and measured) bytes by category, memory reuse
 * and the memory check, live bytes per program step, per-unit reports, a
 * Graphviz picture, and profiling by layer type and pass.
 *
 *     sl_memory_report r;
 *     sl_net_memory_report(net, sl_shape_nchw(32, 3, 32, 32), SL_MODE_TRAIN, &r);
 *     printf("peak %llu bytes\n", (unsigned long long)r.total);
 */
#ifndef SUBLINEAR_MEMORY_H
#define SUBLINEAR_MEMORY_H

#include "sublinear/core.h"
#include "sublinear/net.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Memory                                                              */
/* ------------------------------------------------------------------ */

typedef struct sl_memory_report {
    /* planned bytes by category */
    uint64_t outputs;     /* activations (forward outputs) */
    uint64_t grad_inputs; /* gradients with respect to activations */
    uint64_t buffers;     /* workspaces and state saved for backward */
    uint64_t params;      /* parameters and running statistics */
    uint64_t param_grads; /* the gradient block; with the update in backward
                             (sl_net_set_update_in_backward) the largest set
                             of parameter gradients live at once, inside the
                             arena (param_grads_in_arena) */
    uint64_t optimizer;   /* momentum / Adam moments */
    uint64_t communication; /* held for data-parallel communication (training
                               a network in a communicator: sl_dist_join);
                               0 otherwise */
    uint64_t total;       /* arena peak + params + grads (unless in the
                             arena) + optimizer + communication */
    uint64_t fixed;       /* the part no schedule changes: params + grads
                             (unless in the arena) + optimizer */
    int param_grads_in_arena; /* 1: the update in backward */
    uint64_t arena_bytes; /* the planned activation arena (peak of the
                             first three categories together) */
    uint64_t arena_measured; /* high-water mark of the arena the executor
                                used in the last run of this mode at this
                                shape; 0 if none ran */
    /* measured: bytes the library holds now for each of these */
    uint64_t measured_params, measured_param_grads, measured_optimizer;
    uint64_t measured_total; /* arena_measured + the three above */
    uint64_t device_used;    /* CUDA: drop of the device's free memory since the
                                context was created (all of this process's
                                use, as cudaMemGetInfo sees it); 0 on the CPU */
    double recompute_fraction; /* recomputed FLOPs / FLOPs of one plain step */
    double recompute_time_fraction; /* the same in time estimated by the network's
                                       cost model (sl_net_set_cost_model) */
} sl_memory_report;

/* The planned memory of one step at this input shape in this mode. Needs
 * no kernel to run. The category figures are the bytes of the largest
 * simultaneous set of live tensors of that category (so categories can sum
 * to more than arena_bytes, never less). */
SL_API sl_status sl_net_memory_report(sl_net *net, sl_shape input, sl_mode mode,
                               sl_memory_report *out);

/* Writes a report as one JSON object (keys: outputs, grad_inputs, buffers,
 * params, param_grads, param_grads_in_arena (true/false), optimizer,
 * communication, fixed, arena, total, arena_measured,
 * measured_total, recompute_fraction, recompute_time_fraction) into buf of
 * size n, NUL-terminated.
 * Returns SL_ERR_INVALID_ARG when it does not fit (the message gives the
 * size needed), SL_ERR_NOMEM when the C library runs out of memory while
 * formatting. */
SL_API sl_status sl_memory_report_json(const sl_memory_report *r, char *buf, size_t n);

/* Memory sharing in plans (default on). Off gives optnet's "before": every
 * output, gradient and workspace in storage of its own, nothing in place,
 * as a plain framework would run. Results are identical either way. */
SL_API sl_status sl_net_set_memory_reuse(sl_net *net, int enabled);

/* Memory check (default on). Before a run allocates anything, its whole
 * step is compared with the memory this process may still take: the
 * planned activation arena, the parameters, gradients and optimizer state
 * not allocated yet, and on the CPU the address space the BLAS's
 * per-thread work buffers (128 MiB each in OpenBLAS) and the threads'
 * stacks take, against the least of /proc/meminfo's MemAvailable, the room
 * under the memory cgroup's limit (v2 memory.max, or v1) and the room
 * under RLIMIT_AS (the BLAS and the stacks count against RLIMIT_AS only);
 * on a GPU its free memory (cudaMemGetInfo). A step that does not fit
 * fails with SL_ERR_NOMEM naming every figure and, in training, a budget
 * schedule that fits (or that none does), instead of being killed by the
 * kernel's OOM killer while the arena is filled, or hanging where
 * OpenBLAS retries a failed mmap. Parameters and optimizer state
 * allocated outside a run (sl_net_param_count, loading, a new optimizer
 * on a network in use) are checked the same way. enabled = 0 skips the
 * check (the allocation itself may still fail with SL_ERR_NOMEM, or the
 * kernel may kill the process). */
SL_API sl_status sl_net_set_memory_check(sl_net *net, int enabled);

/* The memory check of one step of `input` in `mode`, made before the
 * caller allocates anything for it: the step's planned arena, the fixed
 * part not allocated yet and (on the CPU) the BLAS's buffers, as a run
 * checks them, plus batch_bytes the caller is about to allocate in host
 * memory for the step's data (its input batch, labels and outputs; on a
 * GPU these are checked against the host's memory alone). Plans (the plan
 * is cached for the run) and allocates nothing of the step. SL_ERR_NOMEM
 * naming every figure and, in training, a budget schedule that fits, when
 * they do not fit; SL_OK when they do, when nothing is known or when the
 * check is off (sl_net_set_memory_check); the planning errors of
 * sl_net_memory_report. A program that allocates a batch of images and
 * fills it before its first step calls this first, so a step too large for
 * the machine is refused at once instead of after the batch is filled. */
SL_API sl_status sl_net_check_step_memory(sl_net *net, sl_shape input, sl_mode mode,
                                          uint64_t batch_bytes);

/* Plans as one of `ranks` data-parallel ranks (sl_dist_join) with ZeRO
 * stage `shard` (0 none, 1 optimizer state sharded, 2 gradients too; see
 * sl_dist_options.shard) without joining anything: memory reports,
 * timelines, --explain tables and budget schedules then give the per-rank
 * figures of the rank holding the largest slice (the communicator's own
 * small buffers aside). For a network that has not run: planning
 * allocates nothing, and while ranks > 1 is set, runs fail with
 * SL_ERR_STATE; ranks 1 (shard 0) plans a single process again. The
 * refusals of sl_dist_join apply (shard 2 with clipping or accumulation,
 * the update in backward with shard 0 or 1). */
SL_API sl_status sl_net_set_plan_ranks(sl_net *net, int ranks, int shard);

/* Where a run's time goes, by layer type and pass. */
typedef struct sl_profile_entry {
    char layer_type[32]; /* "Conv2d", a custom layer's type name,
                            "SoftmaxCrossEntropy", or "optimizer" */
    char pass[16];       /* "forward", "re-forward", "eval", "backward",
                            "loss" or "update" */
    int64_t calls;       /* program steps (or updates) timed */
    double seconds;      /* their wall time, each step waited for */
} sl_profile_entry;

/* Profiling (default off). On, every step of every run waits for the
 * device (on a GPU: for its kernels to finish) and its wall time is added
 * to the entry of its layer type and pass; sl_net_update's kernels go to
 * ("optimizer", "update"). The waits serialise the device, so profiled
 * runs are slower than plain ones: read the split, not the sum. Off
 * discards the entries. */
SL_API sl_status sl_net_set_profiling(sl_net *net, int enabled);

/* The entries gathered since profiling was turned on (or last reset),
 * slowest first: up to cap of them into out (out may be NULL when cap is
 * 0); *n gets how many there are. reset = 1 clears them after reading.
 * SL_ERR_STATE when profiling is off. */
SL_API sl_status sl_net_profile(sl_net *net, sl_profile_entry *out, int cap, int *n, int reset);

/* Live bytes per program step of one planned step, by category. */
typedef struct sl_memory_timeline {
    int steps;          /* program steps (forward, re-forward, loss, backward) */
    uint64_t *outputs;  /* [steps] */
    uint64_t *grad_inputs;
    uint64_t *buffers;
    uint64_t *param_grads; /* parameter gradients in the arena (the update in
                              backward; zero otherwise) */
    uint64_t arena_bytes;
    char **step_names;  /* [steps] "fwd layer1.0.conv1", "bwd fc", ... */
} sl_memory_timeline;

/* Fills *out for this input shape and mode under the network's schedule;
 * free with sl_memory_timeline_free. No kernel runs. */
SL_API sl_status sl_net_memory_timeline(sl_net *net, sl_shape input, sl_mode mode,
                                 sl_memory_timeline *out);
SL_API void sl_memory_timeline_free(sl_memory_timeline *t);

/* Writes n timelines on shared axes as a self-contained SVG (total live
 * bytes per step, one series per timeline, labelled). */
SL_API sl_status sl_memory_timeline_write_svg(const char *path,
                                              const sl_memory_timeline *const *series,
                                              const char *const *labels, int n);

/* One top-level unit (a layer, or a whole block) of a training plan, for
 * people: what it costs and what the schedule does with it (the table of
 * `sublinear plan --explain`). Sizes in bytes; times are estimates of the
 * network's cost model (sl_net_set_cost_model). */
typedef struct sl_unit_report {
    const char *name;        /* the layer's name, owned by the network */
    const char *type;        /* "Bottleneck", "Conv2d", ... (static) */
    uint64_t fwd_flops, bwd_flops;
    double fwd_seconds, bwd_seconds;
    uint64_t input_bytes, output_bytes;
    /* held from its forward to its backward (output included) when it
     * keeps everything its backward reads / only its conv outputs (the
     * rest recomputed from them) / only its output (its backward
     * re-forwards it from its input) */
    uint64_t keep_all_bytes, keep_conv_bytes, keep_output_bytes;
    uint64_t workspace_bytes; /* the largest scratch one of its kernels takes */
    int forwards;             /* times its forward runs in a step (1 + re-forwards) */
    const char *action;       /* what its first forward keeps: "keep all", "keep conv",
                                 "checkpoint" (only its output, kept), "recompute"
                                 (output dropped once read); "-" in inference */
} sl_unit_report;

/* Reports every top-level unit of the plan of this input shape and mode
 * (no kernel runs). On success *out is a new array of *n reports; free it
 * with sl_unit_reports_free (the strings belong to the network). */
SL_API sl_status sl_net_unit_reports(sl_net *net, sl_shape input, sl_mode mode, sl_unit_report **out,
                              int *n);
SL_API void sl_unit_reports_free(sl_unit_report *reports);

/* Writes the network as a Graphviz DOT graph: one node per layer with its
 * output shape and size; nodes whose outputs share arena storage have the
 * same fill colour (with reuse off every node has its own colour).
 * Composite blocks are drawn as clusters. */
SL_API sl_status sl_net_write_dot(sl_net *net, sl_shape input, sl_mode mode, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* SUBLINEAR_MEMORY_H */
