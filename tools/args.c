/*
 * args.c — the argument parser and usage texts of the `sublinear` command.
 *
 * One table lists every option with the subcommands that take it, so an
 * option given to a command that has no use for it is an error (exit 2)
 * rather than silently ignored. Values follow the option as the next word
 * or after '=' (--steps 3, --steps=3).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
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
    OPT_SHARD, OPT_RANKS,
} opt_id;

typedef struct opt_spec {
    const char *name;
    opt_id id;
    unsigned cmds;
    int has_value;
} opt_spec;

static const opt_spec g_opts[] = {
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
};

static const char *command_name(cli_command cmd)
{
    switch (cmd) {
    case CLI_TRAIN: return "train";
    case CLI_PLAN: return "plan";
    case CLI_DOT: return "dot";
    default: return "memplot";
    }
}

static const char g_schedules_help[] =
    "schedules: none (keep every activation), sqrt (ceil(sqrt(N)) segments),\n"
    "  segments:K (K segments), budget:SIZE (the least recomputed FLOPs whose\n"
    "  planned peak fits SIZE: bytes, or with K/KiB, M/MiB, G/GiB; segments may\n"
    "  checkpoint again inside), ops:SIZE (the same with operator-level choices:\n"
    "  a block may keep its conv outputs and recompute BatchNorm, ReLU and add;\n"
    "  least estimated recompute time)\n";

static const char g_train_help[] =
    "usage: sublinear train [options]\n"
    "  Trains a model and prints a progress bar (step, loss, accuracy, images/s,\n"
    "  memory), then held-out accuracy, the memory report and the activation\n"
    "  memory saved against keeping every activation.\n"
    "options:\n"
    "  --model NAME          model to build (resnet20)\n"
    "  --dataset KIND        synthetic (built in, no download), mnist or cifar10\n"
    "  --data DIR            directory of the files of mnist / cifar10:\n"
    "                          mnist: train-images-idx3-ubyte, train-labels-idx1-ubyte\n"
    "                            and optionally t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte\n"
    "                            (uncompressed IDX; grey images are fed as 3 equal channels)\n"
    "                          cifar10: data_batch_1.bin .. data_batch_5.bin (at least one)\n"
    "                            and optionally test_batch.bin (the binary version)\n"
    "  --steps N             total optimizer steps (300); the learning rate drops\n"
    "                        10x at half of them when N > 10\n"
    "  --batch N             images per step (32)\n"
    "  --res N               image size of the synthetic dataset (32)\n"
    "  --classes N           classes of the synthetic dataset (10)\n"
    "  --lr X                learning rate (0.05 for sgd, 0.001 for adam, adamw)\n"
    "  --optimizer KIND      sgd (momentum 0.9, weight decay 5e-4), adam, or adamw\n"
    "                        (betas 0.9, 0.999, decoupled weight decay 0.01 of the\n"
    "                        >= 2-d weights only, as GPT-2 training)\n"
    "  --clip NORM           clip the global gradient norm to NORM (off)\n"
    "  --warmup N            learning rate: linear warmup over N steps, then cosine\n"
    "                        decay to --lr-min at the last step (instead of the 10x drop)\n"
    "  --lr-min X            the cosine's final learning rate (a tenth of --lr)\n"
    "  --accum K             accumulate the gradients of K batches per optimizer\n"
    "                        step (1): as one batch of K * --batch images\n"
    "  --update-in-backward  update each layer as soon as its gradients are complete;\n"
    "                        gradients then live in the activation arena for their\n"
    "                        short lives (no gradient block): the same weights, less\n"
    "                        memory (not with --clip, --accum or --distributed)\n"
    "GPT-2 (--model gpt2; AdamW betas (0.9, 0.95), decay 0.1 on matrices, lr 6e-4):\n"
    "  --data FILE           the training tokens: an llm.c shard (sublinear tokenize)\n"
    "  --val FILE            held-out tokens; --eval N sequences of them are scored\n"
    "  --seq T               tokens per sequence (1024); --batch sequences per step\n"
    "  --layers N --embd C --heads H --vocab V --context N\n"
    "                        the shape (GPT-2 small: 12, 768, 12, 50257, 1024)\n"
    "  --dropout P           GPT-2's three dropouts (0)\n"
    "  --load-model FILE     start from a model file (sublinear's or Hugging Face's\n"
    "                        model.safetensors of the same shape)\n"
    "  --save-model DIR      gpt2 saves DIR/model.safetensors and DIR/config.json, the\n"
    "                        directory Hugging Face's from_pretrained and `sublinear\n"
    "                        sample --config` read\n"
    "  --schedule S          checkpointing schedule (sqrt); see below\n"
    "  --bn-rescale          memonger's BatchNorm momentum rescale under re-forward\n"
    "  --seed N              seeds weights, data order and dropout (1)\n"
    "  --device cpu|cuda     where kernels run (cpu); cuda needs a build with the\n"
    "                        CUDA toolkit and cuDNN, and a GPU\n"
    "  --gpu N               CUDA device ordinal (0; with --distributed the rank's\n"
    "                        index on its node, so one GPU per rank)\n"
    "  --tf32                CUDA: let convolutions and GEMMs use TF32 tensor cores\n"
    "                        (PyTorch's default for convolutions); off: true FP32\n"
    "  --threads N           CPU threads, 0 = all cores (0)\n"
    "  --distributed         data-parallel over the ranks of `mpirun -np N sublinear\n"
    "                        train ...` (MPI on the CPU, NCCL on CUDA: one GPU per\n"
    "                        rank): --batch images per rank, rank r reading every\n"
    "                        N-th sample of the training order from r; rank 0 prints\n"
    "                        and writes the files; images/s are over all ranks\n"
    "  --shard 0|1|2         with --distributed: 1 = ZeRO-1, each rank holds the\n"
    "                        optimizer state of its 1/N of the parameters; 2 =\n"
    "                        ZeRO-2, and of the reduced gradients (CPU ranks; no\n"
    "                        --clip or --accum; --update-in-backward needs it) (0)\n"
    "  --eval N              held-out samples to measure accuracy on (1000)\n"
    "  --log-every N         progress every N steps (10)\n"
    "  --quiet               no progress bar\n"
    "  --save-model PATH     save the trained model (thin .safetensors: parameters\n"
    "                        and BatchNorm statistics only)\n"
    "  --dtype f32|bf16|f16  the saved model's float type (f32); bf16 and f16 round\n"
    "                        to nearest, ties to even, and halve the file\n"
    "  --no-memory-check     skip comparing the planned memory with the memory\n"
    "                        available before allocating (a step too large for\n"
    "                        memory then fails when allocating, or is killed)\n"
    "  --snapshot PATH       save a snapshot (model + optimizer state + step) at the end\n"
    "  --snapshot-every N    also save the snapshot every N steps\n"
    "  --resume PATH         resume from a snapshot and train on to --steps\n"
    "  --allow-nonfinite     load a --resume snapshot or --load-model file whose\n"
    "                        tensors hold NaN or infinite values (refused by default;\n"
    "                        a step whose loss is not finite still stops the run)\n"
    "  --json                print one JSON object at the end (loss, accuracy, images/s,\n"
    "                        memory reports) and nothing else on stdout\n";

static const char g_plan_help[] =
    "usage: sublinear plan --model NAME [options]\n"
    "  Prints the planned memory of one step by category and the recomputed\n"
    "  fraction of FLOPs. No kernel runs.\n"
    "options:\n"
    "  --model NAME          model to plan (required)\n"
    "  --batch N             batch size (16)\n"
    "  --res N               input resolution (224)\n"
    "  --classes N           classifier outputs (1000)\n"
    "  --schedule S          checkpointing schedule (sqrt); see below\n"
    "  --mode train|infer    plan a training step or an inference forward (train)\n"
    "  --no-reuse            every tensor in storage of its own (a plain framework)\n"
    "  --optimizer KIND      sgd, adam, adamw or none: optimizer state counted (sgd;\n"
    "                        adamw for gpt2)\n"
    "  --update-in-backward  plan the update inside backward: parameter gradients\n"
    "                        as arena values instead of a fixed block\n"
    "  --ranks N --shard S   plan one rank of N data-parallel ranks (the one with the\n"
    "                        largest slice) under ZeRO stage S (0 none, 1 optimizer\n"
    "                        state sharded, 2 gradients too)\n"
    "  --seq T, --layers N, --embd C, --heads H, --vocab V, --context N\n"
    "                        gpt2's sequence length and shape (1024; GPT-2 small)\n"
    "  --explain             also print every top-level unit (layer or block): its\n"
    "                        forward and backward FLOPs and estimated ms, input and\n"
    "                        output bytes, the bytes it holds to its backward when\n"
    "                        it keeps all / its conv outputs / its output only, its\n"
    "                        largest workspace, how many times its forward runs and\n"
    "                        what the schedule keeps of it\n"
    "  --json                print one JSON object\n";

static const char g_dot_help[] =
    "usage: sublinear dot --model NAME -o FILE.dot [options]\n"
    "  Writes the network as a Graphviz graph: one node per layer with its\n"
    "  output shape; equal fill colour means shared arena storage.\n"
    "options:\n"
    "  --model NAME, --batch N (16), --res N (224), --classes N (1000),\n"
    "  --schedule S (sqrt), --mode train|infer (train), --no-reuse,\n"
    "  --optimizer sgd|adam|none (sgd)\n"
    "  -o, --output FILE     the .dot file to write (required)\n"
    "  --json                print one JSON object describing what was written\n";

static const char g_memplot_help[] =
    "usage: sublinear memplot --model NAME -o FILE.svg [options]\n"
    "  Draws the live memory of every program step of one planned step, one\n"
    "  series per schedule, on one SVG. No kernel runs.\n"
    "options:\n"
    "  --model NAME, --batch N (16), --res N (224), --classes N (1000),\n"
    "  --mode train|infer (train), --no-reuse, --optimizer sgd|adam|none (sgd)\n"
    "  --schedules S1,S2,..  up to 8 schedules (none,sqrt)\n"
    "  -o, --output FILE     the .svg file to write (required)\n"
    "  --json                print one JSON object with each series' steps and arena\n";

static const char g_bench_help[] =
    "usage: sublinear bench NAME [options]\n"
    "       sublinear bench list [--json]\n"
    "  Runs one of the benchmarks of bench/. NAME:\n"
    "  optnet     optnet's memory tables (AlexNet, VGG-A, GoogLeNet, ResNet-110):\n"
    "             planned memory before / after sharing; planning only, seconds.\n"
    "             Built into this command. Options: --json.\n"
    "  conv       ResNet-50 convolutions through the CPU kernels (bench_conv).\n"
    "  resnet152  memonger's headline: ResNet-152 plain vs sublinear (bench_resnet).\n"
    "  conv and resnet152 run the bench program, passing the options on (e.g.\n"
    "  --threads N --batch N --json); it is looked for in $SL_BENCH_DIR, in\n"
    "  bench/ beside this command (a build tree) and in ../libexec/sublinear\n"
    "  (an install). `sublinear bench NAME --help` describes one benchmark.\n";

void cli_usage(FILE *f, const char *name)
{
    if (!name) {
        fprintf(f, "usage: sublinear COMMAND [options]   (sublinear COMMAND --help for more)\n"
                   "commands:\n"
                   "  train    train a model on the built-in dataset, MNIST or CIFAR-10\n"
                   "  plan     print the planned memory of one step (no kernel runs)\n"
                   "  dot      write the network as a Graphviz graph of shared storage\n"
                   "  memplot  draw live memory per step for several schedules (SVG)\n"
                   "  bench    run a benchmark (optnet tables, conv kernels, ResNet-152)\n"
                   "  tokenize text files to llm.c token shards with GPT-2's BPE\n"
                   "  sample   generate text from a GPT-2 model file (KV cache)\n"
                   "  version  print the version\n"
                   "exit status: 0 success, 1 failure, 2 bad arguments\n\n%s"
                   "models:",
                g_schedules_help);
        for (const char *const *m = sl_model_names(); *m; m++)
            fprintf(f, " %s", *m);
        fprintf(f, "\n");
        return;
    }
    if (strcmp(name, "train") == 0)
        fputs(g_train_help, f);
    else if (strcmp(name, "plan") == 0)
        fputs(g_plan_help, f);
    else if (strcmp(name, "dot") == 0)
        fputs(g_dot_help, f);
    else if (strcmp(name, "memplot") == 0)
        fputs(g_memplot_help, f);
    else if (strcmp(name, "bench") == 0) {
        fputs(g_bench_help, f);
        return;
    } else if (strcmp(name, "tokenize") == 0) {
        cli_tokenize_usage(f);
        return;
    } else if (strcmp(name, "sample") == 0) {
        cli_sample_usage(f);
        return;
    }
    fputs(g_schedules_help, f);
    fprintf(f, "models:");
    for (const char *const *m = sl_model_names(); *m; m++)
        fprintf(f, " %s", *m);
    fprintf(f, "\n");
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "sublinear %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n\n");
    cli_usage(stderr, cmd);
    return CLI_EXIT_USAGE;
}

int cli_parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
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

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = (uint64_t)v;
    return 0;
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
    case OPT_SEED: return parse_u64(v, &o->seed);
    case OPT_LR: {
        char *end;
        errno = 0;
        o->lr = strtof(v, &end);
        return errno || end == v || *end || !(o->lr > 0) || !isfinite(o->lr) ? -1 : 0;
    }
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
    }
    return -1;
}

void cli_defaults(cli_command cmd, cli_options *o)
{
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
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
    if (cmd == CLI_TRAIN) {
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
static int check_lm(const char *cmd, cli_options *o)
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
static int check_combination(const char *cmd, cli_options *o)
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

int cli_parse(cli_command cmd, int argc, char **argv, cli_options *o, int *help)
{
    const char *name = command_name(cmd);
    int lr_set = 0;
    *help = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cli_usage(stdout, name);
            *help = 1;
            return 0;
        }
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const opt_spec *spec = NULL;
        for (size_t k = 0; k < sizeof g_opts / sizeof *g_opts; k++)
            if (strlen(g_opts[k].name) == len && strncmp(g_opts[k].name, a, len) == 0)
                spec = &g_opts[k];
        if (!spec)
            return cli_usage_error(name, "unknown option '%s'", a);
        if (!(spec->cmds & cmd))
            return cli_usage_error(name, "%s does not apply to %s", spec->name, name);
        const char *v = NULL;
        if (spec->has_value) {
            v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
            if (!v)
                return cli_usage_error(name, "%s needs a value", spec->name);
        } else if (eq) {
            return cli_usage_error(name, "%s takes no value", spec->name);
        }
        lr_set |= spec->id == OPT_LR;
        o->lm_options |= spec->id >= OPT_SEQ && spec->id <= OPT_LOAD_MODEL;
        long lo, hi;
        if (set_option(o, spec->id, v) != 0)
            return spec->id == OPT_MODEL ? cli_usage_error(name, "unknown model '%s'", v)
                   : shape_bounds(spec->id, &lo, &hi)
                       ? cli_usage_error(name, "bad value '%s' for %s: an integer from %ld to %ld",
                                         v, spec->name, lo, hi)
                       : cli_usage_error(name, "bad value '%s' for %s", v, spec->name);
    }
    if (cli_is_lm(o) && !o->optimizer_set)
        o->optimizer = "adamw";
    if (cmd == CLI_TRAIN && !lr_set && strncmp(o->optimizer, "adam", 4) == 0)
        o->lr = cli_is_lm(o) ? 6e-4f : 1e-3f;
    if (cmd == CLI_TRAIN && !o->lr_min_set)
        o->lr_min = 0.1f * o->lr;
    return check_combination(name, o);
}
