/*
 * make_corpus.c — writes the fuzzer's seed corpus into a directory: valid
 * files for the fuzzed network (a model, SGD and Adam snapshots) and
 * broken ones (truncated, lying header lengths, wrong dtype, shape or
 * name, overlapping offsets, not JSON, too short).
 *
 * Usage: sl_fuzz_corpus DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_net.h"

static const char *g_dir;

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0)
        abort();
    long len = ftell(f);
    rewind(f);
    unsigned char *buf = malloc((size_t)len + 1);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len)
        abort();
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static void put(const char *name, const unsigned char *data, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0)
        abort();
}

/* A copy of a file with the first `from` replaced by `to` (same length). */
static void put_patched(const char *name, const unsigned char *data, size_t n, const char *from,
                        const char *to)
{
    size_t k = strlen(from);
    unsigned char *copy = malloc(n);
    memcpy(copy, data, n);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(copy + i, from, k) == 0) {
            memcpy(copy + i, to, k);
            put(name, copy, n);
            break;
        }
    free(copy);
}

static void save_valid(void)
{
    char path[4096];
    sl_context *ctx;
    sl_net *net = fuzz_net_build(&ctx);
    float x[2 * 3 * 5 * 5];
    for (size_t i = 0; i < sizeof x / sizeof *x; i++)
        x[i] = (float)((i * 37) % 11) / 5.0f - 1.0f;
    int labels[2] = {0, 2};
    sl_optimizer_options opt[2] = {sl_sgd(0.1f, 0.9f, 1e-4f, 0),
                                   sl_adam(0.01f, 0.9f, 0.999f, 1e-8f, 0.0f)};
    const char *names[2] = {"snapshot_sgd.safetensors", "snapshot_adam.safetensors"};
    for (int k = 0; k < 2; k++) {
        if (sl_net_set_optimizer(net, &opt[k]) != SL_OK ||
            sl_net_train_step(net, x, (sl_shape){2, 3, 5, 5}, labels, NULL) != SL_OK)
            abort();
        snprintf(path, sizeof path, "%s/%s", g_dir, names[k]);
        if (sl_save_snapshot(net, path) != SL_OK)
            abort();
    }
    snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
    if (sl_save_model(net, path) != SL_OK)
        abort();
    sl_net_free(net);
    sl_context_free(ctx);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    save_valid();
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
    size_t n;
    unsigned char *m = slurp(path, &n);
    put("truncated_data", m, n - 10);
    put("truncated_header", m, 40);
    put("too_short", m, 3);
    unsigned char *lie = malloc(n);
    memcpy(lie, m, n);
    lie[0] = (unsigned char)(lie[0] + 1);
    put("header_length_plus_one", lie, n);
    memset(lie, 0xff, 8);
    put("header_length_huge", lie, n);
    free(lie);
    put_patched("not_json", m, n, "{", "[");
    put_patched("dtype_f64", m, n, "\"F32\"", "\"F64\"");
    put_patched("dtype_unknown", m, n, "\"F32\"", "\"F99\"");
    put_patched("unexpected_name", m, n, "fc.bias", "fc.bia2");
    put_patched("shape_changed", m, n, "\"shape\":[3]", "\"shape\":[4]");
    put_patched("offset_overlap", m, n, "\"data_offsets\":[0,", "\"data_offsets\":[4,");
    put_patched("metadata_number", m, n, "\"pt\"", "1234");
    free(m);
    snprintf(path, sizeof path, "%s/snapshot_sgd.safetensors", g_dir);
    m = slurp(path, &n);
    put_patched("snapshot_bad_step", m, n, "\"step\":\"", "\"step\":\"-");
    put_patched("snapshot_bad_optimizer", m, n, "\"sgd\"", "\"sgx\"");
    free(m);
    return 0;
}
