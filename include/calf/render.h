/* calf/render.h: pictures of an environment's state, as Gymnasium's rgb_array mode gives
 * them (classic control drawn with cairo, MuJoCo through its own offscreen renderer, a
 * plug-in through its class's render hook): what `calf play --video` records. */
#ifndef CALF_RENDER_H
#define CALF_RENDER_H

#include <stdbool.h>
#include <stdint.h>

#include "calf/env.h"
#include "calf/error.h"

/* Opaque: made by calf_renderer_open, released by calf_renderer_close. It holds what
 * drawing needs (a cairo surface; an OpenGL context and MuJoCo's scene), so open one per
 * picture size and env class and draw many frames with it. One thread at a time. */
typedef struct calf_renderer calf_renderer;

/* A renderer of width x height pictures (1..4096 each) for the class named env_name.
 * On success *out is the caller's, to release with calf_renderer_close. Errors, with
 * nothing held: CALF_EINVAL for an unknown env, a size out of range, an env that cannot
 * be drawn (a plug-in class without a render hook; a MuJoCo env in a build without EGL),
 * or a calf built without video support (the message names the Debian packages to
 * install); CALF_EIO when the renderer cannot start (no OpenGL context); CALF_ENOMEM. */
int calf_renderer_open(const char *env_name, int width, int height, calf_renderer **out,
                       calf_error *err);
void calf_renderer_close(calf_renderer *r); /* NULL is fine */

/* Draw env's current state (an env of the renderer's class, reset at least once) into
 * rgb: (height, width, 3) uint8, rows from the top, as Gymnasium's render() returns. The
 * env is only read: drawing never changes what its next step computes. CALF_EINVAL for
 * an env of another class; a plug-in hook's failure is its status and message. */
int calf_renderer_draw(calf_renderer *r, const calf_env *env, uint8_t *rgb, calf_error *err);

/* The frames per second a video of the env plays at: Gymnasium's metadata render_fps
 * (MuJoCo's: 1 / dt). */
double calf_renderer_fps(const calf_renderer *r);
int calf_renderer_width(const calf_renderer *r);
int calf_renderer_height(const calf_renderer *r);

/* Whether this build can draw (cairo) and write videos (FFmpeg, giflib). */
bool calf_has_video(void);

#endif
