/* plot.c: calf plot: a run's events read as TensorBoard reads them (events_run), its
 * scalars put on environment steps, iterations or seconds, and the learning curves
 * written as one plain SVG 1.1 file with no dependency, byte for byte the same for the
 * same events. The pure parts (smoothing, ticks, grouping, the writer) come first. */
#include "tools/plot.h"

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/mem.h"
#include "calf/plot.h"
#include "records/events_reader.h"

/* ------------------------------------------------------------------ smoothing */

void plot_smooth(const double *y, size_t n, double w, double *out) {
    CALF_ASSERT(n == 0 || (y != NULL && out != NULL));
    bool constant = true;
    for (size_t i = 1; i < n && constant; i++) constant = y[i] == y[0];
    if (constant) {
        if (out != y && n) memcpy(out, y, n * sizeof *out);
        return;
    }
    double last = 0;
    double k = 0;
    for (size_t i = 0; i < n; i++) {
        double v = y[i];
        if (!isfinite(v)) {
            out[i] = v;
            continue;
        }
        last = last * w + (1 - w) * v;
        k += 1;
        out[i] = last / (w == 1 ? 1 : 1 - pow(w, k));
    }
}

/* ------------------------------------------------------------------ ticks */

/* 10^e for |e| <= 22 is exact as a double; a tick is an integer times it (or over it,
 * for e < 0, which keeps 0.3 as close to 3/10 as a double gets). */
static double pow10_exact(int e) {
    double p = 1;
    for (int i = 0; i < (e < 0 ? -e : e); i++) p *= 10;
    return p;
}

static double scaled(double mantissa, int e) {
    return e >= 0 ? mantissa * pow10_exact(e) : mantissa / pow10_exact(-e);
}

double plot_axis_tick(const plot_axis *a, int i) {
    return scaled((double)((a->k0 + i) * a->m), a->e);
}

static int fits(double lo, double hi, int m, int e, bool extend, int max_ticks, int64_t *k0,
                int *count) {
    double step = scaled(m, e);
    /* the tolerance keeps 0.3 / 0.1 = 2.9999999999999996 a whole 3 */
    const double tol = 1e-9;
    double a = extend ? floor(lo / step + tol) : ceil(lo / step - tol);
    double b = extend ? ceil(hi / step - tol) : floor(hi / step + tol);
    if (b - a + 1 > max_ticks) return 0;
    *k0 = (int64_t)a;
    *count = (int)(b - a + 1);
    return 1;
}

/* v within the double range: a widened end that overflowed is the largest double. */
static double clamp_finite(double v) {
    return isfinite(v) ? v : copysign(DBL_MAX, v);
}

void plot_axis_nice(double lo, double hi, int max_ticks, bool extend, plot_axis *a) {
    CALF_ASSERT(a != NULL && max_ticks >= 2 && lo <= hi && isfinite(lo) && isfinite(hi));
    if (lo == hi) {
        double d = lo != 0 ? fabs(lo) * 0.1 : 1;
        lo = clamp_finite(lo - d);
        hi = clamp_finite(hi + d);
    }
    /* keep k * m (an int64) small: a range far narrower than its magnitude is widened */
    double mag = fmax(fabs(lo), fabs(hi));
    if (hi - lo < mag * 1e-9) {
        double mid = lo / 2 + hi / 2, half = mag * 0.5e-9;
        lo = clamp_finite(mid - half);
        hi = clamp_finite(mid + half);
    }
    static const int ms[3] = {1, 2, 5};
    /* a range wider than the largest double (-1e308 to 1e308) is divided before the
     * subtraction, which then cannot overflow */
    double per_tick = isfinite(hi - lo) ? (hi - lo) / (max_ticks - 1)
                                        : hi / (max_ticks - 1) - lo / (max_ticks - 1);
    int e = (int)floor(log10(per_tick));
    int64_t k0 = 0;
    int count = 0, m = 1;
    bool found = false;
    for (; !found; e++)
        for (int j = 0; j < 3 && !found; j++)
            if (fits(lo, hi, ms[j], e, extend, max_ticks, &k0, &count)) {
                m = ms[j];
                found = true;
            }
    e--;
    if (!extend && count < 1) { /* no multiple inside: show the ticks around instead */
        plot_axis_nice(lo, hi, max_ticks, true, a);
        return;
    }
    a->m = m;
    a->e = e;
    a->k0 = k0;
    a->count = count;
    if (extend && !(isfinite(plot_axis_tick(a, 0)) && isfinite(plot_axis_tick(a, count - 1)))) {
        /* the ticks around lie past the largest double: keep to the ticks inside */
        plot_axis_nice(lo, hi, max_ticks, false, a);
        return;
    }
    a->lo = extend ? plot_axis_tick(a, 0) : lo;
    a->hi = extend ? plot_axis_tick(a, count - 1) : hi;
    /* the suffix: from the digits of the largest |tick| */
    int64_t big = llabs(k0 * m) > llabs((k0 + count - 1) * m) ? llabs(k0 * m)
                                                              : llabs((k0 + count - 1) * m);
    int digits = 0;
    for (int64_t v = big; v > 0; v /= 10) digits++;
    int top = digits + e - 1; /* floor(log10(largest |tick|)) */
    a->unit = big == 0 || top < 4 ? 0 : (top >= 12 ? 12 : top / 3 * 3);
}

char *plot_axis_label(const plot_axis *a, int i, char *buf, size_t cap) {
    CALF_ASSERT(a != NULL && buf != NULL && cap >= 32);
    int64_t v = (a->k0 + i) * a->m;
    if (v == 0) {
        snprintf(buf, cap, "0");
        return buf;
    }
    static const char suffix[] = {'\0', 'k', 'M', 'G', 'T'};
    char sfx[2] = {suffix[a->unit / 3], '\0'};
    int s = a->e - a->unit; /* the label is v * 10^s, then the suffix */
    char digits[24];
    snprintf(digits, sizeof digits, "%lld", (long long)llabs(v));
    const char *sign = v < 0 ? "-" : "";
    if (s > 12 || s < -12) {
        snprintf(buf, cap, "%s%se%d%s", sign, digits, s, sfx);
    } else if (s >= 0) {
        snprintf(buf, cap, "%s%s%.*s%s", sign, digits, s, "000000000000", sfx);
    } else {
        /* digits with a point s places from the right, zeros in front as needed, then
         * the fraction's trailing zeros and a bare point dropped */
        char num[48];
        int len = (int)strlen(digits), frac = -s;
        int lead = frac >= len ? frac - len + 1 : 0;
        snprintf(num, sizeof num, "%.*s%s", lead, "0000000000000", digits);
        len += lead;
        int int_len = len - frac; /* >= 1 */
        memmove(num + int_len + 1, num + int_len, (size_t)frac + 1);
        num[int_len] = '.';
        char *last = num + len; /* the last fraction digit */
        while (*last == '0') *last-- = '\0';
        if (*last == '.') *last = '\0';
        snprintf(buf, cap, "%s%s%s", sign, num, sfx);
    }
    return buf;
}

/* ------------------------------------------------------------------ grouping */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool seed_word_at(const char *p) {
    static const char w[] = "seed";
    for (int i = 0; i < 4; i++)
        if (p[i] != w[i] && p[i] != w[i] - 'a' + 'A') return false;
    return true;
}

size_t plot_seed_key_len(const char *name) {
    CALF_ASSERT(name != NULL);
    size_t n = strlen(name), i = n;
    while (i > 0 && is_digit(name[i - 1])) i--;
    if (i == n) return n;
    if (i > 0 && strchr("-_.=", name[i - 1]) && name[i - 1] != '\0') i--;
    if (i >= 4 && seed_word_at(name + i - 4)) {
        i -= 4;
        if (i > 0 && strchr("-_.", name[i - 1]) && name[i - 1] != '\0') i--;
    }
    return i > 0 ? i : n;
}

typedef struct step_ref {
    int64_t step;
    size_t index; /* in the run's reading order */
} step_ref;

static int cmp_step_ref(const void *a, const void *b) {
    const step_ref *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* The run's points by step, one per step (the last read). Returns how many. */
static size_t sorted_steps(const plot_points *r, step_ref *out) {
    for (size_t i = 0; i < r->n; i++) out[i] = (step_ref){r->step[i], i};
    if (r->n > 1) qsort(out, r->n, sizeof *out, cmp_step_ref);
    size_t m = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (m > 0 && out[m - 1].step == out[i].step) m--;
        out[m++] = out[i];
    }
    return m;
}

int plot_group(const plot_points *runs, size_t num_runs, int64_t *step, double *x,
               double *mean, double *min, double *max, size_t *count, calf_error *err) {
    CALF_ASSERT(runs != NULL && num_runs > 0 && count != NULL);
    *count = 0;
    step_ref **sorted = mem_calloc(num_runs, sizeof *sorted, err);
    size_t *len = sorted ? mem_calloc(num_runs, sizeof *len, err) : NULL;
    size_t *at = len ? mem_calloc(num_runs, sizeof *at, err) : NULL;
    size_t *pick = at ? mem_calloc(num_runs, sizeof *pick, err) : NULL;
    bool ok = pick != NULL;
    for (size_t r = 0; r < num_runs && ok; r++) {
        sorted[r] = mem_calloc(runs[r].n ? runs[r].n : 1, sizeof **sorted, err);
        ok = sorted[r] != NULL;
        if (ok) len[r] = sorted_steps(&runs[r], sorted[r]);
    }
    size_t out = 0;
    for (size_t i = 0; ok && i < len[0]; i++) {
        int64_t s = sorted[0][i].step;
        bool everywhere = true;
        pick[0] = sorted[0][i].index;
        for (size_t r = 1; r < num_runs && everywhere; r++) {
            while (at[r] < len[r] && sorted[r][at[r]].step < s) at[r]++;
            everywhere = at[r] < len[r] && sorted[r][at[r]].step == s;
            if (everywhere) pick[r] = sorted[r][at[r]].index;
        }
        if (!everywhere) continue;
        double sx = 0, sy = 0, lo = INFINITY, hi = -INFINITY;
        for (size_t r = 0; r < num_runs; r++) {
            double v = runs[r].y[pick[r]];
            sx += runs[r].x[pick[r]];
            sy += v;
            lo = fmin(lo, v);
            hi = fmax(hi, v);
        }
        step[out] = s;
        x[out] = sx / (double)num_runs;
        mean[out] = sy / (double)num_runs;
        min[out] = lo;
        max[out] = hi;
        out++;
    }
    for (size_t r = 0; sorted && r < num_runs; r++) free(sorted[r]);
    free(sorted);
    free(len);
    free(at);
    free(pick);
    if (!ok) return CALF_ENOMEM;
    *count = out;
    return CALF_OK;
}

/* ------------------------------------------------------------------ SVG */

/* Tableau 10: distinct hues that survive a grey print. */
static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

static const char *color_of(int i) {
    int n = (int)(sizeof palette / sizeof palette[0]);
    return palette[((i % n) + n) % n];
}

typedef struct svg {
    FILE *out;
    bool failed; /* a write failed; nothing after it counts */
    int errnum;  /* the failed write's errno */
    /* put_line's scratch, for the longest line (n), taken before anything is written */
    double *sm, *slo, *shi; /* (n) the smoothed y, lo and hi */
    double *bx, *by;        /* (2n) a band's outline */
} svg;

static void put(svg *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(svg *s, const char *fmt, ...) {
    if (s->failed) return;
    va_list ap;
    va_start(ap, fmt);
    if (vfprintf(s->out, fmt, ap) < 0) {
        s->failed = true;
        s->errnum = errno;
    }
    va_end(ap);
}

/* Text as XML character data or an attribute value: the five markup characters as
 * entities, control characters XML 1.0 cannot hold and bytes that are not UTF-8 as '?'
 * (a directory name may be any bytes). */
static void put_text(svg *s, const char *t) {
    const unsigned char *p = (const unsigned char *)t;
    while (*p && !s->failed) {
        unsigned c = *p;
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = len > 0;
        for (int i = 1; i < len && ok; i++) ok = (p[i] & 0xc0) == 0x80;
        if (ok && len == 2) ok = c >= 0xc2; /* no overlong forms */
        if (ok && len == 3) {
            unsigned cp = ((c & 0xfu) << 12) | ((p[1] & 0x3fu) << 6) | (p[2] & 0x3fu);
            ok = cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff) && cp != 0xfffe && cp != 0xffff;
        }
        if (ok && len == 4) {
            unsigned cp = ((c & 0x7u) << 18) | ((p[1] & 0x3fu) << 12) | ((p[2] & 0x3fu) << 6) |
                          (p[3] & 0x3fu);
            ok = cp >= 0x10000 && cp <= 0x10ffff;
        }
        if (!ok) {
            put(s, "?");
            p++;
            continue;
        }
        if (len > 1) {
            put(s, "%.*s", len, (const char *)p);
            p += len;
            continue;
        }
        switch (c) {
        case '&': put(s, "&amp;"); break;
        case '<': put(s, "&lt;"); break;
        case '>': put(s, "&gt;"); break;
        case '"': put(s, "&quot;"); break;
        case '\'': put(s, "&apos;"); break;
        default: put(s, "%c", c < 0x20 && c != '\t' && c != '\n' && c != '\r' ? '?' : (int)c);
        }
        p++;
    }
}

/* A coordinate, "%.2f" with no "-0.00". */
static const char *coord(double v, char *buf, size_t cap) {
    snprintf(buf, cap, "%.2f", v);
    if (!strcmp(buf, "-0.00")) snprintf(buf, cap, "0.00");
    return buf;
}

/* Width of a label at font-size 12, for laying out the legend: ~7 units a character
 * (UTF-8 continuation bytes do not count). */
static int text_width(const char *t) {
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)t; *p; p++) n += (*p & 0xc0) != 0x80;
    return 7 * n;
}

typedef struct frame {
    double xlo, xhi, ylo, yhi; /* the axis ranges */
    int px0, px1, py0, py1;    /* where they go: left, right, bottom, top */
} frame;

/* Where v lies in [lo, hi], 0 to 1; halved first when hi - lo overflows a double. */
static double fraction_of(double v, double lo, double hi) {
    if (isfinite(hi - lo)) return (v - lo) / (hi - lo);
    return (v / 2 - lo / 2) / (hi / 2 - lo / 2);
}

static double map_x(const frame *f, double x) {
    return f->px0 + fraction_of(x, f->xlo, f->xhi) * (f->px1 - f->px0);
}

static double map_y(const frame *f, double y) {
    return f->py0 + fraction_of(y, f->ylo, f->yhi) * (f->py1 - f->py0);
}

static void put_points(svg *s, const frame *f, const double *x, const double *y, size_t n) {
    char a[48], b[48];
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i])) continue;
        put(s, "%s%s,%s", first ? "" : " ", coord(map_x(f, x[i]), a, sizeof a),
            coord(map_y(f, y[i]), b, sizeof b));
        first = false;
    }
}

static size_t finite_points(const double *x, const double *y, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += isfinite(x[i]) && isfinite(y[i]);
    return k;
}

static void put_line(svg *s, const frame *f, const plot_line *l, double w) {
    const char *c = color_of(l->color);
    double *sm = s->sm;
    plot_smooth(l->y, l->n, w, sm);
    put(s, "<g class=\"run\"><title>");
    put_text(s, l->label);
    put(s, "</title>\n");
    if (l->lo && l->hi) {
        double *slo = s->slo, *shi = s->shi;
        plot_smooth(l->lo, l->n, w, slo);
        plot_smooth(l->hi, l->n, w, shi);
        /* the band: lo forwards, then hi backwards */
        double *bx = s->bx, *by = s->by;
        for (size_t i = 0; i < l->n; i++) {
            bx[i] = l->x[i];
            by[i] = slo[i];
            bx[2 * l->n - 1 - i] = l->x[i];
            by[2 * l->n - 1 - i] = shi[i];
        }
        put(s, "<polygon class=\"band\" fill=\"%s\" fill-opacity=\"0.2\" stroke=\"none\" points=\"", c);
        put_points(s, f, bx, by, 2 * l->n);
        put(s, "\"/>\n");
    }
    put(s, "<polyline class=\"raw\" fill=\"none\" stroke=\"%s\" stroke-opacity=\"0.3\" "
           "stroke-width=\"1\" points=\"", c);
    put_points(s, f, l->x, l->y, l->n);
    put(s, "\"/>\n<polyline class=\"smoothed\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
           "stroke-linejoin=\"round\" points=\"", c);
    put_points(s, f, l->x, sm, l->n);
    put(s, "\"/>\n");
    if (finite_points(l->x, sm, l->n) <= PLOT_MARKERS_MAX) {
        char a[48], b[48];
        for (size_t i = 0; i < l->n; i++)
            if (isfinite(l->x[i]) && isfinite(sm[i]))
                put(s, "<circle cx=\"%s\" cy=\"%s\" r=\"2.5\" fill=\"%s\"/>\n",
                    coord(map_x(f, l->x[i]), a, sizeof a), coord(map_y(f, sm[i]), b, sizeof b), c);
    }
    put(s, "</g>\n");
}

/* The ranges a panel's axes must cover: every finite raw point and band edge; x from 0
 * (counters and elapsed time start there). */
static void panel_ranges(const plot_panel *p, double *xlo, double *xhi, double *ylo,
                         double *yhi) {
    *xlo = 0;
    *xhi = 0;
    *ylo = INFINITY;
    *yhi = -INFINITY;
    for (size_t j = 0; j < p->num_lines; j++) {
        const plot_line *l = &p->lines[j];
        for (size_t i = 0; i < l->n; i++) {
            if (!isfinite(l->x[i])) continue;
            const double *cols[3] = {l->y, l->lo, l->hi};
            bool any = false;
            for (int c = 0; c < 3; c++) {
                if (!cols[c] || !isfinite(cols[c][i])) continue;
                *ylo = fmin(*ylo, cols[c][i]);
                *yhi = fmax(*yhi, cols[c][i]);
                any = true;
            }
            if (!any) continue;
            *xlo = fmin(*xlo, l->x[i]);
            *xhi = fmax(*xhi, l->x[i]);
        }
    }
    if (*ylo > *yhi) *ylo = *yhi = 0; /* nothing to draw: an empty frame */
}

static void put_panel(svg *s, const plot_figure *fig, const plot_panel *p, int ox, int oy) {
    double xlo, xhi, ylo, yhi;
    panel_ranges(p, &xlo, &xhi, &ylo, &yhi);
    plot_axis ax, ay;
    plot_axis_nice(xlo, xhi, PLOT_X_TICKS, false, &ax);
    plot_axis_nice(ylo, yhi, PLOT_Y_TICKS, true, &ay);
    frame f = {ax.lo, ax.hi, ay.lo, ay.hi, ox + PLOT_MARGIN_L, ox + PLOT_PANEL_W - PLOT_MARGIN_R,
               oy + PLOT_PANEL_H - PLOT_MARGIN_B, oy + PLOT_MARGIN_T};
    char a[48], b[48], lab[64];
    put(s, "<g class=\"panel\"><title>");
    put_text(s, p->title);
    put(s, "</title>\n<desc>x [%.17g, %.17g] to [%d, %d]; y [%.17g, %.17g] to [%d, %d]</desc>\n",
        f.xlo, f.xhi, f.px0, f.px1, f.ylo, f.yhi, f.py0, f.py1);
    put(s, "<text class=\"title\" x=\"%d\" y=\"%d\" font-weight=\"bold\">", f.px0, oy + 18);
    put_text(s, p->title);
    put(s, "</text>\n<g class=\"grid\" stroke=\"#e6e6e6\" stroke-width=\"1\">\n");
    for (int i = 0; i < ax.count; i++) {
        coord(map_x(&f, plot_axis_tick(&ax, i)), a, sizeof a);
        put(s, "<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\"/>\n", a, f.py1, a, f.py0);
    }
    for (int i = 0; i < ay.count; i++) {
        coord(map_y(&f, plot_axis_tick(&ay, i)), b, sizeof b);
        put(s, "<line x1=\"%d\" y1=\"%s\" x2=\"%d\" y2=\"%s\"/>\n", f.px0, b, f.px1, b);
    }
    put(s, "</g>\n<rect class=\"frame\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
           "stroke=\"#999999\"/>\n", f.px0, f.py1, f.px1 - f.px0, f.py0 - f.py1);
    put(s, "<g class=\"xticks\" text-anchor=\"middle\" fill=\"#444444\">\n");
    for (int i = 0; i < ax.count; i++)
        put(s, "<text x=\"%s\" y=\"%d\">%s</text>\n", coord(map_x(&f, plot_axis_tick(&ax, i)), a, sizeof a),
            f.py0 + 16, plot_axis_label(&ax, i, lab, sizeof lab));
    put(s, "</g>\n<g class=\"yticks\" text-anchor=\"end\" fill=\"#444444\">\n");
    for (int i = 0; i < ay.count; i++)
        put(s, "<text x=\"%d\" y=\"%s\">%s</text>\n", f.px0 - 6,
            coord(map_y(&f, plot_axis_tick(&ay, i)) + 4, b, sizeof b),
            plot_axis_label(&ay, i, lab, sizeof lab));
    put(s, "</g>\n<text class=\"xlabel\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">",
        (f.px0 + f.px1) / 2, f.py0 + 36);
    put_text(s, fig->x_label);
    int yx = ox + 16, yy = (f.py0 + f.py1) / 2;
    put(s, "</text>\n<text class=\"ylabel\" x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
           "transform=\"rotate(-90 %d %d)\">", yx, yy, yx, yy);
    put_text(s, p->y_label);
    put(s, "</text>\n");
    for (size_t j = 0; j < p->num_lines; j++) put_line(s, &f, &p->lines[j], fig->smooth);
    put(s, "</g>\n");
}

/* Legend entries flow left to right in rows of LEGEND_ROW units. */
enum { LEGEND_ROW = 20, LEGEND_SWATCH = 18, LEGEND_GAP = 18 };

static void svg_free(svg *s) {
    free(s->sm);
    free(s->slo);
    free(s->shi);
    free(s->bx);
    free(s->by);
}

static int legend_rows(const plot_figure *fig, int width, int *xs, int *rows_of) {
    int x = PLOT_PAD + PLOT_MARGIN_L, row = 0, right = width - PLOT_PAD;
    for (size_t i = 0; i < fig->num_legend; i++) {
        int w = LEGEND_SWATCH + 6 + text_width(fig->legend[i].label);
        if (x + w > right && x > PLOT_PAD + PLOT_MARGIN_L) {
            row++;
            x = PLOT_PAD + PLOT_MARGIN_L;
        }
        xs[i] = x;
        rows_of[i] = row;
        x += w + LEGEND_GAP;
    }
    return fig->num_legend ? row + 1 : 0;
}

int plot_write_svg(const plot_figure *fig, FILE *out, calf_error *err) {
    CALF_ASSERT(fig != NULL && out != NULL);
    int cols = fig->num_panels >= 2 ? 2 : 1;
    int rows = (int)((fig->num_panels + (size_t)cols - 1) / (size_t)cols);
    int width = 2 * PLOT_PAD + cols * PLOT_PANEL_W;
    size_t longest = 0;
    for (size_t p = 0; p < fig->num_panels; p++)
        for (size_t j = 0; j < fig->panels[p].num_lines; j++)
            if (fig->panels[p].lines[j].n > longest) longest = fig->panels[p].lines[j].n;
    svg s = {out, false, 0, NULL, NULL, NULL, NULL, NULL};
    int *xs = mem_calloc(fig->num_legend + 1, sizeof *xs, err);
    int *rows_of = xs ? mem_calloc(fig->num_legend + 1, sizeof *rows_of, err) : NULL;
    bool ok = rows_of && (s.sm = mem_calloc(longest + 1, sizeof *s.sm, err)) &&
              (s.slo = mem_calloc(longest + 1, sizeof *s.slo, err)) &&
              (s.shi = mem_calloc(longest + 1, sizeof *s.shi, err)) &&
              (s.bx = mem_calloc(2 * longest + 1, sizeof *s.bx, err)) &&
              (s.by = mem_calloc(2 * longest + 1, sizeof *s.by, err));
    if (!ok) {
        free(xs);
        free(rows_of);
        svg_free(&s);
        return CALF_ENOMEM; /* nothing written */
    }
    int lrows = legend_rows(fig, width, xs, rows_of);
    int legend_h = lrows * LEGEND_ROW + (lrows ? 6 : 0);
    int height = 2 * PLOT_PAD + legend_h + rows * PLOT_PANEL_H;
    put(&s, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" "
            "font-size=\"12\">\n<title>learning curves (calf plot)</title>\n"
            "<desc>smoothing %g (TensorBoard's debiased exponential moving average), the raw "
            "values faint behind</desc>\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
        width, height, width, height, fig->smooth, width, height);
    put(&s, "<g class=\"legend\">\n");
    for (size_t i = 0; i < fig->num_legend; i++) {
        const plot_legend_entry *e = &fig->legend[i];
        const char *c = color_of(e->color);
        int x = xs[i], y = PLOT_PAD + rows_of[i] * LEGEND_ROW + 14;
        put(&s, "<g class=\"entry\">");
        if (e->band)
            put(&s, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"10\" fill=\"%s\" fill-opacity=\"0.2\"/>",
                x, y - 9, LEGEND_SWATCH, c);
        put(&s, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>"
                "<text x=\"%d\" y=\"%d\">", x, y - 4, x + LEGEND_SWATCH, y - 4, c,
            x + LEGEND_SWATCH + 6, y);
        put_text(&s, e->label);
        put(&s, "</text></g>\n");
    }
    put(&s, "</g>\n");
    for (size_t p = 0; p < fig->num_panels; p++)
        put_panel(&s, fig, &fig->panels[p], PLOT_PAD + (int)(p % (size_t)cols) * PLOT_PANEL_W,
                  PLOT_PAD + legend_h + (int)(p / (size_t)cols) * PLOT_PANEL_H);
    put(&s, "</svg>\n");
    free(xs);
    free(rows_of);
    svg_free(&s);
    if (!s.failed && (fflush(out) != 0 || ferror(out))) {
        s.failed = true;
        s.errnum = errno;
    }
    if (s.failed) /* the caller knows the file's name and adds it */
        return calf_error_set(err, CALF_EIO, "writing the SVG: %s", strerror(s.errnum));
    return CALF_OK;
}

/* ------------------------------------------------------------------ calf plot */

/* A run's directories, in the order their panels come: eval first (the greedy
 * policy's return is the result), then train. */
enum { DIR_EVAL, DIR_TRAIN, NUM_DIRS };
static const char *const dir_names[NUM_DIRS] = {"eval", "train"};

typedef struct plot_run {
    const char *root;
    char *name;                 /* the legend's label: ROOT's last path component */
    events_run ev[NUM_DIRS];    /* each directory read as one TensorBoard run */
    bool present[NUM_DIRS];     /* it had an events file */
    double t0;                  /* the earliest wall time of any record (--x seconds) */
} plot_run;

/* One panel's points of one run, in reading order. */
typedef struct plot_series {
    int64_t *step;
    double *x, *y;
    size_t n;
} plot_series;

static char *dup_n(const char *s, size_t n, calf_error *err) {
    char *out = mem_alloc(n + 1, err);
    if (!out) return NULL;
    memcpy(out, s, n);
    out[n] = '\0';
    return out;
}

/* ROOT's last path component; for ".", ".." or "/" the resolved directory's. NULL (err
 * set) when memory runs out. */
static char *run_name(const char *root, calf_error *err) {
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && root[b - 1] != '/') b--;
    const char *base = root + b;
    size_t len = n - b;
    if (len == 0 || (len == 1 && base[0] == '.') || (len == 2 && !strncmp(base, "..", 2))) {
        char *real = realpath(root, NULL);
        if (real) {
            char *slash = strrchr(real, '/');
            char *name = dup_n(slash && slash[1] ? slash + 1 : real,
                               strlen(slash && slash[1] ? slash + 1 : real), err);
            free(real);
            return name;
        }
    }
    return dup_n(base, len, err);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* DIR's events.out.tfevents.* files, in name order (TensorBoard's; calf's names start
 * with the creation time to the microsecond, so launch by launch). A missing DIR has none. */
static int list_events(const char *dir, char ***out, size_t *count, calf_error *err) {
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT || errno == ENOTDIR) return CALF_OK;
        return calf_error_set(err, CALF_EINVAL, "%s: %s", dir, strerror(errno));
    }
    static const char prefix[] = "events.out.tfevents.";
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = CALF_OK;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) {
            if (errno) rc = calf_error_set(err, CALF_EIO, "%s: readdir: %s", dir, strerror(errno));
            break;
        }
        if (strncmp(e->d_name, prefix, sizeof prefix - 1) != 0) continue;
        size_t len = strlen(dir) + 1 + strlen(e->d_name);
        char *path = mem_alloc(len + 1, err);
        if (!path) {
            rc = CALF_ENOMEM;
            break;
        }
        snprintf(path, len + 1, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            free(path);
            continue;
        }
        if (n == cap) {
            char **a = mem_realloc(names, (cap ? 2 * cap : 8) * sizeof *a, err);
            if (!a) {
                free(path);
                rc = CALF_ENOMEM;
                break;
            }
            cap = cap ? 2 * cap : 8;
            names = a;
        }
        names[n++] = path;
    }
    closedir(d); /* read-only: nothing to lose if it fails */
    if (rc == CALF_ENOMEM) {
        for (size_t i = 0; i < n; i++) free(names[i]);
        free(names);
        return rc;
    }
    if (n > 1) qsort(names, n, sizeof *names, cmp_str);
    *out = names;
    *count = n;
    return rc;
}

static int read_run(plot_run *r, const char *root, FILE *warn, calf_error *err) {
    r->root = root;
    r->t0 = INFINITY;
    r->name = run_name(root, err);
    if (!r->name) return CALF_ENOMEM;
    struct stat st;
    if (stat(root, &st) != 0)
        return calf_error_set(err, CALF_EINVAL, "%s: %s", root, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return calf_error_set(err, CALF_EINVAL, "%s: not a directory (a run's --root_dir)", root);
    int rc = CALF_OK;
    for (int d = 0; d < NUM_DIRS && rc == CALF_OK; d++) {
        events_run_init(&r->ev[d]);
        size_t len = strlen(root) + 1 + strlen(dir_names[d]);
        char *dir = mem_alloc(len + 1, err);
        if (!dir) {
            rc = CALF_ENOMEM;
            break;
        }
        snprintf(dir, len + 1, "%s/%s", root, dir_names[d]);
        char **files;
        size_t nfiles;
        rc = list_events(dir, &files, &nfiles, err);
        for (size_t i = 0; i < nfiles; i++) {
            if (rc == CALF_OK) rc = events_run_read_file(&r->ev[d], files[i], warn, err);
            free(files[i]);
        }
        free(files);
        free(dir);
        r->present[d] = nfiles > 0;
        /* wall_time 0 is a record that has none (proto3 leaves it out) */
        for (size_t i = 0; rc == CALF_OK && i < r->ev[d].num_entries; i++)
            if (r->ev[d].entries[i].wall_time > 0)
                r->t0 = fmin(r->t0, r->ev[d].entries[i].wall_time);
    }
    if (isinf(r->t0)) r->t0 = 0;
    if (rc == CALF_OK && !r->present[DIR_EVAL] && !r->present[DIR_TRAIN])
        rc = calf_error_set(err, CALF_EINVAL, "%s: no events file in %s/train or %s/eval", root,
                            root, root);
    return rc;
}

static void free_run(plot_run *r) {
    for (int d = 0; d < NUM_DIRS; d++) events_run_free(&r->ev[d]);
    free(r->name);
}

/* ALF's StepMetric names a metric written against another step "<prefix>_vs_<step>/". */
static bool against_env_steps(const char *tag) {
    static const char vs[] = "_vs_EnvironmentSteps/";
    const char *slash = strchr(tag, '/');
    size_t n = sizeof vs - 1;
    return slash && (size_t)(slash + 1 - tag) > n && !strncmp(slash + 1 - n, vs, n);
}

static bool visible_scalar(const events_entry *e) {
    return e->what == EVENTS_ENTRY_VALUE && !e->purged && e->kind == EVENTS_VALUE_SIMPLE;
}

typedef struct step_value {
    int64_t step;
    double value;
} step_value;

static int cmp_step_value(const void *a, const void *b) {
    const step_value *x = a, *y = b;
    return (x->step > y->step) - (x->step < y->step);
}

/* The scalar tag's values in ev by step (the last one read of each step), *count of
 * them; *out is the caller's to free. */
static int values_by_step(const events_run *ev, const char *tag, step_value **out,
                          size_t *count, calf_error *err) {
    size_t n = 0;
    step_value *v = mem_calloc(ev->num_entries + 1, sizeof *v, err);
    if (!v) return CALF_ENOMEM;
    for (size_t i = 0; i < ev->num_entries; i++) {
        const events_entry *e = &ev->entries[i];
        if (visible_scalar(e) && !strcmp(e->text, tag)) v[n++] = (step_value){e->step, e->simple_value};
    }
    /* a stable order by step: reading order breaks ties, so the last read is last */
    for (size_t i = 1; i < n; i++) {
        step_value t = v[i];
        size_t j = i;
        while (j > 0 && v[j - 1].step > t.step) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = t;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && v[m - 1].step == v[i].step) m--;
        v[m++] = v[i];
    }
    *out = v;
    *count = m;
    return CALF_OK;
}

/* Run r's points of tag in directory d, on the x the options ask for. *dropped counts
 * the values left out for want of an env-step count at their step. Out of memory: s
 * holds what free_series frees. */
static int extract(const plot_run *r, int d, const char *tag, int xmode, plot_series *s,
                   size_t *dropped, calf_error *err) {
    const events_run *ev = &r->ev[d];
    memset(s, 0, sizeof *s);
    *dropped = 0;
    if (!(s->step = mem_calloc(ev->num_entries + 1, sizeof *s->step, err)) ||
        !(s->x = mem_calloc(ev->num_entries + 1, sizeof *s->x, err)) ||
        !(s->y = mem_calloc(ev->num_entries + 1, sizeof *s->y, err)))
        return CALF_ENOMEM;
    step_value *env = NULL;
    size_t nenv = 0;
    bool map_steps = xmode == CALF_PLOT_X_STEPS && !against_env_steps(tag);
    if (map_steps && values_by_step(ev, "Metrics/EnvironmentSteps", &env, &nenv, err) != CALF_OK)
        return CALF_ENOMEM;
    for (size_t i = 0; i < ev->num_entries; i++) {
        const events_entry *e = &ev->entries[i];
        if (!visible_scalar(e) || strcmp(e->text, tag) != 0) continue;
        double x = (double)e->step, y = e->simple_value;
        if (!isfinite(y)) continue;
        if (xmode == CALF_PLOT_X_SECONDS) {
            x = e->wall_time - r->t0;
        } else if (map_steps) {
            step_value key = {e->step, 0};
            step_value *hit = nenv ? bsearch(&key, env, nenv, sizeof *env, cmp_step_value) : NULL;
            if (!hit) {
                (*dropped)++;
                continue;
            }
            x = hit->value;
        }
        s->step[s->n] = e->step;
        s->x[s->n] = x;
        s->y[s->n] = y;
        s->n++;
    }
    free(env);
    return CALF_OK;
}

static void free_series(plot_series *s) {
    free(s->step);
    free(s->x);
    free(s->y);
}

typedef struct tag_spec {
    int dir;         /* DIR_EVAL, DIR_TRAIN, or -1: each */
    const char *tag;
} tag_spec;

static int parse_spec(const char *t, tag_spec *s, calf_error *err) {
    s->dir = -1;
    s->tag = t;
    for (int d = 0; d < NUM_DIRS; d++) {
        size_t n = strlen(dir_names[d]);
        if (!strncmp(t, dir_names[d], n) && t[n] == ':') {
            s->dir = d;
            s->tag = t + n + 1;
        }
    }
    if (!s->tag[0]) return calf_error_set(err, CALF_EINVAL, "--tag '%s': no tag name", t);
    return CALF_OK;
}

/* Everything a figure points into, freed together. */
typedef struct figure_store {
    plot_panel *panels;
    size_t num_panels;
    plot_series *series; /* (num_series) */
    size_t num_series;
    double **arrays;     /* group outputs */
    size_t num_arrays, arrays_cap;
    char **strings;
    size_t num_strings, strings_cap;
} figure_store;

/* Keeps p (NULL: an allocation that failed) in the list; NULL, with p freed, when
 * either memory ran out. */
static void *store_keep(void ***list, size_t *n, size_t *cap, void *p, calf_error *err) {
    if (!p) return NULL;
    if (*n == *cap) {
        void **a = mem_realloc(*list, (*cap ? 2 * *cap : 16) * sizeof *a, err);
        if (!a) {
            free(p);
            return NULL;
        }
        *cap = *cap ? 2 * *cap : 16;
        *list = a;
    }
    (*list)[(*n)++] = p;
    return p;
}

static double *store_array(figure_store *fs, size_t n, calf_error *err) {
    return store_keep((void ***)&fs->arrays, &fs->num_arrays, &fs->arrays_cap,
                      mem_calloc(n ? n : 1, sizeof(double), err), err);
}

static char *store_string(figure_store *fs, const char *a, const char *b, calf_error *err) {
    size_t n = strlen(a) + strlen(b);
    char *s = mem_alloc(n + 1, err);
    if (s) snprintf(s, n + 1, "%s%s", a, b);
    return store_keep((void ***)&fs->strings, &fs->num_strings, &fs->strings_cap, s, err);
}

static void store_free(figure_store *fs) {
    for (size_t i = 0; fs->panels && i < fs->num_panels; i++) free((void *)fs->panels[i].lines);
    free(fs->panels);
    for (size_t i = 0; i < fs->num_series; i++) free_series(&fs->series[i]);
    free(fs->series);
    for (size_t i = 0; i < fs->num_arrays; i++) free(fs->arrays[i]);
    free(fs->arrays);
    for (size_t i = 0; i < fs->num_strings; i++) free(fs->strings[i]);
    free(fs->strings);
}

/* Groups: runs with the same seed key, in order of first appearance; without --group
 * every run is its own. group_of[r] is run r's group. Returns the number of groups. */
static size_t make_groups(const plot_run *runs, size_t n, bool group, size_t *group_of,
                          size_t *first_of, size_t *size_of) {
    size_t g = 0;
    for (size_t r = 0; r < n; r++) {
        size_t key = plot_seed_key_len(runs[r].name), found = g;
        for (size_t j = 0; group && j < g && found == g; j++) {
            const char *other = runs[first_of[j]].name;
            if (plot_seed_key_len(other) == key && !strncmp(other, runs[r].name, key)) found = j;
        }
        if (found == g) {
            first_of[g] = r;
            size_of[g] = 0;
            g++;
        }
        group_of[r] = found;
        size_of[found]++;
    }
    return g;
}

/* One panel: every group's line that has points there. p->lines is store_free's to
 * free, also when memory runs out on the way. */
static int build_panel(figure_store *fs, plot_series *ser, size_t nruns, const size_t *group_of,
                       size_t ngroups, const size_t *size_of, char **glabel, plot_panel *p,
                       calf_error *err) {
    plot_line *lines = mem_calloc(ngroups + 1, sizeof *lines, err);
    if (!lines) return CALF_ENOMEM;
    p->lines = lines;
    p->num_lines = 0;
    size_t nl = 0;
    plot_points *members = mem_calloc(nruns + 1, sizeof *members, err);
    int rc = members ? CALF_OK : CALF_ENOMEM;
    for (size_t g = 0; g < ngroups && rc == CALF_OK; g++) {
        size_t nm = 0, last = 0;
        for (size_t r = 0; r < nruns; r++)
            if (group_of[r] == g && ser[r].n > 0) {
                members[nm++] = (plot_points){ser[r].step, ser[r].x, ser[r].y, ser[r].n};
                last = r;
            }
        if (nm == 0) continue;
        plot_line *l = &lines[nl++];
        l->label = glabel[g];
        l->color = (int)g;
        if (size_of[g] == 1) {
            l->x = ser[last].x;
            l->y = ser[last].y;
            l->n = ser[last].n;
            continue;
        }
        size_t cap = members[0].n;
        int64_t *steps = mem_calloc(cap + 1, sizeof *steps, err);
        double *x = steps ? store_array(fs, cap, err) : NULL;
        double *mean = x ? store_array(fs, cap, err) : NULL;
        double *lo = mean ? store_array(fs, cap, err) : NULL;
        double *hi = lo ? store_array(fs, cap, err) : NULL;
        rc = hi ? plot_group(members, nm, steps, x, mean, lo, hi, &l->n, err) : CALF_ENOMEM;
        free(steps);
        l->x = x;
        l->y = mean;
        l->lo = lo;
        l->hi = hi;
    }
    free(members);
    p->num_lines = nl;
    return rc;
}

static const char *x_label(int xmode) {
    switch (xmode) {
    case CALF_PLOT_X_ITERATIONS: return "iterations";
    case CALF_PLOT_X_SECONDS: return "seconds since the run's first record";
    default: return "environment steps";
    }
}

static int plot_runs(plot_run *runs, size_t nruns, const calf_plot_options *opt, FILE *out,
                     calf_error *err) {
    static const char *const default_tags[] = {"Metrics/AverageReturn"};
    const char *const *tags = opt->num_tags ? opt->tags : default_tags;
    size_t ntags = opt->num_tags ? opt->num_tags : 1;
    figure_store fs = {0};
    plot_legend_entry *legend = NULL;
    size_t *group_of = mem_calloc(nruns, sizeof *group_of, err);
    size_t *first_of = group_of ? mem_calloc(nruns, sizeof *first_of, err) : NULL;
    size_t *size_of = first_of ? mem_calloc(nruns, sizeof *size_of, err) : NULL;
    char **glabel = size_of ? mem_calloc(nruns, sizeof *glabel, err) : NULL;
    size_t ngroups = 0;
    int rc = glabel ? CALF_OK : CALF_ENOMEM;
    if (rc == CALF_OK) {
        ngroups = make_groups(runs, nruns, opt->group, group_of, first_of, size_of);
        legend = mem_calloc(ngroups, sizeof *legend, err);
        if (!legend) rc = CALF_ENOMEM;
    }
    for (size_t g = 0; g < ngroups && rc == CALF_OK; g++) {
        const char *name = runs[first_of[g]].name;
        if (size_of[g] > 1) {
            char tail[64];
            snprintf(tail, sizeof tail, " (%zu runs: mean, min to max)", size_of[g]);
            char *key = store_string(&fs, "", name, err);
            if (key) key[plot_seed_key_len(name)] = '\0';
            glabel[g] = key ? store_string(&fs, key, tail, err) : NULL;
            if (!glabel[g]) rc = CALF_ENOMEM;
        } else {
            glabel[g] = (char *)name;
        }
        legend[g] = (plot_legend_entry){glabel[g], (int)g, size_of[g] > 1};
    }
    if (rc == CALF_OK && !(fs.panels = mem_calloc(ntags * NUM_DIRS, sizeof *fs.panels, err)))
        rc = CALF_ENOMEM;
    for (size_t t = 0; t < ntags && rc == CALF_OK; t++) {
        tag_spec spec;
        if ((rc = parse_spec(tags[t], &spec, err)) != CALF_OK) break;
        if (opt->x == CALF_PLOT_X_ITERATIONS && against_env_steps(spec.tag)) {
            rc = calf_error_set(err, CALF_EINVAL,
                                "%s is written against environment steps, not iterations: "
                                "use --x steps, or the Metrics/ tag", spec.tag);
            break;
        }
        size_t panels_before = fs.num_panels, values = 0, dropped = 0;
        for (int d = 0; d < NUM_DIRS && rc == CALF_OK; d++) {
            if (spec.dir >= 0 && spec.dir != d) continue;
            /* kept at once (the panel points into them), so store_free frees them */
            plot_series *all = mem_realloc(fs.series, (fs.num_series + nruns) * sizeof *all, err);
            if (!all) {
                rc = CALF_ENOMEM;
                break;
            }
            fs.series = all;
            plot_series *ser = fs.series + fs.num_series;
            memset(ser, 0, nruns * sizeof *ser);
            fs.num_series += nruns;
            size_t points = 0;
            for (size_t r = 0; r < nruns && rc == CALF_OK; r++) {
                size_t drop;
                if ((rc = extract(&runs[r], d, spec.tag, opt->x, &ser[r], &drop, err)) != CALF_OK)
                    break;
                points += ser[r].n;
                values += ser[r].n + drop;
                dropped += drop;
                if (drop && opt->warn)
                    fprintf(opt->warn,
                            "calf: warning: %s/%s: %zu values of %s have no "
                            "Metrics/EnvironmentSteps at their step; left out\n",
                            runs[r].root, dir_names[d], drop, spec.tag);
            }
            if (rc == CALF_OK && points > 0) {
                plot_panel *p = &fs.panels[fs.num_panels++];
                const char *head = store_string(&fs, dir_names[d], ":", err);
                p->title = head ? store_string(&fs, head, spec.tag, err) : NULL;
                const char *slash = strrchr(spec.tag, '/');
                p->y_label = slash && slash[1] ? slash + 1 : spec.tag;
                rc = p->title ? build_panel(&fs, ser, nruns, group_of, ngroups, size_of, glabel, p,
                                            err)
                              : CALF_ENOMEM;
            }
        }
        if (rc == CALF_OK && fs.num_panels == panels_before) {
            if (values > 0 && values == dropped)
                rc = calf_error_set(err, CALF_EINVAL,
                                    "%s: no value has a Metrics/EnvironmentSteps at its step "
                                    "(use --x iterations)", spec.tag);
            else
                rc = calf_error_set(err, CALF_EINVAL, "no run has the scalar tag '%s' in %s",
                                    spec.tag,
                                    spec.dir >= 0 ? (spec.dir == DIR_EVAL ? "eval/" : "train/")
                                                  : "eval/ or train/");
        }
    }
    if (rc == CALF_OK) {
        plot_figure fig = {x_label(opt->x), opt->smooth, fs.panels, fs.num_panels, legend, ngroups};
        rc = plot_write_svg(&fig, out, err);
    }
    store_free(&fs);
    free(legend);
    free(glabel);
    free(group_of);
    free(first_of);
    free(size_of);
    return rc;
}

int calf_plot(const char *const *roots, size_t num_roots, const calf_plot_options *opt,
              FILE *out, calf_error *err) {
    CALF_ASSERT(roots != NULL && opt != NULL && out != NULL);
    if (num_roots == 0) return calf_error_set(err, CALF_EINVAL, "no ROOT given");
    if (!(opt->smooth >= 0 && opt->smooth < 1))
        return calf_error_set(err, CALF_EINVAL, "--smooth %g: the weight must be in [0, 1)",
                              opt->smooth);
    if (opt->x != CALF_PLOT_X_STEPS && opt->x != CALF_PLOT_X_ITERATIONS &&
        opt->x != CALF_PLOT_X_SECONDS)
        return calf_error_set(err, CALF_EINVAL, "unknown x axis %d", opt->x);
    plot_run *runs = mem_calloc(num_roots, sizeof *runs, err);
    if (!runs) return CALF_ENOMEM;
    int rc = CALF_OK;
    size_t nread = 0;
    for (; nread < num_roots && rc == CALF_OK; nread++)
        rc = read_run(&runs[nread], roots[nread], opt->warn, err);
    if (rc == CALF_OK) rc = plot_runs(runs, num_roots, opt, out, err);
    for (size_t r = 0; r < nread; r++) free_run(&runs[r]);
    free(runs);
    return rc;
}
