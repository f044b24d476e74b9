/*
 * lm.c — language models (net stage): the head tied to a parameter and
 * fused with the loss (layers/lm_head.c runs it in the loss step), and
 * the token-id runs, on top of net_run.c's runs and optimizer.c's update.
 */
#include <string.h>

#include "net/net.h"

sl_status sl_net_set_lm_head(sl_net *net, const char *weight, int ignore_index, int chunk_rows)
{
    const char *fn = "sl_net_set_lm_head";
    if (!net || !weight)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: network or weight name is NULL", fn);
    if (chunk_rows < 0)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: chunk_rows %d must be >= 0 (0: automatic)", fn,
                            chunk_rows);
    sl_status st = sl_net_finalize(net);
    if (st != SL_OK)
        return st;
    sl_param_spec *w = NULL;
    for (int i = 0; i < net->n_params && !w; i++)
        if (strcmp(net->params[i].name, weight) == 0)
            w = net->params[i].spec;
    if (!w)
        return sl_set_error(SL_ERR_NOT_FOUND, "%s: the network has no parameter named '%s'", fn, weight);
    if (w->ndim != 2 || !w->trainable)
        return sl_set_error(SL_ERR_SHAPE, "%s: '%s' must be a trainable [vocab, channels] matrix", fn,
                            weight);
    if (net->out_channels > 0 && w->dims[1] != net->out_channels)
        return sl_set_error(SL_ERR_SHAPE, "%s: '%s' is [%d, %d] but the last layer gives %d channels",
                            fn, weight, w->dims[0], w->dims[1], net->out_channels);
    if (ignore_index >= 0 && ignore_index < w->dims[0])
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: ignore_index %d is a token of the vocabulary "
                            "[0, %d); use a negative value such as -100", fn, ignore_index, w->dims[0]);
    net->head = (sl_lm_head){w, w->dims[0], w->dims[1], ignore_index, chunk_rows};
    net->has_head = 1;
    net->graph.head = &net->head;
    sl_run_cache_release(&net->cache[SL_MODE_TRAIN]);
    sl_run_cache_release(&net->cache[SL_MODE_INFER]);
    return SL_OK;
}

/* The vocabulary the ids index: the head's, or without a head the
 * embedding's (-1 when the network has none: it takes floats, which
 * sl_net_run says). Finalises the network only where it succeeds. */
static sl_status ids_vocab(sl_net *net, int *vocab)
{
    *vocab = -1;
    if (net->has_head) {
        *vocab = net->head.vocab;
        return SL_OK;
    }
    sl_net_mark m = sl_net_mark_now(net);
    sl_status st = sl_net_finalize(net);
    for (int i = 0; st == SL_OK && i < net->graph.n_nodes && *vocab < 0; i++)
        *vocab = sl_embedding_vocab(net->graph.nodes[i].layer);
    return sl_net_undo_first_use(net, m, st);
}

/* The checks every token run shares; *shape is the input's. need_head:
 * the run's loss is the head's (targets per position). */
static sl_status check_tokens(sl_net *net, const int32_t *ids, int batch, int seq, int need_head,
                              const char *fn, sl_shape *shape)
{
    if (!net || !ids)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: network or ids is NULL", fn);
    if (need_head && !net->has_head)
        return sl_set_error(SL_ERR_STATE, "%s: the network has no language-model head "
                            "(sl_net_set_lm_head; sl_model_gpt2 sets one)", fn);
    if (batch < 1 || seq < 1)
        return sl_set_error(SL_ERR_SHAPE, "%s: batch %d and seq %d must be >= 1", fn, batch, seq);
    int vocab;
    sl_status st = ids_vocab(net, &vocab);
    size_t n = (size_t)batch * (size_t)seq;
    for (size_t i = 0; st == SL_OK && vocab > 0 && i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return sl_set_error(SL_ERR_INVALID_ARG, "%s: token id %d at position %zu is outside the "
                                "vocabulary [0, %d)", fn, (int)ids[i], i, vocab);
    *shape = sl_shape_seq(batch, seq, 1);
    return st;
}

/* One token run: the checks every run shares, then the run in `mode`
 * with targets as labels (training and evaluation), dy as the output's
 * gradient (sl_net_forward_backward_tokens), or logits out; io comes
 * zeroed, or from sl_net_step_begin. The ids are the run's input, an I32
 * value (the embedding reads them as such). */
static sl_status run_tokens(sl_net *net, const int32_t *ids, const int32_t *targets,
                            const float *dy, int batch, int seq, sl_mode mode, float *logits,
                            sl_step_result *result, sl_run_io *io, const char *fn)
{
    sl_shape shape = sl_shape_nchw(0, 0, 0, 0);
    sl_status pre = check_tokens(net, ids, batch, seq, targets != NULL, fn, &shape);
    if (pre == SL_OK && mode == SL_MODE_TRAIN)
        pre = sl_net_check_training(net, fn);
    if (pre == SL_OK && !logits && !targets && !dy)
        pre = sl_set_error(SL_ERR_INVALID_ARG, "%s: targets is NULL", fn);
    if (pre != SL_OK)
        return pre;
    io->labels = (const int *)targets;
    io->dy_in = dy;
    io->logits_out = logits;
    io->input_dtype = SL_DTYPE_I32;
    return sl_net_run(net, (const float *)(const void *)ids, shape, mode, pre, io, result, fn);
}

/* run_tokens with a zeroed io: every token run but a train step's. */
static sl_status run_tokens_plain(sl_net *net, const int32_t *ids, const int32_t *targets,
                                  int batch, int seq, sl_mode mode, float *logits,
                                  sl_step_result *result, const char *fn)
{
    sl_run_io io;
    memset(&io, 0, sizeof io);
    return run_tokens(net, ids, targets, NULL, batch, seq, mode, logits, result, &io, fn);
}

sl_status sl_net_compute_gradients_tokens(sl_net *net, const int32_t *ids, const int32_t *targets,
                                          int batch, int seq, sl_step_result *result)
{
    return run_tokens_plain(net, ids, targets, batch, seq, SL_MODE_TRAIN, NULL, result,
                            "sl_net_compute_gradients_tokens");
}

sl_status sl_net_train_step_tokens(sl_net *net, const int32_t *ids, const int32_t *targets,
                                   int batch, int seq, sl_step_result *result)
{
    const char *fn = "sl_net_train_step_tokens";
    sl_run_io io;
    sl_status st = sl_net_step_begin(net, fn, &io);
    if (st != SL_OK)
        return st;
    sl_step_result local;
    if (!result)
        result = &local;
    return sl_net_step_end(net, run_tokens(net, ids, targets, NULL, batch, seq, SL_MODE_TRAIN,
                                           NULL, result, &io, fn), result, fn);
}

sl_status sl_net_evaluate_tokens(sl_net *net, const int32_t *ids, const int32_t *targets, int batch,
                                 int seq, sl_step_result *result)
{
    return run_tokens_plain(net, ids, targets, batch, seq, SL_MODE_INFER, NULL, result,
                            "sl_net_evaluate_tokens");
}

sl_status sl_net_predict_tokens(sl_net *net, const int32_t *ids, int batch, int seq, float *logits)
{
    if (!logits)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_predict_tokens: logits is NULL");
    return run_tokens_plain(net, ids, NULL, batch, seq, SL_MODE_INFER, logits, NULL,
                            "sl_net_predict_tokens");
}

sl_status sl_net_forward_backward_tokens(sl_net *net, const int32_t *ids, int batch, int seq,
                                         const float *dy, float *output)
{
    const char *fn = "sl_net_forward_backward_tokens";
    if (!dy)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: dy is NULL", fn);
    if (net && net->has_head)
        return sl_set_error(SL_ERR_STATE, "%s: the network ends with a language-model head, whose "
                            "loss is its own; use sl_net_compute_gradients_tokens", fn);
    sl_run_io io;
    memset(&io, 0, sizeof io);
    return run_tokens(net, ids, NULL, dy, batch, seq, SL_MODE_TRAIN, output, NULL, &io, fn);
}
