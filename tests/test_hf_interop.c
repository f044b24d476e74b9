/*
 * test_hf_interop.c — GPT-2 files both ways with Hugging Face's
 * transformers (tests/hf_interop.py), run by the python that the
 * environment variable SL_HF_PYTHON names; without one that imports
 * transformers the test prints "SKIPPED: ..." and passes (CI keeps no
 * transformers: its PyPI torch belongs to a scratch venv).
 *  (a) HF builds a small random GPT2LMHeadModel and save_pretrained's it;
 *      sl_gpt2_read_config, sl_model_gpt2 and sl_load_model take it, and
 *      our logits for the same ids are HF's within 1e-5 relative; the same
 *      model in older transformers' layout (a tied lm_head.weight, the
 *      attention buffers) loads to the same logits bit for bit;
 *  (b) sl_gpt2_save_pretrained writes a model of ours; HF's
 *      from_pretrained loads it with no missing or unexpected key, and its
 *      logits are ours within 1e-5 relative.
 *  (c) greedy decoding: HF builds another small random model and
 *      generate(do_sample=False) adds 24 tokens to an 8-token prompt; the
 *      model loaded here and decoded with the KV-cache generator
 *      (sl_gpt2_generate, no options: greedy) gives the same 24 tokens.
 * Relative: max |ours - HF| / max |HF| over all logits.
 */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define B 2
#define T 32
#define TOL 1e-5

static char g_python[1024];
static char g_script[1024];

/* 1 when SL_HF_PYTHON names a python that imports transformers. */
static int have_transformers(void)
{
    const char *env = getenv("SL_HF_PYTHON");
    if (!env || !*env) {
        printf("SKIPPED: test_hf_interop needs SL_HF_PYTHON, a python with torch and transformers "
               "(e.g. a venv: pip install torch transformers safetensors numpy)\n");
        return 0;
    }
    snprintf(g_python, sizeof g_python, "%s", env);
    if (access(g_python, X_OK) != 0) {
        printf("SKIPPED: SL_HF_PYTHON=%s is not an executable\n", g_python);
        return 0;
    }
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "'%s' '%s' probe", g_python, g_script);
    FILE *p = popen(cmd, "r");
    ck_assert(p);
    char line[512] = "";
    if (!fgets(line, sizeof line, p))
        line[0] = '\0';
    line[strcspn(line, "\n")] = '\0';
    int rc = pclose(p);
    if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
        printf("SKIPPED: %s cannot import transformers (%s)\n", g_python, line);
        return 0;
    }
    printf("Hugging Face side: %s\n", line);
    return 1;
}

static void run_script(const char *what, const char *dir)
{
    char cmd[3300];
    snprintf(cmd, sizeof cmd, "'%s' '%s' %s '%s' 2>&1", g_python, g_script, what, dir);
    fflush(stdout);
    int rc = system(cmd);
    ck_assert_msg(rc == 0, "hf_interop.py %s failed (status %d)", what, rc);
}

static void *read_file(const char *dir, const char *name, size_t bytes)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f, "missing %s", path);
    void *v = malloc(bytes);
    ck_assert(v && fread(v, 1, bytes, f) == bytes);
    fclose(f);
    return v;
}

/* max |a - ref| / max |ref|. */
static double rel_diff(const float *a, const float *ref, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert(isfinite(a[i]) && isfinite(ref[i]));
        e = fmax(e, fabs((double)a[i] - (double)ref[i]));
        m = fmax(m, fabs((double)ref[i]));
    }
    ck_assert(m > 0);
    return e / m;
}

START_TEST(test_both_ways)
{
    if (!have_transformers())
        return;
    char dir[] = "/tmp/sl_hf_interop_XXXXXX";
    ck_assert(mkdtemp(dir));
    run_script("make", dir);

    /* (a) Hugging Face's save_pretrained -> here. */
    char path[1200];
    snprintf(path, sizeof path, "%s/hf/config.json", dir);
    sl_gpt2_config cfg;
    ck_assert_msg(sl_gpt2_read_config(path, &cfg) == SL_OK, "%s", sl_last_error());
    ck_assert_int_eq(cfg.layers, 2);
    ck_assert_int_eq(cfg.embd, 64);
    ck_assert_int_eq(cfg.heads, 4);
    ck_assert_int_eq(cfg.vocab, 512);
    ck_assert_int_eq(cfg.context, 64);
    sl_context *ctx = th_context(8);
    sl_net *net;
    net = th_gpt2(ctx, &cfg, SL_SCHEDULE_NONE);
    snprintf(path, sizeof path, "%s/hf/model.safetensors", dir);
    sl_load_report rep;
    ck_assert_msg(sl_load_model(net, path, NULL, &rep) == SL_OK, "%s", sl_last_error());
    printf("(a) loaded %d tensors, ignored %d\n", rep.loaded, rep.ignored);
    ck_assert_int_eq(rep.loaded, th_param_count(net));
    int32_t *ids = read_file(dir, "ids.bin", B * T * sizeof(int32_t));
    size_t nl = (size_t)B * T * cfg.vocab;
    float *ours = malloc(nl * sizeof(float));
    float *ref = read_file(dir, "hf_logits.bin", nl * sizeof(float));
    ck_assert_msg(sl_net_predict_tokens(net, ids, B, T, ours) == SL_OK, "%s", sl_last_error());
    double da = rel_diff(ours, ref, nl);
    printf("(a) save_pretrained -> sl_load_model: logits max |ours - HF| / max |HF| = %.3g\n", da);
    ck_assert_msg(da <= TOL, "(a) logits differ by %.3g relative", da);
    free(ref);
    sl_net_free(net);

    /* (a') The same model as older transformers stored it, with a tied
     * lm_head.weight and the attention buffers: the same logits exactly. */
    net = th_gpt2(ctx, &cfg, SL_SCHEDULE_NONE);
    snprintf(path, sizeof path, "%s/hf_old.safetensors", dir);
    ck_assert_msg(sl_load_model(net, path, NULL, &rep) == SL_OK, "%s", sl_last_error());
    printf("(a') older layout: loaded %d tensors, ignored %d (lm_head.weight, attn.bias, "
           "attn.masked_bias)\n", rep.loaded, rep.ignored);
    ck_assert_int_eq(rep.loaded, th_param_count(net));
    ck_assert_int_eq(rep.ignored, 2 * cfg.layers + 1);
    float *again = malloc(nl * sizeof(float));
    ck_assert_msg(sl_net_predict_tokens(net, ids, B, T, again) == SL_OK, "%s", sl_last_error());
    ck_assert(memcmp(again, ours, nl * sizeof(float)) == 0);
    free(again);
    sl_net_free(net);

    /* (b) ours -> Hugging Face's from_pretrained: a model of our own. */
    sl_gpt2_config mine = sl_gpt2_defaults();
    mine.layers = 2;
    mine.embd = 64;
    mine.heads = 4;
    mine.vocab = 512;
    mine.context = 64;
    net = th_gpt2(ctx, &mine, SL_SCHEDULE_NONE);
    int n = th_param_count(net);
    for (int i = 0; i < n; i++) { /* LayerNorms and biases off their 1 / 0 init */
        sl_param_info p;
        ck_assert(sl_net_param(net, i, &p) == SL_OK);
        float *noise = malloc(p.count * sizeof(float));
        th_fill_normal(noise, p.count, 300 + (uint64_t)i, 0.05f);
        for (size_t k = 0; k < p.count; k++)
            p.data[k] += noise[k];
        free(noise);
    }
    snprintf(path, sizeof path, "%s/ours", dir);
    ck_assert_msg(sl_gpt2_save_pretrained(net, &mine, path) == SL_OK, "%s", sl_last_error());
    ck_assert_msg(sl_net_predict_tokens(net, ids, B, T, ours) == SL_OK, "%s", sl_last_error());
    run_script("check", dir);
    ref = read_file(dir, "hf_on_ours_logits.bin", nl * sizeof(float));
    double db = rel_diff(ours, ref, nl);
    printf("(b) sl_gpt2_save_pretrained -> from_pretrained: logits max |ours - HF| / max |HF| = "
           "%.3g\n", db);
    ck_assert_msg(db <= TOL, "(b) logits differ by %.3g relative", db);
    free(ref);
    free(ours);
    free(ids);
    sl_net_free(net);
    sl_context_free(ctx);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert(system(cmd) == 0);
}
END_TEST

#define GEN_PROMPT 8
#define GEN_NEW 24

START_TEST(test_greedy_generate)
{
    if (!have_transformers())
        return;
    char dir[] = "/tmp/sl_hf_generate_XXXXXX";
    ck_assert(mkdtemp(dir));
    run_script("generate", dir);
    char path[1200];
    snprintf(path, sizeof path, "%s/gen/config.json", dir);
    sl_gpt2_config cfg;
    ck_assert_msg(sl_gpt2_read_config(path, &cfg) == SL_OK, "%s", sl_last_error());
    sl_context *ctx = th_context(9);
    sl_net *net;
    net = th_gpt2(ctx, &cfg, SL_SCHEDULE_NONE);
    snprintf(path, sizeof path, "%s/gen/model.safetensors", dir);
    ck_assert_msg(sl_load_model(net, path, NULL, NULL) == SL_OK, "%s", sl_last_error());
    int32_t *prompt = read_file(dir, "gen_prompt.bin", GEN_PROMPT * sizeof(int32_t));
    int32_t *want = read_file(dir, "gen_hf.bin", GEN_NEW * sizeof(int32_t));
    sl_gpt2_generator *gen;
    ck_assert_msg(sl_gpt2_generator_create(net, &cfg, GEN_PROMPT + GEN_NEW, &gen) == SL_OK, "%s",
                  sl_last_error());
    int32_t got[GEN_NEW];
    ck_assert_msg(sl_gpt2_generate(gen, prompt, GEN_PROMPT, GEN_NEW, NULL, got) == SL_OK, "%s",
                  sl_last_error());
    int distinct = 0;
    printf("(c) sl_gpt2_generate greedy:");
    for (int i = 0; i < GEN_NEW; i++) {
        printf(" %d", (int)got[i]);
        distinct += i == 0 || got[i] != got[i - 1];
    }
    printf("\n");
    for (int i = 0; i < GEN_NEW; i++)
        ck_assert_msg(got[i] == want[i], "(c) token %d: ours %d, transformers' generate %d", i,
                      (int)got[i], (int)want[i]);
    printf("(c) %d greedy tokens equal transformers' generate(do_sample=False)\n", GEN_NEW);
    ck_assert(distinct > 3);
    free(prompt);
    free(want);
    sl_gpt2_generator_free(gen);
    sl_net_free(net);
    sl_context_free(ctx);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert(system(cmd) == 0);
}
END_TEST

int main(void)
{
    snprintf(g_script, sizeof g_script, "%s/hf_interop.py", SL_TEST_SOURCE_DIR);
    Suite *s = suite_create("hf_interop");
    TCase *t = tcase_create("hf_interop");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_both_ways);
    tcase_add_test(t, test_greedy_generate);
    suite_add_tcase(s, t);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
