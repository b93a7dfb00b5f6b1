/* clock.h: a clock's reading in seconds, for timeouts, rates and the summaries' wall
 * time; never part of a result. */
#ifndef CALF_CLOCK_H
#define CALF_CLOCK_H

#include <time.h>

/* Seconds on clock `id` (CLOCK_MONOTONIC for intervals, CLOCK_REALTIME for wall time). */
static inline double calf_clock_s(clockid_t id) {
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return 0.0; /* cannot fail for these clocks */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds on the monotonic clock: what intervals are measured with. */
static inline double calf_monotonic_s(void) { return calf_clock_s(CLOCK_MONOTONIC); }

#endif
