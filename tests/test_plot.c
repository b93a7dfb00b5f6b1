/* test_plot.c: calf plot's parts against their definitions: smoothing against
 * TensorBoard's formula written as a closed sum, 1-2-5 ticks and their exact labels,
 * seed keys, grouping, the SVG's structure and coordinates (escaping, byte-stability, a
 * full disk), and calf_plot on events written here: restart markers, x mappings, bad
 * input. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "calf/plot.h"
#include "calf/summary.h"
#include "tools/plot.h"
#include "test_files.h"
#include "test_util.h"

/* ------------------------------------------------------------------ smoothing */

/* TensorBoard's debiased EMA as the closed sum it equals: after k finite values
 * v_1..v_k, sum_j (1 - w) w^(k-j) v_j / (1 - w^k). */
static double smooth_closed(const double *y, size_t upto, double w) {
    double sum = 0, k = 0;
    for (size_t i = 0; i <= upto; i++) k += isfinite(y[i]);
    double j = 0;
    for (size_t i = 0; i <= upto; i++) {
        if (!isfinite(y[i])) continue;
        j += 1;
        sum += (1 - w) * pow(w, k - j) * y[i];
    }
    return sum / (1 - pow(w, k));
}

static void test_smooth(void) {
    const double y[] = {1, 3, 2, NAN, 5, -4, INFINITY, 10, 0.5};
    size_t n = sizeof y / sizeof y[0];
    const double ws[] = {0, 0.3, 0.6, 0.9, 0.999};
    for (size_t t = 0; t < sizeof ws / sizeof ws[0]; t++) {
        double out[16];
        plot_smooth(y, n, ws[t], out);
        for (size_t i = 0; i < n; i++) {
            if (!isfinite(y[i])) {
                /* passes through, unchanged */
                CHECK(isnan(y[i]) ? isnan(out[i]) : out[i] == y[i]);
                continue;
            }
            CHECK_NEAR(out[i], smooth_closed(y, i, ws[t]), 1e-9 * (1 + fabs(out[i])));
        }
        /* the first finite value is itself, whatever the weight (the debiasing) */
        CHECK_NEAR(out[0], 1.0, 1e-15);
    }
    /* weight 0: the raw values, bit for bit */
    double out[16];
    plot_smooth(y, n, 0, out);
    for (size_t i = 0; i < n; i++)
        if (isfinite(y[i])) CHECK(out[i] == y[i]);
    /* TensorBoard's own example: every value c gives c (EMA = c (1 - s^t), debiased) */
    const double c[] = {7, 7, 7, 7};
    plot_smooth(c, 4, 0.6, out);
    for (int i = 0; i < 4; i++) CHECK(out[i] == 7);
    /* w = 0.6 by hand: 1; (0.6*0.4 + 0.4*3)/(1-0.36) = 1.44/0.64 = 2.25 */
    const double two[] = {1, 3};
    plot_smooth(two, 2, 0.6, out);
    CHECK_NEAR(out[1], 2.25, 1e-12);
    /* in place */
    double inplace[] = {1, 3};
    plot_smooth(inplace, 2, 0.6, inplace);
    CHECK_NEAR(inplace[1], 2.25, 1e-12);
    plot_smooth(NULL, 0, 0.6, NULL);
}

/* ------------------------------------------------------------------ ticks */

static void check_axis(double lo, double hi, int max_ticks, bool extend, int m, int e,
                       const char *labels) {
    plot_axis a;
    plot_axis_nice(lo, hi, max_ticks, extend, &a);
    CHECK_INT_EQ(a.m, m);
    CHECK_INT_EQ(a.e, e);
    CHECK(a.count >= 1 && a.count <= max_ticks);
    char all[512] = "", buf[64];
    for (int i = 0; i < a.count; i++) {
        const char *l = plot_axis_label(&a, i, buf, sizeof buf);
        strncat(all, i ? " " : "", sizeof all - strlen(all) - 1);
        strncat(all, l, sizeof all - strlen(all) - 1);
        /* the label reads back as the tick */
        char *end;
        double v = strtod(l, &end);
        double unit = *end == 'k' ? 1e3 : *end == 'M' ? 1e6 : *end == 'G' ? 1e9 : 1;
        CHECK_NEAR(v * unit, plot_axis_tick(&a, i), 1e-9 * (1 + fabs(v * unit)));
        /* ticks inside the axis */
        CHECK(plot_axis_tick(&a, i) >= a.lo - 1e-9 * fabs(a.lo) - 1e-12);
        CHECK(plot_axis_tick(&a, i) <= a.hi + 1e-9 * fabs(a.hi) + 1e-12);
    }
    CHECK_STR_EQ(all, labels);
    if (extend) {
        CHECK(a.lo <= lo && a.hi >= hi);
        CHECK(a.lo == plot_axis_tick(&a, 0) && a.hi == plot_axis_tick(&a, a.count - 1));
    } else if (lo < hi) {
        CHECK(a.lo == lo && a.hi == hi);
    }
    /* the step is the smallest 1-2-5 step that fits */
    static const int ms[3] = {1, 2, 5};
    int j = m == 1 ? 2 : m == 2 ? 0 : 1;
    int pe = m == 1 ? e - 1 : e;
    plot_axis smaller = a;
    smaller.m = ms[j];
    smaller.e = pe;
    double step = smaller.m * pow(10, smaller.e);
    if (lo < hi) {
        double k0 = extend ? floor(lo / step + 1e-9) : ceil(lo / step - 1e-9);
        double k1 = extend ? ceil(hi / step - 1e-9) : floor(hi / step + 1e-9);
        CHECK(k1 - k0 + 1 > max_ticks);
    }
}

static void test_ticks(void) {
    /* ppo_cartpole's 150 iterations of 2048 steps, from 0 */
    check_axis(0, 307200, 7, false, 5, 4, "0 50k 100k 150k 200k 250k 300k");
    /* a Pendulum return range, extended to the ticks around it */
    check_axis(-1587.3, -120.2, 9, true, 2, 2,
               "-1600 -1400 -1200 -1000 -800 -600 -400 -200 0");
    check_axis(0, 1, 9, true, 2, -1, "0 0.2 0.4 0.6 0.8 1");
    check_axis(0.31, 0.39, 9, true, 1, -2, "0.31 0.32 0.33 0.34 0.35 0.36 0.37 0.38 0.39");
    check_axis(0, 0.3, 4, false, 1, -1, "0 0.1 0.2 0.3");
    check_axis(0, 2.5e6, 7, false, 5, 5, "0 0.5M 1M 1.5M 2M 2.5M");
    check_axis(0, 9000, 7, false, 2, 3, "0 2000 4000 6000 8000");
    check_axis(0, 12000, 7, false, 2, 3, "0 2k 4k 6k 8k 10k 12k");
    check_axis(9.5, 500, 9, true, 1, 2, "0 100 200 300 400 500");
    check_axis(-0.0042, 0.0013, 9, true, 1, -3, "-0.005 -0.004 -0.003 -0.002 -0.001 0 0.001 0.002");
    /* empty ranges widen by 10% (or 1 around 0) */
    check_axis(500, 500, 9, true, 2, 1, "440 460 480 500 520 540 560");
    check_axis(0, 0, 9, true, 5, -1, "-1 -0.5 0 0.5 1");
    check_axis(-3, -3, 9, true, 1, -1, "-3.3 -3.2 -3.1 -3 -2.9 -2.8 -2.7");
    /* no tick label is ever "-0" */
    plot_axis a;
    plot_axis_nice(-1, 1, 5, true, &a);
    char buf[64];
    for (int i = 0; i < a.count; i++) CHECK(strcmp(plot_axis_label(&a, i, buf, sizeof buf), "-0") != 0);
    /* huge and tiny magnitudes stay exact integers times a power of ten */
    plot_axis_nice(0, 3e15, 7, false, &a);
    CHECK_STR_EQ(plot_axis_label(&a, 1, buf, sizeof buf), "500T");
    plot_axis_nice(1e9, 1e9 + 1e-3, 7, true, &a); /* far narrower than its magnitude */
    CHECK(a.count >= 2 && a.count <= 7 && a.lo <= 1e9 && a.hi >= 1e9 + 1e-3);
}

/* ------------------------------------------------------------------ grouping */

static void test_seed_key(void) {
    static const struct { const char *name; size_t key; } cases[] = {
        {"ppo-seed1", 3}, {"ppo_seed=2", 3}, {"ppo.3", 3}, {"ppo4", 3}, {"ppo-SEED12", 3},
        {"ppo_seed_7", 3}, {"ppo=5", 3}, {"ppo", 3}, {"seed3", 5}, {"12", 2}, {"-1", 2},
        {"a1", 1}, {"run-2024-01", 8}, {"x.seed.9", 1}, {"ppo-seed", 8}, {"", 0},
        {"cartpole_v1", 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t got = plot_seed_key_len(cases[i].name);
        if (got != cases[i].key)
            fprintf(stderr, "seed key of '%s': %zu, want %zu\n", cases[i].name, got, cases[i].key);
        CHECK_INT_EQ(got, cases[i].key);
    }
}

static void test_group(void) {
    /* run a: steps 1..4; b: 2..5 in a shuffled order with step 3 twice (its last, 30,
     * counts); c: 1..5 */
    const int64_t sa[] = {1, 2, 3, 4}, sb[] = {5, 3, 2, 3, 4}, sc[] = {1, 2, 3, 4, 5};
    const double xa[] = {10, 20, 30, 40}, xb[] = {50, 31, 20, 32, 40}, xc[] = {10, 20, 30, 40, 50};
    const double ya[] = {1, 2, 3, 4}, yb[] = {0, 99, 6, 30, 8}, yc[] = {0, -1, 0, 1, 2};
    plot_points runs[3] = {{sa, xa, ya, 4}, {sb, xb, yb, 5}, {sc, xc, yc, 5}};
    int64_t step[8];
    double x[8], mean[8], mn[8], mx[8];
    size_t n = 0;
    calf_error err;
    CHECK_INT_EQ(plot_group(runs, 3, step, x, mean, mn, mx, &n, &err), CALF_OK);
    CHECK_INT_EQ(n, 3); /* steps 2, 3, 4: the ones all three have */
    const int64_t want_step[] = {2, 3, 4};
    const double want_x[] = {20, (30.0 + 32 + 30) / 3, 40};
    const double want_mean[] = {(2.0 + 6 - 1) / 3, (3.0 + 30 + 0) / 3, (4.0 + 8 + 1) / 3};
    const double want_min[] = {-1, 0, 1}, want_max[] = {6, 30, 8};
    for (size_t i = 0; i < n && i < 3; i++) {
        CHECK_INT_EQ(step[i], want_step[i]);
        CHECK(x[i] == want_x[i]);
        CHECK(mean[i] == want_mean[i]);
        CHECK(mn[i] == want_min[i]);
        CHECK(mx[i] == want_max[i]);
    }
    /* one run: its own points by step, min = max = mean */
    CHECK_INT_EQ(plot_group(runs, 1, step, x, mean, mn, mx, &n, &err), CALF_OK);
    CHECK_INT_EQ(n, 4);
    CHECK(mean[3] == 4 && mn[3] == 4 && mx[3] == 4 && x[3] == 40);
    /* no step in common */
    const int64_t sd[] = {7};
    plot_points two[2] = {{sa, xa, ya, 4}, {sd, xa, ya, 1}};
    CHECK_INT_EQ(plot_group(two, 2, step, x, mean, mn, mx, &n, &err), CALF_OK);
    CHECK_INT_EQ(n, 0);
    /* the EMA is linear: the smoothed mean is the mean of the smoothed runs */
    const double r1[] = {1, 5, 2, 8}, r2[] = {3, -1, 4, 0};
    double m[4], s1[4], s2[4], sm[4];
    for (int i = 0; i < 4; i++) m[i] = (r1[i] + r2[i]) / 2;
    plot_smooth(r1, 4, 0.6, s1);
    plot_smooth(r2, 4, 0.6, s2);
    plot_smooth(m, 4, 0.6, sm);
    for (int i = 0; i < 4; i++) CHECK_NEAR(sm[i], (s1[i] + s2[i]) / 2, 1e-12);
}

/* ------------------------------------------------------------------ SVG */

/* The text of a file, NUL-terminated; the caller frees it. */
static char *slurp(FILE *f) {
    if (fseek(f, 0, SEEK_END) != 0) return NULL;
    long n = ftell(f);
    rewind(f);
    char *s = calloc((size_t)n + 1, 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        return NULL;
    }
    return s;
}

static size_t count_of(const char *s, const char *what) {
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, what)) != NULL; p += strlen(what)) n++;
    return n;
}

/* The points attribute of the polyline of class cls in the run titled title, within
 * the panel titled panel; NULL when there is none. Owned by the caller. */
static char *points_of(const char *svg, const char *panel, const char *title, const char *cls) {
    char key[256];
    snprintf(key, sizeof key, "<g class=\"panel\"><title>%s</title>", panel);
    const char *p = strstr(svg, key);
    if (!p) return NULL;
    const char *end = strstr(p + 1, "<g class=\"panel\">");
    snprintf(key, sizeof key, "<g class=\"run\"><title>%s</title>", title);
    p = strstr(p, key);
    if (!p || (end && p > end)) return NULL;
    snprintf(key, sizeof key, "<polyline class=\"%s\"", cls);
    p = strstr(p, key);
    if (!p) return NULL;
    p = strstr(p, "points=\"");
    if (!p) return NULL;
    p += strlen("points=\"");
    const char *q = strchr(p, '"');
    char *out = calloc((size_t)(q - p) + 1, 1);
    memcpy(out, p, (size_t)(q - p));
    return out;
}

/* The panel's mapping from its <desc>. */
static int desc_of(const char *svg, const char *panel, double v[8]) {
    char key[256];
    snprintf(key, sizeof key, "<g class=\"panel\"><title>%s</title>\n<desc>", panel);
    const char *p = strstr(svg, key);
    if (!p) return -1;
    p += strlen(key);
    return sscanf(p, "x [%lf, %lf] to [%lf, %lf]; y [%lf, %lf] to [%lf, %lf]", &v[0], &v[1],
                  &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 8 ? 0 : -1;
}

/* Check "px,py px,py ..." against (x, y) mapped by the desc's numbers. */
static void check_points(const char *pts, const double *x, const double *y, size_t n,
                         const double d[8]) {
    CHECK(pts != NULL);
    if (!pts) return;
    const char *p = pts;
    size_t i = 0;
    for (; *p && i < n; i++) {
        char *end;
        double px = strtod(p, &end);
        CHECK(*end == ',');
        double py = strtod(end + 1, &end);
        double wx = d[2] + (x[i] - d[0]) / (d[1] - d[0]) * (d[3] - d[2]);
        double wy = d[6] + (y[i] - d[4]) / (d[5] - d[4]) * (d[7] - d[6]);
        CHECK_NEAR(px, wx, 0.005 + 1e-9);
        CHECK_NEAR(py, wy, 0.005 + 1e-9);
        p = *end == ' ' ? end + 1 : end;
    }
    CHECK_INT_EQ(i, n);
    CHECK(*p == '\0');
}

static void test_svg(void) {
    const double x1[] = {0, 100, 200, 300}, y1[] = {10, 30, 20, 40};
    const double x2[] = {50, 150}, y2[] = {-5, 5}, lo2[] = {-6, 4}, hi2[] = {-4, 9};
    plot_line lines[2] = {{"a<b & \"c\"", 0, x1, y1, NULL, NULL, 4},
                          {"bad\xff utf8 \xc3\xa9\x01", 11, x2, y2, lo2, hi2, 2}};
    plot_panel panels[3] = {{"train:Metrics/AverageReturn", "AverageReturn", lines, 2},
                            {"eval:X", "X", lines, 1},
                            {"empty", "nothing", NULL, 0}};
    plot_legend_entry legend[2] = {{"a<b & \"c\"", 0, false}, {"bad\xff utf8 \xc3\xa9\x01", 11, true}};
    plot_figure fig = {"environment steps", 0.6, panels, 3, legend, 2};
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f) return;
    calf_error err;
    calf_error_clear(&err);
    CHECK_INT_EQ(plot_write_svg(&fig, f, &err), CALF_OK);
    char *svg = slurp(f);
    fclose(f);
    CHECK(svg != NULL);
    if (!svg) return;
    CHECK(!strncmp(svg, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n<svg "
                        "xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" ", 106));
    CHECK(strlen(svg) > 7 && !strcmp(svg + strlen(svg) - 7, "</svg>\n"));
    CHECK_INT_EQ(count_of(svg, "<g class=\"panel\">"), 3);
    CHECK_INT_EQ(count_of(svg, "<g class=\"run\">"), 3);
    CHECK_INT_EQ(count_of(svg, "<polygon class=\"band\""), 1);
    CHECK_INT_EQ(count_of(svg, "<g class=\"entry\">"), 2);
    /* two columns: 2 * 480 + 2 * 10 wide */
    CHECK(strstr(svg, "width=\"980\"") != NULL);
    /* escaping: markup characters as entities, bytes that are not UTF-8 and control
     * characters as '?', UTF-8 kept */
    CHECK(strstr(svg, "<title>a&lt;b &amp; &quot;c&quot;</title>") != NULL);
    CHECK(strstr(svg, "<title>bad? utf8 \xc3\xa9?</title>") != NULL);
    CHECK(strstr(svg, "\xff") == NULL);
    CHECK(strstr(svg, "-0.00") == NULL);
    /* colour 11 wraps to the palette's second */
    CHECK(strstr(svg, "<polyline class=\"raw\" fill=\"none\" stroke=\"#ff7f0e\"") != NULL);
    /* coordinates: the raw points and the smoothed ones, mapped as the desc says */
    double d[8];
    CHECK_INT_EQ(desc_of(svg, "train:Metrics/AverageReturn", d), 0);
    /* x from 0 to the data's end, y extended to ticks around every raw value and band */
    CHECK(d[0] == 0 && d[1] == 300 && d[4] == -10 && d[5] == 40);
    CHECK(d[2] == 10 + PLOT_MARGIN_L && d[3] == 10 + PLOT_PANEL_W - PLOT_MARGIN_R);
    char *raw = points_of(svg, "train:Metrics/AverageReturn", "a&lt;b &amp; &quot;c&quot;", "raw");
    check_points(raw, x1, y1, 4, d);
    double sm[4];
    plot_smooth(y1, 4, 0.6, sm);
    char *smooth = points_of(svg, "train:Metrics/AverageReturn", "a&lt;b &amp; &quot;c&quot;", "smoothed");
    check_points(smooth, x1, sm, 4, d);
    free(raw);
    free(smooth);
    /* the band: smoothed lo forwards, smoothed hi backwards */
    const char *band = strstr(svg, "<polygon class=\"band\"");
    CHECK(band != NULL);
    if (band) {
        double slo[2], shi[2];
        plot_smooth(lo2, 2, 0.6, slo);
        plot_smooth(hi2, 2, 0.6, shi);
        const double bx[4] = {50, 150, 150, 50}, by[4] = {slo[0], slo[1], shi[1], shi[0]};
        const char *p = strstr(band, "points=\"") + 8;
        char *pts = calloc(strlen(p) + 1, 1);
        memcpy(pts, p, (size_t)(strchr(p, '"') - p));
        check_points(pts, bx, by, 4, d);
        free(pts);
    }
    /* few points: dots on the smoothed line */
    CHECK_INT_EQ(count_of(svg, "<circle "), 4 + 2 + 4);
    /* the same figure is the same bytes */
    f = tmpfile();
    CHECK(f != NULL);
    if (f) {
        CHECK_INT_EQ(plot_write_svg(&fig, f, &err), CALF_OK);
        char *again = slurp(f);
        fclose(f);
        CHECK(again && !strcmp(again, svg));
        free(again);
    }
    free(svg);
    /* a full disk is an error */
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        calf_error_clear(&err);
        CHECK_INT_EQ(plot_write_svg(&fig, full, &err), CALF_EIO);
        CHECK_STR_EQ(err.msg, "writing the SVG: No space left on device");
        fclose(full);
    } else {
        printf("skipped: /dev/full cannot be opened here\n");
    }
}

/* ------------------------------------------------------------------ calf_plot */

static char tmp_root[256];

static void write_scalars(const char *dir, int64_t marker, int64_t from, int64_t to, double base,
                          bool env_steps) {
    calf_error err;
    calf_error_clear(&err);
    calf_summary_writer *w = calf_summary_writer_open(dir, 0, &err);
    CHECK(w != NULL);
    if (!w) return;
    CHECK_INT_EQ(calf_summary_writer_add_session_start(w, marker, 1000.0 + (double)from), CALF_OK);
    for (int64_t s = from; s <= to; s++) {
        double wall = 1000.0 + 2.0 * (double)s;
        calf_summary_writer_add_scalar(w, "Metrics/AverageReturn", s, wall, base + (double)s);
        if (env_steps)
            calf_summary_writer_add_scalar(w, "Metrics/EnvironmentSteps", s, wall, 100.0 * (double)s);
        calf_summary_writer_add_scalar(w, "Metrics_vs_EnvironmentSteps/AverageReturn", 100 * s,
                                       wall, base + (double)s);
    }
    CHECK_INT_EQ(calf_summary_writer_close(w, &err), CALF_OK);
}

/* calf_plot into a string; the status, and err's message in msg. */
static int plot_string(const char *const *roots, size_t n, const calf_plot_options *o,
                       char **svg, char *msg, size_t cap) {
    FILE *f = tmpfile();
    CHECK(f != NULL);
    *svg = NULL;
    if (!f) return -1;
    calf_error err;
    calf_error_clear(&err);
    int rc = calf_plot(roots, n, o, f, &err);
    *svg = slurp(f);
    fclose(f);
    snprintf(msg, cap, "%s", err.msg);
    return rc;
}

static void test_calf_plot(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmp_root, sizeof tmp_root, "%s/calf_test_plot_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmp_root)) {
        CHECK(!"mkdtemp");
        return;
    }
    char a[512], b[512], dir[700], msg[1024];
    snprintf(a, sizeof a, "%s/run-seed1", tmp_root);
    snprintf(b, sizeof b, "%s/run-seed2", tmp_root);
    /* run a: a launch to step 4 that died after its checkpoint at 2, then one that
     * resumed at 3 with other values: TensorBoard shows 1, 2 of the first, 3..5 of the
     * second (the files are named by the second they were opened in, then pid and a
     * count, so the second launch's file sorts after the first's) */
    snprintf(dir, sizeof dir, "%s/train", a);
    write_scalars(dir, 1, 1, 4, 0, true);
    write_scalars(dir, 3, 3, 5, 100, true);
    snprintf(dir, sizeof dir, "%s/train", b);
    write_scalars(dir, 1, 1, 5, 10, true);
    const char *roots[2] = {a, b};
    calf_plot_options o = {NULL, 0, 0.6, CALF_PLOT_X_STEPS, false, NULL};
    char *svg;
    CHECK_INT_EQ(plot_string(roots, 2, &o, &svg, msg, sizeof msg), CALF_OK);
    double d[8];
    if (svg) {
        /* no eval/ anywhere: one panel */
        CHECK_INT_EQ(count_of(svg, "<g class=\"panel\">"), 1);
        CHECK(strstr(svg, "eval:") == NULL);
        CHECK_INT_EQ(desc_of(svg, "train:Metrics/AverageReturn", d), 0);
        const double xa[] = {100, 200, 300, 400, 500}, ya[] = {1, 2, 103, 104, 105};
        char *pts = points_of(svg, "train:Metrics/AverageReturn", "run-seed1", "raw");
        check_points(pts, xa, ya, 5, d);
        free(pts);
        const double yb[] = {11, 12, 13, 14, 15};
        pts = points_of(svg, "train:Metrics/AverageReturn", "run-seed2", "raw");
        check_points(pts, xa, yb, 5, d);
        free(pts);
        CHECK(strstr(svg, ">run-seed1</text>") && strstr(svg, ">run-seed2</text>"));
    }
    free(svg);
    /* the _vs_EnvironmentSteps tag: TensorBoard's restart marker drops by step whatever
     * the tag, so the resumed launch's marker at 3 drops the first launch's values at
     * env steps 100..400 too: only the second launch's remain */
    const char *vs_tag[1] = {"train:Metrics_vs_EnvironmentSteps/AverageReturn"};
    o.tags = vs_tag;
    o.num_tags = 1;
    CHECK_INT_EQ(plot_string(roots, 1, &o, &svg, msg, sizeof msg), CALF_OK);
    if (svg) {
        CHECK_INT_EQ(desc_of(svg, "train:Metrics_vs_EnvironmentSteps/AverageReturn", d), 0);
        const double x[] = {300, 400, 500}, y[] = {103, 104, 105};
        char *pts = points_of(svg, "train:Metrics_vs_EnvironmentSteps/AverageReturn", "run-seed1", "raw");
        check_points(pts, x, y, 3, d);
        free(pts);
    }
    free(svg);
    /* --x iterations: the step; --x seconds: wall time less the run's first record's */
    o.tags = NULL;
    o.num_tags = 0;
    o.x = CALF_PLOT_X_ITERATIONS;
    CHECK_INT_EQ(plot_string(roots, 1, &o, &svg, msg, sizeof msg), CALF_OK);
    if (svg) {
        CHECK_INT_EQ(desc_of(svg, "train:Metrics/AverageReturn", d), 0);
        const double x[] = {1, 2, 3, 4, 5}, y[] = {1, 2, 103, 104, 105};
        char *pts = points_of(svg, "train:Metrics/AverageReturn", "run-seed1", "raw");
        check_points(pts, x, y, 5, d);
        free(pts);
        CHECK(strstr(svg, ">iterations</text>") != NULL);
    }
    free(svg);
    o.x = CALF_PLOT_X_SECONDS;
    CHECK_INT_EQ(plot_string(roots, 1, &o, &svg, msg, sizeof msg), CALF_OK);
    if (svg) {
        /* the earliest record is the first launch's marker at 1001; the values were
         * written at 1000 + 2 step: 1002, 1004 by the first launch, 1006..1010 by the
         * second */
        CHECK_INT_EQ(desc_of(svg, "train:Metrics/AverageReturn", d), 0);
        const double x[] = {1, 3, 5, 7, 9}, y[] = {1, 2, 103, 104, 105};
        char *pts = points_of(svg, "train:Metrics/AverageReturn", "run-seed1", "raw");
        check_points(pts, x, y, 5, d);
        free(pts);
        CHECK(strstr(svg, ">seconds since the run&apos;s first record</text>") != NULL);
    }
    free(svg);
    /* --group: one line, the mean of the two runs, over their min-max band */
    o.x = CALF_PLOT_X_STEPS;
    o.group = true;
    CHECK_INT_EQ(plot_string(roots, 2, &o, &svg, msg, sizeof msg), CALF_OK);
    if (svg) {
        CHECK_INT_EQ(count_of(svg, "<g class=\"run\">"), 1);
        CHECK_INT_EQ(count_of(svg, "<polygon class=\"band\""), 1);
        const char *label = "run (2 runs: mean, min to max)";
        CHECK_INT_EQ(desc_of(svg, "train:Metrics/AverageReturn", d), 0);
        const double x[] = {100, 200, 300, 400, 500}, y[] = {6, 7, 58, 59, 60};
        char *pts = points_of(svg, "train:Metrics/AverageReturn", label, "raw");
        check_points(pts, x, y, 5, d);
        free(pts);
    }
    free(svg);
    o.group = false;
    /* errors: nothing written, one line */
    const char *unknown[1] = {"Nope/Tag"};
    o.tags = unknown;
    o.num_tags = 1;
    CHECK_INT_EQ(plot_string(roots, 2, &o, &svg, msg, sizeof msg), CALF_EINVAL);
    CHECK(strstr(msg, "no run has the scalar tag 'Nope/Tag' in eval/ or train/") != NULL);
    CHECK(svg && svg[0] == '\0');
    free(svg);
    const char *eval_only[1] = {"eval:Metrics/AverageReturn"};
    o.tags = eval_only;
    CHECK_INT_EQ(plot_string(roots, 2, &o, &svg, msg, sizeof msg), CALF_EINVAL);
    CHECK(strstr(msg, "in eval/") != NULL);
    free(svg);
    const char *empty[1] = {"train:"};
    o.tags = empty;
    CHECK_INT_EQ(plot_string(roots, 2, &o, &svg, msg, sizeof msg), CALF_EINVAL);
    CHECK(strstr(msg, "no tag name") != NULL);
    free(svg);
    o.tags = vs_tag;
    o.x = CALF_PLOT_X_ITERATIONS;
    CHECK_INT_EQ(plot_string(roots, 2, &o, &svg, msg, sizeof msg), CALF_EINVAL);
    CHECK(strstr(msg, "against environment steps") != NULL);
    free(svg);
    o.tags = NULL;
    o.num_tags = 0;
    o.x = CALF_PLOT_X_STEPS;
    o.smooth = 1;
    CHECK_INT_EQ(plot_string(roots, 2, &o, &svg, msg, sizeof msg), CALF_EINVAL);
    CHECK(strstr(msg, "[0, 1)") != NULL);
    free(svg);
    o.smooth = 0.6;
    const char *missing[1] = {tmp_root}; /* a directory with no train/ or eval/ */
    CHECK_INT_EQ(plot_string(missing, 1, &o, &svg, msg, sizeof msg), CALF_EINVAL);
    CHECK(strstr(msg, "no events file in") != NULL);
    free(svg);
    char nothere[600];
    snprintf(nothere, sizeof nothere, "%s/nothere", tmp_root);
    const char *absent[1] = {nothere};
    CHECK_INT_EQ(plot_string(absent, 1, &o, &svg, msg, sizeof msg), CALF_EINVAL);
    CHECK(strstr(msg, "nothere") != NULL);
    free(svg);
    /* a run without Metrics/EnvironmentSteps cannot be put on env steps */
    char c[600];
    snprintf(c, sizeof c, "%s/nosteps", tmp_root);
    snprintf(dir, sizeof dir, "%s/train", c);
    write_scalars(dir, 1, 1, 3, 0, false);
    const char *nosteps[1] = {c};
    CHECK_INT_EQ(plot_string(nosteps, 1, &o, &svg, msg, sizeof msg), CALF_EINVAL);
    CHECK(strstr(msg, "no value has a Metrics/EnvironmentSteps at its step") != NULL);
    free(svg);
    rm_rf(tmp_root);
}

/* ------------------------------------------------------------------ extreme values */

typedef struct extreme_case {
    double wall[2];     /* the two records' wall times */
    int64_t step[2];
    double value, env_steps; /* the return and Metrics/EnvironmentSteps of both */
} extreme_case;

/* No events file makes calf plot or calf events abort: wall times at the ends of the
 * double range, NaN and infinite ones, steps at the ends of int64, NaN, infinite and
 * huge values. Each is plotted on every x or refused with a message; an SVG holds no
 * NaN or infinite coordinate. */
static void test_extremes(void) {
    const double big = 1.7976931348623157e308, inf = INFINITY;
    const extreme_case cases[] = {
        {{-1e308, 1e308}, {1, 2}, 1, 100},
        {{1e308, -1e308}, {1, 2}, 1, 100},
        {{-big, big}, {1, 2}, 1, 100},
        {{4e-320, big}, {1, 2}, -3e38, 3e38},
        {{NAN, inf}, {1, 2}, 1, 100},
        {{-inf, inf}, {1, 2}, 1, inf},
        {{1, 2}, {INT64_MIN, INT64_MAX}, 3e38, NAN},
        {{1, 2}, {INT64_MAX - 1, INT64_MAX}, NAN, 1e30},
        {{1, 1}, {0, 0}, inf, -inf},
    };
    const char *base = getenv("TMPDIR");
    char root[256];
    snprintf(root, sizeof root, "%s/calf_test_plot_x_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(root)) {
        CHECK(!"mkdtemp");
        return;
    }
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const extreme_case *k = &cases[c];
        char run[300], dir[320];
        snprintf(run, sizeof run, "%s/case%zu", root, c);
        snprintf(dir, sizeof dir, "%s/train", run);
        calf_error err;
        calf_error_clear(&err);
        calf_summary_writer *w = calf_summary_writer_open(dir, 0, &err);
        CHECK(w != NULL);
        if (!w) continue;
        for (int i = 0; i < 2; i++) {
            calf_summary_writer_add_scalar(w, "Metrics/AverageReturn", k->step[i], k->wall[i],
                                           k->value * (i + 1));
            calf_summary_writer_add_scalar(w, "Metrics/EnvironmentSteps", k->step[i],
                                           k->wall[i], k->env_steps * (i + 1));
        }
        char path[1024];
        snprintf(path, sizeof path, "%s", calf_summary_writer_path(w));
        CHECK_INT_EQ(calf_summary_writer_close(w, &err), CALF_OK);
        const int xs[3] = {CALF_PLOT_X_STEPS, CALF_PLOT_X_ITERATIONS, CALF_PLOT_X_SECONDS};
        for (int x = 0; x < 3; x++) {
            calf_plot_options o = {0};
            o.smooth = 0.6;
            o.x = xs[x];
            const char *roots[1] = {run};
            char *svg, msg[1024];
            int rc = plot_string(roots, 1, &o, &svg, msg, sizeof msg);
            if (rc != CALF_OK) {
                CHECK_INT_EQ(rc, CALF_EINVAL);
                CHECK(strstr(msg, "Metrics/AverageReturn") != NULL);
            } else {
                CHECK(svg != NULL && strstr(svg, "</svg>") != NULL);
                CHECK(svg && !strstr(svg, "nan") && !strstr(svg, "inf"));
            }
            free(svg);
        }
        FILE *f = tmpfile();
        CHECK(f != NULL);
        if (!f) continue;
        const char *paths[1] = {path};
        calf_events_dump_options d = {false, true, NULL};
        CHECK_INT_EQ(calf_events_dump(paths, 1, &d, f, &err), CALF_OK);
        fclose(f);
    }
    rm_rf(root);
}

int main(void) {
    test_smooth();
    test_ticks();
    test_seed_key();
    test_group();
    test_svg();
    test_calf_plot();
    test_extremes();
    return test_report("test_plot");
}
