/* draw_mujoco.c: MuJoCo envs drawn by MuJoCo's own renderer (mjv_updateScene, mjr_render,
 * mjr_readPixels) into its offscreen buffer, in an OpenGL context from EGL's surfaceless
 * platform (Mesa; llvmpipe without a GPU), so no display is needed. Any env whose class
 * is an mj_env (envs/mj_env.h) is drawn; cameras follow Gymnasium's DEFAULT_CAMERA_CONFIG
 * of each task (its mj_task's camera), tracking the torso of the locomotion tasks. calf's
 * models leave out what only drawing needs, so the look of Gymnasium's files is added here,
 * to the renderer's copy and scene only: their body colour, the checkered floor, the
 * overhead light, the sky. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <mujoco/mujoco.h>

#include "envs/mj_env.h"
#include "render/render.h"

typedef struct mujoco_ctx {
    EGLDisplay display;
    EGLContext context;
    mjModel *m;      /* owned: a copy of the env's model with an offscreen buffer of our size */
    mjData *d;       /* owned: the frame's copy of the env's data (drawing writes scratch) */
    mjvScene scene;
    mjvCamera camera;
    mjvOption option;
    mjrContext con;
    bool scene_made, con_made, camera_set;
    int track_body; /* the body the camera follows; 0: none */
    const mj_camera *config; /* the task's camera (envs/mj_env.h) */
    int width, height;
    unsigned char *flipped; /* (height, width, 3) as OpenGL reads it, bottom row first */
    float *depth;           /* (height, width) likewise: 1 where nothing was drawn (the sky) */
} mujoco_ctx;

/* Gymnasium's look (its assets/ MJCF files): bodies rgba 0.8 0.6 0.4 (where calf's model leaves
 * MuJoCo's default grey), the floor a checker of black and 0.8 grey (a 100x100 "checker"
 * texture repeated 60 times over the plane: squares of size / 60), a directional light
 * from above, a skybox from 0.4 0.5 0.6 to black. */
enum { SCENE_GEOMS = 1000, FLOOR_SQUARES = 60 }; /* geoms of Gymnasium's scene; squares a side */

/* The renderer's own model (its offscreen size and colours are changed) and data. */
typedef struct copy_args {
    const mjModel *from;
    mujoco_ctx *c;
} copy_args;
static void copy_model_and_data(void *arg) {
    copy_args *a = arg;
    a->c->m = mj_copyModel(NULL, a->from);
    if (a->c->m) a->c->d = mj_makeData(a->c->m);
}

static void make_scene_and_context(void *arg) {
    mujoco_ctx *c = arg;
    mjv_makeScene(c->m, &c->scene, SCENE_GEOMS + FLOOR_SQUARES * FLOOR_SQUARES / 2 + FLOOR_SQUARES);
    c->scene_made = true;
    mjr_makeContext(c->m, &c->con, mjFONTSCALE_150);
    c->con_made = true;
    mjr_setBuffer(mjFB_OFFSCREEN, &c->con);
}

static void mujoco_close(void *p) {
    mujoco_ctx *c = p;
    if (!c) return;
    if (c->display != EGL_NO_DISPLAY && c->context != EGL_NO_CONTEXT)
        eglMakeCurrent(c->display, EGL_NO_SURFACE, EGL_NO_SURFACE, c->context);
    if (c->con_made) mjr_freeContext(&c->con);
    if (c->scene_made) mjv_freeScene(&c->scene);
    if (c->display != EGL_NO_DISPLAY) {
        eglMakeCurrent(c->display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
        /* the display stays initialized: EGL gives every renderer of the process the same
         * one, and terminating it unloads Mesa's driver with some of its memory still
         * held (which the leak checker then reports as ours) */
        if (c->context != EGL_NO_CONTEXT) eglDestroyContext(c->display, c->context);
    }
    if (c->d) mj_deleteData(c->d);
    if (c->m) mj_deleteModel(c->m);
    free(c->flipped);
    free(c->depth);
    free(c);
}

/* An OpenGL context current on this thread, without a window: EGL's surfaceless
 * platform (EGL_MESA_platform_surfaceless). */
static int start_egl(mujoco_ctx *c, const char *name, calf_error *err) {
    const char *exts = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    PFNEGLGETPLATFORMDISPLAYEXTPROC get_display =
        (PFNEGLGETPLATFORMDISPLAYEXTPROC)eglGetProcAddress("eglGetPlatformDisplayEXT");
    if (!exts || !strstr(exts, "EGL_MESA_platform_surfaceless") || !get_display)
        return calf_error_set(err, CALF_EIO,
                              "%s: cannot start MuJoCo's renderer: EGL has no surfaceless platform "
                              "(apt-get install libegl-mesa0 libgl1-mesa-dri)", name);
    c->display = get_display(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, NULL);
    EGLint major, minor, n = 0;
    if (c->display == EGL_NO_DISPLAY || !eglInitialize(c->display, &major, &minor)) {
        c->display = EGL_NO_DISPLAY;
        return calf_error_set(err, CALF_EIO, "%s: cannot start MuJoCo's renderer: EGL error 0x%x",
                              name, (unsigned)eglGetError());
    }
    static const EGLint attrs[] = {EGL_RED_SIZE, 8, EGL_GREEN_SIZE, 8, EGL_BLUE_SIZE, 8,
                                   EGL_DEPTH_SIZE, 24, EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT,
                                   EGL_SURFACE_TYPE, EGL_PBUFFER_BIT,
                                   EGL_NONE};
    EGLConfig config;
    if (!eglChooseConfig(c->display, attrs, &config, 1, &n) || n < 1 || !eglBindAPI(EGL_OPENGL_API))
        return calf_error_set(err, CALF_EIO,
                              "%s: cannot start MuJoCo's renderer: no OpenGL configuration in EGL "
                              "(0x%x)", name, (unsigned)eglGetError());
    c->context = eglCreateContext(c->display, config, EGL_NO_CONTEXT, NULL);
    if (c->context == EGL_NO_CONTEXT ||
        !eglMakeCurrent(c->display, EGL_NO_SURFACE, EGL_NO_SURFACE, c->context))
        return calf_error_set(err, CALF_EIO,
                              "%s: cannot start MuJoCo's renderer: no OpenGL context (EGL 0x%x)",
                              name, (unsigned)eglGetError());
    return CALF_OK;
}

static int mujoco_open(const calf_env_class *cls, int width, int height, void **out, double *fps,
                       calf_error *err) {
    *out = NULL;
    const char *name = cls->spec.name;
    /* the class's model: from an env of it (the process's compiled copy, shared) */
    calf_env probe;
    int rc = calf_env_init(&probe, name, 0, 0, err);
    if (rc != CALF_OK) return rc;
    const mj_state *ps = probe.state;
    mujoco_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        calf_env_free(&probe);
        return calf_error_set(err, CALF_ENOMEM, "out of memory for a %s renderer", name);
    }
    c->display = EGL_NO_DISPLAY;
    c->context = EGL_NO_CONTEXT;
    c->width = width;
    c->height = height;
    c->config = &ps->task->camera;
    copy_args copy = {ps->m, c};
    rc = mj_env_guarded(copy_model_and_data, &copy, name, err);
    c->flipped = malloc((size_t)width * height * 3);
    c->depth = malloc((size_t)width * height * sizeof(float));
    double dt = mj_env_dt(ps);
    calf_env_free(&probe);
    if (rc != CALF_OK || !c->m || !c->d || !c->flipped || !c->depth) {
        mujoco_close(c);
        return rc != CALF_OK ? rc
                             : calf_error_set(err, CALF_ENOMEM, "out of memory for a %s renderer", name);
    }
    c->m->vis.global.offwidth = width;
    c->m->vis.global.offheight = height;
    for (int g = 0; g < c->m->ngeom; g++) {
        float *rgba = c->m->geom_rgba + 4 * g;
        if (c->m->geom_type[g] == mjGEOM_PLANE) rgba[0] = rgba[1] = rgba[2] = 0.8f, rgba[3] = 1;
        else if (rgba[0] == 0.5f && rgba[1] == 0.5f && rgba[2] == 0.5f)
            rgba[0] = 0.8f, rgba[1] = 0.6f, rgba[2] = 0.4f;
    }
    rc = start_egl(c, name, err);
    mjv_defaultScene(&c->scene);
    mjr_defaultContext(&c->con);
    mjv_defaultCamera(&c->camera);
    mjv_defaultOption(&c->option);
    if (rc == CALF_OK) rc = mj_env_guarded(make_scene_and_context, c, name, err);
    if (rc == CALF_OK && c->con.currentBuffer != mjFB_OFFSCREEN)
        rc = calf_error_set(err, CALF_EIO, "%s: MuJoCo's renderer has no offscreen buffer", name);
    if (rc != CALF_OK) {
        mujoco_close(c);
        return rc;
    }
    *fps = c->config->fps > 0 ? c->config->fps : 1.0 / dt;
    *out = c;
    return CALF_OK;
}

/* Gymnasium's OffScreenViewer._init_camera (a free camera on the geoms' median, at the
 * model's extent), then the task's DEFAULT_CAMERA_CONFIG; on the first frame, whose data
 * the median is taken from. */
static void set_camera(mujoco_ctx *c) {
    const mjModel *m = c->m;
    mjvCamera *cam = &c->camera;
    cam->type = mjCAMERA_FREE;
    cam->fixedcamid = -1;
    double *col = malloc(sizeof(double) * (size_t)(m->ngeom > 0 ? m->ngeom : 1));
    for (int i = 0; i < 3 && col; i++) {
        for (int g = 0; g < m->ngeom; g++) col[g] = c->d->geom_xpos[3 * g + i];
        /* np.median: the middle value, or the mean of the middle two */
        for (int a = 1; a < m->ngeom; a++)
            for (int b = a; b > 0 && col[b - 1] > col[b]; b--) {
                double t = col[b];
                col[b] = col[b - 1];
                col[b - 1] = t;
            }
        int n = m->ngeom;
        if (n > 0) cam->lookat[i] = n % 2 ? col[n / 2] : 0.5 * (col[n / 2 - 1] + col[n / 2]);
    }
    free(col);
    cam->distance = m->stat.extent;
    const mj_camera *k = c->config;
    if (k->distance > 0) cam->distance = k->distance;
    if (k->has_lookat) memcpy(cam->lookat, k->lookat, sizeof k->lookat);
    if (k->has_elevation) cam->elevation = k->elevation;
    if (k->track_body > 0 && k->track_body < m->nbody) c->track_body = k->track_body;
    c->camera_set = true;
}

/* The black squares of each floor plane's checker near what the camera looks at, as
 * thin boxes just above the plane (which is the grey of the other squares). */
static void add_floor_squares(mujoco_ctx *c) {
    const mjModel *m = c->m;
    mjvScene *scn = &c->scene;
    static const float black[4] = {0, 0, 0, 1};
    for (int g = 0; g < m->ngeom; g++) {
        if (m->geom_type[g] != mjGEOM_PLANE || m->geom_bodyid[g] != 0) continue;
        const mjtNum *pos = c->d->geom_xpos + 3 * g, *mat = c->d->geom_xmat + 9 * g;
        double half_x = m->geom_size[3 * g], half_y = m->geom_size[3 * g + 1];
        double sq = (half_x > 0 ? half_x : 40) / FLOOR_SQUARES;
        /* the squares within FLOOR_SQUARES / 2 of the camera's point, in the plane's frame */
        double lx = 0, ly = 0;
        for (int i = 0; i < 3; i++) {
            lx += mat[3 * i] * (c->camera.lookat[i] - pos[i]);
            ly += mat[3 * i + 1] * (c->camera.lookat[i] - pos[i]);
        }
        long ix0 = (long)floor(lx / sq) - FLOOR_SQUARES / 2, iy0 = (long)floor(ly / sq) - FLOOR_SQUARES / 2;
        for (long ix = ix0; ix < ix0 + FLOOR_SQUARES; ix++)
            for (long iy = iy0; iy < iy0 + FLOOR_SQUARES; iy++) {
                if (((ix + iy) & 1) == 0 || scn->ngeom >= scn->maxgeom) continue;
                double x = (ix + 0.5) * sq, y = (iy + 0.5) * sq;
                if ((half_x > 0 && fabs(x) > half_x) || (half_y > 0 && fabs(y) > half_y)) continue;
                mjtNum size[3] = {sq / 2, sq / 2, 0.0005}, at[3];
                for (int i = 0; i < 3; i++)
                    at[i] = pos[i] + mat[3 * i] * x + mat[3 * i + 1] * y + mat[3 * i + 2] * 0.0005;
                mjv_initGeom(&scn->geoms[scn->ngeom++], mjGEOM_BOX, size, at, mat, black);
            }
    }
}

/* Gymnasium's <light directional="true" pos="0 0 1.3" dir="0 0 -1.3" diffuse="1 1 1"
 * specular=".1 .1 .1" cutoff="100" exponent="1">, without its shadows: on llvmpipe they
 * cost three times the rest of the frame. */
static void add_light(mjvScene *scn) {
    if (scn->nlight >= mjMAXLIGHT) return;
    mjvLight *l = &scn->lights[scn->nlight++];
    memset(l, 0, sizeof *l);
    l->pos[2] = 1.3f;
    l->dir[2] = -1.0f;
    l->attenuation[0] = 1;
    l->cutoff = 100;
    l->exponent = 1;
    for (int i = 0; i < 3; i++) l->diffuse[i] = 1, l->specular[i] = 0.1f;
    l->directional = 1;
    l->castshadow = 0;
}

static int mujoco_draw(void *p, const calf_env *env, uint8_t *rgb, calf_error *err) {
    mujoco_ctx *c = p;
    const mj_state *s = env->state;
    if (!eglMakeCurrent(c->display, EGL_NO_SURFACE, EGL_NO_SURFACE, c->context))
        return calf_error_set(err, CALF_EIO, "%s: cannot make the OpenGL context current (EGL 0x%x)",
                              env->cls->spec.name, (unsigned)eglGetError());
    mj_copyData(c->d, c->m, s->d);
    if (!c->camera_set) set_camera(c);
    /* tracking without MuJoCo's smoothing (mjCAMERA_TRACKING lags a runner by a body
     * length): the camera looks at the body's subtree centre of mass every frame, as the
     * "track" cameras (mode="trackcom") of Gymnasium's files keep it in the middle */
    if (c->track_body > 0) memcpy(c->camera.lookat, c->d->subtree_com + 3 * c->track_body, 3 * sizeof(mjtNum));
    mjv_updateScene(c->m, c->d, &c->option, NULL, &c->camera, mjCAT_ALL, &c->scene);
    add_floor_squares(c);
    add_light(&c->scene);
    mjrRect viewport = {0, 0, c->width, c->height};
    mjr_render(viewport, &c->scene, &c->con);
    mjr_readPixels(c->flipped, c->depth, viewport, &c->con);
    size_t row = (size_t)c->width * 3;
    for (int y = 0; y < c->height; y++) {
        const unsigned char *src = c->flipped + (size_t)(c->height - 1 - y) * row;
        const float *z = c->depth + (size_t)(c->height - 1 - y) * c->width;
        uint8_t *dst = rgb + (size_t)y * row;
        /* the sky: Gymnasium's gradient skybox, 0.4 0.5 0.6 at the top to black below */
        double t = 1.0 - (double)y / c->height;
        const uint8_t sky[3] = {(uint8_t)(0.4 * 255 * t), (uint8_t)(0.5 * 255 * t), (uint8_t)(0.6 * 255 * t)};
        for (int x = 0; x < c->width; x++)
            for (int k = 0; k < 3; k++) dst[3 * x + k] = z[x] >= 1.0f ? sky[k] : src[3 * x + k];
    }
    return CALF_OK;
}

static const render_backend mujoco_backend = {mujoco_open, mujoco_draw, mujoco_close};

const render_backend *draw_mujoco_backend(const calf_env_class *cls) {
    return cls->destroy == mj_env_destroy_hook ? &mujoco_backend : NULL;
}
