/*
 * net_options.c — the options of the network commands (train, plan, dot,
 * memplot): one table they share, each option marked with the commands
 * that take it, and the hooks that store a value, set the defaults and
 * check the combinations (cli.h, cli_command).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

enum {
    ALL_NETS = CLI_TRAIN | CLI_PLAN | CLI_DOT | CLI_MEMPLOT,
    PLANS = CLI_PLAN | CLI_DOT | CLI_MEMPLOT,
    /* Upper bounds that keep every size computation far from overflow. */
    MAX_BATCH = 65536,
    MAX_RES = 8192,
    MAX_CLASSES = 1000000,
    MAX_SEQ = 1 << 20,
    /* GPT-2's depth on the command line: its runs plan every layer */
    MAX_LAYERS = 1000,
};

typedef enum opt_id {
    OPT_MODEL, OPT_STEPS, OPT_BATCH, OPT_RES, OPT_CLASSES, OPT_THREADS, OPT_EVAL, OPT_SEED,
    OPT_LR, OPT_SCHEDULE, OPT_SCHEDULES, OPT_OUTPUT, OPT_OPTIMIZER, OPT_MODE, OPT_NO_REUSE,
    OPT_JSON, OPT_DATASET, OPT_DATA, OPT_SAVE_MODEL, OPT_SNAPSHOT, OPT_SNAPSHOT_EVERY,
    OPT_RESUME, OPT_LOG_EVERY, OPT_QUIET, OPT_BN_RESCALE, OPT_DEVICE, OPT_DISTRIBUTED,
    OPT_NO_MEMORY_CHECK, OPT_DTYPE, OPT_EXPLAIN, OPT_GPU, OPT_TF32,
    OPT_CLIP, OPT_WARMUP, OPT_LR_MIN, OPT_ACCUM, OPT_UPDATE_IN_BACKWARD,
    OPT_SEQ, OPT_LAYERS, OPT_EMBD, OPT_HEADS, OPT_VOCAB, OPT_CONTEXT, OPT_DROPOUT, OPT_VAL,
    OPT_LOAD_MODEL, OPT_ALLOW_NONFINITE,
    OPT_SHARD, OPT_RANKS, OPT_PRECISION,
} opt_id;

const cli_option cli_net_options[] = {
    {"--model", OPT_MODEL, ALL_NETS, 1},
    {"--steps", OPT_STEPS, CLI_TRAIN, 1},
    {"--batch", OPT_BATCH, ALL_NETS, 1},
    {"--res", OPT_RES, ALL_NETS, 1},
    {"--classes", OPT_CLASSES, ALL_NETS, 1},
    {"--threads", OPT_THREADS, CLI_TRAIN, 1},
    {"--eval", OPT_EVAL, CLI_TRAIN, 1},
    {"--seed", OPT_SEED, CLI_TRAIN, 1},
    {"--lr", OPT_LR, CLI_TRAIN, 1},
    {"--schedule", OPT_SCHEDULE, CLI_TRAIN | CLI_PLAN | CLI_DOT, 1},
    {"--schedules", OPT_SCHEDULES, CLI_MEMPLOT, 1},
    {"-o", OPT_OUTPUT, CLI_DOT | CLI_MEMPLOT, 1},
    {"--output", OPT_OUTPUT, CLI_DOT | CLI_MEMPLOT, 1},
    {"--optimizer", OPT_OPTIMIZER, ALL_NETS, 1},
    {"--mode", OPT_MODE, PLANS, 1},
    {"--no-reuse", OPT_NO_REUSE, PLANS, 0},
    {"--json", OPT_JSON, ALL_NETS, 0},
    {"--dataset", OPT_DATASET, CLI_TRAIN, 1},
    {"--data", OPT_DATA, CLI_TRAIN, 1},
    {"--save-model", OPT_SAVE_MODEL, CLI_TRAIN, 1},
    {"--snapshot", OPT_SNAPSHOT, CLI_TRAIN, 1},
    {"--snapshot-every", OPT_SNAPSHOT_EVERY, CLI_TRAIN, 1},
    {"--resume", OPT_RESUME, CLI_TRAIN, 1},
    {"--log-every", OPT_LOG_EVERY, CLI_TRAIN, 1},
    {"--quiet", OPT_QUIET, CLI_TRAIN, 0},
    {"--bn-rescale", OPT_BN_RESCALE, CLI_TRAIN, 0},
    {"--explain", OPT_EXPLAIN, CLI_PLAN, 0},
    {"--device", OPT_DEVICE, CLI_TRAIN, 1},
    {"--gpu", OPT_GPU, CLI_TRAIN, 1},
    {"--tf32", OPT_TF32, CLI_TRAIN, 0},
    {"--distributed", OPT_DISTRIBUTED, CLI_TRAIN, 0},
    {"--no-memory-check", OPT_NO_MEMORY_CHECK, CLI_TRAIN, 0},
    {"--dtype", OPT_DTYPE, CLI_TRAIN, 1},
    {"--clip", OPT_CLIP, CLI_TRAIN, 1},
    {"--warmup", OPT_WARMUP, CLI_TRAIN, 1},
    {"--lr-min", OPT_LR_MIN, CLI_TRAIN, 1},
    {"--accum", OPT_ACCUM, CLI_TRAIN, 1},
    {"--update-in-backward", OPT_UPDATE_IN_BACKWARD, ALL_NETS, 0},
    {"--seq", OPT_SEQ, ALL_NETS, 1},
    {"--layers", OPT_LAYERS, ALL_NETS, 1},
    {"--embd", OPT_EMBD, ALL_NETS, 1},
    {"--heads", OPT_HEADS, ALL_NETS, 1},
    {"--vocab", OPT_VOCAB, ALL_NETS, 1},
    {"--context", OPT_CONTEXT, ALL_NETS, 1},
    {"--dropout", OPT_DROPOUT, CLI_TRAIN, 1},
    {"--val", OPT_VAL, CLI_TRAIN, 1},
    {"--load-model", OPT_LOAD_MODEL, CLI_TRAIN, 1},
    {"--allow-nonfinite", OPT_ALLOW_NONFINITE, CLI_TRAIN, 0},
    {"--shard", OPT_SHARD, CLI_TRAIN | CLI_PLAN, 1},
    {"--ranks", OPT_RANKS, CLI_PLAN, 1},
    {"--precision", OPT_PRECISION, ALL_NETS, 1},
    {NULL, 0, 0, 0},
};

static const char g_schedules_help[] =
    "schedules: none (keep every activation), sqrt (ceil(sqrt(N)) segments),\n"
    "  segments:K (K segments), budget:SIZE (the least recomputed FLOPs whose\n"
    "  planned peak fits SIZE: bytes, or with K/KiB, M/MiB, G/GiB; segments may\n"
    "  checkpoint again inside), ops:SIZE (the same with operator-level choices:\n"
    "  a block may keep its conv outputs and recompute BatchNorm, ReLU and add;\n"
    "  least estimated recompute time)\n";

void cli_print_schedules_and_models(FILE *f)
{
    fputs(g_schedules_help, f);
    fprintf(f, "models:");
    for (const char *const *m = sl_model_names(); *m; m++)
        fprintf(f, " %s", *m);
    fprintf(f, "\n");
}

/* The shape flags and their bounds, which the message of a bad value
 * names; each is within what the library accepts (SL_GPT2_MAX_*). */
static const struct {
    opt_id id;
    long lo, hi;
} g_shape_bounds[] = {
    {OPT_BATCH, 1, MAX_BATCH},       {OPT_RES, 8, MAX_RES},
    {OPT_CLASSES, 2, MAX_CLASSES},   {OPT_SEQ, 1, MAX_SEQ},
    {OPT_LAYERS, 1, MAX_LAYERS},     {OPT_EMBD, 1, SL_GPT2_MAX_EMBD},
    {OPT_HEADS, 1, 4096},            {OPT_VOCAB, 2, 65536}, /* ids are uint16 in shards */
    {OPT_CONTEXT, 1, MAX_SEQ},
};

/* The bounds of a shape flag into lo and hi; 0 when id is not one. */
static int shape_bounds(opt_id id, long *lo, long *hi)
{
    for (size_t k = 0; k < sizeof g_shape_bounds / sizeof *g_shape_bounds; k++)
        if (g_shape_bounds[k].id == id) {
            *lo = g_shape_bounds[k].lo;
            *hi = g_shape_bounds[k].hi;
            return 1;
        }
    return 0;
}

static int parse_shape(opt_id id, const char *v, int *out)
{
    long lo = 0, hi = 0;
    shape_bounds(id, &lo, &hi);
    return cli_parse_int(v, lo, hi, out);
}

static int is_model(const char *name)
{
    for (const char *const *m = sl_model_names(); *m; m++)
        if (strcmp(*m, name) == 0)
            return 1;
    return strcmp(name, "gpt2") == 0; /* built by sl_model_gpt2 */
}

/* A finite float > 0, nothing after it. Returns 0 or -1. */
static int parse_positive(const char *v, float *out)
{
    char *end;
    errno = 0;
    *out = strtof(v, &end);
    return errno || end == v || *end || !(*out > 0) || !isfinite(*out) ? -1 : 0;
}

/* Sets one option from its value. Returns 0, or -1 for a bad value. */
static int set_option(cli_options *o, opt_id id, const char *v)
{
    switch (id) {
    case OPT_MODEL: o->model = v; return is_model(v) ? 0 : -1;
    case OPT_STEPS: return cli_parse_int(v, 1, 1000000000L, &o->steps);
    case OPT_BATCH: return parse_shape(id, v, &o->batch);
    case OPT_RES: o->res_set = 1; return parse_shape(id, v, &o->res);
    case OPT_CLASSES: o->classes_set = 1; return parse_shape(id, v, &o->classes);
    case OPT_THREADS: return cli_parse_int(v, 0, 4096, &o->threads);
    case OPT_EVAL: return cli_parse_int(v, 0, 1000000000L, &o->eval_samples);
    case OPT_LOG_EVERY: return cli_parse_int(v, 1, 1000000000L, &o->log_every);
    case OPT_SNAPSHOT_EVERY: return cli_parse_int(v, 1, 1000000000L, &o->snapshot_every);
    case OPT_SEED: return cli_parse_u64(v, &o->seed);
    case OPT_LR: o->lr_set = 1; return parse_positive(v, &o->lr);
    case OPT_SCHEDULE:
        snprintf(o->schedule_text, sizeof o->schedule_text, "%s", v);
        return strlen(v) < sizeof o->schedule_text ? (sl_schedule_parse(v, &o->schedule) == SL_OK ? 0 : -1) : -1;
    case OPT_SCHEDULES: o->schedules = v; return *v ? 0 : -1;
    case OPT_OUTPUT: o->output = v; return *v ? 0 : -1;
    case OPT_OPTIMIZER:
        o->optimizer = v;
        o->optimizer_set = 1;
        if (o->cmd == CLI_TRAIN)
            return strcmp(v, "sgd") && strcmp(v, "adam") && strcmp(v, "adamw") ? -1 : 0;
        return strcmp(v, "sgd") && strcmp(v, "adam") && strcmp(v, "adamw") && strcmp(v, "none")
                   ? -1 : 0;
    case OPT_MODE:
        o->mode = strcmp(v, "infer") == 0 ? SL_MODE_INFER : SL_MODE_TRAIN;
        return strcmp(v, "train") && strcmp(v, "infer") ? -1 : 0;
    case OPT_DATASET:
        o->dataset = v;
        return strcmp(v, "synthetic") && strcmp(v, "mnist") && strcmp(v, "cifar10") ? -1 : 0;
    case OPT_DATA: o->data_dir = v; return *v ? 0 : -1;
    case OPT_SAVE_MODEL: o->save_model = v; return *v ? 0 : -1;
    case OPT_SNAPSHOT: o->snapshot = v; return *v ? 0 : -1;
    case OPT_RESUME: o->resume = v; return *v ? 0 : -1;
    case OPT_JSON: o->json = 1; return 0;
    case OPT_NO_REUSE: o->no_reuse = 1; return 0;
    case OPT_QUIET: o->quiet = 1; return 0;
    case OPT_BN_RESCALE: o->bn_rescale = 1; return 0;
    case OPT_DISTRIBUTED: o->distributed = 1; return 0;
    case OPT_EXPLAIN: o->explain = 1; return 0;
    case OPT_DEVICE:
        o->device = strcmp(v, "cuda") == 0 ? SL_DEVICE_CUDA : SL_DEVICE_CPU;
        return strcmp(v, "cpu") && strcmp(v, "cuda") ? -1 : 0;
    case OPT_NO_MEMORY_CHECK: o->no_memory_check = 1; return 0;
    case OPT_GPU: o->gpu_set = 1; return cli_parse_int(v, 0, 4096, &o->gpu);
    case OPT_TF32: o->tf32 = 1; return 0;
    case OPT_DTYPE:
        o->save_dtype = strcmp(v, "bf16") == 0  ? SL_FILE_BF16
                        : strcmp(v, "f16") == 0 ? SL_FILE_F16
                                                : SL_FILE_F32;
        return strcmp(v, "f32") && strcmp(v, "bf16") && strcmp(v, "f16") ? -1 : 0;
    case OPT_CLIP: return parse_positive(v, &o->clip);
    case OPT_WARMUP: o->warmup_set = 1; return cli_parse_int(v, 0, 1000000000L, &o->warmup);
    case OPT_LR_MIN: {
        char *end;
        errno = 0;
        o->lr_min_set = 1;
        o->lr_min = strtof(v, &end);
        return errno || end == v || *end || !(o->lr_min >= 0) || !isfinite(o->lr_min) ? -1 : 0;
    }
    case OPT_ACCUM: return cli_parse_int(v, 1, 1000000, &o->accum);
    case OPT_UPDATE_IN_BACKWARD: o->update_in_backward = 1; return 0;
    case OPT_SEQ: return parse_shape(id, v, &o->seq);
    case OPT_LAYERS: return parse_shape(id, v, &o->layers);
    case OPT_EMBD: return parse_shape(id, v, &o->embd);
    case OPT_HEADS: return parse_shape(id, v, &o->heads);
    case OPT_VOCAB: return parse_shape(id, v, &o->vocab);
    case OPT_CONTEXT: return parse_shape(id, v, &o->context);
    case OPT_DROPOUT: {
        char *end;
        errno = 0;
        o->dropout = strtof(v, &end);
        return errno || end == v || *end || !(o->dropout >= 0 && o->dropout < 1) ? -1 : 0;
    }
    case OPT_VAL: o->val_data = v; return *v ? 0 : -1;
    case OPT_LOAD_MODEL: o->load_model = v; return *v ? 0 : -1;
    case OPT_ALLOW_NONFINITE: o->allow_nonfinite = 1; return 0;
    case OPT_SHARD: return cli_parse_int(v, 0, 2, &o->shard);
    case OPT_RANKS: return cli_parse_int(v, 1, 1000000, &o->ranks);
    case OPT_PRECISION:
        o->precision = strcmp(v, "bf16") == 0 ? SL_PRECISION_BF16 : SL_PRECISION_F32;
        return strcmp(v, "f32") && strcmp(v, "bf16") ? -1 : 0;
    }
    return -1;
}

void cli_net_defaults(const cli_command *self, void *opts)
{
    cli_options *o = opts;
    memset(o, 0, sizeof *o);
    o->cmd = (cli_net_command)self->mask;
    o->steps = 300;
    o->eval_samples = 1000;
    o->log_every = 10;
    o->seed = 1;
    o->schedule = SL_SCHEDULE_SQRT;
    snprintf(o->schedule_text, sizeof o->schedule_text, "sqrt");
    o->mode = SL_MODE_TRAIN;
    o->dataset = "synthetic";
    o->lr = 0.05f;
    o->accum = 1;
    o->seq = 1024; /* GPT-2 small */
    o->layers = 12;
    o->embd = 768;
    o->heads = 12;
    o->vocab = 50257;
    o->context = 1024;
    if (o->cmd == CLI_TRAIN) {
        o->model = "resnet20";
        o->batch = 32;
        o->res = 32;
        o->classes = 10;
        o->optimizer = "sgd";
    } else {
        o->batch = 16;
        o->res = 224;
        o->classes = 1000;
        o->optimizer = "sgd";
    }
}

/* The combinations of --model gpt2. */
static int check_lm(const cli_command *cmd, cli_options *o)
{
    if (o->res_set || o->classes_set)
        return cli_usage_error(cmd, "--res and --classes do not apply to gpt2 (--seq, --vocab)");
    if (o->seq > o->context)
        return cli_usage_error(cmd, "--seq %d is longer than the context of %d positions "
                                    "(--context)", o->seq, o->context);
    if (o->embd % o->heads != 0)
        return cli_usage_error(cmd, "--embd %d is not a multiple of --heads %d", o->embd, o->heads);
    /* a step's positions are counted in int by the kernels (as the library checks) */
    if ((int64_t)o->batch * o->seq > INT_MAX)
        return cli_usage_error(cmd, "--batch %d x --seq %d = %lld tokens per step; at most %d",
                               o->batch, o->seq, (long long)o->batch * o->seq, INT_MAX);
    if (o->cmd != CLI_TRAIN)
        return 0;
    if (strcmp(o->dataset, "synthetic") != 0)
        return cli_usage_error(cmd, "--dataset does not apply to gpt2: --data FILE is a token "
                                    "shard (sublinear tokenize writes them)");
    if (!o->data_dir)
        return cli_usage_error(cmd, "--model gpt2 needs --data TRAIN.bin, a token shard "
                                    "(sublinear tokenize writes them)");
    if (o->distributed)
        return cli_usage_error(cmd, "--distributed does not train gpt2 yet");
    if (o->bn_rescale)
        return cli_usage_error(cmd, "--bn-rescale does not apply to gpt2 (no BatchNorm)");
    if (o->save_dtype != SL_FILE_F32)
        return cli_usage_error(cmd, "--dtype does not apply to gpt2 (its model directory is F32, "
                                    "as Hugging Face's)");
    if (o->snapshot_every && !o->snapshot)
        return cli_usage_error(cmd, "--snapshot-every needs --snapshot PATH");
    return 0;
}

/* Checks what single options cannot: required options and combinations. */
static int check_combination(const cli_command *cmd, cli_options *o)
{
    if (!o->model)
        return cli_usage_error(cmd, "--model is required");
    if ((o->cmd == CLI_DOT || o->cmd == CLI_MEMPLOT) && !o->output)
        return cli_usage_error(cmd, "-o FILE is required");
    if (o->cmd == CLI_PLAN && o->shard && o->ranks < 2)
        return cli_usage_error(cmd, "--shard needs --ranks N with N >= 2");
    if (cli_is_lm(o))
        return check_lm(cmd, o);
    if (o->lm_options)
        return cli_usage_error(cmd, "--seq, --layers, --embd, --heads, --vocab, --context, "
                                    "--dropout, --val and --load-model apply to --model gpt2");
    if ((int64_t)o->batch * o->res * o->res > INT_MAX)
        return cli_usage_error(cmd, "--batch %d x --res %d x %d = %lld pixel positions per step; "
                               "at most %d", o->batch, o->res, o->res,
                               (long long)o->batch * o->res * o->res, INT_MAX);
    if (o->cmd != CLI_TRAIN)
        return 0;
    int synthetic = strcmp(o->dataset, "synthetic") == 0;
    if (synthetic && o->data_dir)
        return cli_usage_error(cmd, "--data applies to --dataset mnist or cifar10");
    if (!synthetic && !o->data_dir)
        return cli_usage_error(cmd, "--dataset %s needs --data DIR", o->dataset);
    if (!synthetic && o->res_set)
        return cli_usage_error(cmd, "--res applies to the synthetic dataset only "
                                    "(%s images keep their size)", o->dataset);
    if (!synthetic && o->classes_set && o->classes != 10)
        return cli_usage_error(cmd, "%s has 10 classes, not %d", o->dataset, o->classes);
    if (o->lr_min_set && !o->warmup_set)
        return cli_usage_error(cmd, "--lr-min applies to the cosine schedule of --warmup N");
    if (o->snapshot_every && !o->snapshot)
        return cli_usage_error(cmd, "--snapshot-every needs --snapshot PATH");
    if (o->shard && !o->distributed)
        return cli_usage_error(cmd, "--shard applies to --distributed training");
    if (o->distributed && o->save_dtype != SL_FILE_F32)
        return cli_usage_error(cmd, "--dtype applies to single-process training (a "
                                    "--distributed run saves F32 from rank 0)");
    return 0;
}


int cli_net_set(const cli_command *self, void *opts, const cli_option *opt, const char *v)
{
    cli_options *o = opts;
    opt_id id = (opt_id)opt->id;
    o->lm_options |= id >= OPT_SEQ && id <= OPT_LOAD_MODEL;
    if (set_option(o, id, v) == 0)
        return 0;
    long lo, hi;
    if (id == OPT_MODEL)
        return cli_usage_error(self, "unknown model '%s'", v);
    if (shape_bounds(id, &lo, &hi))
        return cli_usage_error(self, "bad value '%s' for %s: an integer from %ld to %ld", v,
                               opt->name, lo, hi);
    return cli_usage_error(self, "bad value '%s' for %s", v, opt->name);
}

/* The defaults that depend on other options, then the combinations. */
int cli_net_check(const cli_command *self, void *opts)
{
    cli_options *o = opts;
    if (cli_is_lm(o) && !o->optimizer_set)
        o->optimizer = "adamw";
    if (o->cmd == CLI_TRAIN && !o->lr_set && strncmp(o->optimizer, "adam", 4) == 0)
        o->lr = cli_is_lm(o) ? 6e-4f : 1e-3f;
    if (o->cmd == CLI_TRAIN && !o->lr_min_set)
        o->lr_min = 0.1f * o->lr;
    return check_combination(self, o);
}
