/*
 * train.h — the one training loop of `sublinear train` (cmd_train.c) and
 * the batch sources it runs over: images from a dataset (train_images.c)
 * and token shards for a language model (train_tokens.c).
 *
 * The loop owns everything a run does the same way whatever it reads:
 * building and planning, the memory check before the batch is allocated,
 * the learning rate of each step, micro-batches, the progress line, the
 * stop on a loss that is not finite, snapshots, saving, the memory report,
 * the summary and the JSON object. A source says what differs: how it
 * reads its data and its batches, which step call trains on them, what
 * held-out figure it measures, how its model is saved and the few words of
 * output that name its data.
 */
#ifndef SL_TRAIN_H
#define SL_TRAIN_H

#include "cli.h"

typedef struct train_source train_source;

typedef struct train_run {
    cli_options *o;
    const train_source *source;
    void *data; /* the source's own state: state_size bytes, zeroed before open */
    sl_context *ctx;
    sl_net *net;
    sl_dist *dist; /* --distributed */
    int rank, ranks;
    sl_shape shape; /* of one step's input (open sets it) */
    int64_t units_per_batch; /* images or tokens of one batch (open sets it) */
    uint64_t batch_bytes; /* the host buffers of a batch (open sets it) */
    sl_memory_report planned, baseline;
    int64_t first_step; /* the step count at the start (non-zero after --resume) */
    int64_t snapshot_step; /* of the last snapshot this run wrote; -1: none */
    int steps_run;
    double seconds, loss_avg, first_loss, last_loss;
    int64_t correct, seen; /* training samples classified right, of seen */
    int tty;
} train_run;

/* The parts of the JSON object a source writes (see cmd_train.c). */
typedef enum train_json_part {
    TRAIN_JSON_DATA, /* after "model": the data and the model's shape */
    TRAIN_JSON_BATCH, /* after "batch": the rest of a step's size */
    TRAIN_JSON_HELD_OUT, /* after the training figures: the held-out ones */
} train_json_part;

struct train_source {
    size_t state_size; /* of its own state (train_run.data) */
    const char *rate_unit; /* of the progress line: "img/s" */
    int rate_width; /* its field's width */
    const char *rate_noun; /* "images": the summary's images/s, "images_per_second" */
    int classifies; /* steps count correct answers: training accuracy is shown */
    /* Reads the data (printing why it cannot) into r->data and sets shape,
     * units_per_batch and batch_bytes; may set o->classes and o->res. */
    int (*open)(train_run *r);
    /* The batch buffers, once the step and batch_bytes were checked. */
    int (*allocate)(train_run *r);
    /* This rank's index-th training batch into the buffers. */
    sl_status (*fetch)(train_run *r, int64_t index);
    /* One training step on the fetched batch. */
    sl_status (*step)(train_run *r, sl_step_result *res);
    /* Held-out figures; 0 or CLI_EXIT_FAIL. */
    int (*evaluate)(train_run *r);
    /* --save-model (collective in a communicator). */
    sl_status (*save_model)(const train_run *r);
    /* "training MODEL on DATA ..., batch ..." (the loop adds the rest). */
    void (*print_what)(const train_run *r);
    void (*print_json)(const train_run *r, train_json_part part);
    /* "held-out ...: ..." */
    void (*print_held_out)(const train_run *r);
    /* "saved the model to ..." */
    void (*print_saved_model)(const train_run *r, const sl_memory_report *m);
    /* Frees what open and allocate made (r->data itself is the loop's). */
    void (*free)(train_run *r);
};

extern const train_source train_images, train_tokens;

#endif
