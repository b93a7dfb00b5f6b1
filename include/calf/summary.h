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
 * dir/events.out.tfevents.<unix seconds, 10 digits>.<microseconds, 6>.<hostname>.<pid>.<n>
 * (the time first, so a directory's files sort by name in the order they were opened;
 * n counts writers opened by this process, so two writers never share a file) and
 * write the file_version event.
 * Records reach the file at least every flush_secs seconds (checked on each write;
 * <= 0 flushes after every record), when 1 MiB is waiting, and at flush/close; never in
 * part: a write that fails is cut back to the last whole record (so a full disk leaves
 * a file that reads cleanly), and nothing more is written after it. Running out of
 * memory for a record is sticky the same way (CALF_ENOMEM; the records before it are
 * written). Opens regardless of rank: use calf_summary_run for the rank-gated context.
 * Returns NULL and fills err on failure (CALF_ENOMEM when the writer does not fit;
 * no file is left then).
 * The caller owns the writer and releases it with calf_summary_writer_close. */
calf_summary_writer *calf_summary_writer_open(const char *dir, double flush_secs,
                                              calf_error *err);
/* Path of the events file; owned by the writer. */
const char *calf_summary_writer_path(const calf_summary_writer *w);
/* Push buffered records to the file. Reports the first write error (or lost record,
 * CALF_ENOMEM) since the writer was opened, if any (they are sticky: after one,
 * nothing more is written). */
int calf_summary_writer_flush(calf_summary_writer *w, calf_error *err);
/* The first write error since the writer was opened (filling err), or CALF_OK; writes
 * nothing. */
int calf_summary_writer_status(const calf_summary_writer *w, calf_error *err);
/* Flush, close and free; NULL is fine. Stops being the calling thread's current writer
 * if it was (close a writer only where no other thread has it current). */
int calf_summary_writer_close(calf_summary_writer *w, calf_error *err);

/* Write to an explicit writer with an explicit timestamp (seconds since the epoch).
 * Return CALF_OK or the writer's sticky error status. */
int calf_summary_writer_add_scalar(calf_summary_writer *w, const char *tag, int64_t step,
                                   double wall_time, double value);
/* TensorBoard's restart marker: an Event at step carrying SessionLog{status: START}
 * (event.proto: Event.session_log = 7, SessionLog.status = 1, START = 1).
 *
 * What TensorBoard does with it (plugin_event_accumulator.py, _MaybePurgeOrphanedData
 * with purge_orphaned_data on, its default, in files whose file_version is
 * "brain.Event:2" as all of calf's are): a run is one directory, its events files read
 * in file-name order (calf's names start with the creation time to the microsecond,
 * so launch by launch). The run's first START is its initial start and drops nothing. Every later
 * START at step K drops, from every tag of the run, the values already read whose step
 * is >= K (steps < K stay), whichever file and launch wrote them; values after the
 * marker are kept whatever their step.
 *
 * So a launch writes one marker before its first value, on each writer (each directory
 * is its own run), at the first step it will write: a fresh run at its first step, a
 * resumed one at the step after the last one its checkpoint covers, so the dead
 * launch's values from that step on are replaced, not shown twice. Values of the same
 * launch written before the marker would be dropped too. */
int calf_summary_writer_add_session_start(calf_summary_writer *w, int64_t step,
                                          double wall_time);

/* A histogram over TensorFlow's default buckets (0, +-1e-12 * 1.1^k up to 1e20,
 * +-DBL_MAX), runs of empty buckets collapsed as TensorFlow does. Non-finite values
 * cannot be placed in a bucket and are left out of every statistic. */
int calf_summary_writer_add_histogram(calf_summary_writer *w, const char *tag,
                                      int64_t step, double wall_time,
                                      const float *values, /* (n) */ size_t n);

/* The current writer: the one the calf_summary_* calls below write to. Each thread has
 * its own (none at first), so runs in different threads (two calf_trainer handles) write
 * only to their own files. Not owned by this registry; set_current returns the calling
 * thread's previous one so contexts nest. */
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

/* Write to the calling thread's current writer, stamped with the current time; no-ops
 * when none is current. A write error is remembered and reported by the next flush or close. */
void calf_summary_scalar(const char *tag, int64_t step, double value);
void calf_summary_histogram(const char *tag, int64_t step,
                            const float *values, /* (n) */ size_t n);
/* calf_summary_writer_add_session_start on the current writer. */
void calf_summary_session_start(int64_t step);

/* How calf_events_dump shows what it read; all false/NULL is `calf events FILE`. */
typedef struct calf_events_dump_options {
    bool raw;   /* every record as stored; default: what TensorBoard shows (see below) */
    bool csv;   /* "tag,step,wall_time,value" then one row per scalar; nothing else */
    FILE *warn; /* where a cut last record is reported; NULL: not reported */
} calf_events_dump_options;

/* `calf events FILE...`: validate events files (both CRCs of every record) and print
 * them on out. The files are read in the order given as one run, the way TensorBoard
 * reads a run directory's files in name order, and only then printed.
 *
 * Text (the default): "file_version <v>" for each version record, "<step> session_start"
 * for a restart marker (session_stop, session_checkpoint, "session_log status=<n>" for
 * the other SessionLog statuses), and one line per value, "<step> <tag> <simple_value>"
 * or "<step> <tag> histogram num=<n> min=<min> max=<max> sum=<sum>" (%.9g). Tags and
 * versions are anyone's bytes, so the text view escapes what a terminal would act on: a
 * newline, a carriage return and a tab as \n, \r and \t, a backslash as \\, other
 * control characters and bytes that are not UTF-8 as \xNN, C1 controls (U+0080 to
 * U+009F) as \u0080..\u009f; the rest of UTF-8 as it is.
 * CSV: the header "tag,step,wall_time,value", then per scalar (simple_value) a row with
 * the tag (in double quotes, quotes doubled, when it holds a comma, a quote or a line
 * break, as RFC 4180 has it), the step, wall_time as %.17g (seconds; reads back as the
 * same double) and the value as %.9g (reads back as the same float). Histograms,
 * markers and version records have no row.
 *
 * Unless raw, values are left out as TensorBoard leaves them out: at each START marker
 * after the run's first, those read before it with step >= its step (see
 * calf_summary_writer_add_session_start); in files older than "brain.Event:2",
 * TensorBoard's older rule: an Event whose step is below the previous summary's drops
 * the earlier values of its own tags with step >= its step.
 *
 * A file that ends inside its last record (a crash while writing it: a partial length
 * header, or a length whose CRC checks out but runs past the end) is read up to that
 * record, and warn gets "calf: warning: FILE: last record cut at offset N (a crash while
 * writing?); ignored". A damaged record (CRC mismatch, a length over 1 GiB, an Event
 * that does not parse), a file with no complete record, or one that cannot be opened
 * is CALF_EINVAL/CALF_EIO naming the file (and the record's byte offset); what was read
 * before it is printed and the files after it are not read. Running out of memory is
 * CALF_ENOMEM "events: FILE: record at offset N: out of memory allocating ...", and
 * nothing is printed. A failed write on out is CALF_EIO "events: write: ...". opt may
 * be NULL (the defaults). */
int calf_events_dump(const char *const *paths, /* (num_paths) */ size_t num_paths,
                     const calf_events_dump_options *opt, FILE *out, calf_error *err);

/* Called by calf_events_scalars once per scalar: its tag (calf's, valid during the
 * call), step, wall time (seconds since the epoch) and simple_value, as stored. Returns
 * CALF_OK to go on; any other value stops the walk. */
typedef int (*calf_events_scalar_fn)(void *arg, const char *tag, int64_t step,
                                     double wall_time, float value);

/* The scalars of `calf events --csv` as numbers, not text: the files read as
 * calf_events_dump reads them (in the order given, as one run, values left out as
 * TensorBoard leaves them out, a cut last record reported on warn), then fn(arg, ...)
 * called for each scalar the CSV has a row for, in the CSV's order. Returns CALF_OK;
 * calf_events_dump's error for a file that cannot be read to its end (fn is then not
 * called at all); or the first value other than CALF_OK that fn returned, which stops
 * the walk (err is then left for fn to have filled). */
int calf_events_scalars(const char *const *paths, /* (num_paths) */ size_t num_paths,
                        FILE *warn, calf_events_scalar_fn fn, void *arg, calf_error *err);

#endif
