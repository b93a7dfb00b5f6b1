/* events_writer.h: what the library adds to the public summary API (calf/summary.h)
 * for its own use: a listener that sees every scalar written through the current-writer
 * calls, so the stepwise trainer can hand an algorithm's losses back as values. */
#ifndef CALF_EVENTS_WRITER_H
#define CALF_EVENTS_WRITER_H

typedef void (*summary_listener)(void *arg, const char *tag, double value);

/* From now on calf_summary_scalar, called in this thread, also calls fn(arg, tag,
 * value), whether or not a writer is current; NULL stops it. One listener per thread. */
void summary_listen(summary_listener fn, void *arg);

#endif
