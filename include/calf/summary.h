/* calf/summary.h: TensorBoard event files (TFRecord framing, masked CRC32C, Event
 * protobuf), written without a protobuf library, and ALF's record context: only the
 * main process (rank <= 0) ever creates a writer, a directory or a file. */
#ifndef CALF_SUMMARY_H
#define CALF_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "calf/error.h"

typedef struct calf_summary_writer calf_summary_writer;

/* Create dir (and its parents), open a new file
 * dir/events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n> (n counts writers opened
 * by this process, so two writers never share a file) and write the file_version event.
 * Records reach the file at least every flush_secs seconds (checked on each write;
 * <= 0 flushes after every record) and at flush/close. Opens regardless of rank: use
 * calf_summary_run for the rank-gated context. Returns NULL and fills err on failure.
 * The caller owns the writer and releases it with calf_summary_writer_close. */
calf_summary_writer *calf_summary_writer_open(const char *dir, double flush_secs,
                                              calf_error *err);
/* Path of the events file; owned by the writer. */
const char *calf_summary_writer_path(const calf_summary_writer *w);
/* Push buffered records to the file. Reports the first write error since the writer
 * was opened, if any (write errors are sticky: after one, nothing more is written). */
int calf_summary_writer_flush(calf_summary_writer *w, calf_error *err);
/* Flush, close and free; NULL is fine. Stops being the current writer if it was. */
int calf_summary_writer_close(calf_summary_writer *w, calf_error *err);

/* Write to an explicit writer with an explicit timestamp (seconds since the epoch).
 * Return CALF_OK or the writer's sticky error status. */
int calf_summary_writer_add_scalar(calf_summary_writer *w, const char *tag, int64_t step,
                                   double wall_time, double value);
/* A histogram over TensorFlow's default buckets (0, +-1e-12 * 1.1^k up to 1e20,
 * +-DBL_MAX), runs of empty buckets collapsed as TensorFlow does. Non-finite values
 * cannot be placed in a bucket and are left out of every statistic. */
int calf_summary_writer_add_histogram(calf_summary_writer *w, const char *tag,
                                      int64_t step, double wall_time,
                                      const float *values, /* (n) */ size_t n);

/* The current writer: the one the calf_summary_* calls below write to. Not owned by
 * this registry; set_current returns the previous one so contexts nest. */
calf_summary_writer *calf_summary_set_current(calf_summary_writer *w);
calf_summary_writer *calf_summary_current(void);
bool calf_summary_enabled(void); /* a writer is current */

/* ALF's run_under_record_context. On the main process (calf_context_is_main(), rank
 * <= 0): open a writer on dir, make it current, run fn(arg), restore the previous
 * current writer, flush and close. On rank > 0 only run fn(arg): no writer, no
 * directory, no file, nothing written. Returns fn's result when it is not CALF_OK
 * (err is then left alone), else the writer's status (open, write or close failure). */
int calf_summary_run(const char *dir, double flush_secs, int (*fn)(void *arg), void *arg,
                     calf_error *err);

/* Write to the current writer, stamped with the current time; no-ops when none is
 * current. A write error is remembered and reported by the next flush or close. */
void calf_summary_scalar(const char *tag, int64_t step, double value);
void calf_summary_histogram(const char *tag, int64_t step,
                            const float *values, /* (n) */ size_t n);

/* Validate an events file (both CRCs of every record) and print it as text on out:
 * "file_version <v>" for the version record, then one line per value,
 * "<step> <tag> <simple_value>" or
 * "<step> <tag> histogram num=<n> min=<min> max=<max> sum=<sum>" (%.9g). Stops at the
 * first truncated or corrupt record with CALF_EINVAL naming the file and the record's
 * byte offset; the lines before it are printed. For `calf events FILE`. */
int calf_events_dump(const char *path, FILE *out, calf_error *err);

#endif
