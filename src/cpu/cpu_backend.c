/*
 * cpu_backend.c — the CPU backend's sl_backend table: host memory, copies,
 * and the kernels of the other cpu_*.c files. Part of the "run" stage: the
 * executor calls these through the table at planned offsets. impl holds
 * the sl_cpu_state of cpu_onednn.c.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cpu/cpu.h"

static void *sl_cpu_alloc(const sl_backend *be, size_t bytes, const char *what)
{
    (void)be;
    return sl_aligned_zalloc(bytes, what);
}

static void sl_cpu_free(const sl_backend *be, void *p)
{
    (void)be;
    sl_aligned_free(p);
}

static void sl_cpu_destroy(sl_backend *be)
{
    sl_cpu_state_free(be->impl);
    free(be);
}

static void sl_cpu_memcpy(const sl_exec *ex, void *dst, const void *src, size_t bytes)
{
    (void)ex;
    if (dst != src && bytes)
        memcpy(dst, src, bytes);
}

static sl_status sl_cpu_sync(const sl_exec *ex)
{
    return sl_cpu_state_sync(ex && ex->be ? ex->be->impl : NULL);
}

static const sl_backend sl_cpu_table = {
    .name = "cpu",
    .host_memory = 1,
    .destroy = sl_cpu_destroy,
    .alloc = sl_cpu_alloc,
    .free = sl_cpu_free,
    .upload = sl_cpu_memcpy,
    .download = sl_cpu_memcpy,
    .download_later = sl_cpu_memcpy, /* written at once: before any sync */
    .sync = sl_cpu_sync,
    .conv2d_native_bf16 = sl_cpu_conv2d_native_bf16,
    .attention_native_bf16 = sl_cpu_attention_native_bf16,
    .gemm_bf16_workspace_bytes = sl_cpu_gemm_bf16_workspace_bytes,
    .gemm_bf16 = sl_cpu_gemm_bf16,
    .batchnorm_relu_forward_train = sl_cpu_batchnorm_relu_forward_train,
    .batchnorm_relu_forward_apply = sl_cpu_batchnorm_relu_forward_apply,
    .batchnorm_relu_backward = sl_cpu_batchnorm_relu_backward,
#define SL_CPU_ENTRY(ret, member, params) .member = sl_cpu_##member,
    SL_BACKEND_OPS(SL_CPU_ENTRY, SL_BACKEND_SKIP)
#undef SL_CPU_ENTRY
};

/* A switch of new backends: a test's forced value (0 or 1; -1: none),
 * else on unless environment variable name is "off" or "0". */
static int switch_on(int forced, const char *name)
{
    if (forced >= 0)
        return forced;
    const char *v = getenv(name);
    return !(v && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0));
}

/* The kernel families that take bf16 activations (all of them unless
 * SL_CPU_BF16_KERNELS=off, or a test's sl_cpu_bf16_kernels_force(0): then
 * a bf16 network's BatchNorm, ReLU, adds, LayerNorm, GELU, attention and
 * GEMMs use float copies; the GEMMs only on a CPU with bf16 dot
 * products). */
static int g_bf16_forced = -1;

void sl_cpu_bf16_kernels_force(int on) { g_bf16_forced = on != 0; }

/* Which of them (tests: comparing some families' kernels with copies). */
static unsigned g_bf16_mask = ~0u;

void sl_cpu_bf16_kernels_mask(unsigned families) { g_bf16_mask = families; }

static unsigned bf16_kernels(void)
{
    int on = switch_on(g_bf16_forced, "SL_CPU_BF16_KERNELS");
    /* GEMMs on bf16 operands where oneDNN has bf16 dot products to run them */
    return on ? (SL_BF16_RELU | SL_BF16_ADD | SL_BF16_BATCHNORM | SL_BF16_LAYERNORM |
                 SL_BF16_GELU | SL_BF16_ATTENTION | (sl_cpu_has_bf16_dot() ? SL_BF16_GEMM : 0)) &
                    g_bf16_mask
              : 0;
}

/* Whether new backends join BatchNorm and the ReLU after it (the
 * batchnorm_relu_* members): yes unless SL_CPU_BN_RELU=off, or a test's
 * sl_cpu_bn_relu_force says otherwise. The same bits either way. */
static int g_bn_relu_forced = -1;

void sl_cpu_bn_relu_force(int on) { g_bn_relu_forced = on < 0 ? -1 : on != 0; }

sl_status sl_cpu_backend_create(int threads, sl_backend **out)
{
    sl_backend *be = sl_alloc(sizeof *be, "a CPU backend");
    if (!be)
        return SL_ERR_NOMEM;
    *be = sl_cpu_table;
    be->bf16_kernels = bf16_kernels();
    if (!switch_on(g_bn_relu_forced, "SL_CPU_BN_RELU"))
        sl_backend_drop_bn_relu(be);
    sl_cpu_state *s;
    sl_status st = sl_cpu_state_create(threads, &s);
    if (st != SL_OK) {
        free(be);
        return st;
    }
    be->impl = s;
    *out = be;
    return SL_OK;
}
