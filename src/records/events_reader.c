/* events_reader.c: reads TFRecord-framed Event protobufs back, trusting nothing: every
 * length is checked against what remains before use, and both masked CRCs of every
 * record are verified, so a torn tail or a flipped byte is reported with its offset. */
#include "records/events_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calf/summary.h"
#include "base/bytes.h"
#include "base/mem.h"
#include "records/crc32c.h"

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_FIXED32 = 5 };

/* A record longer than this is not something calf (or TensorBoard) writes; refusing it
 * keeps a damaged length that happens to pass its CRC from driving a huge allocation. */
#define EVENTS_MAX_RECORD ((uint64_t)1 << 30)

typedef struct pcur {
    const unsigned char *p, *end;
} pcur;

/* Each reader zeroes its outputs first, so nothing downstream sees an unset value
 * even on a path the caller has already abandoned. */
static int rd_varint(pcur *c, uint64_t *v, calf_error *err) {
    uint64_t r = 0;
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (c->p >= c->end) return calf_error_set(err, CALF_EINVAL, "truncated varint");
        unsigned char b = *c->p++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return CALF_OK;
        }
    }
    return calf_error_set(err, CALF_EINVAL, "varint longer than 10 bytes");
}

static int rd_fixed(pcur *c, int nbytes, uint64_t *v, calf_error *err) {
    *v = 0;
    if ((size_t)(c->end - c->p) < (size_t)nbytes)
        return calf_error_set(err, CALF_EINVAL, "truncated %d-byte field", nbytes);
    *v = bytes_get_le(c->p, nbytes);
    c->p += nbytes;
    return CALF_OK;
}

static int rd_double(pcur *c, double *d, calf_error *err) {
    const unsigned char *at = c->p;
    uint64_t bits;
    int rc = rd_fixed(c, 8, &bits, err);
    if (rc == CALF_OK) *d = bytes_get_f64(at);
    return rc;
}

static int rd_float(pcur *c, float *f, calf_error *err) {
    const unsigned char *at = c->p;
    uint64_t bits;
    int rc = rd_fixed(c, 4, &bits, err);
    if (rc == CALF_OK) *f = bytes_get_f32(at);
    return rc;
}

/* A length-delimited field's body, as a sub-cursor. */
static int rd_len(pcur *c, pcur *sub, calf_error *err) {
    uint64_t n;
    int rc = rd_varint(c, &n, err);
    if (rc != CALF_OK) return rc;
    if (n > (uint64_t)(c->end - c->p))
        return calf_error_set(err, CALF_EINVAL,
                              "length %llu exceeds the %zu bytes left in the message",
                              (unsigned long long)n, (size_t)(c->end - c->p));
    sub->p = c->p;
    sub->end = c->p + n;
    c->p += n;
    return CALF_OK;
}

static int rd_key(pcur *c, unsigned *field, unsigned *wt, calf_error *err) {
    uint64_t key;
    *field = 0;
    *wt = 0;
    int rc = rd_varint(c, &key, err);
    if (rc != CALF_OK) return rc;
    *wt = (unsigned)(key & 7);
    if ((key >> 3) == 0 || (key >> 3) > 0x1fffffff)
        return calf_error_set(err, CALF_EINVAL, "invalid field number %llu",
                              (unsigned long long)(key >> 3));
    *field = (unsigned)(key >> 3);
    return CALF_OK;
}

static int skip_field(pcur *c, unsigned wt, calf_error *err) {
    uint64_t v;
    pcur sub;
    switch (wt) {
    case WT_VARINT: return rd_varint(c, &v, err);
    case WT_FIXED64: return rd_fixed(c, 8, &v, err);
    case WT_LEN: return rd_len(c, &sub, err);
    case WT_FIXED32: return rd_fixed(c, 4, &v, err);
    default:
        /* Groups are long deprecated and never appear in Event; treat as damage. */
        return calf_error_set(err, CALF_EINVAL, "unsupported wire type %u", wt);
    }
}

static int want_wt(unsigned field, unsigned wt, unsigned want, const char *msg,
                   calf_error *err) {
    if (wt == want) return CALF_OK;
    return calf_error_set(err, CALF_EINVAL, "%s field %u has wire type %u, expected %u", msg,
                          field, wt, want);
}

/* The bytes of s as a C string in *out (replacing and freeing what it held). */
static int dup_bytes(const pcur *s, char **out, calf_error *err) {
    size_t n = (size_t)(s->end - s->p);
    char *d = mem_alloc(n + 1, err);
    if (!d) return CALF_ENOMEM;
    if (n) memcpy(d, s->p, n);
    d[n] = '\0';
    free(*out);
    *out = d;
    return CALF_OK;
}

static int push_double(double **arr, size_t *n, double v, calf_error *err) {
    /* Capacity is 16, 32, 64, ...: grow exactly when n reaches it. The count is bounded
     * by the record size, which is bounded by EVENTS_MAX_RECORD. */
    if (*n == 0 || (*n >= 16 && (*n & (*n - 1)) == 0)) {
        size_t cap = *n ? *n * 2 : 16;
        double *grown = mem_realloc(*arr, cap * sizeof **arr, err);
        if (!grown) return CALF_ENOMEM;
        *arr = grown;
    }
    (*arr)[(*n)++] = v;
    return CALF_OK;
}

/* bucket_limit and bucket are packed doubles, but a parser must also accept the same
 * field repeated unpacked. */
static int rd_doubles(pcur *c, unsigned field, unsigned wt, double **arr, size_t *n,
                      calf_error *err) {
    double d;
    if (wt == WT_FIXED64) {
        int rc = rd_double(c, &d, err);
        if (rc == CALF_OK) rc = push_double(arr, n, d, err);
        return rc;
    }
    int rc = want_wt(field, wt, WT_LEN, "HistogramProto", err);
    if (rc != CALF_OK) return rc;
    pcur sub;
    if ((rc = rd_len(c, &sub, err)) != CALF_OK) return rc;
    if ((sub.end - sub.p) % 8 != 0)
        return calf_error_set(err, CALF_EINVAL,
                              "HistogramProto field %u: packed length %zu is not a multiple of 8",
                              field, (size_t)(sub.end - sub.p));
    while (sub.p < sub.end) {
        if ((rc = rd_double(&sub, &d, err)) != CALF_OK) return rc;
        if ((rc = push_double(arr, n, d, err)) != CALF_OK) return rc;
    }
    return CALF_OK;
}

static int decode_histo(pcur *c, events_value *v, calf_error *err) {
    size_t nlimits = 0, nbuckets = 0;
    int rc = CALF_OK;
    while (c->p < c->end && rc == CALF_OK) {
        unsigned field, wt;
        if ((rc = rd_key(c, &field, &wt, err)) != CALF_OK) break;
        double *dst = NULL;
        switch (field) {
        case 1: dst = &v->histo_min; break;
        case 2: dst = &v->histo_max; break;
        case 3: dst = &v->histo_num; break;
        case 4: dst = &v->histo_sum; break;
        case 5: dst = &v->histo_sum_squares; break;
        case 6: rc = rd_doubles(c, field, wt, &v->bucket_limit, &nlimits, err); continue;
        case 7: rc = rd_doubles(c, field, wt, &v->bucket, &nbuckets, err); continue;
        default: rc = skip_field(c, wt, err); continue;
        }
        if ((rc = want_wt(field, wt, WT_FIXED64, "HistogramProto", err)) == CALF_OK)
            rc = rd_double(c, dst, err);
    }
    if (rc != CALF_OK) return rc;
    if (nlimits != nbuckets)
        return calf_error_set(err, CALF_EINVAL,
                              "histogram has %zu bucket limits but %zu bucket counts", nlimits,
                              nbuckets);
    v->num_buckets = nbuckets;
    return CALF_OK;
}

static void value_clear(events_value *v) {
    free(v->tag);
    free(v->bucket_limit);
    free(v->bucket);
    memset(v, 0, sizeof *v);
}

static int decode_value(pcur *c, events_value *v, calf_error *err) {
    int rc = CALF_OK;
    while (c->p < c->end && rc == CALF_OK) {
        unsigned field, wt;
        if ((rc = rd_key(c, &field, &wt, err)) != CALF_OK) break;
        pcur sub;
        switch (field) {
        case 1: /* tag */
            if ((rc = want_wt(field, wt, WT_LEN, "Summary.Value", err)) != CALF_OK) break;
            if ((rc = rd_len(c, &sub, err)) != CALF_OK) break;
            rc = dup_bytes(&sub, &v->tag, err);
            break;
        case 2: /* simple_value */
            if ((rc = want_wt(field, wt, WT_FIXED32, "Summary.Value", err)) != CALF_OK) break;
            if ((rc = rd_float(c, &v->simple_value, err)) != CALF_OK) break;
            v->kind = EVENTS_VALUE_SIMPLE;
            break;
        case 5: /* histo */
            if ((rc = want_wt(field, wt, WT_LEN, "Summary.Value", err)) != CALF_OK) break;
            if ((rc = rd_len(c, &sub, err)) != CALF_OK) break;
            v->kind = EVENTS_VALUE_HISTO;
            rc = decode_histo(&sub, v, err);
            break;
        case 3: case 4: case 6: case 8: /* other members of the value oneof */
            v->kind = EVENTS_VALUE_OTHER;
            rc = skip_field(c, wt, err);
            break;
        default: rc = skip_field(c, wt, err); break;
        }
    }
    if (rc == CALF_OK && !v->tag) rc = dup_bytes(&(pcur){c->end, c->end}, &v->tag, err);
    return rc;
}

static int decode_summary(pcur *c, events_record *rec, calf_error *err) {
    int rc = CALF_OK;
    while (c->p < c->end && rc == CALF_OK) {
        unsigned field, wt;
        if ((rc = rd_key(c, &field, &wt, err)) != CALF_OK) break;
        if (field != 1) {
            rc = skip_field(c, wt, err);
            continue;
        }
        pcur sub;
        if ((rc = want_wt(field, wt, WT_LEN, "Summary", err)) != CALF_OK) break;
        if ((rc = rd_len(c, &sub, err)) != CALF_OK) break;
        if (rec->num_values == rec->values_cap) {
            size_t cap = rec->values_cap ? rec->values_cap * 2 : 4;
            events_value *grown = mem_realloc(rec->values, cap * sizeof *rec->values, err);
            if (!grown) {
                rc = CALF_ENOMEM;
                break;
            }
            rec->values = grown;
            rec->values_cap = cap;
        }
        events_value *v = &rec->values[rec->num_values++];
        memset(v, 0, sizeof *v);
        rc = decode_value(&sub, v, err);
    }
    return rc;
}

/* Event.what is a oneof: when the bytes hold several of its members, the last one read
 * is the one the message has (as protobuf parsers, TensorBoard's among them, decide),
 * so decoding a member first forgets the others. A member repeated merges with itself. */
enum { WHAT_FILE_VERSION = 3, WHAT_SUMMARY = 5, WHAT_SESSION_LOG = 7, WHAT_OTHER = 0 };

static void clear_what_except(events_record *rec, int keep) {
    if (keep != WHAT_SUMMARY) {
        for (size_t i = 0; i < rec->num_values; i++) value_clear(&rec->values[i]);
        rec->num_values = 0;
        rec->has_summary = false;
    }
    if (keep != WHAT_FILE_VERSION) {
        free(rec->file_version);
        rec->file_version = NULL;
    }
    if (keep != WHAT_SESSION_LOG) {
        rec->has_session_log = false;
        rec->session_status = EVENTS_SESSION_UNSPECIFIED;
    }
}

static void record_reset(events_record *rec) {
    clear_what_except(rec, WHAT_OTHER);
    rec->wall_time = 0;
    rec->step = 0;
}

/* SessionLog: status = 1 (enum SessionStatus); checkpoint_path and msg are skipped. */
static int decode_session_log(pcur *c, int *status, calf_error *err) {
    int rc = CALF_OK;
    while (c->p < c->end && rc == CALF_OK) {
        unsigned field, wt;
        uint64_t v;
        if ((rc = rd_key(c, &field, &wt, err)) != CALF_OK) break;
        if (field != 1) {
            rc = skip_field(c, wt, err);
            continue;
        }
        if ((rc = want_wt(field, wt, WT_VARINT, "SessionLog", err)) != CALF_OK) break;
        if ((rc = rd_varint(c, &v, err)) != CALF_OK) break;
        /* an enum is an int32: its low 32 bits, sign included, whatever the width */
        uint32_t lo = (uint32_t)v;
        int32_t s;
        memcpy(&s, &lo, sizeof s);
        *status = s;
    }
    return rc;
}

void events_record_free(events_record *rec) {
    if (!rec) return;
    record_reset(rec);
    free(rec->values);
    rec->values = NULL;
    rec->values_cap = 0;
}

int events_decode_event(const unsigned char *data, size_t len, events_record *rec,
                        calf_error *err) {
    record_reset(rec);
    rec->data = data;
    rec->len = len;
    pcur c = {data, data + len};
    int rc = CALF_OK;
    while (c.p < c.end && rc == CALF_OK) {
        unsigned field, wt;
        if ((rc = rd_key(&c, &field, &wt, err)) != CALF_OK) break;
        pcur sub;
        uint64_t v;
        switch (field) {
        case 1: /* wall_time */
            if ((rc = want_wt(field, wt, WT_FIXED64, "Event", err)) == CALF_OK)
                rc = rd_double(&c, &rec->wall_time, err);
            break;
        case 2: /* step */
            if ((rc = want_wt(field, wt, WT_VARINT, "Event", err)) != CALF_OK) break;
            if ((rc = rd_varint(&c, &v, err)) == CALF_OK) rec->step = (int64_t)v;
            break;
        case 3: /* file_version */
            if ((rc = want_wt(field, wt, WT_LEN, "Event", err)) != CALF_OK) break;
            if ((rc = rd_len(&c, &sub, err)) != CALF_OK) break;
            clear_what_except(rec, WHAT_FILE_VERSION);
            rc = dup_bytes(&sub, &rec->file_version, err);
            break;
        case 5: /* summary */
            if ((rc = want_wt(field, wt, WT_LEN, "Event", err)) != CALF_OK) break;
            if ((rc = rd_len(&c, &sub, err)) != CALF_OK) break;
            clear_what_except(rec, WHAT_SUMMARY);
            rec->has_summary = true;
            rc = decode_summary(&sub, rec, err);
            break;
        case 7: /* session_log */
            if ((rc = want_wt(field, wt, WT_LEN, "Event", err)) != CALF_OK) break;
            if ((rc = rd_len(&c, &sub, err)) != CALF_OK) break;
            clear_what_except(rec, WHAT_SESSION_LOG);
            rec->has_session_log = true;
            rc = decode_session_log(&sub, &rec->session_status, err);
            break;
        case 4: case 6: case 8: case 9: /* graph_def, log_message, run metadata, meta graph */
            clear_what_except(rec, WHAT_OTHER);
            rc = skip_field(&c, wt, err);
            break;
        default: rc = skip_field(&c, wt, err); break;
        }
    }
    return rc;
}

int events_reader_open(events_reader *r, const char *path, calf_error *err) {
    CALF_ASSERT(r != NULL && path != NULL);
    memset(r, 0, sizeof *r);
    /* O_NONBLOCK: a FIFO that no process writes (one named like an events file in a run
     * dir) would block open until one does; opened so, it reads as empty and is refused
     * as an empty file. Reads block again after, so a pipe being written (`calf
     * events /dev/stdin`) is read to its end. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return calf_error_set(err, CALF_EIO, "events: open %s: %s", path, strerror(errno));
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 || !(r->f = fdopen(fd, "rb"))) {
        int e = errno;
        close(fd);
        return calf_error_set(err, CALF_EIO, "events: open %s: %s", path, strerror(e));
    }
    r->path = mem_strdup(path, err);
    if (!r->path) {
        fclose(r->f); /* read-only: nothing to lose */
        r->f = NULL;
        return CALF_ENOMEM;
    }
    return CALF_OK;
}

void events_reader_close(events_reader *r) {
    if (!r) return;
    if (r->f) fclose(r->f); /* read-only: nothing to lose if close fails */
    r->f = NULL;
    free(r->path);
    r->path = NULL;
    free(r->buf);
    r->buf = NULL;
    r->cap = 0;
    events_record_free(&r->rec);
}

/* Read exactly n bytes; returns how many were read before end of file. */
static int read_full(events_reader *r, void *dst, size_t n, size_t *got, calf_error *err) {
    *got = fread(dst, 1, n, r->f);
    if (*got < n && ferror(r->f))
        return calf_error_set(err, CALF_EIO, "events: read %s at offset %llu: %s", r->path,
                              (unsigned long long)(r->offset + *got), strerror(errno));
    return CALF_OK;
}

int events_reader_next(events_reader *r, const events_record **out, calf_error *err) {
    CALF_ASSERT(r != NULL && r->f != NULL && out != NULL);
    *out = NULL;
    r->cut = false;
    unsigned long long off = (unsigned long long)r->offset;
    unsigned char head[12];
    size_t got;
    int rc = read_full(r, head, sizeof head, &got, err);
    if (rc != CALF_OK) return rc;
    if (got == 0) return CALF_OK; /* clean end of file */
    if (got < sizeof head) {
        r->cut = true;
        return calf_error_set(err, CALF_EINVAL,
                              "events: %s: truncated record header at offset %llu (%zu of 12 bytes)",
                              r->path, off, got);
    }
    uint64_t len = bytes_get_le(head, 8);
    uint32_t len_crc = (uint32_t)bytes_get_le(head + 8, 4);
    if (crc32c_mask(crc32c(head, 8)) != len_crc)
        return calf_error_set(err, CALF_EINVAL,
                              "events: %s: length CRC mismatch in record at offset %llu", r->path,
                              off);
    if (len > EVENTS_MAX_RECORD)
        return calf_error_set(err, CALF_EINVAL,
                              "events: %s: implausible record length %llu at offset %llu",
                              r->path, (unsigned long long)len, off);
    size_t need = (size_t)len + 4;
    /* a damaged length that passes its CRC must not drive an allocation larger than
     * what the file can still hold; a pipe's size is not known, so its buffer grows
     * only as its bytes arrive */
    struct stat st;
    bool regular = fstat(fileno(r->f), &st) == 0 && S_ISREG(st.st_mode);
    uint64_t left = regular && (uint64_t)st.st_size > r->offset + 12
                        ? (uint64_t)st.st_size - r->offset - 12
                        : 0;
    if (regular && left < (uint64_t)need) {
        r->cut = true;
        return calf_error_set(err, CALF_EINVAL,
                              "events: %s: truncated record at offset %llu (length %llu, file "
                              "ends %llu bytes after its header)",
                              r->path, off, (unsigned long long)len, (unsigned long long)left);
    }
    got = 0;
    while (got < need) {
        size_t want = regular ? need : (got < 65536 ? 65536 : 2 * got);
        if (want > need) want = need;
        if (want > r->cap) {
            calf_error merr;
            unsigned char *b = mem_realloc(r->buf, want, &merr);
            if (!b)
                return calf_error_set(err, CALF_ENOMEM, "events: %s: record at offset %llu: %s",
                                      r->path, off, merr.msg);
            r->buf = b;
            r->cap = want;
        }
        size_t more;
        if ((rc = read_full(r, r->buf + got, want - got, &more, err)) != CALF_OK) return rc;
        got += more;
        if (got < want) break; /* end of file */
    }
    if (got < need) { /* the file shrank since fstat, or a pipe ended early */
        r->cut = true;
        return calf_error_set(err, CALF_EINVAL,
                              "events: %s: truncated record at offset %llu (%llu of %zu bytes after the header)",
                              r->path, off, (unsigned long long)got, need);
    }
    uint32_t data_crc = (uint32_t)bytes_get_le(r->buf + len, 4);
    if (crc32c_mask(crc32c(r->buf, (size_t)len)) != data_crc)
        return calf_error_set(err, CALF_EINVAL,
                              "events: %s: data CRC mismatch in record at offset %llu", r->path,
                              off);
    calf_error derr;
    calf_error_clear(&derr);
    rc = events_decode_event(r->buf, (size_t)len, &r->rec, &derr);
    if (rc == CALF_ENOMEM)
        return calf_error_set(err, rc, "events: %s: record at offset %llu: %s", r->path, off,
                              derr.msg);
    if (rc != CALF_OK)
        return calf_error_set(err, CALF_EINVAL, "events: %s: bad Event in record at offset %llu: %s",
                              r->path, off, derr.msg);
    r->rec.offset = r->offset;
    r->offset += 12 + need;
    *out = &r->rec;
    return CALF_OK;
}

/* ------------------------------------------------------------------ a run */

/* A restart marker drops values read before it, so a run is read whole before anyone
 * (calf events, calf plot) shows it; the entries wait here. */
static events_entry *run_push(events_run *d, int what, const events_record *rec,
                              calf_error *err) {
    if (d->num_entries == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 64;
        events_entry *grown = mem_realloc(d->entries, cap * sizeof *d->entries, err);
        if (!grown) return NULL;
        d->entries = grown;
        d->cap = cap;
    }
    events_entry *l = &d->entries[d->num_entries++];
    memset(l, 0, sizeof *l);
    l->what = what;
    l->step = rec->step;
    l->wall_time = rec->wall_time;
    return l;
}

/* event_util.ParseFileVersion: the number after the last "brain.Event:" (the whole
 * string when there is none), read as a float; -1 when it is not one. */
static double parse_file_version(const char *v) {
    const char *p = v, *hit;
    while ((hit = strstr(p, "brain.Event:")) != NULL) p = hit + strlen("brain.Event:");
    char *end;
    double x = strtod(p, &end); /* out of range is +-inf or 0, as float() has it */
    while (*end == ' ' || *end == '\t' || *end == '\n') end++; /* float() strips them */
    if (end == p || *end != '\0') return -1;
    return x;
}

/* _MaybePurgeOrphanedData, run (as there) before the record's own values are added.
 * Version 2 files: the run's first START is its initial start and drops nothing; each
 * later START at step K drops every value already read with step >= K, of every tag.
 * Older files: an Event with a summary whose step is below the last summary's drops
 * the earlier values of its own tags with step >= its step. */
static void run_purge(events_run *d, const events_record *rec) {
    if (d->file_version >= 2) {
        if (!rec->has_session_log || rec->session_status != EVENTS_SESSION_START) return;
        if (!d->seen_start) {
            d->seen_start = true;
            return;
        }
        for (size_t i = 0; i < d->num_entries; i++)
            if (d->entries[i].what == EVENTS_ENTRY_VALUE && d->entries[i].step >= rec->step)
                d->entries[i].purged = true;
    } else if (rec->has_summary && rec->step < d->most_recent_step) {
        for (size_t v = 0; v < rec->num_values; v++)
            for (size_t i = 0; i < d->num_entries; i++) {
                events_entry *l = &d->entries[i];
                if (l->what == EVENTS_ENTRY_VALUE && l->step >= rec->step &&
                    !strcmp(l->text, rec->values[v].tag))
                    l->purged = true;
            }
    }
}

/* A new entry whose text is a copy of text. */
static events_entry *run_push_text(events_run *d, int what, const events_record *rec,
                                   const char *text, calf_error *err) {
    events_entry *l = run_push(d, what, rec, err);
    if (l && !(l->text = mem_strdup(text, err))) {
        d->num_entries--;
        return NULL;
    }
    return l;
}

/* Adds rec's entries to the run. Out of memory: CALF_ENOMEM, with the entries taken
 * before it still in the run (whose reading fails as a whole). */
static int run_take(events_run *d, const events_record *rec, calf_error *err) {
    events_entry *l;
    if (rec->file_version) {
        d->file_version = parse_file_version(rec->file_version);
        if (!run_push_text(d, EVENTS_ENTRY_VERSION, rec, rec->file_version, err))
            return CALF_ENOMEM;
    }
    run_purge(d, rec);
    if (rec->has_summary) d->most_recent_step = rec->step;
    if (rec->has_session_log) {
        if (!(l = run_push(d, EVENTS_ENTRY_SESSION, rec, err))) return CALF_ENOMEM;
        l->status = rec->session_status;
    }
    for (size_t i = 0; i < rec->num_values; i++) {
        const events_value *v = &rec->values[i];
        if (!(l = run_push_text(d, EVENTS_ENTRY_VALUE, rec, v->tag, err))) return CALF_ENOMEM;
        l->kind = v->kind;
        l->simple_value = v->simple_value;
        l->histo_num = v->histo_num;
        l->histo_min = v->histo_min;
        l->histo_max = v->histo_max;
        l->histo_sum = v->histo_sum;
    }
    return CALF_OK;
}

void events_run_init(events_run *run) {
    CALF_ASSERT(run != NULL);
    memset(run, 0, sizeof *run);
    run->file_version = -1;
    run->most_recent_step = -1;
}

void events_run_free(events_run *run) {
    if (!run) return;
    for (size_t i = 0; i < run->num_entries; i++) free(run->entries[i].text);
    free(run->entries);
    events_run_init(run);
}

/* A cut last record is reported on warn and ends the file normally; anything else that
 * stops the reader is the error. */
int events_run_read_file(events_run *d, const char *path, FILE *warn, calf_error *err) {
    events_reader r;
    int rc = events_reader_open(&r, path, err);
    if (rc != CALF_OK) return rc;
    const events_record *rec;
    long records = 0;
    calf_error rerr;
    calf_error_clear(&rerr);
    while ((rc = events_reader_next(&r, &rec, &rerr)) == CALF_OK && rec) {
        records++;
        calf_error terr;
        if ((rc = run_take(d, rec, &terr)) != CALF_OK) {
            calf_error_set(&rerr, rc, "events: %s: record at offset %llu: %s", path,
                           (unsigned long long)rec->offset, terr.msg);
            break;
        }
    }
    if (rc != CALF_OK && r.cut && records > 0) {
        rc = CALF_OK;
        /* only a note: one that cannot be shown does not change what was read */
        if (warn)
            fprintf(warn,
                    "calf: warning: %s: last record cut at offset %llu (a crash while "
                    "writing?); ignored\n",
                    path, (unsigned long long)r.offset);
    } else if (rc != CALF_OK) {
        calf_error_set(err, rc, "%s", rerr.msg);
    } else if (records == 0) {
        /* every events file starts with its file_version record: an empty one is not one */
        rc = calf_error_set(err, CALF_EINVAL, "events: %s: empty file, not an events file", path);
    }
    events_reader_close(&r);
    return rc;
}

/* ------------------------------------------------------------------ calf events */

static const char *session_name(int status) {
    switch (status) {
    case EVENTS_SESSION_START: return "session_start";
    case EVENTS_SESSION_STOP: return "session_stop";
    case EVENTS_SESSION_CHECKPOINT: return "session_checkpoint";
    default: return NULL;
    }
}

/* A CSV field as RFC 4180 has it: quoted, with quotes doubled, when it holds a comma,
 * a quote or a line break. */
static int put_csv_field(FILE *out, const char *s) {
    if (!strpbrk(s, ",\"\r\n")) return fputs(s, out) < 0 ? -1 : 0;
    if (fputc('"', out) == EOF) return -1;
    for (; *s; s++)
        if ((*s == '"' && fputc('"', out) == EOF) || fputc(*s, out) == EOF) return -1;
    return fputc('"', out) == EOF ? -1 : 0;
}

/* The length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), or 0 when s does not start one. */
static size_t utf8_length(const unsigned char *s) {
    unsigned char c = s[0];
    size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (n == 0 || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return n;
}

/* A tag or version in the text view, as a terminal should show it: they are anyone's
 * bytes, and a newline would forge a line of the view and ESC (or a C1 control, U+0080
 * to U+009F) start a terminal escape sequence. So control characters are written as C
 * escapes (\n, \r, \t, else \xNN; C1 ones as \u0080..\u009f), a backslash as \\ (so
 * the view reads back unambiguously), bytes that are not UTF-8 as \xNN, and all else
 * (printable ASCII and UTF-8) as it is. The CSV keeps the bytes, quoted (RFC 4180). */
static int put_text(FILE *out, const char *text) {
    const unsigned char *s = (const unsigned char *)text;
    while (*s) {
        unsigned char c = *s;
        int rc;
        size_t n = 1;
        if (c == '\\') rc = fputs("\\\\", out);
        else if (c == '\n') rc = fputs("\\n", out);
        else if (c == '\r') rc = fputs("\\r", out);
        else if (c == '\t') rc = fputs("\\t", out);
        else if (c < 0x20 || c == 0x7F) rc = fprintf(out, "\\x%02x", c);
        else if (c < 0x80) rc = fputc(c, out);
        else if ((n = utf8_length(s)) == 0) {
            n = 1;
            rc = fprintf(out, "\\x%02x", c);
        } else if (c == 0xC2 && s[1] < 0xA0) {
            rc = fprintf(out, "\\u%04x", s[1]); /* U+0080..U+009F: C1 controls */
        } else {
            rc = fwrite(s, 1, n, out) == n ? 0 : EOF;
        }
        if (rc < 0) return -1;
        s += n;
    }
    return 0;
}

static int dump_print_line(const events_entry *l, FILE *out, bool csv) {
    long long step = (long long)l->step;
    if (csv) {
        if (l->what != EVENTS_ENTRY_VALUE || l->kind != EVENTS_VALUE_SIMPLE) return 0;
        if (put_csv_field(out, l->text) < 0) return -1;
        return fprintf(out, ",%lld,%.17g,%.9g\n", step, l->wall_time, (double)l->simple_value);
    }
    if (l->what == EVENTS_ENTRY_VERSION)
        return fputs("file_version ", out) < 0 || put_text(out, l->text) < 0 ||
                       fputc('\n', out) == EOF ? -1 : 0;
    if (l->what == EVENTS_ENTRY_SESSION) {
        const char *name = session_name(l->status);
        return name ? fprintf(out, "%lld %s\n", step, name)
                    : fprintf(out, "%lld session_log status=%d\n", step, l->status);
    }
    if (fprintf(out, "%lld ", step) < 0 || put_text(out, l->text) < 0) return -1;
    if (l->kind == EVENTS_VALUE_SIMPLE) return fprintf(out, " %.9g\n", (double)l->simple_value);
    if (l->kind == EVENTS_VALUE_HISTO)
        return fprintf(out, " histogram num=%.9g min=%.9g max=%.9g sum=%.9g\n", l->histo_num,
                       l->histo_min, l->histo_max, l->histo_sum);
    return fputs(" (unsupported value type)\n", out) < 0 ? -1 : 0;
}

static int dump_print(const events_run *d, const calf_events_dump_options *opt, FILE *out,
                      calf_error *err) {
    bool failed = opt->csv && fputs("tag,step,wall_time,value\n", out) < 0;
    for (size_t i = 0; i < d->num_entries && !failed; i++)
        if (opt->raw || !d->entries[i].purged)
            failed = dump_print_line(&d->entries[i], out, opt->csv) < 0;
    /* a buffered stream reports a failed write only when it is flushed */
    if (failed || fflush(out) != 0 || ferror(out))
        return calf_error_set(err, CALF_EIO, "events: write: %s", strerror(errno));
    return CALF_OK;
}

int calf_events_dump(const char *const *paths, size_t num_paths,
                     const calf_events_dump_options *opt, FILE *out, calf_error *err) {
    CALF_ASSERT(paths != NULL && out != NULL);
    static const calf_events_dump_options defaults = {false, false, NULL};
    if (!opt) opt = &defaults;
    events_run d;
    events_run_init(&d);
    int rc = CALF_OK;
    for (size_t i = 0; i < num_paths && rc == CALF_OK; i++)
        rc = events_run_read_file(&d, paths[i], opt->warn, err);
    /* what was read before an error is still shown (but not what memory ran out in the
     * middle of); the first error is the one reported */
    if ((d.num_entries > 0 && rc != CALF_ENOMEM) || rc == CALF_OK) {
        calf_error perr;
        calf_error_clear(&perr);
        int prc = dump_print(&d, opt, out, &perr);
        if (rc == CALF_OK && prc != CALF_OK) rc = calf_error_set(err, prc, "%s", perr.msg);
    }
    events_run_free(&d);
    return rc;
}

int calf_events_scalars(const char *const *paths, size_t num_paths, FILE *warn,
                        calf_events_scalar_fn fn, void *arg, calf_error *err) {
    CALF_ASSERT(paths != NULL && fn != NULL);
    events_run d;
    events_run_init(&d);
    int rc = CALF_OK;
    for (size_t i = 0; i < num_paths && rc == CALF_OK; i++)
        rc = events_run_read_file(&d, paths[i], warn, err);
    /* the rows dump_print_line writes in CSV, unless raw */
    for (size_t i = 0; i < d.num_entries && rc == CALF_OK; i++) {
        const events_entry *l = &d.entries[i];
        if (l->purged || l->what != EVENTS_ENTRY_VALUE || l->kind != EVENTS_VALUE_SIMPLE)
            continue;
        rc = fn(arg, l->text, l->step, l->wall_time, l->simple_value);
    }
    events_run_free(&d);
    return rc;
}
