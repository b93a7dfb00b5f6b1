/* calf/train.h: the library's entry points for training and playing a policy.
 * The command-line program is a thin layer over these. */
#ifndef CALF_TRAIN_H
#define CALF_TRAIN_H

#include <stdbool.h>
#include <stdio.h>

#include "calf/config.h"
#include "calf/error.h"

typedef struct calf_train_options {
    const char *root_dir;            /* where the run's files go (required) */
    const char *conf_path;           /* gin file; NULL: ROOT/config.gin of an earlier run */
    const char *const *conf_params;  /* --conf_param assignments, applied after the file;
                                      * none NULL (else CALF_EINVAL) */
    int num_conf_params;             /* >= 0 (else CALF_EINVAL) */
    int nproc;                       /* local worker processes; <= 1: this process only */
    bool quiet;                      /* no progress output on stderr */
    /* The config as gin text held in memory, in place of conf_path (errors name it
     * "<conf_text>:LINE"); both given is CALF_EINVAL. Appended after 0.3.0: a struct
     * zeroed as the rule below says reads the file, as before. */
    const char *conf_text;
} calf_train_options;

/* Load, override and validate the config described by `o` (no files written) into cfg,
 * one from calf_config_new (whatever it held is replaced).
 * Errors: CALF_EINVAL / CALF_EIO with "file:line: ..." messages. */
int calf_train_load_config(const calf_train_options *o, calf_config *cfg, calf_error *err);

/* Train. Returns CALF_OK, CALF_EINVAL for bad input (exit 2), CALF_EINTR when stopped
 * by Ctrl-C after writing a checkpoint (exit 130), or another status for failures. */
int calf_train(const calf_train_options *o, calf_error *err);

typedef struct calf_play_options {
    const char *root_dir;            /* a run's root dir (its config.gin and checkpoints) */
    const char *checkpoint;          /* a checkpoint file; NULL: the newest valid one */
    int num_episodes;                /* episodes to run (>= 1) */
    long long seed;                  /* seed of the play environments */
    bool verbose;                    /* print every episode */
    /* Where the report goes (the policy, each episode's return, the average). NULL:
     * stdout. The caller's stream; calf flushes it and does not close it. */
    FILE *out;
    /* Record the episodes, one after another, as this video file: MP4 (H.264) when it
     * ends in .mp4, an animated GIF when .gif, at the env's frame rate; written whole
     * and atomically at the end (after a failure or Ctrl-C there is none). NULL: none.
     * Needs a calf built with video support (calf_has_video, calf/render.h). */
    const char *video;
    int width, height;               /* the video's size in pixels; 0: 480 */
    long long max_frames;            /* record at most this many frames; 0: all of them
                                        (the episodes still all play, the report is the same) */
} calf_play_options;

/* Growth rule of calf_play_options and calf_export_options: fields are only ever added
 * at the end (0.3 took calf_play_options' two test-only fields out, the one exception:
 * README.md, "Changes in 0.3"), and a new field's 0 or NULL keeps the behaviour of the
 * version before it. So zero the whole struct (memset, or an initializer that names the fields it
 * sets) and set what you need: such source compiles and behaves the same against a
 * newer header. The struct's size grows, so a program is rebuilt against the libcalf
 * it runs with. */

/* Run the greedy policy of a checkpoint; writes each episode's return and the average
 * to o->out. Returns a calf_status: a failed write is CALF_EIO naming the stream and the
 * system's reason; running out of memory CALF_ENOMEM "... out of memory ...", with
 * nothing written. With o->video, the same for the video: CALF_EINVAL for an unknown extension, a size out of range or odd
 * for MP4, an env that cannot be drawn or a calf without video support (naming the
 * packages); CALF_EIO for a path that cannot be written or a renderer that cannot start;
 * CALF_EINTR after SIGINT/SIGTERM (caught while recording); never a file then. */
int calf_play(const calf_play_options *o, calf_error *err);

typedef struct calf_export_options {
    const char *root_dir;            /* a run's root dir (its config.gin and checkpoints) */
    const char *checkpoint;          /* a checkpoint file; NULL: the newest valid one */
    const char *output;              /* the C file to write; NULL or "-": the stream out */
    FILE *out;                       /* the stream for output NULL or "-"; NULL: stdout.
                                        The caller's; calf flushes it, never closes it */
} calf_export_options;

/* Write the greedy policy of a checkpoint as one C99 source file that needs only a C
 * compiler and libm: the weights as hex floats and
 *   int calf_policy_act(const float *obs, float *action);
 * with CALF_POLICY_OBS_DIM, CALF_POLICY_ACTION_DIM, CALF_POLICY_DISCRETE and the other
 * macros the file's comment lists. It computes what `calf play` computes, with the
 * same arithmetic (fused multiply-adds where this build uses them, calf's tanh, the
 * same summation order): equal discrete actions, continuous ones within rounding of the
 * last step. The file is written atomically (a device or pipe that exists, straight).
 * Returns a calf_status; an algorithm that cannot be exported, a run or checkpoint that
 * does not load, is CALF_EINVAL; a failed write CALF_EIO naming the file and reason;
 * running out of memory CALF_ENOMEM "... out of memory ...", with nothing written. */
int calf_export(const calf_export_options *o, calf_error *err);

#endif
