/*
 * sublinear.h — the public interface of the sublinear library: one
 * include for all of it. The topic headers under sublinear/ can also be
 * included alone; they come in the order a reader needs them.
 *
 * sublinear trains sequential deep networks (chains of layers and of
 * composite blocks such as residual or inception blocks, built in or
 * written by the user: "Writing a layer" below) in C. A network
 * built with sl_sequential() keeps every activation; the same network built
 * with sl_sublinear() keeps only the tensors at segment boundaries and
 * re-runs each segment's forward during backward, with gradients equal bit
 * for bit to the plain run.
 *
 * Conventions, for every function below:
 *  - Functions that can fail return an sl_status; on failure
 *    sl_last_error() returns a message a person can read, and the objects
 *    passed in are left as they were.
 *  - Every *_create / constructor has a matching *_free that accepts NULL.
 *  - Names, one rule per kind (docs/guide.md, "Names"; tests/names.py
 *    checks every function below against it):
 *      objects     sl_status sl_<object>_<how>(..., sl_<object> **out):
 *                  _create, or where it comes from (_open, _load,
 *                  _mnist, _join); networks: sl_sequential, sl_sublinear;
 *                  void sl_<object>_free(sl_<object> *)
 *      layers      sl_layer *sl_<layer>(...), torch's noun (sl_conv2d,
 *                  sl_join_sum), never a verb: _add appends
 *      variants    <call>_with(..., const sl_<noun>_options *): the same
 *                  call with more choices (sl_conv2d_with); no _ex
 *      options     sl_<noun>_defaults(void), or sl_<noun>_<kind>(...) for
 *                  a struct with kinds (sl_optimizer_sgd)
 *      setters     sl_status sl_<noun>_set_<what>(sl_<noun> *, value...),
 *                  on/off switches included
 *      counts      sl_<noun>_<thing>_count, a plain integer; an
 *                  sl_status and *count only where reading it can fail
 *                  (sl_net_param_count finalises the network)
 *      getters     sl_<noun>_<what>(const sl_<noun> *), the value itself;
 *                  no get_
 *      calls       sl_status sl_<noun>_<verb or what>(sl_<noun> *, ...,
 *                  results *); a call on a file names its verb (save,
 *                  load, read, write, open); get_ only where
 *                  sl_<noun>_<what> is the struct type the call fills
 *                  (sl_dataset_get_info), a name C gives the type alone
 *  - Tensors are float32, NCHW, contiguous, in host memory owned by the
 *    caller unless a comment says otherwise.
 *  - Threads: a context and every network made from it are used by one
 *    thread at a time (the networks of a context share its backend
 *    instance, its seed and its dropout counter, which sl_load_snapshot
 *    sets). Different contexts, with their networks, may be used from
 *    different threads at once, and give the same results as run one after
 *    the other (tests/test_threads.c, under ThreadSanitizer in the CI).
 *    sl_last_error() is per thread.
 *  - Memory: every allocation failure is SL_ERR_NOMEM, and the failing call
 *    changes nothing (tests/test_alloc_failure.c fails every allocation of
 *    a build-train-save-load run in turn). Two exceptions outside the
 *    library's hands: on the CPU, OpenMP's runtime (libgomp) ends the
 *    process when it cannot allocate a thread team, and OpenBLAS allocates
 *    its own buffers; a run too large for the host is refused before its
 *    arena is allocated (sl_net_set_memory_check).
 *
 * The headers, in reading order:
 *   sublinear/core.h    status, errors, shapes, the context
 *   sublinear/layers.h  built-in layers and blocks, blocks of your own
 *   sublinear/net.h     schedules, networks, parameters, optimizers, steps
 *   sublinear/memory.h  planned and measured memory, reports, pictures,
 *                       profiling
 *   sublinear/io.h      model files and snapshots
 *   sublinear/data.h    datasets (synthetic, MNIST, CIFAR-10)
 *   sublinear/text.h    GPT-2's byte-level BPE tokenizer
 *   sublinear/models.h  model builders
 *   sublinear/dist.h    data-parallel training
 *   sublinear/custom.h  writing a layer of your own
 */
#ifndef SUBLINEAR_H
#define SUBLINEAR_H

#include "sublinear/core.h"
#include "sublinear/layers.h"
#include "sublinear/net.h"
#include "sublinear/memory.h"
#include "sublinear/io.h"
#include "sublinear/data.h"
#include "sublinear/text.h"
#include "sublinear/models.h"
#include "sublinear/dist.h"
#include "sublinear/custom.h"

#endif /* SUBLINEAR_H */
