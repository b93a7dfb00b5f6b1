/* render.h: the backends behind calf_renderer (calf/render.h): each knows the classes it
 * draws and holds what drawing them needs. render.c picks one: the class's own hook
 * (plug-ins), cairo for classic control (draw_classic.c), MuJoCo (draw_mujoco.c). */
#ifndef CALF_RENDER_RENDER_H
#define CALF_RENDER_RENDER_H

#include <stdint.h>

#include "calf/env.h"
#include "calf/error.h"

typedef struct render_backend {
    /* Make the backend's context for cls's pictures of width x height; sets *fps. NULL
     * *ctx is fine for a backend that needs none. A failure holds nothing. */
    int (*open)(const calf_env_class *cls, int width, int height, void **ctx, double *fps,
                calf_error *err);
    /* rgb: (height, width, 3), rows from the top. */
    int (*draw)(void *ctx, const calf_env *env, uint8_t *rgb, calf_error *err);
    void (*close)(void *ctx);
} render_backend;

/* The backend for cls, or NULL when it does not draw cls. */
const render_backend *draw_classic_backend(const calf_env_class *cls);
const render_backend *draw_mujoco_backend(const calf_env_class *cls);

#endif
