/* draw_classic.c: the classic-control envs drawn as Gymnasium's rgb_array mode draws them
 * (classic_control/ render() of each env: the same canvas, shapes, sizes and colours), with cairo
 * instead of pygame. Gymnasium's canvas (600x400 or 500x500, y up) is scaled to fit the
 * requested size, centred on white. Pendulum's torque arrow, a picture file in
 * Gymnasium (assets/clockwise.png), is drawn as the same curved arrow in cairo. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cairo.h>

#include "envs/envs.h"
#include "render/render.h"

typedef struct classic_ctx {
    cairo_surface_t *surface; /* width x height, CAIRO_FORMAT_RGB24 */
    cairo_t *cr;
    int width, height;
} classic_ctx;

/* One classic class: Gymnasium's canvas, its frame rate and how to draw a state on it. */
typedef struct classic_kind {
    const calf_env_class *cls;
    double canvas_w, canvas_h;
    double fps;                                     /* metadata render_fps */
    void (*paint)(cairo_t *cr, const calf_env *env); /* in canvas units, y up */
} classic_kind;

static void set_rgb(cairo_t *cr, int r, int g, int b) {
    cairo_set_source_rgb(cr, r / 255.0, g / 255.0, b / 255.0);
}

/* A filled polygon of n (x, y) points rotated by angle (pygame's Vector2.rotate_rad)
 * about the origin, then moved by (dx, dy). */
static void fill_rotated(cairo_t *cr, const double (*pts)[2], int n, double angle, double dx,
                         double dy) {
    double c = cos(angle), s = sin(angle);
    for (int i = 0; i < n; i++) {
        double x = pts[i][0] * c - pts[i][1] * s + dx, y = pts[i][0] * s + pts[i][1] * c + dy;
        if (i == 0) cairo_move_to(cr, x, y);
        else cairo_line_to(cr, x, y);
    }
    cairo_close_path(cr);
    cairo_fill(cr);
}

static void fill_circle(cairo_t *cr, double x, double y, double r) {
    cairo_new_sub_path(cr);
    cairo_arc(cr, x, y, r, 0, 2 * M_PI);
    cairo_fill(cr);
}

static void stroke_line(cairo_t *cr, double x0, double y0, double x1, double y1) {
    cairo_move_to(cr, x0, y0);
    cairo_line_to(cr, x1, y1);
    cairo_stroke(cr);
}

/* cartpole.py: world 4.8 wide on 600 px, the cart 50x30 with its top at y 100. */
static void paint_cartpole(cairo_t *cr, const calf_env *env) {
    const cartpole_state *s = env->state;
    const double scale = 600 / 4.8, polewidth = 10.0, polelen = scale * (2 * 0.5);
    const double cartwidth = 50.0, cartheight = 30.0, axleoffset = cartheight / 4.0;
    double cartx = s->x * scale + 600 / 2.0, carty = 100;
    double l = -cartwidth / 2, r = cartwidth / 2, t = cartheight / 2, b = -cartheight / 2;
    const double cart[4][2] = {{l, b}, {l, t}, {r, t}, {r, b}};
    set_rgb(cr, 0, 0, 0);
    fill_rotated(cr, cart, 4, 0, cartx, carty);
    l = -polewidth / 2, r = polewidth / 2, t = polelen - polewidth / 2, b = -polewidth / 2;
    const double pole[4][2] = {{l, b}, {l, t}, {r, t}, {r, b}};
    set_rgb(cr, 202, 152, 101);
    fill_rotated(cr, pole, 4, -s->theta, cartx, carty + axleoffset);
    set_rgb(cr, 129, 132, 203);
    fill_circle(cr, (int)cartx, (int)(carty + axleoffset), (int)(polewidth / 2));
    set_rgb(cr, 0, 0, 0);
    stroke_line(cr, 0, carty, 600, carty);
}

/* Gymnasium's clockwise.png scaled to size x size at (cx, cy): a black arc from twelve
 * o'clock round through three and six to nine, where an arrowhead points up; mirrored
 * left to right (counter-clockwise) for a positive torque. Proportions read off the
 * picture: radius 0.46, line 0.028, head 0.17 long and 0.14 wide, of the size. */
static void paint_torque_arrow(cairo_t *cr, double cx, double cy, double size, bool mirror) {
    const double r = 0.46 * size, head_len = 0.17 * size, head_half = 0.07 * size;
    cairo_save(cr);
    cairo_translate(cr, cx, cy);
    if (mirror) cairo_scale(cr, -1, 1);
    set_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 0.028 * size);
    cairo_new_path(cr);
    cairo_arc_negative(cr, 0, 0, r, M_PI / 2, -M_PI); /* y up: decreasing is clockwise */
    cairo_stroke(cr);
    cairo_move_to(cr, -r - head_half, 0);
    cairo_line_to(cr, -r + head_half, 0);
    cairo_line_to(cr, -r, head_len);
    cairo_close_path(cr);
    cairo_fill(cr);
    cairo_restore(cr);
}

/* pendulum.py: 500x500, the rod 1 long and 0.2 wide at scale 500 / 4.4, from the centre;
 * after a step, the torque arrow (last_u: the action the step applied, clipped; none
 * after a reset, as Gymnasium's last_u is None then) scale |u| / 2 wide, then the axle. */
static void paint_pendulum(cairo_t *cr, const calf_env *env) {
    const pendulum_state *s = env->state;
    const double scale = 500 / (2.2 * 2), offset = 500 / 2;
    const double rod_length = 1 * scale, rod_width = 0.2 * scale;
    const double rod[4][2] = {{0, -rod_width / 2}, {0, rod_width / 2}, {rod_length, rod_width / 2},
                              {rod_length, -rod_width / 2}};
    double angle = s->th + M_PI / 2;
    set_rgb(cr, 204, 77, 77);
    fill_rotated(cr, rod, 4, angle, offset, offset);
    fill_circle(cr, offset, offset, (int)(rod_width / 2));
    fill_circle(cr, (int)(rod_length * cos(angle) + offset), (int)(rod_length * sin(angle) + offset),
                (int)(rod_width / 2));
    if (env->elapsed_steps > 0 && env->clipped) {
        double u = env->clipped[0], size = scale * fabs(u) / 2;
        if (size > 0) paint_torque_arrow(cr, offset, offset, size, u > 0); /* a NaN: none */
    }
    set_rgb(cr, 0, 0, 0);
    fill_circle(cr, offset, offset, (int)(0.05 * scale));
}

/* acrobot.py: 500x500, links of length 1 at scale 500 / 4.4, a line at height 1. */
static void paint_acrobot(cairo_t *cr, const calf_env *env) {
    const acrobot_state *s = env->state;
    const double scale = 500 / (2.2 * 2), offset = 500 / 2.0;
    double p1x = -1.0 * cos(s->theta1) * scale, p1y = 1.0 * sin(s->theta1) * scale;
    /* xys[:, ::-1]: each joint's (x, y) swapped */
    const double joints[2][2] = {{0, 0}, {p1y, p1x}};
    const double thetas[2] = {s->theta1 - M_PI / 2, s->theta1 + s->theta2 - M_PI / 2};
    set_rgb(cr, 0, 0, 0);
    stroke_line(cr, -2.2 * scale + offset, 1 * scale + offset, 2.2 * scale + offset,
                1 * scale + offset);
    for (int k = 0; k < 2; k++) {
        double x = joints[k][0] + offset, y = joints[k][1] + offset, len = 1.0 * scale;
        const double link[4][2] = {{0, -0.1 * scale}, {0, 0.1 * scale}, {len, 0.1 * scale},
                                   {len, -0.1 * scale}};
        set_rgb(cr, 0, 204, 204);
        fill_rotated(cr, link, 4, thetas[k], x, y);
        set_rgb(cr, 204, 204, 0);
        fill_circle(cr, (int)x, (int)y, (int)(0.1 * scale));
    }
}

static double hill(double x) { return sin(3 * x) * 0.45 + 0.55; }

/* mountain_car.py and continuous_mountain_car.py: positions -1.2..0.6 on 600 px, the
 * hill, the 40x20 car tilted with the slope, its wheels, and the flag at the goal. */
static void paint_mountain_car(cairo_t *cr, double pos, double goal) {
    const double min_position = -1.2, scale = 600 / (0.6 - min_position);
    const double carwidth = 40, carheight = 20, clearance = 10;
    set_rgb(cr, 0, 0, 0);
    for (int i = 0; i < 100; i++) {
        double x = min_position + (0.6 - min_position) * i / 99.0;
        if (i == 0) cairo_move_to(cr, (x - min_position) * scale, hill(x) * scale);
        else cairo_line_to(cr, (x - min_position) * scale, hill(x) * scale);
    }
    cairo_stroke(cr);
    double angle = cos(3 * pos), cx = (pos - min_position) * scale;
    double cy = clearance + hill(pos) * scale;
    const double car[4][2] = {{-carwidth / 2, 0}, {-carwidth / 2, carheight},
                              {carwidth / 2, carheight}, {carwidth / 2, 0}};
    fill_rotated(cr, car, 4, angle, cx, cy);
    set_rgb(cr, 128, 128, 128);
    for (int k = 0; k < 2; k++) {
        double wx = (k ? -carwidth : carwidth) / 4;
        fill_circle(cr, (int)(wx * cos(angle) + cx), (int)(wx * sin(angle) + cy),
                    (int)(carheight / 2.5));
    }
    int flagx = (int)((goal - min_position) * scale), flagy1 = (int)(hill(goal) * scale);
    int flagy2 = flagy1 + 50;
    set_rgb(cr, 0, 0, 0);
    stroke_line(cr, flagx, flagy1, flagx, flagy2);
    const double flag[3][2] = {{flagx, flagy2}, {flagx, flagy2 - 10}, {flagx + 25, flagy2 - 5}};
    set_rgb(cr, 204, 204, 0);
    fill_rotated(cr, flag, 3, 0, 0, 0);
}

static void paint_mountain_car_v0(cairo_t *cr, const calf_env *env) {
    paint_mountain_car(cr, ((const mountain_car_state *)env->state)->position, 0.5);
}

static void paint_mountain_car_continuous(cairo_t *cr, const calf_env *env) {
    paint_mountain_car(cr, ((const mountain_car_state *)env->state)->position, 0.45);
}

static const classic_kind kinds[] = {
    {&cartpole_class, 600, 400, 50, paint_cartpole},
    {&pendulum_class, 500, 500, 30, paint_pendulum},
    {&acrobot_class, 500, 500, 15, paint_acrobot},
    {&mountain_car_class, 600, 400, 30, paint_mountain_car_v0},
    {&mountain_car_continuous_class, 600, 400, 30, paint_mountain_car_continuous},
    {&cartpole_novel_class, 600, 400, 50, paint_cartpole},
    {&pendulum_novel_class, 500, 500, 30, paint_pendulum},
};

static const classic_kind *kind_of(const calf_env_class *cls) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kinds[i].cls == cls) return &kinds[i];
    return NULL;
}

static void classic_close(void *p) {
    classic_ctx *c = p;
    if (!c) return;
    if (c->cr) cairo_destroy(c->cr);
    if (c->surface) cairo_surface_destroy(c->surface);
    free(c);
}

static int classic_open(const calf_env_class *cls, int width, int height, void **out, double *fps,
                        calf_error *err) {
    *out = NULL;
    classic_ctx *c = calloc(1, sizeof *c);
    if (!c) return calf_error_set(err, CALF_ENOMEM, "out of memory for a %s renderer", cls->spec.name);
    c->width = width;
    c->height = height;
    c->surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
    if (cairo_surface_status(c->surface) == CAIRO_STATUS_SUCCESS) c->cr = cairo_create(c->surface);
    if (!c->cr || cairo_status(c->cr) != CAIRO_STATUS_SUCCESS) {
        cairo_status_t st = c->cr ? cairo_status(c->cr) : cairo_surface_status(c->surface);
        classic_close(c);
        return calf_error_set(err, CALF_ENOMEM, "cannot make a %dx%d cairo surface for %s: %s", width,
                              height, cls->spec.name, cairo_status_to_string(st));
    }
    *fps = kind_of(cls)->fps;
    *out = c;
    return CALF_OK;
}

static int classic_draw(void *p, const calf_env *env, uint8_t *rgb, calf_error *err) {
    classic_ctx *c = p;
    const classic_kind *k = kind_of(env->cls);
    cairo_t *cr = c->cr;
    cairo_identity_matrix(cr);
    set_rgb(cr, 255, 255, 255);
    cairo_paint(cr);
    /* Gymnasium's canvas, y up (it draws so, then flips), fitted and centred */
    double s = fmin(c->width / k->canvas_w, c->height / k->canvas_h);
    cairo_matrix_t m;
    cairo_matrix_init(&m, s, 0, 0, -s, (c->width - s * k->canvas_w) / 2,
                      (c->height - s * k->canvas_h) / 2 + s * k->canvas_h);
    cairo_set_matrix(cr, &m);
    cairo_set_line_width(cr, 1.0);
    k->paint(cr, env);
    cairo_surface_flush(c->surface);
    if (cairo_status(cr) != CAIRO_STATUS_SUCCESS)
        return calf_error_set(err, CALF_EIO, "drawing %s: %s", env->cls->spec.name,
                              cairo_status_to_string(cairo_status(cr)));
    const unsigned char *px = cairo_image_surface_get_data(c->surface);
    int stride = cairo_image_surface_get_stride(c->surface);
    for (int y = 0; y < c->height; y++) {
        const uint32_t *row = (const uint32_t *)(const void *)(px + (size_t)y * stride);
        uint8_t *out = rgb + (size_t)y * c->width * 3;
        for (int x = 0; x < c->width; x++) {
            out[3 * x] = (uint8_t)(row[x] >> 16);
            out[3 * x + 1] = (uint8_t)(row[x] >> 8);
            out[3 * x + 2] = (uint8_t)row[x];
        }
    }
    return CALF_OK;
}

static const render_backend classic_backend = {classic_open, classic_draw, classic_close};

const render_backend *draw_classic_backend(const calf_env_class *cls) {
    return kind_of(cls) ? &classic_backend : NULL;
}
