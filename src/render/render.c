/* render.c: calf_renderer (calf/render.h): picks who draws a class (its own render hook,
 * cairo for classic control, MuJoCo's renderer) and keeps that backend's context. A build
 * without the optional libraries still has the API, which says what to install. */
#include "calf/render.h"

#include <stdlib.h>

#include "base/mem.h"
#include "render/render.h"
#if CALF_HAVE_MUJOCO
#include "envs/mj_env.h"
#endif

#ifndef CALF_HAVE_VIDEO
#define CALF_HAVE_VIDEO 0
#endif
#ifndef CALF_HAVE_EGL
#define CALF_HAVE_EGL 0
#endif

struct calf_renderer {
    const calf_env_class *cls;
    int width, height;
    double fps;
    const render_backend *backend; /* NULL: the class's own hook */
    void *ctx;                     /* the backend's, owned */
};

bool calf_has_video(void) { return CALF_HAVE_VIDEO != 0; }

/* A built-in MuJoCo class (all of them share mj_env's destroy hook). */
static bool is_mujoco(const calf_env_class *cls) {
#if CALF_HAVE_MUJOCO
    return cls->destroy == mj_env_destroy_hook;
#else
    (void)cls;
    return false;
#endif
}

/* The class's render hook: no context to hold. */
static int hook_draw(const calf_renderer *r, const calf_env *env, uint8_t *rgb, calf_error *err) {
    calf_error sub;
    calf_error_clear(&sub);
    int rc = r->cls->render(env->state, r->width, r->height, rgb, &sub);
    if (rc != CALF_OK)
        return calf_error_set(err, rc, "%s: its render hook failed: %s", r->cls->spec.name,
                              sub.msg[0] ? sub.msg : "no message");
    return CALF_OK;
}

int calf_renderer_open(const char *env_name, int width, int height, calf_renderer **out,
                       calf_error *err) {
    *out = NULL;
    const calf_env_class *cls = calf_env_lookup(env_name ? env_name : "", err);
    if (!cls) return CALF_EINVAL;
    if (width < 1 || width > 4096 || height < 1 || height > 4096)
        return calf_error_set(err, CALF_EINVAL, "a picture of %dx%d: width and height must be in [1, 4096]",
                              width, height);
    const render_backend *backend = NULL;
    if (!cls->render) {
        if (!CALF_HAVE_VIDEO)
            return calf_error_set(err, CALF_EINVAL,
                                  "%s cannot be drawn: this calf was built without video support; "
                                  "apt-get install " CALF_VIDEO_PACKAGES " and build again",
                                  cls->spec.name);
#if CALF_HAVE_VIDEO
        backend = draw_classic_backend(cls);
#endif
#if CALF_HAVE_EGL
        if (!backend) backend = draw_mujoco_backend(cls);
#endif
        if (!backend)
            return calf_error_set(err, CALF_EINVAL, "%s cannot be drawn: %s", cls->spec.name,
                                  calf_env_class_library(cls)
                                      ? "its plug-in class has no render hook (calf/env.h)"
                                  : is_mujoco(cls)
                                      ? "this calf was built without EGL/OpenGL for MuJoCo's "
                                        "renderer; apt-get install " CALF_EGL_PACKAGES
                                        " and build again"
                                      : "its class has no render hook (calf/env.h)");
    }
    calf_renderer *r = mem_calloc(1, sizeof *r, err);
    if (!r) return CALF_ENOMEM;
    r->cls = cls;
    r->width = width;
    r->height = height;
    r->backend = backend;
    r->fps = cls->render_fps > 0 ? cls->render_fps : 30;
    if (backend) {
        int rc = backend->open(cls, width, height, &r->ctx, &r->fps, err);
        if (rc != CALF_OK) {
            free(r);
            return rc;
        }
    }
    *out = r;
    return CALF_OK;
}

void calf_renderer_close(calf_renderer *r) {
    if (!r) return;
    if (r->backend) r->backend->close(r->ctx);
    free(r);
}

int calf_renderer_draw(calf_renderer *r, const calf_env *env, uint8_t *rgb, calf_error *err) {
    if (!env || env->cls != r->cls)
        return calf_error_set(err, CALF_EINVAL, "calf_renderer_draw: the renderer draws %s, not %s",
                              r->cls->spec.name, env ? env->cls->spec.name : "(no env)");
    if (!r->backend) return hook_draw(r, env, rgb, err);
    return r->backend->draw(r->ctx, env, rgb, err);
}

double calf_renderer_fps(const calf_renderer *r) { return r->fps; }
int calf_renderer_width(const calf_renderer *r) { return r->width; }
int calf_renderer_height(const calf_renderer *r) { return r->height; }
