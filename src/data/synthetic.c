/*
 * synthetic.c — the generator behind sl_dataset_synthetic (src/data, beside
 * the image files' readers; dataset.c makes the public object of either).
 *
 * Stage: data, outside the pipeline; it feeds sl_net_train_step and the tests, benches
 * and examples without a download. Each class owns, per channel,
 * a smooth pattern: a sum of DATASET_WAVES 2-D sinusoids with small
 * integer frequencies (so the pattern is periodic over the image and a
 * cyclic shift is a phase change), random orientation, phase and
 * amplitude, normalised to RMS 1. A sample is its class pattern shifted
 * cyclically by up to 1/4 of the image, scaled by [0.7, 1.3], plus
 * Gaussian noise of std 0.6: a template matched over the shifts classifies
 * it, a fixed linear classifier does not (see DATASET_SHIFT_DIVISOR).
 *
 * Everything random is drawn from the counter-based RNG, keyed by the seed
 * and a stream number that encodes (split, index), so a sample is a pure
 * function of (seed, split, index), any batch can be drawn in any order,
 * and the two splits never share a stream.
 */
#include <math.h>
#include <stdlib.h>

#include "base/base.h"
#include "data/data.h"

#define DATASET_WAVES 4
#define DATASET_MAX_FREQ 3     /* highest cycles per image along an axis */
#define DATASET_NOISE_STD 0.6f
/* Shifts reach +-size/DATASET_SHIFT_DIVISOR. At 8 (+-1/8 of the image) a
 * linear classifier still scores 100% on 32x32x3; at 4 it scores ~85%
 * while matching the class pattern over the shifts scores 100%. */
#define DATASET_SHIFT_DIVISOR 4
#define DATASET_SCALE_MIN 0.7f
#define DATASET_SCALE_MAX 1.3f
/* Sample streams encode (index << 1 | split); keeping index below 2^62
 * keeps them disjoint from the pattern streams (see pattern_stream). */
#define DATASET_MAX_INDEX ((int64_t)1 << 62)
/* Element numbers of a sample's stream: a few uniforms, then the noise. */
#define DRAW_SHIFT_X 0
#define DRAW_SHIFT_Y 1
#define DRAW_SCALE 2
#define DRAW_NOISE_BASE 8

static const double two_pi = 6.28318530717958647692;

typedef struct dataset_wave {
    int kx, ky;      /* cycles per image width / height */
    float phase;     /* radians */
    float amplitude;
} dataset_wave;

struct sl_synthetic {
    int num_classes, channels, height, width;
    uint64_t seed;
    dataset_wave *waves; /* [num_classes][channels][DATASET_WAVES] */
};

/* SplitMix64's finaliser: a bijection on 64-bit words. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Streams for the class patterns: inputs >= 2^63, sample streams' inputs
 * are < 2^63, and mix64 is a bijection, so the two never collide. */
static uint64_t pattern_stream(uint64_t class_channel)
{
    return mix64(~class_channel);
}

static uint64_t sample_stream(sl_split split, int64_t index)
{
    return mix64(((uint64_t)index << 1) | (uint64_t)split);
}

static size_t plane_size(const sl_synthetic *ds)
{
    return (size_t)ds->height * (size_t)ds->width;
}

/* Uniform integer in [lo, hi] from a uniform draw in [0, 1). */
static int uniform_int(float u, int lo, int hi)
{
    int v = lo + (int)(u * (float)(hi - lo + 1));
    return v > hi ? hi : v;
}

static void dataset_make_pattern(uint64_t seed, uint64_t class_channel, int height, int width,
                                 dataset_wave *waves)
{
    uint64_t stream = pattern_stream(class_channel);
    int kx_max = (width - 1) / 2 < DATASET_MAX_FREQ ? (width - 1) / 2 : DATASET_MAX_FREQ;
    int ky_max = (height - 1) / 2 < DATASET_MAX_FREQ ? (height - 1) / 2 : DATASET_MAX_FREQ;
    double power = 0.0;
    for (int j = 0; j < DATASET_WAVES; j++) {
        uint64_t i = 4 * (uint64_t)j;
        dataset_wave *w = &waves[j];
        w->kx = uniform_int(sl_random_uniform(seed, stream, i), 0, kx_max);
        w->ky = uniform_int(sl_random_uniform(seed, stream, i + 1), -ky_max, ky_max);
        if (w->kx == 0 && w->ky == 0) { /* a constant is no pattern */
            if (kx_max > 0)
                w->kx = 1;
            else if (ky_max > 0)
                w->ky = 1;
        }
        w->phase = (float)(two_pi * sl_random_uniform(seed, stream, i + 2));
        w->amplitude = 0.5f + 0.5f * sl_random_uniform(seed, stream, i + 3);
        power += 0.5 * (double)w->amplitude * w->amplitude; /* mean of a^2 sin^2 */
    }
    float norm = (float)(1.0 / sqrt(power));
    for (int j = 0; j < DATASET_WAVES; j++)
        waves[j].amplitude *= norm;
}

sl_status sl_synthetic_create(int num_classes, int channels, int height, int width,
                              uint64_t seed, sl_synthetic **out)
{
    if (num_classes < 2)
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "sl_dataset_synthetic: num_classes must be >= 2, got %d", num_classes);
    if (channels < 1 || height < 1 || width < 1)
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "sl_dataset_synthetic: channels, height and width must be >= 1, "
                            "got %d x %d x %d",
                            channels, height, width);
    if ((int64_t)channels * height * width > INT32_MAX)
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "sl_dataset_synthetic: a %d x %d x %d sample is too large", channels,
                            height, width);

    size_t patterns = (size_t)num_classes * (size_t)channels;
    if (patterns > SIZE_MAX / (DATASET_WAVES * sizeof(dataset_wave)))
        return sl_set_error(SL_ERR_INVALID_ARG,
                       "sl_dataset_synthetic: %d classes x %d channels is too many", num_classes,
                       channels);
    sl_synthetic *ds = sl_alloc(sizeof *ds, "synthetic dataset");
    if (!ds)
        return SL_ERR_NOMEM;
    ds->waves = sl_alloc(patterns * DATASET_WAVES * sizeof(dataset_wave),
                         "synthetic dataset class patterns");
    if (!ds->waves) {
        free(ds);
        return SL_ERR_NOMEM;
    }
    ds->num_classes = num_classes;
    ds->channels = channels;
    ds->height = height;
    ds->width = width;
    ds->seed = seed;
    for (size_t p = 0; p < patterns; p++)
        dataset_make_pattern(seed, p, height, width, &ds->waves[p * DATASET_WAVES]);
    *out = ds;
    return SL_OK;
}

void sl_synthetic_free(sl_synthetic *ds)
{
    if (!ds)
        return;
    free(ds->waves);
    free(ds);
}

/* Per-sample lookup tables that make a wave separable:
 * sin(ax + by) = sin(ax) cos(by) + cos(ax) sin(by). */
typedef struct wave_tables {
    float *sin_x, *cos_x; /* [DATASET_WAVES][width] */
    float *sin_y, *cos_y; /* [DATASET_WAVES][height] */
} wave_tables;

/* Writes one channel of one sample: scale * (shifted pattern). */
static void dataset_render_channel(const sl_synthetic *ds, const dataset_wave *waves, int shift_x,
                                   int shift_y, float scale, wave_tables *t, float *dst)
{
    size_t h = (size_t)ds->height, w = (size_t)ds->width;
    for (size_t j = 0; j < DATASET_WAVES; j++) {
        double amplitude = (double)scale * waves[j].amplitude;
        for (size_t x = 0; x < w; x++) {
            double a = two_pi * waves[j].kx * ((double)x - shift_x) / (double)w;
            t->sin_x[j * w + x] = (float)sin(a);
            t->cos_x[j * w + x] = (float)cos(a);
        }
        for (size_t y = 0; y < h; y++) {
            double b = two_pi * waves[j].ky * ((double)y - shift_y) / (double)h + waves[j].phase;
            t->sin_y[j * h + y] = (float)(amplitude * sin(b));
            t->cos_y[j * h + y] = (float)(amplitude * cos(b));
        }
    }
    for (size_t y = 0; y < h; y++) {
        float *row = dst + y * w;
        for (size_t x = 0; x < w; x++)
            row[x] = 0.0f;
        for (size_t j = 0; j < DATASET_WAVES; j++) {
            const float *sx = t->sin_x + j * w, *cx = t->cos_x + j * w;
            float sy = t->sin_y[j * h + y], cy = t->cos_y[j * h + y];
            for (size_t x = 0; x < w; x++)
                row[x] += sx[x] * cy + cx[x] * sy;
        }
    }
}

static void dataset_render_sample(const sl_synthetic *ds, sl_split split, int64_t index,
                                  wave_tables *t, float *x, int *label)
{
    uint64_t stream = sample_stream(split, index);
    int klass = (int)(mix64(ds->seed ^ stream) % (uint64_t)ds->num_classes);
    int mx = ds->width / DATASET_SHIFT_DIVISOR, my = ds->height / DATASET_SHIFT_DIVISOR;
    int shift_x = uniform_int(sl_random_uniform(ds->seed, stream, DRAW_SHIFT_X), -mx, mx);
    int shift_y = uniform_int(sl_random_uniform(ds->seed, stream, DRAW_SHIFT_Y), -my, my);
    float scale = DATASET_SCALE_MIN + (DATASET_SCALE_MAX - DATASET_SCALE_MIN) *
                                          sl_random_uniform(ds->seed, stream, DRAW_SCALE);
    size_t plane = plane_size(ds);
    for (int c = 0; c < ds->channels; c++) {
        const dataset_wave *waves =
            &ds->waves[((size_t)klass * (size_t)ds->channels + (size_t)c) * DATASET_WAVES];
        dataset_render_channel(ds, waves, shift_x, shift_y, scale, t, x + (size_t)c * plane);
    }
    size_t count = plane * (size_t)ds->channels;
    for (size_t e = 0; e < count; e++)
        x[e] += DATASET_NOISE_STD * sl_random_normal(ds->seed, stream, DRAW_NOISE_BASE + e);
    *label = klass;
}

sl_status sl_synthetic_batch(const sl_synthetic *ds, sl_split split, int64_t index, int n,
                             float *x, int *labels)
{
    if (index < 0 || index > DATASET_MAX_INDEX - n)
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "sl_dataset_batch: index %lld with n %d is out of range "
                            "(index must be >= 0 and index + n <= 2^62)",
                            (long long)index, n);

    size_t table_floats = 2 * DATASET_WAVES * ((size_t)ds->width + (size_t)ds->height);
    float *tables = sl_alloc(table_floats * sizeof(float), "synthetic dataset wave tables");
    if (!tables)
        return SL_ERR_NOMEM;
    wave_tables t = {
        .sin_x = tables,
        .cos_x = tables + DATASET_WAVES * (size_t)ds->width,
        .sin_y = tables + 2 * DATASET_WAVES * (size_t)ds->width,
        .cos_y = tables + 2 * DATASET_WAVES * (size_t)ds->width + DATASET_WAVES * (size_t)ds->height,
    };
    size_t sample = (size_t)ds->channels * plane_size(ds);
    for (int s = 0; s < n; s++)
        dataset_render_sample(ds, split, index + s, &t, x + (size_t)s * sample, &labels[s]);
    free(tables);
    return SL_OK;
}

int64_t sl_synthetic_samples(void) { return DATASET_MAX_INDEX; }
