/*
 * harness.h — shared test helpers: seeded random tensors, contexts, and a
 * finite-difference gradient check of any network (a single layer, a
 * block or a whole model) through sl_net_forward_backward with the loss
 * L = sum(output * r) for a fixed random r; and the run of a test suite.
 */
#ifndef SL_TEST_HARNESS_H
#define SL_TEST_HARNESS_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "sublinear.h"

/* A CPU context with 2 threads and the given seed; aborts the test on failure. */
sl_context *th_context(uint64_t seed);

/* sl_net_param_count, asserting it succeeds. */
int th_param_count(sl_net *net);

/* x[i] = scale * N(0, 1), seeded. */
void th_fill_normal(float *x, size_t n, uint64_t seed, float scale);
/* n floats rounded to bf16 (base/element.h's rule), and n bf16 widened. */
void th_bf16_round_all(uint16_t *dst, const float *src, size_t n);
void th_bf16_widen_all(float *dst, const uint16_t *src, size_t n);
/* max |a - b| / max |b| over n values (b the reference). */
double th_rel_err(const float *a, const float *b, size_t n);
/* |a - b| / |b| over a tensor as norms: the norm of the difference over
 * b's (the difference's norm where b is zero). */
double th_norm_rel(const float *a, const float *b, size_t n);

/* Moves every value at least `gap` away from zero (for ReLU kinks). */
void th_push_from_zero(float *x, size_t n, float gap);

/* Fills x with a shuffled, evenly spaced ramp (distinct values `step`
 * apart), so max pooling has no near-ties. */
void th_fill_distinct(float *x, size_t n, uint64_t seed, float step);

typedef struct th_gradcheck_result {
    int candidates;     /* coordinates drawn */
    int checked;        /* coordinates compared */
    int skipped_kinks;  /* coordinates where the loss is not smooth at +-eps */
    double worst_error; /* max |fd - analytic| / (atol + rtol * max(|fd|, |analytic|)) */
    char worst[160];    /* which coordinate */
} th_gradcheck_result;

/* Compares analytic gradients of L = sum(out * r) with respect to the
 * input (when check_input) and every trainable parameter with central
 * differences at `coords` random coordinates of each tensor. Passing means
 * worst_error <= 1. The input x (shape in) is not modified. */
void th_gradcheck(sl_net *net, const float *x, sl_shape in, int check_input, int coords,
                  float eps, double rtol, double atol, th_gradcheck_result *res);
/* The same for a network whose input is token ids ({n, 1, h, 1}, in the
 * vocabulary): the parameters' coordinates (ids have no gradient). */
void th_gradcheck_tokens(sl_net *net, const int32_t *ids, sl_shape in, int coords, float eps,
                         double rtol, double atol, th_gradcheck_result *res);
/* sl_net_forward_backward on floats x, or on token ids where ids is not
 * NULL (sl_net_forward_backward_tokens: no dx). */
sl_status th_forward_backward(sl_net *net, const float *x, const int32_t *ids, sl_shape in,
                              const float *dy, float *y, float *dx);

/* Builds a model of 10 classes at res x res into net: a name of
 * sl_model_build, or "resnet56-dropout" (CIFAR ResNet-56 with dropout after
 * each stage and before the classifier). */
void th_build_model(sl_net *net, const char *model, int res);

/* A GPT-2 of config c (sl_model_gpt2) in a new network of ctx under
 * schedule; asserts that it builds. */
sl_net *th_gpt2(sl_context *ctx, const sl_gpt2_config *c, sl_schedule schedule);

/* Freezes every BatchNorm of net (sl_net_set_batchnorm_frozen) and moves its
 * running statistics away from their (0, 1) init, so that the frozen
 * normalisation does something; works on a CUDA network too. Returns how
 * many layers were frozen. */
int th_freeze_batchnorms(sl_net *net);

/* Every named tensor of a network (parameters and running statistics) and
 * the gradients of the trainable ones, copied out after a run. */
typedef struct th_params {
    int n;
    float **data, **grad; /* grad[i] NULL for a tensor without gradient */
    size_t *count;
} th_params;

/* Copies net's tensors and gradients into out (th_params_free it). */
void th_params_capture(sl_net *net, th_params *out);
void th_params_free(th_params *p);
/* Asserts that a and b hold the same tensors and gradients, bit for bit;
 * `what` names the comparison in the failure message. */
void th_params_assert_identical(const th_params *a, const th_params *b, const char *what);

/* The least planned peak any schedule of net reaches for this input, read
 * from the error a 1-byte budget gives (the net's schedule is set to it). */
uint64_t th_least_budget(sl_net *net, sl_shape input);
/* One gradient step of a token network on b sequences of t ids: its loss
 * into *loss; asserts the arena it used is the one it planned, and
 * returns those bytes. */
uint64_t th_token_step_as_planned(sl_net *net, const int32_t *ids, const int32_t *targets, int b,
                                  int t, float *loss);
/* The least planned peak named by the SL_ERR_BUDGET error just raised. */
uint64_t th_named_least(void);

/* The largest number of forwards (the TRAIN pass and re-forwards) of one
 * node in net's last planned training program: above 2 the schedule is
 * multi-level. */
int th_most_forwards(const sl_net *net);

/* Draws for random networks: th_pick gives 0..n-1 from the Philox stream
 * (seed, stream), one counter per draw. */
typedef struct th_rng {
    uint64_t seed, stream, i;
} th_rng;
int th_pick(th_rng *r, int n);

/* Ends a chain with global average pooling, flatten and a linear layer of
 * `classes` outputs. */
void th_add_classifier(sl_net *net, int classes);

/* `steps` training steps of net on batches of `shape` (10 classes):
 * inputs normal from seed 100 + step, each value then times 1 + perturb
 * or 1 - perturb in a fixed pattern of signs (perturb 0: as drawn),
 * labels (b * 7 + step) % 10; losses[step] gets each step's loss. Then
 * asserts that the arena the executor measured is the planned one. */
void th_train_steps(sl_net *net, sl_shape shape, int steps, float perturb, float *losses);

/* Asserts that st is `want` and that sl_last_error() contains fragment. */
void th_assert_error(sl_status st, sl_status want, const char *fragment);

/* Runs every test of s (Check's default fork mode), frees the runner and
 * returns how many tests failed. */
int th_run_suite(Suite *s);

/* Environment switches ("off") for the code that reads them next (a CUDA
 * instance reads its SL_CUDA_* switches when it is made), and the
 * environment as it was before: th_switches_off sets names[k] to "off"
 * for each bit k of off and keeps what every name held; th_switches_restore
 * puts that back. */
enum { TH_SWITCHES = 4 };
typedef struct th_switches {
    const char *name[TH_SWITCHES];
    char *was[TH_SWITCHES];
    int n;
} th_switches;
void th_switches_off(th_switches *s, const char *const *names, int n, unsigned off);
void th_switches_restore(th_switches *s);

/* 1 where environment variable name is "off" or "0": a switch turned off
 * (a GPU session's diagnosis sets one to see whether its path fails). */
int th_env_off(const char *name);
/* 1 where environment variable name is "on" or "1". */
int th_env_on(const char *name);

#endif
