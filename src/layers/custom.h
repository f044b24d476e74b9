/*
 * custom.h — layer types defined in the user's code (layers stage): the
 * adapter in custom.c turns a public sl_custom_type into the internal
 * layer contract (layer.h), so schedules, programs, plans and the executor
 * treat custom layers exactly as built-in ones. block.c wires them (and
 * built-in layers) into the user's composite blocks and needs to know
 * their inputs and channels.
 */
#ifndef SL_CUSTOM_H
#define SL_CUSTOM_H

#include "layers/layer.h"

/* 1 when l was made by sl_custom_layer. */
int sl_custom_is(const sl_layer *l);
/* Inputs a custom layer takes (1 for any other layer). */
int sl_custom_inputs(const sl_layer *l);
/* Output channels of a custom layer for its inputs' channel counts (0:
 * not known); -1 with an error set when the type refuses them. */
int sl_custom_channels(const sl_layer *l, int n_in, const int *in_channels);

#endif
