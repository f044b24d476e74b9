/*
 * test_poll.c — the polling loop with a deadline (src/base/poll.c) that
 * every wait of data-parallel training goes through (MPI requests, NCCL
 * streams, events and communicator creation): it returns the probe's
 * answer as soon as the operation finishes or fails, keeps looking while
 * it runs, gives up only once the clock has passed the deadline, looks at
 * least once even past the deadline, and never looks again after giving
 * up. A fake clock makes the deadline exact.
 */
#include <check.h>
#include <stdlib.h>

#include "base/poll.h"
#include "harness.h"

/* An operation that answers PENDING `pending` times, then `final`. */
typedef struct fake_op {
    int pending;
    sl_poll final;
    int looks;
} fake_op;

static sl_poll look(void *state)
{
    fake_op *op = state;
    op->looks++;
    return op->looks > op->pending ? op->final : SL_POLL_PENDING;
}

/* A clock that advances one second per reading. */
static double now;
static int readings;

static double tick(void)
{
    readings++;
    return now += 1.0;
}

static void reset_clock(void)
{
    now = 0.0;
    readings = 0;
}

START_TEST(test_poll_returns_done_when_the_operation_finishes)
{
    reset_clock();
    fake_op op = {5, SL_POLL_DONE, 0};
    ck_assert_int_eq(sl_poll_until(look, &op, 100.0, tick), SL_POLL_DONE);
    ck_assert_int_eq(op.looks, 6);
    ck_assert_int_eq(readings, 5); /* the clock is read after each PENDING only */
}
END_TEST

START_TEST(test_poll_returns_failed_at_once)
{
    reset_clock();
    fake_op op = {2, SL_POLL_FAILED, 0};
    ck_assert_int_eq(sl_poll_until(look, &op, 100.0, tick), SL_POLL_FAILED);
    ck_assert_int_eq(op.looks, 3);
}
END_TEST

START_TEST(test_poll_gives_up_after_the_deadline)
{
    reset_clock();
    fake_op op = {1000000, SL_POLL_DONE, 0};
    ck_assert_int_eq(sl_poll_until(look, &op, 10.0, tick), SL_POLL_PENDING);
    /* Clock readings 1 .. 10 are within the deadline, 11 is past it: 11
     * looks, and none after the reading that ended the wait. */
    ck_assert_int_eq(readings, 11);
    ck_assert_int_eq(op.looks, 11);
}
END_TEST

START_TEST(test_poll_looks_once_even_past_the_deadline)
{
    reset_clock();
    fake_op done = {0, SL_POLL_DONE, 0};
    ck_assert_int_eq(sl_poll_until(look, &done, -5.0, tick), SL_POLL_DONE);
    ck_assert_int_eq(done.looks, 1);
    fake_op running = {10, SL_POLL_DONE, 0};
    ck_assert_int_eq(sl_poll_until(look, &running, -5.0, tick), SL_POLL_PENDING);
    ck_assert_int_eq(running.looks, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("poll");
    TCase *tc = tcase_create("poll");
    tcase_add_test(tc, test_poll_returns_done_when_the_operation_finishes);
    tcase_add_test(tc, test_poll_returns_failed_at_once);
    tcase_add_test(tc, test_poll_gives_up_after_the_deadline);
    tcase_add_test(tc, test_poll_looks_once_even_past_the_deadline);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
