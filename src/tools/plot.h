/* plot.h: learning curves as SVG 1.1 (calf plot): TensorBoard's smoothing, "nice" axis
 * ticks, runs grouped by seed, and the SVG writer, each a function of its arguments
 * alone so tests can check it against its definition. Reading runs is calf_plot's, in
 * plot.c (calf/plot.h). */
#ifndef CALF_TOOLS_PLOT_H
#define CALF_TOOLS_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "calf/error.h"

/* TensorBoard's smoothing (webapp/widgets/line_chart_v2/data_transformer.ts,
 * classicSmoothing), for weight w in [0, 1]:
 *     last = 0, k = 0; for each finite y_i:
 *         last = last * w + (1 - w) * y_i;  k += 1;
 *         out_i = last / (w == 1 ? 1 : 1 - w^k)     (the debiased EMA)
 * A non-finite y_i passes through unchanged and does not count in k; a series whose
 * values all compare equal is returned unchanged. out may be y. */
void plot_smooth(const double *y, /* (n) */ size_t n, double w, double *out /* (n) */);

/* An axis: ticks at k * step, step = m * 10^e with m in {1, 2, 5}. */
typedef struct plot_axis {
    double lo, hi;    /* the range the axis shows (lo < hi) */
    int m, e;         /* step = m * 10^e */
    int64_t k0;       /* the first tick is k0 * step, the last (k0 + count - 1) * step */
    int count;        /* number of ticks, >= 1 */
    int unit;         /* label suffix exponent: 0, 3 (k), 6 (M), 9 (G) or 12 (T) */
} plot_axis;

/* Ticks for the data range [lo, hi] (lo <= hi, both finite; hi - lo may overflow): the
 * smallest step m * 10^e that gives at most max_ticks ticks (max_ticks >= 2). With extend
 * the axis range becomes [first tick, last tick] covering [lo, hi] (unless those ticks
 * lie past the largest double); without it stays [lo, hi] and the ticks are the
 * multiples of step inside. An empty range (lo == hi) is widened first to lo -+ 10% of
 * |lo| (-+1 when lo is 0). Labels take a suffix (k, M, G, T) when the largest |tick| is
 * 10^4 or more. */
void plot_axis_nice(double lo, double hi, int max_ticks, bool extend, plot_axis *a);
/* Tick i's value, (k0 + i) * m * 10^e, computed as exactly as a double allows. */
double plot_axis_tick(const plot_axis *a, int i);
/* Tick i's label, written exactly from the integers (no rounding): "-1.5", "250k",
 * "1.2M", "0". Fills buf (cap >= 32) and returns it. */
char *plot_axis_label(const plot_axis *a, int i, char *buf, size_t cap);

/* How long name's group key is: name less a seed suffix, which is, at the end of the
 * name, digits, after an optional one of "-_.=", after an optional "seed" (any case),
 * after an optional one of "-_.". "ppo-seed1", "ppo_seed=2", "ppo.3" and "ppo4" all
 * have the key "ppo". The key must keep at least one character: a name with no such
 * suffix, or one that is all suffix ("seed3", "12"), is its own key (its length). */
size_t plot_seed_key_len(const char *name);

/* One run's points for a group: step, x and y of each, in the order read. */
typedef struct plot_points {
    const int64_t *step; /* (n) */
    const double *x;     /* (n) */
    const double *y;     /* (n) */
    size_t n;
} plot_points;

/* A group's curve: at each step every one of runs[0..num_runs) has (in increasing step
 * order; where a run has a step more than once, its last one counts), the mean of the
 * runs' x, and the mean, minimum and maximum of their y, the mean summed in run order.
 * Writes up to runs[0].n entries of each output and *count, how many; CALF_ENOMEM
 * (*count 0) when its scratch does not fit. */
int plot_group(const plot_points *runs, /* (num_runs) */ size_t num_runs, int64_t *step,
               double *x, double *mean, double *min, double *max, size_t *count,
               calf_error *err);

/* One curve of a panel: a run, or a group (mean with its min-max band). */
typedef struct plot_line {
    const char *label;     /* the legend's name; also the <title> of its <g class="run"> */
    int color;             /* index into the palette (wraps) */
    const double *x, *y;   /* (n) raw points in reading order; y the group's mean */
    const double *lo, *hi; /* (n) a group's min and max, or NULL for a run */
    size_t n;
} plot_line;

typedef struct plot_panel {
    const char *title;   /* "train: Metrics/AverageReturn" */
    const char *y_label; /* "AverageReturn" */
    const plot_line *lines; /* (num_lines) */
    size_t num_lines;
} plot_panel;

typedef struct plot_legend_entry {
    const char *label;
    int color;
    bool band; /* a group: drawn as a line over a band */
} plot_legend_entry;

typedef struct plot_figure {
    const char *x_label;    /* "environment steps" */
    double smooth;          /* plot_smooth's weight, [0, 1) */
    const plot_panel *panels; /* (num_panels) */
    size_t num_panels;
    const plot_legend_entry *legend; /* (num_legend) */
    size_t num_legend;
} plot_figure;

/* Panel geometry, in SVG user units (pixels). Panels sit in a grid of up to two
 * columns below the legend; a panel's plot area is PLOT_PANEL_W - PLOT_MARGIN_L -
 * PLOT_MARGIN_R wide and PLOT_PANEL_H - PLOT_MARGIN_T - PLOT_MARGIN_B high. */
enum {
    PLOT_PANEL_W = 480,
    PLOT_PANEL_H = 300,
    PLOT_MARGIN_L = 64,
    PLOT_MARGIN_R = 16,
    PLOT_MARGIN_T = 28,
    PLOT_MARGIN_B = 48,
    PLOT_PAD = 10,        /* around the whole figure */
    PLOT_X_TICKS = 7,     /* at most, x: the axis is the data's range from 0 */
    PLOT_Y_TICKS = 9,     /* at most, y: the axis extends to the ticks around the data */
    PLOT_MARKERS_MAX = 30 /* a smoothed line with at most this many points gets dots */
};

/* Write fig as one SVG 1.1 document on out. Each panel is
 *   <g class="panel"><title>TITLE</title><desc>x [XLO, XHI] to [PX0, PX1]; y [YLO, YHI]
 *   to [PY0, PY1]</desc> ...axes... <g class="run"><title>LABEL</title>
 *   [<polygon class="band">] <polyline class="raw"> <polyline class="smoothed">
 *   [<circle>...]</g>...</g>
 * and a point (x, y) is drawn at px = PX0 + (x - XLO) / (XHI - XLO) * (PX1 - PX0),
 * py = PY0 + (y - YLO) / (YHI - YLO) * (PY1 - PY0) (PY0 is the bottom: SVG's y grows
 * downwards), both written "%.2f"; the desc numbers are "%.17g". The raw polyline
 * holds the points as given, the smoothed one plot_smooth(y, smooth) at the same x, a
 * band the smoothed lo forwards then the smoothed hi backwards. Points whose x or y is
 * not finite are left out. Nothing depends on the time, the locale or an address, so
 * the same figure is the same bytes. A failed write is CALF_EIO; CALF_ENOMEM, with
 * nothing written, when the scratch for the longest line does not fit. */
int plot_write_svg(const plot_figure *fig, FILE *out, calf_error *err);

#endif
