/* swish_se.h — layers written with the public custom-layer API (see
 * swish_se.c): a Swish activation with a learned slope per channel, a
 * two-input channel gate, and the blocks built from them. Used by
 * custom_layer.c and checked against finite differences by
 * tests/test_custom.c. CPU only: on a CUDA context the callbacks refuse
 * with SL_ERR_UNSUPPORTED (a CUDA version would launch kernels on the
 * stream its arguments carry). */
#ifndef SWISH_SE_H
#define SWISH_SE_H

#include "sublinear.h"

/* y = x * sigmoid(beta_c * x), beta ("beta", one per channel) starts at 1:
 * SiLU, learning its slope. */
sl_layer *swish(int channels);

/* Two inputs: x (n x c x h x w) and s (n x c x 1 x 1); y = x * sigmoid(s). */
sl_layer *channel_gate(void);

/* Squeeze-and-excitation (Hu et al. 2018) as a block: global average
 * pool, fc (c -> c / reduction), ReLU, fc (-> c), then the gate scales
 * each channel of the block's input. */
sl_layer *se_block(int channels, int reduction);

/* A residual block: conv 3x3, BN, Swish, conv 3x3, BN, SE, plus the
 * block's input, Swish. */
sl_layer *se_residual_block(int channels, int reduction);

#endif
