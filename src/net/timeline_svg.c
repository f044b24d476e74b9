/*
 * timeline_svg.c — the picture of memory timelines (net stage, for
 * people): total live bytes per program step of one or more schedules on
 * shared axes, as a self-contained SVG. Ticks sit at 1-2-5 steps with
 * their unit; the legend sits below the plot, never on the curves, and
 * the picture widens to hold its longest line. Timelines come from
 * timeline.c; tests/svg_check.py checks the result.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "net/net.h"

/* Text width per character in font sizes, kept on the safe side (DejaVu
 * Sans digits are 0.64), as tests/svg_check.py estimates it. */
#define CHAR_W 0.65

enum { FONT = 12, TITLE_FONT = 15, LEGEND_ROW = 20 };

typedef struct {
    double step;  /* 1, 2 or 5 times a power of ten */
    int decimals; /* enough to print every multiple of step exactly */
    int count;    /* ticks 0, step, ..., (count - 1) * step */
} axis_ticks;

/* Ticks from 0 covering [0, hi] in about five 1-2-5 steps; at least
 * min_step apart (1 for whole program steps). */
static axis_ticks ticks_to(double hi, double min_step)
{
    double raw = hi > 0 ? hi / 5 : 1;
    double mag = pow(10, floor(log10(raw)));
    double m = raw / mag;
    double step = (m <= 1 + 1e-9 ? 1 : m <= 2 + 1e-9 ? 2 : m <= 5 + 1e-9 ? 5 : 10) * mag;
    if (step < min_step)
        step = min_step;
    axis_ticks t = {step, 0, (int)ceil(hi / step - 1e-9) + 1};
    if (t.count < 2)
        t.count = 2;
    int digits = (int)floor(log10(step) + 1e-9);
    t.decimals = digits < 0 ? -digits : 0;
    return t;
}

/* The unit live bytes are shown in: KiB, MiB or GiB, whichever keeps the
 * largest value between 1 and 10240. */
static const char *byte_unit(uint64_t max_bytes, double *per_unit)
{
    if (max_bytes >= (10ull << 30)) {
        *per_unit = 1073741824.0;
        return "GiB";
    }
    if (max_bytes >= (1ull << 20)) {
        *per_unit = 1048576.0;
        return "MiB";
    }
    *per_unit = 1024.0;
    return "KiB";
}

/* Escapes &, <, > and quotes for SVG text. */
static void put_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                      "#9467bd", "#8c564b", "#e377c2", "#17becf"};

static uint64_t live_at(const sl_memory_timeline *t, int s)
{
    return t->outputs[s] + t->grad_inputs[s] + t->buffers[s] +
           (t->param_grads ? t->param_grads[s] : 0);
}

static uint64_t peak_live(const sl_memory_timeline *t)
{
    uint64_t peak = 0;
    for (int s = 0; s < t->steps; s++)
        peak = live_at(t, s) > peak ? live_at(t, s) : peak;
    return peak;
}

/* The legend line of series i after its label, written into buf. */
static void legend_tail(char *buf, size_t cap, const sl_memory_timeline *t, double per_unit,
                        const char *unit)
{
    snprintf(buf, cap, ": peak %.1f %s live, arena %.1f %s, %d steps",
             (double)peak_live(t) / per_unit, unit, (double)t->arena_bytes / per_unit, unit,
             t->steps);
}

typedef struct {
    double W, H, L, R, T, pw, ph; /* picture, margins, plot width and height */
    double y_top, per_unit;       /* the y axis' top, in units; bytes per unit */
    int x_top;                    /* the x axis' last step */
    const char *unit;
} frame;

static void write_axes(FILE *f, const frame *fr, axis_ticks yt, axis_ticks xt)
{
    double bottom = fr->T + fr->ph;
    fprintf(f, "<g stroke=\"#888\" stroke-width=\"1\">\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
               "y2=\"%.1f\"/>\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n</g>\n",
            fr->L, bottom, fr->L + fr->pw, bottom, fr->L, fr->T, fr->L, bottom);
    for (int k = 0; k < yt.count; k++) {
        double v = yt.step * k, y = bottom - fr->ph * v / fr->y_top;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n",
                fr->L, y, fr->L + fr->pw, y);
        fprintf(f, "<text class=\"tick\" data-axis=\"y\" data-value=\"%.*f\" x=\"%.1f\" "
                   "y=\"%.1f\" text-anchor=\"end\">%.*f %s</text>\n",
                yt.decimals, v, fr->L - 6, y + 4, yt.decimals, v, fr->unit);
    }
    for (int k = 0; k < xt.count; k++) {
        double v = xt.step * k;
        fprintf(f, "<text class=\"tick\" data-axis=\"x\" data-value=\"%.0f\" x=\"%.1f\" "
                   "y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n",
                v, fr->L + fr->pw * v / fr->x_top, bottom + 18, v);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">program step</text>\n",
            fr->L + fr->pw / 2, bottom + 38);
}

static void write_series(FILE *f, const frame *fr, const sl_memory_timeline *t,
                         const char *label, int i)
{
    const char *color = palette[i % (int)(sizeof palette / sizeof *palette)];
    double bottom = fr->T + fr->ph;
    fprintf(f, "<g class=\"series\" id=\"series-%d\">\n<title>", i);
    put_text(f, label);
    fprintf(f, "</title>\n<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
            color);
    for (int s = 0; s < t->steps; s++) {
        double x = fr->L + fr->pw * s / fr->x_top;
        double y = bottom - fr->ph * ((double)live_at(t, s) / fr->per_unit) / fr->y_top;
        fprintf(f, "%.1f,%.1f ", x, y);
    }
    char tail[160];
    legend_tail(tail, sizeof tail, t, fr->per_unit, fr->unit);
    double row = bottom + 64 + (double)LEGEND_ROW * i;
    fprintf(f, "\"/>\n<rect class=\"swatch\" x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" "
               "fill=\"%s\"/>\n<text x=\"%.1f\" y=\"%.1f\">",
            fr->L, row - 10, color, fr->L + 18, row);
    put_text(f, label);
    fprintf(f, "%s</text>\n</g>\n", tail);
}

static const char title[] = "Live memory per program step: outputs + gradInputs + buffers (+ parameter gradients)";

sl_status sl_memory_timeline_write_svg(const char *path, const sl_memory_timeline *const *series,
                                 const char *const *labels, int n)
{
    if (!path || !series || !labels || n < 1)
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "sl_memory_timeline_write_svg: path, series or labels missing");
    int max_steps = 2;
    uint64_t max_bytes = 1;
    for (int i = 0; i < n; i++) {
        if (!series[i] || !labels[i])
            return sl_set_error(SL_ERR_INVALID_ARG, "sl_memory_timeline_write_svg: series %d is NULL",
                                i);
        if (series[i]->steps > max_steps)
            max_steps = series[i]->steps;
        uint64_t peak = peak_live(series[i]);
        max_bytes = peak > max_bytes ? peak : max_bytes;
    }
    frame fr = {.W = 920, .L = 90, .R = 30, .T = 44, .ph = 320};
    fr.unit = byte_unit(max_bytes, &fr.per_unit);
    axis_ticks yt = ticks_to((double)max_bytes / fr.per_unit, 0);
    axis_ticks xt = ticks_to(max_steps - 1, 1);
    fr.y_top = yt.step * (yt.count - 1);
    fr.x_top = (int)(xt.step * (xt.count - 1));
    /* Widen the picture to the longest legend line (labels are the caller's). */
    double need = 2 * 10 + CHAR_W * TITLE_FONT * (double)strlen(title);
    for (int i = 0; i < n; i++) {
        char tail[160];
        legend_tail(tail, sizeof tail, series[i], fr.per_unit, fr.unit);
        double w = fr.L + 18 + CHAR_W * FONT * (double)(strlen(labels[i]) + strlen(tail)) + 10;
        need = w > need ? w : need;
    }
    fr.W = need > fr.W ? ceil(need) : fr.W;
    fr.pw = fr.W - fr.L - fr.R;
    fr.H = fr.T + fr.ph + 64 + (double)LEGEND_ROW * (n - 1) + 14;

    FILE *f = fopen(path, "w");
    if (!f)
        return sl_set_error(SL_ERR_IO, "sl_memory_timeline_write_svg: cannot write '%s'", path);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"%d\">\n"
               "<title>Live memory per program step</title>\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"10\" y=\"24\" font-size=\"%d\">%s</text>\n",
            fr.W, fr.H, FONT, TITLE_FONT, title);
    write_axes(f, &fr, yt, xt);
    for (int i = 0; i < n; i++)
        write_series(f, &fr, series[i], labels[i], i);
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0)
        return sl_set_error(SL_ERR_IO, "sl_memory_timeline_write_svg: error writing '%s'", path);
    return SL_OK;
}
