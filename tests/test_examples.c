/*
 * test_examples.c — the programs of examples/ build and do what they say:
 * minimal_swap's loss falls, and it falls identically with sl_sequential
 * (the swap changes the memory, not the numbers) while the activation
 * memory saved is above zero; budget_training meets its budget with a
 * falling loss; inference loads a model the command saved and measures
 * the same accuracy the command did, in less memory than a training step;
 * custom_layer (its own Swish and SE blocks) learns, identically to its
 * plain run, in less memory, with the measured arena equal to the plan.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "harness.h"

#if !defined(SL_EXAMPLES_DIR) || !defined(SL_CLI_PATH)
#error "SL_EXAMPLES_DIR and SL_CLI_PATH must be defined"
#endif

static cr_result example(const char *name, const char *args)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", SL_EXAMPLES_DIR, name);
    return cr_run(path, "%s", args);
}

/* The "mean loss" figures an example printed, in order; returns how many. */
static int mean_losses(const char *out, double *loss, int max)
{
    int n = 0;
    for (const char *p = out; n < max && (p = strstr(p, "mean loss ")); p++)
        loss[n++] = atof(p + strlen("mean loss "));
    return n;
}

/* The percentage after "label" in out; fails the test when absent. */
static double percent_after(const char *out, const char *label)
{
    const char *p = strstr(out, label);
    ck_assert_msg(p, "no '%s' in:\n%s", label, out);
    return atof(p + strlen(label));
}

START_TEST(test_minimal_swap_learns_and_saves_memory)
{
    cr_result sub = example("minimal_swap", "");
    ck_assert_msg(sub.status == 0, "%s", sub.err);
    double loss[16];
    int n = mean_losses(sub.out, loss, 16);
    ck_assert_int_eq(n, 8);
    ck_assert_msg(loss[n - 1] < 0.8 * loss[0], "loss %f -> %f", loss[0], loss[n - 1]);
    ck_assert(percent_after(sub.out, "saving ") > 0);

    cr_result plain = example("minimal_swap", "plain");
    ck_assert_msg(plain.status == 0, "%s", plain.err);
    double plain_loss[16];
    ck_assert_int_eq(mean_losses(plain.out, plain_loss, 16), n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(plain_loss[i] == loss[i], "window %d: plain %f, sublinear %f", i,
                      plain_loss[i], loss[i]);
    ck_assert(percent_after(plain.out, "saving ") == 0);
    cr_free(&sub);
    cr_free(&plain);
}
END_TEST

START_TEST(test_budget_training_meets_its_budget)
{
    cr_result r = example("budget_training", "");
    ck_assert_msg(r.status == 0, "%s", r.err);
    double loss[16];
    int n = mean_losses(r.out, loss, 16);
    ck_assert_int_eq(n, 6);
    ck_assert_msg(loss[n - 1] < loss[0], "loss %f -> %f", loss[0], loss[n - 1]);
    ck_assert_ptr_nonnull(strstr(r.out, "within the budget"));
    ck_assert(percent_after(r.out, "saving against keep-everything: ") > 0);
    cr_free(&r);

    /* A budget below what any schedule reaches is raised until it fits,
     * each refusal naming the smallest planned peak. */
    r = example("budget_training", "0.05");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "cannot be met"));
    ck_assert_ptr_nonnull(strstr(r.out, "smallest planned peak"));
    ck_assert_ptr_nonnull(strstr(r.out, "within the budget"));
    cr_free(&r);
}
END_TEST

START_TEST(test_inference_matches_the_accuracy_measured_in_training)
{
    char model[512];
    snprintf(model, sizeof model, "%s/model.safetensors", cr_dir());
    cr_result r = cr_run(SL_CLI_PATH, "train --model resnet20 --batch 32 --steps 3 --eval 64 "
                         "--threads 2 --save-model '%s' --json", model);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cJSON *j = cr_json(&r);
    double trained = cr_num(j, "test_accuracy");
    cJSON_Delete(j);
    cr_free(&r);

    char args[600];
    snprintf(args, sizeof args, "'%s' 64 1", model);
    r = example("inference", args);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "loaded "));
    const char *acc = strstr(r.out, "accuracy ");
    ck_assert_ptr_nonnull(acc);
    double measured = atof(acc + strlen("accuracy "));
    ck_assert_msg(measured == trained || (measured - trained) * (measured - trained) < 1e-8,
                  "inference %f, training run %f", measured, trained);
    ck_assert(percent_after(r.out, "saving ") > 0);
    cr_free(&r);

    snprintf(args, sizeof args, "'%s/missing.safetensors'", cr_dir());
    r = example("inference", args);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "missing.safetensors"));
    cr_free(&r);
}
END_TEST

START_TEST(test_custom_layer_learns_identically_in_less_memory)
{
    cr_result sub = example("custom_layer", "");
    ck_assert_msg(sub.status == 0, "%s", sub.err);
    double loss[16];
    int n = mean_losses(sub.out, loss, 16);
    ck_assert_int_eq(n, 6);
    ck_assert_msg(loss[n - 1] < 0.8 * loss[0], "loss %f -> %f", loss[0], loss[n - 1]);
    ck_assert(percent_after(sub.out, "saving ") > 0);
    const char *mem = strstr(sub.out, "activation memory ");
    ck_assert_ptr_nonnull(mem);
    double planned = atof(mem + strlen("activation memory "));
    ck_assert_msg(planned == percent_after(sub.out, "(measured "), "%s", sub.out);
    ck_assert_ptr_nonnull(strstr(sub.out, "beta[0] learned "));

    cr_result plain = example("custom_layer", "plain");
    ck_assert_msg(plain.status == 0, "%s", plain.err);
    double plain_loss[16];
    ck_assert_int_eq(mean_losses(plain.out, plain_loss, 16), n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(plain_loss[i] == loss[i], "window %d: plain %f, sublinear %f", i,
                      plain_loss[i], loss[i]);
    ck_assert(percent_after(plain.out, "saving ") == 0);
    cr_free(&sub);
    cr_free(&plain);
}
END_TEST

int main(void)
{
    cr_init();
    Suite *s = suite_create("examples");
    TCase *tc = tcase_create("examples");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_minimal_swap_learns_and_saves_memory);
    tcase_add_test(tc, test_budget_training_meets_its_budget);
    tcase_add_test(tc, test_inference_matches_the_accuracy_measured_in_training);
    tcase_add_test(tc, test_custom_layer_learns_identically_in_less_memory);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    cr_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
