/*
 * fuzz_gpt2_config.c — libFuzzer target of the Hugging Face config.json
 * reader (sl_gpt2_read_config, models/gpt2_files.c), the first half of
 * loading a GPT-2 directory. Besides the sanitizers' checks it asserts
 * the reader's promises: a config it accepts is one sl_model_gpt2 takes
 * (every size positive, n_embd a multiple of n_head, a positive epsilon,
 * a dropout rate in [0, 1)), and a small one builds, with GPT-2's tensors;
 * a config it refuses leaves *out as it was and says why.
 *
 * Build: CC=clang cmake -DSL_FUZZ=ON; seeds: sl_fuzz_corpus --config DIR;
 * dictionary: tests/fuzz/gpt2_config.dict.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sublinear.h"
#include "fuzz_file.h"

static sl_context *g_ctx;

/* Builds GPT-2 of an accepted config when it is small enough to build
 * per input (a large one would allocate its parameters each time; the
 * model's size checks have tests of their own). */
static void build_small(const sl_gpt2_config *c)
{
    if (c->layers > 2 || c->embd > 64 || c->vocab > 512 || c->context > 64)
        return;
    if (!g_ctx) {
        sl_context_options o = sl_context_defaults();
        o.threads = 1;
        if (sl_context_create(&o, &g_ctx) != SL_OK)
            abort();
    }
    sl_net *net = NULL;
    if (sl_sequential(g_ctx, 1, &net) != SL_OK)
        abort();
    if (sl_model_gpt2(net, c) != SL_OK)
        abort(); /* the reader accepted what the model refuses */
    int n = 0;
    if (sl_net_param_count(net, &n) != SL_OK || n != 4 + 12 * c->layers)
        abort();
    sl_net_free(net);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file_write(data, size);
    sl_gpt2_config c, before;
    memset(&c, 0xa5, sizeof c);
    before = c;
    if (sl_gpt2_read_config(path, &c) != SL_OK) {
        if (memcmp(&c, &before, sizeof c) != 0 || !*sl_last_error())
            abort(); /* a refusal changed *out, or gave no reason */
        return 0;
    }
    if (c.layers < 1 || c.embd < 1 || c.heads < 1 || c.vocab < 1 || c.context < 1 ||
        c.embd % c.heads != 0 || !(c.ln_eps > 0.0f) || !isfinite(c.ln_eps) ||
        !(c.dropout >= 0.0f && c.dropout < 1.0f))
        abort();
    build_small(&c);
    return 0;
}
