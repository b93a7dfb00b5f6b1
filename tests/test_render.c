/* test_render.c: calf_renderer (calf/render.h) and the video writer. Pictures of known
 * states are not blank (they differ from the background) and two states give two
 * pictures, for every classic-control env and (with EGL) the MuJoCo ones; drawing does
 * not change what an env's next step computes; a plug-in's hook is used, a class
 * without one is refused naming it; MP4 and GIF bytes start as their formats say. */
#include <math.h>
#include <stdint.h>

#include "calf/render.h"
#include "calf/vec_env.h"
#include "envs/envs.h"
#include "render/video_writer.h"
#include "test_util.h"

enum { W = 120, H = 80 };

/* Pixels whose colour differs from the picture's corner (the background). */
static long count_foreground(const uint8_t *rgb, int w, int h) {
    long n = 0;
    for (long i = 0; i < (long)w * h; i++)
        n += memcmp(rgb + 3 * i, rgb, 3) != 0;
    return n;
}

static long count_different(const uint8_t *a, const uint8_t *b, int w, int h) {
    long n = 0;
    for (long i = 0; i < (long)w * h; i++) n += memcmp(a + 3 * i, b + 3 * i, 3) != 0;
    return n;
}

/* An env of a classic class placed in a state (the plain-data states of envs/envs.h). */
static void check_classic(const char *name, const void *s1, const void *s2, size_t size) {
    calf_error err;
    calf_renderer *r = NULL;
    CHECK_INT_EQ(calf_renderer_open(name, W, H, &r, &err), CALF_OK);
    if (!r) return;
    calf_env env;
    CHECK_INT_EQ(calf_env_init(&env, name, 1, 0, &err), CALF_OK);
    static uint8_t a[W * H * 3], b[W * H * 3];
    memcpy(env.state, s1, size);
    CHECK_INT_EQ(calf_renderer_draw(r, &env, a, &err), CALF_OK);
    memcpy(env.state, s2, size);
    CHECK_INT_EQ(calf_renderer_draw(r, &env, b, &err), CALF_OK);
    /* the background is Gymnasium's white */
    CHECK(a[0] == 255 && a[1] == 255 && a[2] == 255);
    long fg = count_foreground(a, W, H), diff = count_different(a, b, W, H);
    if (fg < 50 || diff < 10) fprintf(stderr, "%s: %ld foreground pixels, %ld differ\n", name, fg, diff);
    CHECK(fg >= 50);
    CHECK(diff >= 10);
    /* the same state again: the same picture */
    memcpy(env.state, s1, size);
    static uint8_t again[W * H * 3];
    CHECK_INT_EQ(calf_renderer_draw(r, &env, again, &err), CALF_OK);
    CHECK(memcmp(a, again, sizeof a) == 0);
    calf_env_free(&env);
    calf_renderer_close(r);
}

static void test_classic(void) {
    cartpole_state c1 = {0, 0, 0, 0}, c2 = {1.0, 0, 0.2, 0};
    check_classic("CartPole-v1", &c1, &c2, sizeof c1);
    pendulum_state p1 = {0, 0}, p2 = {2.0, 0};
    check_classic("Pendulum-v1", &p1, &p2, sizeof p1);
    acrobot_state a1 = {0, 0, 0, 0}, a2 = {1.0, -0.5, 0, 0};
    check_classic("Acrobot-v1", &a1, &a2, sizeof a1);
    mountain_car_state m1 = {-0.5, 0}, m2 = {0.3, 0};
    check_classic("MountainCar-v0", &m1, &m2, sizeof m1);
    check_classic("MountainCarContinuous-v0", &m1, &m2, sizeof m1);

    calf_error err;
    calf_renderer *r = NULL;
    CHECK_INT_EQ(calf_renderer_open("CartPole-v1", W, H, &r, &err), CALF_OK);
    CHECK(calf_renderer_fps(r) == 50);
    calf_env other;
    CHECK_INT_EQ(calf_env_init(&other, "Pendulum-v1", 1, 0, &err), CALF_OK);
    static uint8_t px[W * H * 3];
    CHECK_INT_EQ(calf_renderer_draw(r, &other, px, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "draws CartPole-v1, not Pendulum-v1") != NULL);
    calf_env_free(&other);
    calf_renderer_close(r);
    CHECK_INT_EQ(calf_renderer_open("CartPole-v1", 0, H, &r, &err), CALF_EINVAL);
    CHECK(r == NULL);
    CHECK_INT_EQ(calf_renderer_open("NoSuchEnv-v0", W, H, &r, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_renderer_open("Pendulum-v1", W, H, &r, &err), CALF_OK);
    CHECK(calf_renderer_fps(r) == 30);
    calf_renderer_close(r);
    calf_renderer_close(NULL);

    /* a vec env's envs, one by one (what calf.make_vec(...).render() draws) */
    calf_vec_env *v = NULL;
    CHECK_INT_EQ(calf_vec_env_open("CartPole-v1", NULL, 7, 0, 3, &v, &err), CALF_OK);
    CHECK_INT_EQ(calf_renderer_open("CartPole-v1", W, H, &r, &err), CALF_OK);
    static uint8_t e0[W * H * 3], e2[W * H * 3];
    CHECK_INT_EQ(calf_renderer_draw(r, calf_vec_env_env(v, 0), e0, &err), CALF_OK);
    CHECK_INT_EQ(calf_renderer_draw(r, calf_vec_env_env(v, 2), e2, &err), CALF_OK);
    CHECK(count_different(e0, e2, W, H) > 0); /* two start states */
    CHECK(calf_vec_env_env(v, 3) == NULL && calf_vec_env_env(v, -1) == NULL);
    CHECK_INT_EQ(calf_renderer_draw(r, NULL, e0, &err), CALF_EINVAL);
    calf_renderer_close(r);
    calf_vec_env_close(v);
}

/* Pendulum's torque arrow: none after a reset (Gymnasium's last_u is None); after a
 * step, black pixels round the pivot, more for a larger torque, and the arrow of -u the
 * mirror image of u's (the upright rod is symmetric, so the whole picture mirrors). */
static long count_black(const uint8_t *rgb, int w, int h) {
    long n = 0;
    for (long i = 0; i < (long)w * h; i++)
        n += rgb[3 * i] < 64 && rgb[3 * i + 1] < 64 && rgb[3 * i + 2] < 64;
    return n;
}

static void draw_after_torque(calf_renderer *r, calf_env *env, float u, uint8_t *rgb) {
    calf_error err;
    float obs[3], rew;
    int term, trunc;
    calf_env_reset(env, obs);
    if (!isnan(u)) calf_env_step(env, 0, &u, obs, &rew, &term, &trunc); /* NaN: no step */
    pendulum_state up = {0, 0};
    memcpy(env->state, &up, sizeof up);
    CHECK_INT_EQ(calf_renderer_draw(r, env, rgb, &err), CALF_OK);
}

static void test_pendulum_torque(void) {
    enum { S = 200 };
    calf_error err;
    calf_renderer *r = NULL;
    CHECK_INT_EQ(calf_renderer_open("Pendulum-v1", S, S, &r, &err), CALF_OK);
    if (!r) return;
    calf_env env;
    CHECK_INT_EQ(calf_env_init(&env, "Pendulum-v1", 1, 0, &err), CALF_OK);
    static uint8_t none[S * S * 3], plus[S * S * 3], minus[S * S * 3], small[S * S * 3],
        clipped[S * S * 3];
    draw_after_torque(r, &env, NAN, none);
    draw_after_torque(r, &env, 2.0f, plus);
    draw_after_torque(r, &env, -2.0f, minus);
    draw_after_torque(r, &env, 0.5f, small);
    draw_after_torque(r, &env, 7.0f, clipped); /* the step clips it to 2 */
    long b0 = count_black(none, S, S), b2 = count_black(plus, S, S), bs = count_black(small, S, S);
    if (!(b2 > b0 + 100 && bs > b0 && bs < b2))
        fprintf(stderr, "torque arrow: %ld black pixels with none, %ld at u 0.5, %ld at u 2\n", b0,
                bs, b2);
    CHECK(b2 > b0 + 100);
    CHECK(bs > b0 && bs < b2);
    CHECK(memcmp(plus, clipped, sizeof plus) == 0);
    CHECK(count_different(plus, minus, S, S) > 50);
    long off = 0; /* minus against plus mirrored left to right, within anti-aliasing */
    for (int y = 0; y < S; y++)
        for (int x = 0; x < S; x++)
            for (int c = 0; c < 3; c++) {
                int d = minus[(y * S + x) * 3 + c] - plus[(y * S + S - 1 - x) * 3 + c];
                off += d > 8 || d < -8;
            }
    if (off > 20) fprintf(stderr, "torque arrow: -u is not u's mirror in %ld bytes\n", off);
    CHECK(off <= 20);
    calf_env_free(&env);
    calf_renderer_close(r);
}

/* A plug-in-like class that draws itself (the state's byte as a grey level), and one
 * that cannot be drawn. */
static void level_reset(void *s, calf_rng *rng, float *obs) {
    (void)rng;
    *(uint8_t *)s = 0;
    obs[0] = 0;
}
static int level_step(void *s, calf_rng *rng, int a, const float *u, float *obs, float *rew) {
    (void)rng, (void)u;
    *(uint8_t *)s = (uint8_t)(*(uint8_t *)s + 40 * a);
    obs[0] = *(uint8_t *)s;
    *rew = 0;
    return 0;
}
static int level_render(const void *s, int w, int h, uint8_t *rgb, calf_error *err) {
    (void)err;
    memset(rgb, *(const uint8_t *)s, (size_t)w * h * 3);
    return CALF_OK;
}
static const calf_env_class level_class = {
    .spec = {.name = "Level-v0", .obs_dim = 1, .num_actions = 2, .max_episode_steps = 9, .state_size = 1},
    .reset = level_reset,
    .step = level_step,
    .render = level_render,
    .render_fps = 12.5,
};
static const calf_env_class dark_class = {
    .spec = {.name = "Dark-v0", .obs_dim = 1, .num_actions = 2, .max_episode_steps = 9, .state_size = 1},
    .reset = level_reset,
    .step = level_step,
};

static void test_hook(void) {
    calf_error err;
    CHECK_INT_EQ(calf_env_register(&level_class, &err), CALF_OK);
    CHECK_INT_EQ(calf_env_register(&dark_class, &err), CALF_OK);
    calf_renderer *r = NULL;
    CHECK_INT_EQ(calf_renderer_open("Level-v0", 4, 3, &r, &err), CALF_OK);
    CHECK(calf_renderer_fps(r) == 12.5);
    calf_env env;
    float obs[1], rew;
    int term, trunc;
    CHECK_INT_EQ(calf_env_init(&env, "Level-v0", 1, 0, &err), CALF_OK);
    calf_env_reset(&env, obs);
    calf_env_step(&env, 1, NULL, obs, &rew, &term, &trunc);
    uint8_t px[4 * 3 * 3];
    CHECK_INT_EQ(calf_renderer_draw(r, &env, px, &err), CALF_OK);
    CHECK(px[0] == 40 && px[sizeof px - 1] == 40);
    calf_env_free(&env);
    calf_renderer_close(r);
    CHECK_INT_EQ(calf_renderer_open("Dark-v0", 4, 3, &r, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "Dark-v0 cannot be drawn") != NULL);
}

#if CALF_HAVE_EGL
/* A MuJoCo env drawn after its reset and after 30 steps of a fixed action: pictures
 * that are not one colour and that differ; an env drawn at every step steps as one never
 * drawn, bit for bit. */
static void check_mujoco(const char *name) {
    calf_error err;
    calf_renderer *r = NULL;
    int rc = calf_renderer_open(name, W, H, &r, &err);
    CHECK_INT_EQ(rc, CALF_OK);
    if (rc != CALF_OK) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        return;
    }
    calf_env drawn, plain;
    CHECK_INT_EQ(calf_env_init(&drawn, name, 3, 0, &err), CALF_OK);
    CHECK_INT_EQ(calf_env_init(&plain, name, 3, 0, &err), CALF_OK);
    int od = drawn.cls->spec.obs_dim, ad = drawn.cls->spec.action_dim;
    float *o1 = calloc((size_t)od, sizeof(float)), *o2 = calloc((size_t)od, sizeof(float));
    float *u = calloc((size_t)ad, sizeof(float));
    static uint8_t first[W * H * 3], later[W * H * 3];
    for (int i = 0; i < ad; i++) u[i] = i % 2 ? 0.5f : -0.5f;
    calf_env_reset(&drawn, o1);
    calf_env_reset(&plain, o2);
    CHECK_INT_EQ(calf_renderer_draw(r, &drawn, first, &err), CALF_OK);
    int same = 1;
    for (int t = 0; t < 30; t++) {
        float r1, r2;
        int te1, tr1, te2, tr2;
        calf_env_step(&drawn, 0, u, o1, &r1, &te1, &tr1);
        calf_env_step(&plain, 0, u, o2, &r2, &te2, &tr2);
        CHECK_INT_EQ(calf_renderer_draw(r, &drawn, later, &err), CALF_OK);
        same &= memcmp(o1, o2, (size_t)od * sizeof(float)) == 0 && memcmp(&r1, &r2, sizeof r1) == 0;
    }
    CHECK(same);
    long fg = count_foreground(first, W, H), diff = count_different(first, later, W, H);
    if (fg < W * H / 10 || diff < 50) fprintf(stderr, "%s: %ld foreground pixels, %ld differ\n", name, fg, diff);
    CHECK(fg >= W * H / 10);
    CHECK(diff >= 50);
    free(o1);
    free(o2);
    free(u);
    calf_env_free(&drawn);
    calf_env_free(&plain);
    calf_renderer_close(r);
}
#endif

/* Frames of a moving square through the writer: the bytes start as the formats say. */
static void check_writer(const char *path, const char *magic, size_t at) {
    calf_error err;
    video_writer *v = NULL;
    CHECK_INT_EQ(video_writer_open(path, 64, 48, 25, &v, &err), CALF_OK);
    if (!v) return;
    static uint8_t px[64 * 48 * 3];
    for (int f = 0; f < 10; f++) {
        memset(px, 255, sizeof px);
        for (int y = 10; y < 20; y++)
            for (int x = 5 * f; x < 5 * f + 10; x++) memset(px + 3 * (y * 64 + x), 0, 3);
        CHECK_INT_EQ(video_writer_add(v, px, &err), CALF_OK);
    }
    uint8_t *data = NULL;
    size_t len = 0;
    CHECK_INT_EQ(video_writer_finish(v, &data, &len, &err), CALF_OK);
    CHECK(len > at + strlen(magic) && memcmp(data + at, magic, strlen(magic)) == 0);
    free(data);
}

static void test_writer(void) {
    check_writer("x.gif", "GIF89a", 0);
    check_writer("x.MP4", "ftyp", 4);
    calf_error err;
    video_writer *v = NULL;
    /* a GIF of a 125-frames-a-second env keeps every third frame; an MP4 all */
    CHECK_INT_EQ(video_writer_open("x.gif", 64, 48, 125, &v, &err), CALF_OK);
    CHECK_INT_EQ(video_writer_every(v), 3);
    CHECK_NEAR(video_writer_fps(v), 125.0 / 3, 1e-12);
    video_writer_abort(v);
    CHECK_INT_EQ(video_writer_open("x.mp4", 64, 48, 125, &v, &err), CALF_OK);
    CHECK_INT_EQ(video_writer_every(v), 1);
    video_writer_abort(v);
    CHECK_INT_EQ(video_writer_open("x.webm", 64, 48, 25, &v, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "unknown extension") != NULL);
    CHECK_INT_EQ(video_writer_open("dir.mp4/x", 64, 48, 25, &v, &err), CALF_EINVAL);
    CHECK_INT_EQ(video_writer_open("x.mp4", 63, 48, 25, &v, &err), CALF_EINVAL);
    CHECK(v == NULL);
    video_writer_abort(NULL);
}

int main(void) {
    if (!calf_has_video()) {
        calf_error err;
        calf_renderer *r = NULL;
        CHECK_INT_EQ(calf_renderer_open("CartPole-v1", W, H, &r, &err), CALF_EINVAL);
        CHECK(strstr(err.msg, "apt-get install") != NULL);
        test_hook(); /* a class's own hook needs no library */
        int rc = test_report("test_render");
        if (rc) return rc;
        printf("skipped: calf was built without video support (cairo, FFmpeg, giflib)\n");
        return 77;
    }
    test_classic();
    test_pendulum_torque();
    test_hook();
    test_writer();
#if CALF_HAVE_EGL
    check_mujoco("HalfCheetah-v4");
    check_mujoco("InvertedPendulum-v4");
    check_mujoco("Hopper-v4");
#else
    printf("note: no EGL/MuJoCo in this build: MuJoCo pictures not checked\n");
#endif
    return test_report("test_render");
}
