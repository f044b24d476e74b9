/*
 * fuzz_load_model.c — libFuzzer target of the loaders: every input is
 * offered to the strict JSON reader of headers alone (io/json.c), to
 * sl_load_model_memory (strict refusing NaN and inf, non-strict allowing
 * them) and to the snapshot loader on a
 * small fixed network. Besides the sanitizers' checks it
 * asserts the loaders' promise: a load that fails leaves every tensor of
 * the network as it was.
 *
 * Build: CC=clang cmake -DSL_FUZZ=ON; seeds: sl_fuzz_corpus DIR.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "io/serialize.h"
#include "fuzz_net.h"

static sl_context *g_ctx;
static sl_net *g_net;
static float *g_copy;
static size_t g_floats;

/* Copies every tensor of the network into g_copy (check = 0), or aborts
 * when one differs from it (check = 1). */
static void tensors(int check)
{
    size_t at = 0;
    int n = 0;
    if (sl_net_param_count(g_net, &n) != SL_OK)
        abort();
    for (int i = 0; i < n; i++) {
        sl_param_info pi;
        if (sl_net_param(g_net, i, &pi) != SL_OK)
            abort();
        if (check && memcmp(g_copy + at, pi.data, pi.count * sizeof(float)) != 0)
            abort(); /* a failed load changed the network */
        if (!check)
            memcpy(g_copy + at, pi.data, pi.count * sizeof(float));
        at += pi.count;
    }
}

static void init(void)
{
    g_net = fuzz_net_build(&g_ctx);
    int n = 0;
    if (sl_net_param_count(g_net, &n) != SL_OK)
        abort();
    for (int i = 0; i < n; i++) {
        sl_param_info pi;
        sl_net_param(g_net, i, &pi);
        g_floats += pi.count;
    }
    g_copy = malloc(g_floats * sizeof(float));
    if (!g_copy)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_net)
        init();
    sl_json_doc doc;
    if (sl_json_parse((const char *)data, size, &doc) == SL_OK) {
        if (doc.n < 1 || doc.v[0].next != -1)
            abort(); /* one root value */
        sl_json_release(&doc);
    }
    sl_load_options opts = sl_load_defaults();
    sl_load_report report;
    for (int strict = 1; strict >= 0; strict--) {
        opts.strict = strict;
        opts.allow_nonfinite = !strict; /* both checks of values, both modes */
        tensors(0);
        if (sl_load_model_memory(g_net, data, size, &opts, &report) != SL_OK)
            tensors(1);
    }
    tensors(0);
    if (sl_snapshot_load_memory(g_net, data, size, "<fuzz>", NULL) != SL_OK)
        tensors(1);
    return 0;
}
