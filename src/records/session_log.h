/* session_log.h: whether a launch of a run writes TensorBoard's restart marker. */
#ifndef CALF_SESSION_LOG_H
#define CALF_SESSION_LOG_H

#include <stdbool.h>
#include <stdint.h>

/* Whether this launch writes TensorBoard's restart marker into root/sub: always on a
 * fresh run (a run's first marker is its start: only later ones purge), and on a resume
 * from iteration K only when an earlier launch wrote an iteration-stepped value past K
 * (it died after its last checkpoint). A marker at K+1 purges every earlier value with
 * step K+1 or more, whatever its tag, so writing one needlessly would hide the earlier
 * launches' Metrics_vs_EnvironmentSteps values, whose steps are env steps. A file that
 * cannot be read counts as needing one. */
bool session_restart_needed(const char *root, const char *sub, int64_t iteration);

#endif
