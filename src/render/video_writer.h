/* video_writer.h: RGB frames encoded as a video file: MP4 (H.264 through FFmpeg's
 * libavcodec/libavformat; libx264 where the build's FFmpeg has it) or an animated GIF
 * (giflib, a palette per frame). The file is made in memory, for the caller to write
 * once, whole and atomically: a failure or Ctrl-C on the way leaves no file. */
#ifndef CALF_VIDEO_WRITER_H
#define CALF_VIDEO_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"

typedef enum video_format { VIDEO_MP4 = 1, VIDEO_GIF = 2 } video_format;

typedef struct video_writer video_writer;

/* The format path's extension names (".mp4", ".gif", any case), or CALF_EINVAL naming
 * path and the extensions there are. */
int video_format_of(const char *path, video_format *fmt, calf_error *err);

/* A writer of width x height frames at fps frames per second for path (written by
 * video_writer_finish). MP4 needs even sizes (H.264's 4:2:0 colour). CALF_EINVAL for a
 * bad extension or size, CALF_EIO when no encoder starts, CALF_ENOMEM; *out is NULL
 * then. Without video support: CALF_EINVAL saying which packages to install. */
int video_writer_open(const char *path, int width, int height, double fps, video_writer **out,
                      calf_error *err);
/* Encode one frame: rgb is (height, width, 3), rows from the top. */
int video_writer_add(video_writer *v, const uint8_t *rgb, calf_error *err);
/* k: the writer wants every k-th of the fps frames a second, 1 but for a GIF of an env
 * faster than 50 frames per second (GIF delays are whole hundredths, and viewers slow
 * those under 2): then the least k that brings fps / k to 50 or below. */
int video_writer_every(const video_writer *v);
/* The frames encoded so far, and the file's frame rate (fps / k). */
long video_writer_frames(const video_writer *v);
double video_writer_fps(const video_writer *v);
/* Finish the stream: *data (the caller's, free()) holds the file's *len bytes. Frees v
 * either way; *data is NULL after a failure. */
int video_writer_finish(video_writer *v, uint8_t **data, size_t *len, calf_error *err);
/* Drop everything, writing nothing; NULL is fine. */
void video_writer_abort(video_writer *v);

#endif
