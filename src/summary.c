/* summary.c: TensorBoard events writer. Each Event is encoded by hand in canonical
 * proto3 form (field order, zero-valued plain scalars omitted, oneof members always
 * present), framed as a TFRecord and handed to stdio in one piece, so a crash can lose
 * the unflushed tail but never damages a record written before it. */
#include "calf/summary.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "calf/context.h"
#include "bytes.h"
#include "crc32c.h"
#include "fsutil.h"

/* Protobuf wire types used here. */
enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_FIXED32 = 5 };

/* A growable byte buffer for encoding. Sizes are small (one Event), so running out of
 * memory is treated like any other calf allocation failure. */
typedef struct pbuf {
    unsigned char *d;
    size_t len, cap;
} pbuf;

static void pb_reserve(pbuf *b, size_t extra) {
    CALF_ASSERT(extra <= SIZE_MAX - b->len);
    if (b->len + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) {
        CALF_ASSERT(cap <= SIZE_MAX / 2);
        cap *= 2;
    }
    unsigned char *d = realloc(b->d, cap);
    if (!d) calf_panic(__FILE__, __LINE__, "out of memory growing a buffer to %zu bytes", cap);
    b->d = d;
    b->cap = cap;
}

static void pb_bytes(pbuf *b, const void *p, size_t n) {
    pb_reserve(b, n);
    if (n) memcpy(b->d + b->len, p, n);
    b->len += n;
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
    uint64_t bits;
    unsigned char le[8];
    memcpy(&bits, &v, sizeof bits);
    bytes_put_le(le, bits, 8);
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
    uint32_t bits;
    unsigned char le[4];
    memcpy(&bits, &v, sizeof bits);
    bytes_put_le(le, bits, 4);
    pb_tag(b, field, WT_FIXED32);
    pb_bytes(b, le, 4);
}

static void pb_len_field(pbuf *b, unsigned field, const void *p, size_t n) {
    pb_tag(b, field, WT_LEN);
    pb_varint(b, n);
    pb_bytes(b, p, n);
}

/* Event fields (tensorboard/compat/proto/event.proto). */
enum { EVENT_WALL_TIME = 1, EVENT_STEP = 2, EVENT_FILE_VERSION = 3, EVENT_SUMMARY = 5 };
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
    FILE *f;
    char *path;
    double flush_secs;   /* <= 0: flush after every record */
    double last_flush;   /* CLOCK_MONOTONIC seconds of the last fflush */
    calf_error error;    /* first write error; status CALF_OK while none */
    pbuf rec;            /* the TFRecord being written */
    pbuf ev, sum, val, histo; /* nested messages, innermost last */
    double *limits;      /* (num_limits) TensorFlow's default bucket limits, ascending */
    double *counts;      /* (num_limits) scratch: bucket counts, then collapsed counts */
    double *out_limits;  /* (num_limits) scratch: collapsed bucket limits */
    size_t num_limits;
};

/* The writer that calf_summary_scalar/histogram write to: the one piece of state the
 * record context needs besides the per-process context (ALF keeps it global too). */
static calf_summary_writer *current_writer;
/* Writers opened by this process so far; part of every file name. */
static unsigned long writers_opened;

static double clock_seconds(clockid_t id) {
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return 0.0; /* cannot fail for these clocks */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* TensorFlow's default histogram bucket limits, generated by the same loop so the
 * doubles are bit-identical: 0, +-1e-12 * 1.1^k while below 1e20, and +-DBL_MAX. */
static void default_bucket_limits(calf_summary_writer *w) {
    size_t npos = 0;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) npos++;
    w->num_limits = 2 * (npos + 1) + 1;
    w->limits = calf_xmalloc(w->num_limits * sizeof *w->limits);
    w->counts = calf_xmalloc(w->num_limits * sizeof *w->counts);
    w->out_limits = calf_xmalloc(w->num_limits * sizeof *w->out_limits);
    size_t mid = npos + 1; /* index of 0.0 */
    w->limits[mid] = 0.0;
    size_t k = 0;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1, k++) {
        w->limits[mid + 1 + k] = v;
        w->limits[mid - 1 - k] = -v;
    }
    w->limits[w->num_limits - 1] = DBL_MAX;
    w->limits[0] = -DBL_MAX;
}

static void writer_fail(calf_summary_writer *w, const char *what, int e) {
    if (w->error.status == CALF_OK)
        calf_error_set(&w->error, CALF_EIO, "summary: %s %s: %s", what, w->path, strerror(e));
}

static void writer_fflush(calf_summary_writer *w) {
    if (w->error.status != CALF_OK) return;
    if (fflush(w->f) != 0) writer_fail(w, "write", errno);
    w->last_flush = clock_seconds(CLOCK_MONOTONIC);
}

/* Frame w->ev as one TFRecord and hand it to stdio in a single fwrite. */
static int write_record(calf_summary_writer *w) {
    if (w->error.status != CALF_OK) return w->error.status;
    const pbuf *ev = &w->ev;
    unsigned char head[12], tail[4];
    bytes_put_le(head, ev->len, 8);
    bytes_put_le(head + 8, crc32c_mask(crc32c(head, 8)), 4);
    bytes_put_le(tail, crc32c_mask(crc32c(ev->d, ev->len)), 4);
    w->rec.len = 0;
    pb_bytes(&w->rec, head, sizeof head);
    pb_bytes(&w->rec, ev->d, ev->len);
    pb_bytes(&w->rec, tail, sizeof tail);
    if (fwrite(w->rec.d, 1, w->rec.len, w->f) != w->rec.len) {
        writer_fail(w, "write", errno ? errno : EIO);
        return w->error.status;
    }
    if (w->flush_secs <= 0 ||
        clock_seconds(CLOCK_MONOTONIC) - w->last_flush >= w->flush_secs)
        writer_fflush(w);
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
    free(w->rec.d);
    free(w->ev.d);
    free(w->sum.d);
    free(w->val.d);
    free(w->histo.d);
    free(w->limits);
    free(w->counts);
    free(w->out_limits);
    free(w);
}

calf_summary_writer *calf_summary_writer_open(const char *dir, double flush_secs,
                                              calf_error *err) {
    CALF_ASSERT(dir != NULL);
    if (fs_mkdir_p(dir, err) != CALF_OK) return NULL;
    calf_summary_writer *w = calf_xcalloc(1, sizeof *w);
    w->flush_secs = flush_secs;
    calf_error_clear(&w->error);
    char host[128];
    host_name(host, sizeof host);
    time_t now = time(NULL);
    if (now == (time_t)-1) {
        calf_error_set(err, CALF_EIO, "summary: time: %s", strerror(errno));
        writer_free(w);
        return NULL;
    }
    size_t cap = strlen(dir) + sizeof host + 96;
    w->path = calf_xmalloc(cap);
    int fd = -1;
    /* O_EXCL: a name already taken (another writer this second, a recycled pid) moves
     * on to the next number instead of appending to someone else's file. */
    for (int attempt = 0; attempt < 1000 && fd < 0; attempt++) {
        unsigned long n = writers_opened++;
        int len = snprintf(w->path, cap, "%s/events.out.tfevents.%lld.%s.%ld.%lu", dir,
                           (long long)now, host, (long)getpid(), n);
        CALF_ASSERT(len > 0 && (size_t)len < cap);
        fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        calf_error_set(err, CALF_EIO, "summary: open %s: %s", w->path, strerror(errno));
        writer_free(w);
        return NULL;
    }
    w->f = fdopen(fd, "wb");
    if (!w->f) {
        calf_error_set(err, CALF_EIO, "summary: fdopen %s: %s", w->path, strerror(errno));
        close(fd);
        unlink(w->path);
        writer_free(w);
        return NULL;
    }
    default_bucket_limits(w);
    w->last_flush = clock_seconds(CLOCK_MONOTONIC);

    w->ev.len = 0;
    encode_event_head(&w->ev, clock_seconds(CLOCK_REALTIME), 0);
    pb_len_field(&w->ev, EVENT_FILE_VERSION, FILE_VERSION, sizeof FILE_VERSION - 1);
    write_record(w);
    /* The file_version record goes out at once so the file is recognisable even if
     * the process dies before its first flush interval. Whatever is still buffered at
     * a normal exit() is flushed by stdio; only _exit or a crash loses the tail. */
    writer_fflush(w);
    if (w->error.status != CALF_OK) {
        calf_error_set(err, w->error.status, "%s", w->error.msg);
        fclose(w->f);
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
    writer_fflush(w);
    if (w->error.status != CALF_OK)
        return calf_error_set(err, w->error.status, "%s", w->error.msg);
    return CALF_OK;
}

int calf_summary_writer_close(calf_summary_writer *w, calf_error *err) {
    if (!w) return CALF_OK;
    if (current_writer == w) current_writer = NULL;
    writer_fflush(w);
    if (fclose(w->f) != 0) writer_fail(w, "close", errno);
    int rc = w->error.status;
    if (rc != CALF_OK) calf_error_set(err, rc, "%s", w->error.msg);
    writer_free(w);
    return rc;
}

/* Wrap w->val as the one value of a Summary inside an Event. */
static int write_summary_event(calf_summary_writer *w, int64_t step, double wall_time) {
    w->sum.len = 0;
    pb_len_field(&w->sum, SUMMARY_VALUE, w->val.d, w->val.len);
    w->ev.len = 0;
    encode_event_head(&w->ev, wall_time, step);
    pb_len_field(&w->ev, EVENT_SUMMARY, w->sum.d, w->sum.len);
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
    pb_len_field(&w->val, VALUE_HISTO, h->d, h->len);
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

void calf_summary_scalar(const char *tag, int64_t step, double value) {
    if (!current_writer) return;
    calf_summary_writer_add_scalar(current_writer, tag, step, clock_seconds(CLOCK_REALTIME),
                                   value);
}

void calf_summary_histogram(const char *tag, int64_t step, const float *values, size_t n) {
    if (!current_writer) return;
    calf_summary_writer_add_histogram(current_writer, tag, step,
                                      clock_seconds(CLOCK_REALTIME), values, n);
}
