/*
 * block.c — composite blocks built in the user's code (layers stage):
 * sl_block, sl_block_add and the residual join sl_join_sum.
 *
 * A block is a small graph inside one top-level layer: each child reads
 * tensors of the block (0 is the block's input, k the output of child k)
 * and the block's output is its last child's. Like ResNet's blocks it
 * emits its children and joins into the network's graph, so the top level
 * stays a chain (checkpoints sit between top-level layers) while the
 * planner sees every tensor inside. Children may be built-in layers,
 * custom layers (custom.c, of any number of inputs) or blocks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/custom.h"
#include "layers/graph.h"

typedef struct wiring {
    int n_in;
    int in[SL_MAX_INPUTS]; /* block tensor ids */
} wiring;

typedef struct block {
    sl_layer base;
    sl_layer_ops ops; /* base.ops points here: .type is type_name */
    char type_name[SL_LOCAL_NAME_MAX];
    wiring *wires; /* [base.n_children] */
} block;

static int block_emit(sl_layer *l, sl_graph *g, int input);

static int is_block(const sl_layer *l) { return l->ops->emit == block_emit; }

/* The graph tensor of each block tensor, child by child. */
static int block_emit(sl_layer *l, sl_graph *g, int input)
{
    const block *b = (const block *)l;
    int n = l->n_children;
    if (n == 0) {
        sl_set_error(SL_ERR_STATE, "block '%s' has no layers", sl_layer_label(l));
        return -1;
    }
    int *map = sl_alloc((size_t)(n + 1) * sizeof *map, "a block's tensors");
    if (!map)
        return -1;
    map[0] = input;
    int t = input;
    for (int k = 0; k < n && t >= 0; k++) {
        const wiring *w = &b->wires[k];
        int ins[SL_MAX_INPUTS];
        for (int i = 0; i < w->n_in; i++)
            ins[i] = map[w->in[i]];
        sl_layer *c = l->children[k];
        t = c->ops->emit ? sl_graph_emit(g, c, ins[0]) : sl_graph_add_node(g, c, w->n_in, ins);
        map[k + 1] = t;
    }
    free(map);
    return t;
}

/* Output channels of child k for the channels of its inputs. */
static int child_channels(const block *b, int k, const int *ch)
{
    const wiring *w = &b->wires[k];
    const sl_layer *c = b->base.children[k];
    int ins[SL_MAX_INPUTS];
    for (int i = 0; i < w->n_in; i++)
        ins[i] = ch[w->in[i]];
    if (sl_custom_is(c))
        return sl_custom_channels(c, w->n_in, ins);
    if (w->n_in == 2 && ins[0] > 0 && ins[1] > 0 && ins[0] != ins[1]) {
        sl_set_error(SL_ERR_SHAPE, "%s '%s' joins tensors of %d and %d channels", c->ops->type,
                     sl_layer_label(c), ins[0], ins[1]);
        return -1;
    }
    return c->ops->out_channels(c, ins[0]);
}

/* A child whose output no later child reads would get no gradient. */
static int check_every_child_read(const block *b)
{
    const sl_layer *l = &b->base;
    int n = l->n_children;
    for (int k = 0; k + 1 < n; k++) {
        int read = 0;
        for (int j = k + 1; j < n && !read; j++)
            for (int i = 0; i < b->wires[j].n_in; i++)
                read |= b->wires[j].in[i] == k + 1;
        if (!read) {
            sl_set_error(SL_ERR_STATE, "block '%s': the output of '%s' is read by no later layer (the "
                    "block's output is its last layer's; every other layer must feed a later one)",
                    sl_layer_label(l), l->children[k]->local);
            return -1;
        }
    }
    return 0;
}

/* Channels through the block's wiring; also checks the wiring is whole.
 * Called when the block is added to a network or to another block. */
static int block_out_channels(const sl_layer *l, int in_c)
{
    const block *b = (const block *)l;
    int n = l->n_children;
    if (n == 0) {
        sl_set_error(SL_ERR_STATE, "block '%s' has no layers (sl_block_add)", sl_layer_label(l));
        return -1;
    }
    if (check_every_child_read(b))
        return -1;
    int *ch = sl_alloc((size_t)(n + 1) * sizeof *ch, "a block's channels");
    if (!ch)
        return -1;
    ch[0] = in_c;
    int out = in_c;
    for (int k = 0; k < n && out >= 0; k++)
        ch[k + 1] = out = child_channels(b, k, ch);
    free(ch);
    if (out < 0) /* a nested block out of memory stays out of memory */
        sl_set_error(sl_error_status() == SL_ERR_NOMEM ? SL_ERR_NOMEM : SL_ERR_SHAPE, "block '%s': %s",
                     sl_layer_label(l), sl_last_error());
    return out;
}

static void block_destroy(sl_layer *l) { free(((block *)l)->wires); }

sl_layer *sl_block(const char *type_name)
{
    if (!type_name || !type_name[0] || strlen(type_name) >= SL_LOCAL_NAME_MAX) {
        sl_set_error(SL_ERR_INVALID_ARG, "sl_block: the type name must have 1 to %d characters",
                     SL_LOCAL_NAME_MAX - 1);
        return NULL;
    }
    block *b = sl_zalloc(sizeof *b, "a block");
    if (!b)
        return NULL;
    snprintf(b->type_name, sizeof b->type_name, "%s", type_name);
    b->ops = (sl_layer_ops){
        .type = b->type_name,
        .emit = block_emit,
        .out_channels = block_out_channels,
        .destroy = block_destroy,
    };
    sl_layer_init(&b->base, &b->ops);
    return &b->base;
}

/* Why child cannot be added reading inputs[0..n_in), or NULL. */
static sl_status check_child(const block *b, const char *name, const sl_layer *child, int n_in,
                             const int *inputs)
{
    const sl_layer *l = &b->base;
    const char *label = sl_layer_label(l);
    if (n_in < 1 || n_in > SL_MAX_INPUTS || !inputs)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_block_add: '%s' in block '%s' reads %d inputs%s; 1 "
                       "to %d", name, label, n_in, inputs ? "" : " from a NULL list", SL_MAX_INPUTS);
    for (int i = 0; i < n_in; i++)
        if (inputs[i] < 0) /* a failed sl_block_add: its message and status say why */
            return sl_error_status() != SL_OK ? sl_error_status() : SL_ERR_INVALID_ARG;
    for (int i = 0; i < n_in; i++)
        if (inputs[i] > l->n_children)
            return sl_set_error(SL_ERR_INVALID_ARG, "sl_block_add: input %d of '%s' in block '%s' is "
                           "tensor %d, which does not exist (0 is the block's input, 1 to %d the "
                           "outputs of the layers added so far)", i, name, label, inputs[i],
                           l->n_children);
    if (child->ops->emit && n_in != 1)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_block_add: '%s' in block '%s' is a block, which "
                            "reads one input, not %d", name, label, n_in);
    if (sl_custom_is(child) && n_in != sl_custom_inputs(child))
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_block_add: '%s' (%s) in block '%s' takes %d inputs, "
                            "not %d", name, child->ops->type, label, sl_custom_inputs(child), n_in);
    if (!name[0] || strlen(name) >= SL_LOCAL_NAME_MAX)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_block_add: a name in block '%s' must have 1 to %d "
                            "characters", label, SL_LOCAL_NAME_MAX - 1);
    for (int k = 0; k < l->n_children; k++)
        if (strcmp(l->children[k]->local, name) == 0)
            return sl_set_error(SL_ERR_INVALID_ARG, "sl_block_add: block '%s' already has a layer "
                                "named '%s'", label, name);
    return SL_OK;
}

/* sl_block_add without the id: the child's output id, or -1 with the
 * error recorded. */
static int block_add(sl_layer *l, const char *name, sl_layer *child, int n_in, const int *inputs)
{
    if (!child) {
        /* The constructor's status (out of memory above all) travels up
         * with its message; a NULL with no failure recorded is the caller's. */
        sl_status why = sl_error_status();
        sl_set_error(why != SL_OK ? why : SL_ERR_INVALID_ARG,
                     "sl_block_add: layer is NULL (its constructor failed: %s)", sl_last_error());
        return -1;
    }
    if (!l || !is_block(l)) {
        sl_layer_free(child);
        sl_set_error(SL_ERR_INVALID_ARG, "sl_block_add: %s",
                     l ? "not a block made by sl_block" : "block is NULL");
        return -1;
    }
    block *b = (block *)l;
    char auto_name[16];
    if (!name) {
        snprintf(auto_name, sizeof auto_name, "%d", l->n_children);
        name = auto_name;
    }
    if (check_child(b, name, child, n_in, inputs) != SL_OK) {
        sl_layer_free(child);
        return -1;
    }
    wiring *w = sl_realloc(b->wires, (size_t)(l->n_children + 1) * sizeof *w);
    if (!w) {
        sl_layer_free(child);
        sl_set_error(SL_ERR_NOMEM, "sl_block_add: out of memory");
        return -1;
    }
    b->wires = w;
    wiring *mine = &w[l->n_children];
    memset(mine, 0, sizeof *mine);
    mine->n_in = n_in;
    memcpy(mine->in, inputs, (size_t)n_in * sizeof *inputs);
    if (sl_layer_add_child(l, name, child) != 0)
        return -1;
    return l->n_children;
}

sl_status sl_block_add(sl_layer *l, const char *name, sl_layer *child, int n_in, const int *inputs,
                       int *id)
{
    int got = block_add(l, name, child, n_in, inputs); /* reads inputs before id is written */
    if (id)
        *id = got;
    if (got < 0) {
        sl_status st = sl_error_status();
        return st != SL_OK ? st : SL_ERR_INVALID_ARG;
    }
    return SL_OK;
}
