/*
 * cmd_tokenize.c — `sublinear tokenize`: text files to llm.c's token
 * shards with GPT-2's tokenizer (sl_tokenizer, include/sublinear/text.h).
 * Its options (cli_option) share nothing with train's.
 *
 * Each file is read whole and encoded on its own, preceded by the
 * vocabulary's "<|endoftext|>" token (the document separator GPT-2 was
 * trained with) when it has one. A shard is 256 little-endian int32 —
 * 20240520 (the magic), 1 (the version), the token count, zeros — then the
 * tokens as little-endian uint16. With --val-fraction F the last
 * floor(F * tokens) tokens go to a second shard (val.bin in the directory
 * of --out unless --val-out names it) and the rest to --out.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static const char g_tokenize_help[] =
    "usage: sublinear tokenize --vocab encoder.json --merges vocab.bpe --out train.bin\n"
    "                          [--val-fraction F] [--val-out FILE] IN.txt...\n"
    "Encodes text files with GPT-2's byte-level BPE and writes llm.c's token shard:\n"
    "a header of 256 int32 [20240520, 1, tokens, 0...], then the tokens as uint16\n"
    "(all little-endian). Each file is preceded by <|endoftext|> when the vocabulary\n"
    "has it.\n"
    "  --vocab FILE         encoder.json (token -> id)\n"
    "  --merges FILE        vocab.bpe (the merges, in order)\n"
    "  --out FILE           the training shard\n"
    "  --val-fraction F     0 <= F < 1: the last floor(F * tokens) tokens go to a\n"
    "                       validation shard instead (default 0: none)\n"
    "  --val-out FILE       the validation shard (default: val.bin beside --out)\n";

typedef struct tokenize_options {
    const char *vocab, *merges, *out, *val_out;
    double val_fraction;
    char val_default[4096];
    int n_inputs;
    const char **inputs; /* the words of the command line, in a list of its own */
} tokenize_options;

enum { OPT_VOCAB, OPT_MERGES, OPT_OUT, OPT_VAL_OUT, OPT_VAL_FRACTION };

static const cli_option g_tokenize_options[] = {
    {"--vocab", OPT_VOCAB, 0, 1},
    {"--merges", OPT_MERGES, 0, 1},
    {"--out", OPT_OUT, 0, 1},
    {"--val-out", OPT_VAL_OUT, 0, 1},
    {"--val-fraction", OPT_VAL_FRACTION, 0, 1},
    {NULL, 0, 0, 0},
};

/* An input file (opt NULL) or an option's value. */
static int tokenize_set(const cli_command *self, void *opts, const cli_option *opt, const char *v)
{
    tokenize_options *o = opts;
    if (!opt) {
        const char **grown = realloc(o->inputs, (size_t)(o->n_inputs + 1) * sizeof *grown);
        if (!grown)
            return cli_usage_error(self, "out of memory for %d input files", o->n_inputs + 1);
        o->inputs = grown;
        o->inputs[o->n_inputs++] = v;
        return 0;
    }
    const char **dest[] = {&o->vocab, &o->merges, &o->out, &o->val_out};
    if (opt->id != OPT_VAL_FRACTION) {
        *dest[opt->id] = v;
        return 0;
    }
    char *end;
    errno = 0;
    o->val_fraction = strtod(v, &end);
    if (errno || end == v || *end || !(o->val_fraction >= 0 && o->val_fraction < 1))
        return cli_usage_error(self, "--val-fraction wants a number in [0, 1), not '%s'", v);
    return 0;
}

static int tokenize_check(const cli_command *self, void *opts)
{
    tokenize_options *o = opts;
    if (!o->vocab || !o->merges || !o->out)
        return cli_usage_error(self, "--vocab, --merges and --out are required");
    if (o->n_inputs == 0)
        return cli_usage_error(self, "no input text files");
    if (o->val_fraction > 0 && !o->val_out) {
        const char *slash = strrchr(o->out, '/');
        int dir = slash ? (int)(slash - o->out + 1) : 0;
        snprintf(o->val_default, sizeof o->val_default, "%.*sval.bin", dir, o->out);
        o->val_out = o->val_default;
    }
    if (o->val_fraction > 0 && strcmp(o->val_out, o->out) == 0)
        return cli_usage_error(self, "the validation shard would overwrite --out (%s): give "
                               "--val-out", o->out);
    return 0;
}

static void tokenize_release(void *opts)
{
    free(((tokenize_options *)opts)->inputs);
}

/* A text file whole. Opened without blocking and refused unless it is a
 * regular file: a FIFO named by mistake would wait forever for a writer. */
static char *read_whole(const char *path, size_t *n)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    const char *why = NULL;
    if (fd < 0 || fstat(fd, &st) != 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = S_ISDIR(st.st_mode) ? "a directory, not a regular file"
              : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe), not a regular file"
                                     : "not a regular file";
    char *text = why ? NULL : malloc(st.st_size ? (size_t)st.st_size : 1);
    if (!why && !text)
        why = "out of memory";
    size_t got = 0;
    while (!why && got < (size_t)st.st_size) {
        ssize_t k = read(fd, text + got, (size_t)st.st_size - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            why = k < 0 ? strerror(errno) : "it shrank while being read";
        else
            got += (size_t)k;
    }
    if (fd >= 0)
        close(fd);
    if (why) {
        fprintf(stderr, "sublinear tokenize: cannot read %s: %s\n", path, why);
        free(text);
        return NULL;
    }
    *n = got;
    return text;
}

/* Appends the ids of one file (after the separator, when sep >= 0). */
static int encode_file(const sl_tokenizer *tok, const char *path, int32_t sep, uint16_t **tokens,
                       size_t *count, size_t *cap)
{
    size_t n;
    char *text = read_whole(path, &n);
    if (!text)
        return CLI_EXIT_FAIL;
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    size_t got = 0;
    int rc = 0;
    if (!ids)
        rc = (fprintf(stderr, "sublinear tokenize: out of memory for %s\n", path), CLI_EXIT_FAIL);
    else if (sl_tokenizer_encode(tok, text, n, ids + 1, n, &got) != SL_OK)
        rc = cli_fail(path);
    if (rc == 0 && sep >= 0)
        ids[0] = sep;
    size_t add = got + (sep >= 0);
    if (rc == 0 && *count + add > *cap) {
        size_t want = 2 * (*count + add);
        uint16_t *grown = realloc(*tokens, want * sizeof *grown);
        if (!grown)
            rc = (fprintf(stderr, "sublinear tokenize: out of memory for %zu tokens\n", want), CLI_EXIT_FAIL);
        else
            *tokens = grown, *cap = want;
    }
    for (size_t i = 0; rc == 0 && i < add; i++)
        (*tokens)[(*count)++] = (uint16_t)ids[i + (sep < 0)];
    free(ids);
    free(text);
    return rc;
}

static int tokenize_run(void *opts)
{
    const tokenize_options *o = opts;
    int rc = 0;
    sl_tokenizer *tok;
    if (sl_tokenizer_load(o->vocab, o->merges, &tok) != SL_OK)
        return cli_fail("loading the tokenizer");
    if (sl_tokenizer_vocab_size(tok) > 65536) {
        fprintf(stderr, "sublinear tokenize: %d tokens do not fit the shard's uint16\n",
                sl_tokenizer_vocab_size(tok));
        sl_tokenizer_free(tok);
        return CLI_EXIT_FAIL;
    }
    int32_t sep = -1;
    if (sl_tokenizer_token_id(tok, "<|endoftext|>", 13, &sep) != SL_OK)
        sep = -1;
    uint16_t *tokens = NULL;
    size_t count = 0, cap = 0, bytes = 0;
    for (int i = 0; i < o->n_inputs && rc == 0; i++) {
        struct stat st;
        bytes += stat(o->inputs[i], &st) == 0 ? (size_t)st.st_size : 0;
        rc = encode_file(tok, o->inputs[i], sep, &tokens, &count, &cap);
    }
    sl_tokenizer_free(tok);
    size_t val = (size_t)(o->val_fraction * (double)count);
    if (rc == 0 && count - val > INT32_MAX)
        rc = (fprintf(stderr, "sublinear tokenize: %zu tokens: more than a shard holds\n", count), CLI_EXIT_FAIL);
    /* sl_token_shard_write replaces a shard atomically: a failed write
     * leaves the previous one, and the message says why it failed. */
    if (rc == 0 && sl_token_shard_write(o->out, tokens, count - val) != SL_OK)
        rc = cli_fail("tokenize: writing --out");
    if (rc == 0 && o->val_fraction > 0 && sl_token_shard_write(o->val_out, tokens + count - val, val) != SL_OK)
        rc = cli_fail("tokenize: writing the validation shard");
    if (rc == 0) {
        printf("tokenize: %d file(s), %zu bytes -> %zu tokens; %s: %zu tokens", o->n_inputs, bytes, count,
               o->out, count - val);
        if (o->val_fraction > 0)
            printf("; %s: %zu tokens", o->val_out, val);
        printf("\n");
    }
    free(tokens);
    return rc;
}

const cli_command cli_tokenize_command = {
    .name = "tokenize",
    .summary = "text files to llm.c token shards with GPT-2's BPE",
    .usage = g_tokenize_help,
    .options = g_tokenize_options,
    .takes_arguments = 1,
    .options_size = sizeof(tokenize_options),
    .set = tokenize_set,
    .check = tokenize_check,
    .run = tokenize_run,
    .release = tokenize_release,
};
