/* events_reader.c: reads TFRecord-framed Event protobufs back, trusting nothing: every
 * length is checked against what remains before use, and both masked CRCs of every
 * record are verified, so a torn tail or a flipped byte is reported with its offset. */
#include "events_reader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "calf/summary.h"
#include "bytes.h"
#include "crc32c.h"

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
    uint64_t bits;
    int rc = rd_fixed(c, 8, &bits, err);
    if (rc == CALF_OK) memcpy(d, &bits, 8);
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

static char *dup_bytes(const pcur *s) {
    size_t n = (size_t)(s->end - s->p);
    char *out = calf_xmalloc(n + 1);
    if (n) memcpy(out, s->p, n);
    out[n] = '\0';
    return out;
}

static void push_double(double **arr, size_t *n, double v) {
    /* Capacity is 16, 32, 64, ...: grow exactly when n reaches it. The count is bounded
     * by the record size, which is bounded by EVENTS_MAX_RECORD. */
    if (*n == 0 || (*n >= 16 && (*n & (*n - 1)) == 0)) {
        size_t cap = *n ? *n * 2 : 16;
        double *a = realloc(*arr, cap * sizeof *a);
        if (!a) calf_panic(__FILE__, __LINE__, "out of memory (%zu doubles)", cap);
        *arr = a;
    }
    (*arr)[(*n)++] = v;
}

/* bucket_limit and bucket are packed doubles, but a parser must also accept the same
 * field repeated unpacked. */
static int rd_doubles(pcur *c, unsigned field, unsigned wt, double **arr, size_t *n,
                      calf_error *err) {
    double d;
    if (wt == WT_FIXED64) {
        int rc = rd_double(c, &d, err);
        if (rc == CALF_OK) push_double(arr, n, d);
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
        push_double(arr, n, d);
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
        uint64_t bits;
        switch (field) {
        case 1: /* tag */
            if ((rc = want_wt(field, wt, WT_LEN, "Summary.Value", err)) != CALF_OK) break;
            if ((rc = rd_len(c, &sub, err)) != CALF_OK) break;
            free(v->tag);
            v->tag = dup_bytes(&sub);
            break;
        case 2: /* simple_value */
            if ((rc = want_wt(field, wt, WT_FIXED32, "Summary.Value", err)) != CALF_OK) break;
            if ((rc = rd_fixed(c, 4, &bits, err)) != CALF_OK) break;
            {
                uint32_t b32 = (uint32_t)bits;
                memcpy(&v->simple_value, &b32, 4);
            }
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
    if (rc == CALF_OK && !v->tag) v->tag = dup_bytes(&(pcur){c->end, c->end});
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
            events_value *a = realloc(rec->values, cap * sizeof *a);
            if (!a) calf_panic(__FILE__, __LINE__, "out of memory (%zu values)", cap);
            rec->values = a;
            rec->values_cap = cap;
        }
        events_value *v = &rec->values[rec->num_values++];
        memset(v, 0, sizeof *v);
        rc = decode_value(&sub, v, err);
    }
    return rc;
}

static void record_reset(events_record *rec) {
    for (size_t i = 0; i < rec->num_values; i++) value_clear(&rec->values[i]);
    rec->num_values = 0;
    free(rec->file_version);
    rec->file_version = NULL;
    rec->has_summary = false;
    rec->wall_time = 0;
    rec->step = 0;
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
            free(rec->file_version);
            rec->file_version = dup_bytes(&sub);
            break;
        case 5: /* summary */
            if ((rc = want_wt(field, wt, WT_LEN, "Event", err)) != CALF_OK) break;
            if ((rc = rd_len(&c, &sub, err)) != CALF_OK) break;
            rec->has_summary = true;
            rc = decode_summary(&sub, rec, err);
            break;
        default: rc = skip_field(&c, wt, err); break;
        }
    }
    return rc;
}

int events_reader_open(events_reader *r, const char *path, calf_error *err) {
    CALF_ASSERT(r != NULL && path != NULL);
    memset(r, 0, sizeof *r);
    r->f = fopen(path, "rb");
    if (!r->f) return calf_error_set(err, CALF_EIO, "events: open %s: %s", path, strerror(errno));
    size_t n = strlen(path);
    r->path = calf_xmalloc(n + 1);
    memcpy(r->path, path, n + 1);
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
    unsigned long long off = (unsigned long long)r->offset;
    unsigned char head[12];
    size_t got;
    int rc = read_full(r, head, sizeof head, &got, err);
    if (rc != CALF_OK) return rc;
    if (got == 0) return CALF_OK; /* clean end of file */
    if (got < sizeof head)
        return calf_error_set(err, CALF_EINVAL,
                              "events: %s: truncated record header at offset %llu (%zu of 12 bytes)",
                              r->path, off, got);
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
     * what the file can still hold */
    struct stat st;
    if (fstat(fileno(r->f), &st) == 0 && (uint64_t)st.st_size < r->offset + 12 + (uint64_t)need)
        return calf_error_set(err, CALF_EINVAL,
                              "events: %s: truncated record at offset %llu (length %llu, file "
                              "ends %llu bytes after its header)",
                              r->path, off, (unsigned long long)len,
                              (unsigned long long)((uint64_t)st.st_size - r->offset - 12));
    if (need > r->cap) {
        unsigned char *b = realloc(r->buf, need);
        if (!b)
            return calf_error_set(err, CALF_ENOMEM, "events: %s: no memory for a %zu-byte record",
                                  r->path, need);
        r->buf = b;
        r->cap = need;
    }
    if ((rc = read_full(r, r->buf, need, &got, err)) != CALF_OK) return rc;
    if (got < need)
        return calf_error_set(err, CALF_EINVAL,
                              "events: %s: truncated record at offset %llu (%llu of %zu bytes after the header)",
                              r->path, off, (unsigned long long)got, need);
    uint32_t data_crc = (uint32_t)bytes_get_le(r->buf + len, 4);
    if (crc32c_mask(crc32c(r->buf, (size_t)len)) != data_crc)
        return calf_error_set(err, CALF_EINVAL,
                              "events: %s: data CRC mismatch in record at offset %llu", r->path,
                              off);
    calf_error derr;
    calf_error_clear(&derr);
    if (events_decode_event(r->buf, (size_t)len, &r->rec, &derr) != CALF_OK)
        return calf_error_set(err, CALF_EINVAL, "events: %s: bad Event in record at offset %llu: %s",
                              r->path, off, derr.msg);
    r->rec.offset = r->offset;
    r->offset += 12 + need;
    *out = &r->rec;
    return CALF_OK;
}

int calf_events_dump(const char *path, FILE *out, calf_error *err) {
    events_reader r;
    int rc = events_reader_open(&r, path, err);
    if (rc != CALF_OK) return rc;
    const events_record *rec;
    long records = 0;
    while ((rc = events_reader_next(&r, &rec, err)) == CALF_OK && rec) {
        records++;
        if (rec->file_version && fprintf(out, "file_version %s\n", rec->file_version) < 0) {
            rc = calf_error_set(err, CALF_EIO, "events: write: %s", strerror(errno));
            break;
        }
        for (size_t i = 0; i < rec->num_values && rc == CALF_OK; i++) {
            const events_value *v = &rec->values[i];
            int n;
            if (v->kind == EVENTS_VALUE_SIMPLE)
                n = fprintf(out, "%lld %s %.9g\n", (long long)rec->step, v->tag,
                            (double)v->simple_value);
            else if (v->kind == EVENTS_VALUE_HISTO)
                n = fprintf(out, "%lld %s histogram num=%.9g min=%.9g max=%.9g sum=%.9g\n",
                            (long long)rec->step, v->tag, v->histo_num, v->histo_min,
                            v->histo_max, v->histo_sum);
            else
                n = fprintf(out, "%lld %s (unsupported value type)\n", (long long)rec->step,
                            v->tag);
            if (n < 0) rc = calf_error_set(err, CALF_EIO, "events: write: %s", strerror(errno));
        }
        if (rc != CALF_OK) break;
    }
    /* every events file starts with its file_version record: an empty one is not one */
    if (rc == CALF_OK && records == 0)
        rc = calf_error_set(err, CALF_EINVAL, "events: %s: empty file, not an events file", path);
    /* a buffered stream reports a failed write only when it is flushed */
    if (rc == CALF_OK && (fflush(out) != 0 || ferror(out)))
        rc = calf_error_set(err, CALF_EIO, "events: write: %s", strerror(errno));
    events_reader_close(&r);
    return rc;
}
