/* events_reader.h: a validating reader for TensorBoard events files. It checks both
 * CRCs of every TFRecord and decodes the Event fields calf writes, so tests can prove
 * what events_writer.c produced and `calf events FILE` can show a run's file as text. */
#ifndef CALF_EVENTS_READER_H
#define CALF_EVENTS_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "calf/error.h"

enum events_value_kind {
    EVENTS_VALUE_OTHER = 0,  /* image, audio, tensor, ...: tag only */
    EVENTS_VALUE_SIMPLE = 1, /* simple_value */
    EVENTS_VALUE_HISTO = 2   /* histo */
};

typedef struct events_value {
    char *tag;          /* NUL-terminated copy */
    int kind;           /* an events_value_kind */
    float simple_value; /* EVENTS_VALUE_SIMPLE */
    /* EVENTS_VALUE_HISTO: HistogramProto fields; absent fields read as 0 (proto3). */
    double histo_min, histo_max, histo_num, histo_sum, histo_sum_squares;
    double *bucket_limit; /* (num_buckets) */
    double *bucket;       /* (num_buckets) */
    size_t num_buckets;
} events_value;

/* SessionLog.SessionStatus (event.proto). */
enum events_session_status {
    EVENTS_SESSION_UNSPECIFIED = 0,
    EVENTS_SESSION_START = 1, /* a (re)start: TensorBoard's restart marker */
    EVENTS_SESSION_STOP = 2,
    EVENTS_SESSION_CHECKPOINT = 3
};

typedef struct events_record {
    uint64_t offset;      /* byte offset of the record's length field in the file */
    double wall_time;
    int64_t step;
    char *file_version;   /* NULL unless the Event carries file_version */
    bool has_session_log; /* the Event carries session_log (field 7) */
    int session_status;   /* its status, an events_session_status; 0 when absent */
    bool has_summary;
    events_value *values; /* (num_values) the Summary's values */
    size_t num_values;
    size_t values_cap;    /* allocated length of values */
    const unsigned char *data; /* (len) the Event's encoded bytes */
    size_t len;
} events_record;

typedef struct events_reader {
    FILE *f;
    char *path;
    uint64_t offset;      /* where the next record starts */
    bool cut;             /* the last next() failed because the file ends inside the
                             record at offset: a torn tail, not a damaged record */
    events_record rec;    /* the last record read; owned by the reader */
    unsigned char *buf;   /* (cap) record data */
    size_t cap;
} events_reader;

/* Open path for reading. On failure (CALF_EIO, CALF_ENOMEM) r needs no close. */
int events_reader_open(events_reader *r, const char *path, calf_error *err);
/* Read and validate the next record. On CALF_OK *rec points at it (valid until the
 * next call or close), or is NULL at a clean end of file. A truncated or corrupt
 * record is CALF_EINVAL with a message naming the file and the byte offset; r->cut
 * then tells the two apart. The file ends inside the record (cut): fewer than 12
 * header bytes, or a length whose CRC checks out but reaches past the end of the
 * file, data and trailing CRC included. Damaged: a CRC that does not match, a length
 * over 1 GiB, an Event that does not parse. Either way r->offset stays at the
 * record's start. Out of memory: CALF_ENOMEM naming the file and offset. */
int events_reader_next(events_reader *r, const events_record **rec, calf_error *err);
void events_reader_close(events_reader *r); /* NULL-safe, idempotent */

/* Decode one Event message (no framing) into rec, which must be zeroed or previously
 * filled by this function (its allocations are reused; release them with
 * events_record_free). The message names the problem, not the file; CALF_ENOMEM when a
 * copy does not fit (rec holds what was decoded before it). */
int events_decode_event(const unsigned char *data, size_t len, events_record *rec,
                        calf_error *err);
void events_record_free(events_record *rec);

/* ---- a run: its files read in order, as TensorBoard's event accumulator reads them */

enum events_entry_what {
    EVENTS_ENTRY_VERSION, /* a file_version record */
    EVENTS_ENTRY_SESSION, /* a SessionLog record (START: a restart marker) */
    EVENTS_ENTRY_VALUE    /* one value of a Summary */
};

typedef struct events_entry {
    int what;            /* an events_entry_what */
    bool purged;         /* dropped from TensorBoard's view by a later record */
    int64_t step;
    double wall_time;
    char *text;          /* VERSION: the file_version; VALUE: the tag; owned */
    int kind;            /* VALUE: an events_value_kind */
    int status;          /* SESSION: an events_session_status */
    float simple_value;  /* EVENTS_VALUE_SIMPLE */
    double histo_num, histo_min, histo_max, histo_sum; /* EVENTS_VALUE_HISTO */
} events_entry;

/* TensorBoard's state for one run (plugin_event_accumulator.py), carried from file to
 * file as it is across the files of a run directory, and everything read so far. */
typedef struct events_run {
    events_entry *entries; /* (num_entries) in file order; purged ones kept, marked */
    size_t num_entries, cap;
    double file_version;   /* the last file_version, parsed; -1 before one (or unparsable) */
    bool seen_start;       /* a SessionLog START was read: the next one is a restart */
    int64_t most_recent_step; /* step of the last Event with a summary; -1 before one */
} events_run;

void events_run_init(events_run *run);
/* Read one more file of the run (files in the order TensorBoard reads them: a run
 * directory's in name order), marking the entries a restart marker drops as purged
 * (the rule is calf_events_dump's, in calf/summary.h). A file that ends inside its last
 * record is read up to it and, when warn is not NULL, reported there as "calf: warning:
 * PATH: last record cut at offset N (a crash while writing?); ignored". Anything else
 * that stops the reader, or a file with no complete record, is the error; what was read
 * before it stays in run. */
int events_run_read_file(events_run *run, const char *path, FILE *warn, calf_error *err);
void events_run_free(events_run *run); /* NULL-safe; leaves run initialised and empty */

/* calf_events_dump, the text form for `calf events FILE...`, and calf_events_scalars,
 * its scalars as numbers for calf.read_scalars, are declared in the public
 * calf/summary.h so the command-line program and the Python package need no internal
 * header; they live in events_reader.c beside the reader they are built on. */

#endif
