/* events_writer.c: TensorBoard events writer. Each Event is encoded by hand in canonical
 * proto3 form (field order, zero-valued plain scalars omitted, oneof members always
 * present) and framed as a TFRecord. Whole records collect in a buffer that goes to the
 * file with write(2): a crash can lose the unflushed tail but never damages a record
 * written before it, and a failed write is cut back to the last whole record. */
#include "calf/summary.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "calf/context.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "records/crc32c.h"
#include "base/fsutil.h"
#include "base/mem.h"
#include "records/events_writer.h"

/* Protobuf wire types used here. */
enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_FIXED32 = 5 };

/* Encoding buffers: bytes_buf (bytes.h). Sizes are small (one Event). An append that
 * cannot get memory sets b->failed and writes nothing; write_record checks. */
typedef bytes_buf pbuf;

static void pb_bytes(pbuf *b, const void *p, size_t n) {
    unsigned char *at = n ? bytes_buf_room(b, n) : NULL;
    if (at) memcpy(at, p, n);
}

static void pb_varint(pbuf *b, uint64_t v) {
    unsigned char tmp[10];
    size_t n = 0;
    do {
        unsigned char byte = v & 0x7f;
        v >>= 7;
        tmp[n++] = byte | (v ? 0x80 : 0);
    } while (v);
    pb_bytes(b, tmp, n);
}

static void pb_tag(pbuf *b, unsigned field, unsigned wire_type) {
    pb_varint(b, (uint64_t)field << 3 | wire_type);
}

static void pb_double(pbuf *b, unsigned field, double v) {
    unsigned char le[8];
    bytes_put_f64(le, v);
    pb_tag(b, field, WT_FIXED64);
    pb_bytes(b, le, 8);
}

/* proto3 leaves a plain (non-oneof) scalar out when it has the default value; matching
 * that keeps our bytes identical to what TensorFlow's own writer produces. */
static void pb_double_nonzero(pbuf *b, unsigned field, double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    if (bits != 0) pb_double(b, field, v);
}

static void pb_float(pbuf *b, unsigned field, float v) {
    unsigned char le[4];
    bytes_put_f32(le, v);
    pb_tag(b, field, WT_FIXED32);
    pb_bytes(b, le, 4);
}

static void pb_len_field(pbuf *b, unsigned field, const void *p, size_t n) {
    pb_tag(b, field, WT_LEN);
    pb_varint(b, n);
    pb_bytes(b, p, n);
}

/* Event fields (tensorboard/compat/proto/event.proto). */
enum {
    EVENT_WALL_TIME = 1, EVENT_STEP = 2, EVENT_FILE_VERSION = 3, EVENT_SUMMARY = 5,
    EVENT_SESSION_LOG = 7
};
/* SessionLog.status = 1; SessionStatus START = 1. */
enum { SESSION_LOG_STATUS = 1, SESSION_STATUS_START = 1 };
/* Summary.value = 1; Summary.Value: tag = 1, simple_value = 2, histo = 5. */
enum { SUMMARY_VALUE = 1, VALUE_TAG = 1, VALUE_SIMPLE = 2, VALUE_HISTO = 5 };
/* HistogramProto (tensorboard/compat/proto/histogram.proto). */
enum {
    HISTO_MIN = 1, HISTO_MAX = 2, HISTO_NUM = 3, HISTO_SUM = 4, HISTO_SUM_SQUARES = 5,
    HISTO_BUCKET_LIMIT = 6, HISTO_BUCKET = 7
};

static const char FILE_VERSION[] = "brain.Event:2";

static void encode_event_head(pbuf *ev, double wall_time, int64_t step) {
    pb_double_nonzero(ev, EVENT_WALL_TIME, wall_time);
    if (step != 0) {
        pb_tag(ev, EVENT_STEP, WT_VARINT);
        pb_varint(ev, (uint64_t)step); /* int64: negatives take ten bytes, as specified */
    }
}

struct calf_summary_writer {
    int fd;
    char *path;
    double flush_secs;   /* <= 0: flush after every record */
    double last_flush;   /* CLOCK_MONOTONIC seconds of the last flush */
    calf_error error;    /* first write error; status CALF_OK while none */
    off_t written;       /* bytes in the file, all of them whole records */
    pbuf out;            /* whole records not yet written */
    pbuf ev, sum, val, histo; /* nested messages, innermost last */
    double *limits;      /* (num_limits) TensorFlow's default bucket limits, ascending */
    double *counts;      /* (num_limits) scratch: bucket counts, then collapsed counts */
    double *out_limits;  /* (num_limits) scratch: collapsed bucket limits */
    size_t num_limits;
};

/* The writer that calf_summary_scalar/histogram write to. ALF keeps it global; here it
 * is the calling thread's, so that two runs stepped in two threads (two calf_trainer
 * handles) each write their own file: a run sets it around its own iteration. */
static _Thread_local calf_summary_writer *current_writer;
/* Writers opened by this process so far, part of every file name, and the last file
 * name's time in microseconds since the epoch (the next one is later): shared by the
 * process's threads, so taken under names_lock. */
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long writers_opened;
static long long last_name_stamp;

/* The time a new file's name carries: now, or just after the last name's. */
static long long take_name_stamp(long long now) {
    CALF_ASSERT(pthread_mutex_lock(&names_lock) == 0);
    if (now <= last_name_stamp) now = last_name_stamp + 1;
    last_name_stamp = now;
    CALF_ASSERT(pthread_mutex_unlock(&names_lock) == 0);
    return now;
}

/* The number a new file's name carries: each writer of the process its own. */
static unsigned long take_writer_number(void) {
    CALF_ASSERT(pthread_mutex_lock(&names_lock) == 0);
    unsigned long n = writers_opened++;
    CALF_ASSERT(pthread_mutex_unlock(&names_lock) == 0);
    return n;
}

/* TensorFlow's default histogram bucket limits, generated by the same loop so the
 * doubles are bit-identical: 0, +-1e-12 * 1.1^k while below 1e20, and +-DBL_MAX. */
static int default_bucket_limits(calf_summary_writer *w, calf_error *err) {
    size_t npos = 0;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) npos++;
    w->num_limits = 2 * (npos + 1) + 1;
    w->limits = mem_alloc(w->num_limits * sizeof *w->limits, err);
    w->counts = w->limits ? mem_alloc(w->num_limits * sizeof *w->counts, err) : NULL;
    w->out_limits = w->counts ? mem_alloc(w->num_limits * sizeof *w->out_limits, err) : NULL;
    if (!w->out_limits) return CALF_ENOMEM; /* writer_free frees the others */
    size_t mid = npos + 1; /* index of 0.0 */
    w->limits[mid] = 0.0;
    size_t k = 0;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1, k++) {
        w->limits[mid + 1 + k] = v;
        w->limits[mid - 1 - k] = -v;
    }
    w->limits[w->num_limits - 1] = DBL_MAX;
    w->limits[0] = -DBL_MAX;
    return CALF_OK;
}

static void writer_fail(calf_summary_writer *w, const char *what, int e) {
    if (w->error.status == CALF_OK)
        calf_error_set(&w->error, CALF_EIO, "summary: %s %s: %s", what, w->path, strerror(e));
}

/* Write the buffered records. On failure the file is cut back to its last whole record
 * (best effort), the error is kept and nothing more is written. */
static void writer_flush_out(calf_summary_writer *w) {
    if (w->error.status != CALF_OK) return;
    const unsigned char *p = w->out.data;
    size_t n = w->out.len;
    while (n > 0) {
        ssize_t got = write(w->fd, p, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            writer_fail(w, "write", got < 0 ? errno : EIO);
            int cut = ftruncate(w->fd, w->written); /* the error above is what counts */
            (void)cut;
            return;
        }
        p += got;
        n -= (size_t)got;
    }
    w->written += (off_t)w->out.len;
    w->out.len = 0;
    w->last_flush = calf_monotonic_s();
}

/* Records past this many buffered bytes go out whatever the flush interval. */
enum { OUT_MAX_BYTES = 1 << 20 };

/* Frame w->ev as one TFRecord at the end of the buffer. A record whose encoding ran
 * out of memory is not written: the records before it go to the file, and running out
 * is the writer's sticky error, as a failed write is. */
static int write_record(calf_summary_writer *w) {
    if (w->error.status != CALF_OK) return w->error.status;
    const pbuf *ev = &w->ev;
    size_t whole = w->out.len;
    bool lost = ev->failed || w->sum.failed || w->val.failed || w->histo.failed;
    if (!lost) {
        unsigned char head[12], tail[4];
        bytes_put_le(head, ev->len, 8);
        bytes_put_le(head + 8, crc32c_mask(crc32c(head, 8)), 4);
        bytes_put_le(tail, crc32c_mask(crc32c(ev->data, ev->len)), 4);
        pb_bytes(&w->out, head, sizeof head);
        pb_bytes(&w->out, ev->data, ev->len);
        pb_bytes(&w->out, tail, sizeof tail);
        lost = w->out.failed;
    }
    if (lost) {
        w->out.len = whole;
        w->out.failed = false;
        writer_flush_out(w);
        if (w->error.status == CALF_OK)
            calf_error_set(&w->error, CALF_ENOMEM,
                           "summary: out of memory encoding a record of %zu bytes for %s",
                           ev->len, w->path);
        return w->error.status;
    }
    if (w->flush_secs <= 0 || w->out.len >= OUT_MAX_BYTES ||
        calf_monotonic_s() - w->last_flush >= w->flush_secs)
        writer_flush_out(w);
    return w->error.status;
}

static void host_name(char *out, size_t cap) {
    char raw[256];
    if (gethostname(raw, sizeof raw) != 0) raw[0] = '\0';
    raw[sizeof raw - 1] = '\0';
    size_t j = 0;
    /* The name becomes part of a file name: keep it to characters safe there. */
    for (size_t i = 0; raw[i] && j + 1 < cap; i++) {
        char c = raw[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_' || c == '.';
        out[j++] = ok ? c : '_';
    }
    if (j == 0 && cap > 7) {
        memcpy(out, "unknown", 7);
        j = 7;
    }
    out[j] = '\0';
}

static void writer_free(calf_summary_writer *w) {
    free(w->path);
    free(w->out.data);
    free(w->ev.data);
    free(w->sum.data);
    free(w->val.data);
    free(w->histo.data);
    free(w->limits);
    free(w->counts);
    free(w->out_limits);
    free(w);
}

calf_summary_writer *calf_summary_writer_open(const char *dir, double flush_secs,
                                              calf_error *err) {
    CALF_ASSERT(dir != NULL);
    if (fs_mkdir_p(dir, err) != CALF_OK) return NULL;
    calf_summary_writer *w = mem_calloc(1, sizeof *w, err);
    if (!w) return NULL;
    w->flush_secs = flush_secs;
    calf_error_clear(&w->error);
    char host[128];
    host_name(host, sizeof host);
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0) {
        calf_error_set(err, CALF_EIO, "summary: clock_gettime: %s", strerror(errno));
        writer_free(w);
        return NULL;
    }
    /* The name's time is what orders a directory's files (TensorBoard reads them in name
     * order): seconds in 10 digits and microseconds in 6 sort as they were opened, where
     * whole seconds tie and the pid that follows (9991, then 10011) sorts by its digits.
     * Launches into one root dir take turns (rundir's lock); within this process, a
     * writer opened in the same microsecond as the last one takes the next. */
    long long stamp = take_name_stamp((long long)now.tv_sec * 1000000 + now.tv_nsec / 1000);
    size_t cap = strlen(dir) + sizeof host + 96;
    w->path = mem_alloc(cap, err);
    if (!w->path) {
        writer_free(w);
        return NULL;
    }
    int fd = -1;
    /* O_EXCL: a name already taken (another writer this second, a recycled pid) moves
     * on to the next number instead of appending to someone else's file. */
    for (int attempt = 0; attempt < 1000 && fd < 0; attempt++) {
        unsigned long n = take_writer_number();
        int len = snprintf(w->path, cap, "%s/events.out.tfevents.%010lld.%06lld.%s.%ld.%lu",
                           dir, stamp / 1000000, stamp % 1000000, host, (long)getpid(), n);
        CALF_ASSERT(len > 0 && (size_t)len < cap);
        fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        calf_error_set(err, CALF_EIO, "summary: open %s: %s", w->path, strerror(errno));
        writer_free(w);
        return NULL;
    }
    w->fd = fd;
    if (default_bucket_limits(w, err) != CALF_OK) {
        close(w->fd);
        unlink(w->path);
        writer_free(w);
        return NULL;
    }
    w->last_flush = calf_monotonic_s();

    w->ev.len = 0;
    encode_event_head(&w->ev, calf_clock_s(CLOCK_REALTIME), 0);
    pb_len_field(&w->ev, EVENT_FILE_VERSION, FILE_VERSION, sizeof FILE_VERSION - 1);
    write_record(w);
    /* The file_version record goes out at once so the file is recognisable even if
     * the process dies before its first flush interval; records buffered since the
     * last flush are lost when the process ends without a flush or close. */
    writer_flush_out(w);
    if (w->error.status != CALF_OK) {
        calf_error_set(err, w->error.status, "%s", w->error.msg);
        close(w->fd);
        unlink(w->path);
        writer_free(w);
        return NULL;
    }
    return w;
}

const char *calf_summary_writer_path(const calf_summary_writer *w) {
    CALF_ASSERT(w != NULL);
    return w->path;
}

int calf_summary_writer_flush(calf_summary_writer *w, calf_error *err) {
    CALF_ASSERT(w != NULL);
    writer_flush_out(w);
    return calf_summary_writer_status(w, err);
}

int calf_summary_writer_status(const calf_summary_writer *w, calf_error *err) {
    CALF_ASSERT(w != NULL);
    if (w->error.status != CALF_OK)
        return calf_error_set(err, w->error.status, "%s", w->error.msg);
    return CALF_OK;
}

int calf_summary_writer_close(calf_summary_writer *w, calf_error *err) {
    if (!w) return CALF_OK;
    if (current_writer == w) current_writer = NULL;
    writer_flush_out(w);
    if (close(w->fd) != 0) writer_fail(w, "close", errno);
    int rc = w->error.status;
    if (rc != CALF_OK) calf_error_set(err, rc, "%s", w->error.msg);
    writer_free(w);
    return rc;
}

/* Wrap w->val as the one value of a Summary inside an Event. */
static int write_summary_event(calf_summary_writer *w, int64_t step, double wall_time) {
    w->sum.len = 0;
    pb_len_field(&w->sum, SUMMARY_VALUE, w->val.data, w->val.len);
    w->ev.len = 0;
    encode_event_head(&w->ev, wall_time, step);
    pb_len_field(&w->ev, EVENT_SUMMARY, w->sum.data, w->sum.len);
    return write_record(w);
}

int calf_summary_writer_add_scalar(calf_summary_writer *w, const char *tag, int64_t step,
                                   double wall_time, double value) {
    CALF_ASSERT(w != NULL && tag != NULL);
    if (w->error.status != CALF_OK) return w->error.status;
    w->val.len = 0;
    pb_len_field(&w->val, VALUE_TAG, tag, strlen(tag));
    pb_float(&w->val, VALUE_SIMPLE, (float)value); /* oneof member: always present */
    return write_summary_event(w, step, wall_time);
}

int calf_summary_writer_add_session_start(calf_summary_writer *w, int64_t step,
                                          double wall_time) {
    CALF_ASSERT(w != NULL);
    if (w->error.status != CALF_OK) return w->error.status;
    w->sum.len = 0; /* the SessionLog; sum is free between records */
    pb_tag(&w->sum, SESSION_LOG_STATUS, WT_VARINT);
    pb_varint(&w->sum, SESSION_STATUS_START);
    w->ev.len = 0;
    encode_event_head(&w->ev, wall_time, step);
    pb_len_field(&w->ev, EVENT_SESSION_LOG, w->sum.data, w->sum.len); /* oneof: always */
    return write_record(w);
}

/* First index whose limit exceeds v (std::upper_bound, as TensorFlow's Histogram::Add). */
static size_t bucket_index(const double *limits, size_t n, double v) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v < limits[mid]) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

int calf_summary_writer_add_histogram(calf_summary_writer *w, const char *tag,
                                      int64_t step, double wall_time,
                                      const float *values, size_t n) {
    CALF_ASSERT(w != NULL && tag != NULL && (values != NULL || n == 0));
    if (w->error.status != CALF_OK) return w->error.status;
    size_t nb = w->num_limits;
    memset(w->counts, 0, nb * sizeof *w->counts);
    double mn = w->limits[nb - 1], mx = -DBL_MAX, num = 0, sum = 0, sum_sq = 0;
    for (size_t i = 0; i < n; i++) {
        double v = values[i];
        if (!isfinite(v)) continue;
        size_t b = bucket_index(w->limits, nb, v);
        CALF_ASSERT(b < nb); /* every finite float is below DBL_MAX */
        w->counts[b] += 1.0;
        if (v < mn) mn = v;
        if (v > mx) mx = v;
        num += 1.0;
        sum += v;
        sum_sq += v * v;
    }
    pbuf *h = &w->histo;
    h->len = 0;
    pb_double_nonzero(h, HISTO_MIN, mn);
    pb_double_nonzero(h, HISTO_MAX, mx);
    pb_double_nonzero(h, HISTO_NUM, num);
    pb_double_nonzero(h, HISTO_SUM, sum);
    pb_double_nonzero(h, HISTO_SUM_SQUARES, sum_sq);
    /* Collapse each run of empty buckets into one bucket ending where the run ends
     * (TensorFlow's EncodeToProto): TensorBoard takes bucket i's left edge from limit
     * i-1, so the edges of non-empty buckets stay exact while a typical histogram
     * needs a few dozen entries instead of 1551. */
    size_t m = 0;
    for (size_t i = 0; i < nb;) {
        double end = w->limits[i], count = w->counts[i];
        i++;
        if (count <= 0.0) {
            while (i < nb && w->counts[i] <= 0.0) {
                end = w->limits[i];
                count = w->counts[i];
                i++;
            }
        }
        /* counts is compacted in place: m stays behind i, which only moves ahead. */
        w->counts[m] = count;
        w->out_limits[m] = end;
        m++;
    }
    unsigned char le[8];
    uint64_t bits;
    pb_tag(h, HISTO_BUCKET_LIMIT, WT_LEN);
    pb_varint(h, (uint64_t)m * 8);
    for (size_t i = 0; i < m; i++) {
        memcpy(&bits, &w->out_limits[i], 8);
        bytes_put_le(le, bits, 8);
        pb_bytes(h, le, 8);
    }
    pb_tag(h, HISTO_BUCKET, WT_LEN);
    pb_varint(h, (uint64_t)m * 8);
    for (size_t i = 0; i < m; i++) {
        memcpy(&bits, &w->counts[i], 8);
        bytes_put_le(le, bits, 8);
        pb_bytes(h, le, 8);
    }
    w->val.len = 0;
    pb_len_field(&w->val, VALUE_TAG, tag, strlen(tag));
    pb_len_field(&w->val, VALUE_HISTO, h->data, h->len);
    return write_summary_event(w, step, wall_time);
}

calf_summary_writer *calf_summary_set_current(calf_summary_writer *w) {
    calf_summary_writer *prev = current_writer;
    current_writer = w;
    return prev;
}

calf_summary_writer *calf_summary_current(void) { return current_writer; }

bool calf_summary_enabled(void) { return current_writer != NULL; }

int calf_summary_run(const char *dir, double flush_secs, int (*fn)(void *arg), void *arg,
                     calf_error *err) {
    CALF_ASSERT(fn != NULL);
    /* Skip the whole context, not just the writes, on rank > 0: opening the writer
     * would already create the directory and a file (the seed's design choice 2). */
    if (!calf_context_is_main()) return fn(arg);
    calf_error open_err;
    calf_error_clear(&open_err);
    calf_summary_writer *w = calf_summary_writer_open(dir, flush_secs, &open_err);
    if (!w) return calf_error_set(err, open_err.status, "%s", open_err.msg);
    calf_summary_writer *prev = calf_summary_set_current(w);
    int rc = fn(arg);
    calf_summary_set_current(prev);
    if (rc != CALF_OK) {
        /* fn's failure is the one to report; fn may have filled err itself. */
        calf_summary_writer_close(w, NULL);
        return rc;
    }
    return calf_summary_writer_close(w, err);
}

/* The stepwise trainer's listener (events_writer.h): the calling thread's, as
 * current_writer is. */
static _Thread_local summary_listener listener_fn = NULL;
static _Thread_local void *listener_arg = NULL;

void summary_listen(summary_listener fn, void *arg) {
    listener_fn = fn;
    listener_arg = arg;
}

void calf_summary_scalar(const char *tag, int64_t step, double value) {
    if (listener_fn) listener_fn(listener_arg, tag, value);
    if (!current_writer) return;
    calf_summary_writer_add_scalar(current_writer, tag, step, calf_clock_s(CLOCK_REALTIME),
                                   value);
}

void calf_summary_histogram(const char *tag, int64_t step, const float *values, size_t n) {
    if (!current_writer) return;
    calf_summary_writer_add_histogram(current_writer, tag, step,
                                      calf_clock_s(CLOCK_REALTIME), values, n);
}

void calf_summary_session_start(int64_t step) {
    if (!current_writer) return;
    calf_summary_writer_add_session_start(current_writer, step, calf_clock_s(CLOCK_REALTIME));
}
