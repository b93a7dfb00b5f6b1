/* calf/plot.h: learning curves of training runs as one SVG 1.1 file (`calf plot`), read
 * from the runs' TensorBoard events files exactly as `calf events` (and TensorBoard)
 * read them, and drawn by calf itself with no dependency. */
#ifndef CALF_PLOT_H
#define CALF_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "calf/error.h"

/* What the x axis shows. */
enum calf_plot_x {
    /* Environment steps: a Metrics_vs_EnvironmentSteps/ tag's own step; any other tag's
     * step mapped through the Metrics/EnvironmentSteps value of the same step in the
     * same directory (values with none there are left out, with a warning). */
    CALF_PLOT_X_STEPS = 0,
    CALF_PLOT_X_ITERATIONS = 1, /* the event's step (not for _vs_EnvironmentSteps tags) */
    /* wall time less the earliest of any record of the run (train/ and eval/) */
    CALF_PLOT_X_SECONDS = 2
};

typedef struct calf_plot_options {
    /* Panels, one per tag and directory: "eval:TAG" or "train:TAG" for one directory,
     * "TAG" for each of eval/ and train/ where some run has it. None (NULL, 0):
     * "Metrics/AverageReturn". A tag no run has is an error. */
    const char *const *tags; /* (num_tags) */
    size_t num_tags;
    double smooth; /* TensorBoard's smoothing weight, [0, 1); TensorBoard's default is 0.6 */
    int x;         /* a calf_plot_x */
    /* Runs whose directory names differ only by a seed suffix (plot_seed_key_len in
     * src/tools/plot.h: "ppo-seed1", "ppo_2", "ppo3") drawn as one line, the mean over the
     * runs at each step they all have, with a band from their minimum to maximum. */
    bool group;
    FILE *warn; /* notes: a cut last record, values left out; NULL: not shown */
} calf_plot_options;

/* `calf plot ROOT...`: read each run's ROOT/eval and ROOT/train events files (each
 * directory one TensorBoard run, its events.out.tfevents.* files in name order, restart
 * markers applied: see calf_events_dump) and write the learning curves on out as one
 * SVG 1.1 document: one panel per tag and directory, one colour per run (or group)
 * with a legend of the runs' directory names, the smoothed curve over the raw one, axes
 * with 1-2-5 ticks. src/tools/plot.h (plot_write_svg) says how values map to coordinates.
 * Everything is read and checked before the first byte is written: bad options, a ROOT
 * with no events file, a damaged events file or a tag no run has is CALF_EINVAL with a
 * one-line message and nothing written; so is running out of memory, CALF_ENOMEM "...
 * out of memory allocating ..."; a failed write is CALF_EIO. */
int calf_plot(const char *const *roots, /* (num_roots) */ size_t num_roots,
              const calf_plot_options *opt, FILE *out, calf_error *err);

#endif
