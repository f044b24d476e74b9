/*
 * custom_test_layers.h — custom layer types for tests/test_custom*.c,
 * written with the public API only: a stochastic in-place layer, a
 * BatchNorm-like layer with kept saved state and a running statistic, a
 * layer that fails on demand, a layer that draws random numbers where it
 * must not, and a layer that declares sizes that lie. Their callbacks
 * count what they see in tl_stats.
 */
#ifndef SL_CUSTOM_TEST_LAYERS_H
#define SL_CUSTOM_TEST_LAYERS_H

#include "sublinear.h"

typedef struct tl_counts {
    int train, eval, reforward, backward; /* callback calls by pass */
    int fwd_inplace, fwd_separate;        /* RandomScale forwards with y == x[0] or not */
    int bwd_inplace, bwd_separate;        /* RandomScale backwards with dx[0] == dy or not */
    int bad_env;                          /* calls with a device, stream or threads unexpected on the CPU */
} tl_counts;

extern tl_counts tl_stats;
extern int tl_fail_forward;  /* 1: Flaky's forward fails with a message; 2: without one */

/* y = x * (1 + sigma * (2u - 1)), u uniform from sl_custom_random_uniform,
 * drawn again in backward. inplace: declares SL_CUSTOM_FWD_INPLACE and
 * SL_CUSTOM_BWD_INPLACE. */
sl_layer *tl_random_scale(float sigma, int inplace);

/* y = x / sqrt(mean(x^2) + eps) per channel over batch and space: in
 * training with the batch's statistic (saved, kept for backward and
 * re-forward) and updating "running_msq"; in evaluation with it. */
sl_layer *tl_batch_scale(int channels);

/* y = x; its forward fails while tl_fail_forward is set. */
sl_layer *tl_flaky(void);

/* y = x; draws count numbers in training, also tries in evaluation, and
 * in backward asks for one more than it drew. */
sl_layer *tl_overdraw(void);

/* y = x, declaring for any input: 1 a negative workspace, 2 saved_bytes 0
 * while its type has SL_CUSTOM_NEEDS_SAVED, 3 saved_bytes without that
 * flag, 4 an output with 0 channels, 5 refusal with a message, 6 an
 * output of layout 7 (none), 7 its input's sizes as NHWC (channels
 * innermost), 8 its input's sizes as NCHW. */
sl_layer *tl_liar(int lie);

#endif
