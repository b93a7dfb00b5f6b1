/* test_summary.c: TensorBoard event files against the spec: CRC32C check value and
 * tables, TFRecord masking, byte-exact Event encoding built by hand from event.proto /
 * summary.proto, a write/read round trip through the validating reader, the rank > 0
 * record context (nothing created), and damage (flipped byte, torn tail, full disk). */
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "calf/context.h"
#include "calf/rng.h"
#include "calf/summary.h"
#include "calf/testing.h"
#include "records/crc32c.h"
#include "records/events_reader.h"
#include "test_files.h"
#include "test_util.h"

/* ------------------------------------------------------------------ helpers */

static char tmp_root[256];

static void make_tmp_root(void) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    int n = snprintf(tmp_root, sizeof tmp_root, "%s/calf_test_summary_XXXXXX", base);
    if (n < 0 || (size_t)n >= sizeof tmp_root || !mkdtemp(tmp_root)) {
        fprintf(stderr, "cannot create a temporary directory under %s\n", base);
        exit(1);
    }
}





/* Number of entries in dir other than . and ..; -1 if it cannot be opened. */
static int count_entries(const char *dir, char *first, size_t cap) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (n++ == 0 && first) join(first, cap, dir, e->d_name);
    }
    closedir(d);
    return n;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Bit-at-a-time CRC-32C straight from the definition: an independent reference for
 * the table-driven code and for framing bytes built by hand below. */
static uint32_t ref_crc32c(const unsigned char *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

static uint32_t ref_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

static void le_put(unsigned char *out, uint64_t v, int nbytes) {
    for (int i = 0; i < nbytes; i++) out[i] = (unsigned char)(v >> (8 * i));
}

/* Frame data as a TFRecord using only the reference CRC. */
static size_t frame(unsigned char *out, const unsigned char *data, size_t n) {
    le_put(out, n, 8);
    le_put(out + 8, ref_mask(ref_crc32c(out, 8)), 4);
    memcpy(out + 12, data, n);
    le_put(out + 12 + n, ref_mask(ref_crc32c(data, n)), 4);
    return n + 16;
}

static bool contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

/* ------------------------------------------------------------------ CRC32C */

static void test_crc32c(void) {
    CHECK_INT_EQ(crc32c("123456789", 9), 0xE3069283u);
    CHECK_INT_EQ(crc32c("", 0), 0);
    /* RFC 3720 (iSCSI) B.4 test vectors. */
    unsigned char buf[48];
    memset(buf, 0, 32);
    CHECK_INT_EQ(crc32c(buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, 32);
    CHECK_INT_EQ(crc32c(buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++) buf[i] = (unsigned char)i;
    CHECK_INT_EQ(crc32c(buf, 32), 0x46DD794Eu);

    /* The literal tables equal what the polynomial generates. */
    const uint32_t *t = crc32c_table_for_testing();
    int bad = 0;
    uint32_t t0[256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        t0[i] = c;
    }
    for (int k = 0; k < 8; k++)
        for (int i = 0; i < 256; i++) {
            uint32_t want = t0[i];
            for (int j = 0; j < k; j++) want = (want >> 8) ^ t0[want & 0xff];
            if (t[k * 256 + i] != want) bad++;
        }
    CHECK_INT_EQ(bad, 0);

    /* Slice-by-8 equals bit-at-a-time at every length and alignment, and incremental
     * updates compose. */
    calf_rng rng;
    calf_rng_seed(&rng, 1, 2, 3);
    unsigned char data[300];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)calf_rng_next(&rng);
    int mismatches = 0, split_mismatches = 0;
    for (size_t off = 0; off < 9; off++)
        for (size_t n = 0; n + off <= sizeof data; n += 7) {
            if (crc32c(data + off, n) != ref_crc32c(data + off, n)) mismatches++;
            size_t h = n / 3;
            if (crc32c_update(crc32c(data + off, h), data + off + h, n - h) !=
                crc32c(data + off, n))
                split_mismatches++;
        }
    CHECK_INT_EQ(mismatches, 0);
    CHECK_INT_EQ(split_mismatches, 0);
}

static void test_mask(void) {
    /* Values worked out by hand from mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. */
    CHECK_INT_EQ(crc32c_mask(0), 0xa282ead8u);
    CHECK_INT_EQ(crc32c_mask(1), 0xa284ead8u);          /* 1 << 17 = 0x20000 */
    CHECK_INT_EQ(crc32c_mask(0x80000000u), 0xa283ead8u); /* >> 15 = 0x10000 */
    CHECK_INT_EQ(crc32c_mask(0xffffffffu), 0xa282ead7u); /* wraps */
    CHECK_INT_EQ(crc32c_mask(0xE3069283u), ref_mask(0xE3069283u));
    int bad = 0;
    calf_rng rng;
    calf_rng_seed(&rng, 4, 5, 6);
    for (int i = 0; i < 1000; i++) {
        uint32_t c = (uint32_t)calf_rng_next(&rng);
        if (crc32c_unmask(crc32c_mask(c)) != c) bad++;
    }
    CHECK_INT_EQ(bad, 0);
}

/* ------------------------------------------------------------------ encoding */

/* Records of a file, located by walking the framing (lengths only). */
typedef struct span {
    size_t off, len; /* whole record: 16 + data length */
} span;

static int split_records(const unsigned char *p, size_t n, span *out, int max) {
    int k = 0;
    size_t off = 0;
    while (off + 12 <= n && k < max) {
        uint64_t len = 0;
        for (int i = 0; i < 8; i++) len |= (uint64_t)p[off + i] << (8 * i);
        if (len > n - off - 12 || n - off - 12 - len < 4) break;
        out[k].off = off;
        out[k].len = (size_t)len + 16;
        off += out[k].len;
        k++;
    }
    return k;
}

static void test_byte_exact(void) {
    char dir[512];
    join(dir, sizeof dir, tmp_root, "exact");
    calf_error err;
    calf_error_clear(&err);
    calf_summary_writer *w = calf_summary_writer_open(dir, 0, &err);
    CHECK(w != NULL);
    if (!w) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s", calf_summary_writer_path(w));
    CHECK_INT_EQ(calf_summary_writer_add_scalar(w, "a", 7, 1.5, 2.0), CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_close(w, &err), CALF_OK);

    size_t n;
    unsigned char *file = read_file(path, &n);
    CHECK(file != NULL);
    if (!file) return;
    span rec[4];
    int k = split_records(file, n, rec, 4);
    CHECK_INT_EQ(k, 2);
    if (k != 2) {
        free(file);
        return;
    }
    CHECK_INT_EQ(rec[0].off + rec[0].len + rec[1].len, n);

    /* Record 1: Event{wall_time = now (field 1, fixed64), file_version = "brain.Event:2"
     * (field 3, length-delimited)}; step 0 is omitted (proto3 default). Take wall_time's
     * eight bytes from the file, build the rest from the spec. */
    unsigned char ev0[64], want0[96];
    size_t m = 0;
    ev0[m++] = 0x09; /* (1 << 3) | 1 */
    memcpy(ev0 + m, file + 12 + 1, 8);
    m += 8;
    ev0[m++] = 0x1a; /* (3 << 3) | 2 */
    ev0[m++] = 13;
    memcpy(ev0 + m, "brain.Event:2", 13);
    m += 13;
    size_t w0 = frame(want0, ev0, m);
    CHECK_INT_EQ(rec[0].len, w0);
    CHECK(rec[0].len == w0 && memcmp(file, want0, w0) == 0);
    double wall;
    memcpy(&wall, file + 13, 8); /* little-endian host assumed by this check only */
    CHECK(wall > 1.6e9 && wall < 4.1e9);

    /* Record 2: Event{wall_time 1.5, step 7, summary {value {tag "a", simple_value 2}}}. */
    const unsigned char ev1[] = {
        0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x3f, /* 1: double 1.5 */
        0x10, 0x07,                                           /* 2: varint 7 */
        0x2a, 0x0a,                                           /* 5: Summary, 10 bytes */
        0x0a, 0x08,                                           /*  1: Value, 8 bytes */
        0x0a, 0x01, 'a',                                      /*   1: tag "a" */
        0x15, 0x00, 0x00, 0x00, 0x40,                         /*   2: float 2.0 */
    };
    unsigned char want1[64];
    size_t w1 = frame(want1, ev1, sizeof ev1);
    CHECK_INT_EQ(rec[1].len, w1);
    CHECK(rec[1].len == w1 && memcmp(file + rec[1].off, want1, w1) == 0);

    free(file);

    /* A negative step is a ten-byte varint (int64, not zigzag). */
    unsigned char buf[64];
    calf_error_clear(&err);
    join(dir, sizeof dir, tmp_root, "exact_neg");
    w = calf_summary_writer_open(dir, 0, &err);
    CHECK(w != NULL);
    if (!w) return;
    snprintf(path, sizeof path, "%s", calf_summary_writer_path(w));
    CHECK_INT_EQ(calf_summary_writer_add_scalar(w, "a", -1, 1.5, 2.0), CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_close(w, &err), CALF_OK);
    file = read_file(path, &n);
    CHECK(file != NULL);
    if (!file) return;
    k = split_records(file, n, rec, 4);
    CHECK_INT_EQ(k, 2);
    if (k == 2) {
        unsigned char ev[64];
        size_t q = 0;
        memcpy(ev, ev1, 9);
        q = 9;
        ev[q++] = 0x10;
        for (int i = 0; i < 9; i++) ev[q++] = 0xff;
        ev[q++] = 0x01;
        memcpy(ev + q, ev1 + 11, sizeof ev1 - 11);
        q += sizeof ev1 - 11;
        size_t wl = frame(buf, ev, q);
        CHECK_INT_EQ(rec[1].len, wl);
        CHECK(rec[1].len == wl && memcmp(file + rec[1].off, buf, wl) == 0);
    }
    free(file);
}

/* ------------------------------------------------------------------ round trip */

/* TensorFlow's default bucket limits, rebuilt here from the published definition. */
static double tf_limits[2000];
static size_t tf_nlimits;

static void build_tf_limits(void) {
    double pos[1000];
    size_t np = 0;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) pos[np++] = v;
    pos[np++] = DBL_MAX;
    size_t k = 0;
    for (size_t i = np; i-- > 0;) tf_limits[k++] = -pos[i];
    tf_limits[k++] = 0.0;
    for (size_t i = 0; i < np; i++) tf_limits[k++] = pos[i];
    tf_nlimits = k;
}

static bool is_tf_limit(double v) {
    for (size_t i = 0; i < tf_nlimits; i++)
        if (tf_limits[i] == v) return true;
    return false;
}

/* Check a decoded histogram against the values it was built from. */
static void check_histogram(const events_value *v, const float *vals, size_t n) {
    double num = 0, sum = 0, sq = 0, mn = DBL_MAX, mx = -DBL_MAX;
    for (size_t i = 0; i < n; i++) {
        double x = vals[i];
        if (!isfinite(x)) continue;
        num += 1;
        sum += x;
        sq += x * x;
        if (x < mn) mn = x;
        if (x > mx) mx = x;
    }
    CHECK_INT_EQ(v->kind, EVENTS_VALUE_HISTO);
    CHECK(v->histo_num == num);
    CHECK(v->histo_sum == sum);
    CHECK(v->histo_sum_squares == sq);
    CHECK(v->histo_min == mn);
    CHECK(v->histo_max == mx);
    CHECK(v->num_buckets >= 1);
    double total = 0;
    int not_tf = 0, not_increasing = 0, empty_neighbours = 0;
    for (size_t b = 0; b < v->num_buckets; b++) {
        total += v->bucket[b];
        if (!is_tf_limit(v->bucket_limit[b])) not_tf++;
        if (b > 0 && !(v->bucket_limit[b] > v->bucket_limit[b - 1])) not_increasing++;
        if (b > 0 && v->bucket[b] == 0 && v->bucket[b - 1] == 0) empty_neighbours++;
    }
    CHECK(total == num);
    CHECK_INT_EQ(not_tf, 0);
    CHECK_INT_EQ(not_increasing, 0);
    CHECK_INT_EQ(empty_neighbours, 0); /* runs of empty buckets are collapsed */
    CHECK(v->bucket_limit[v->num_buckets - 1] == DBL_MAX);
    /* Every value lies in the bucket TensorBoard will draw for it: left edge is the
     * previous limit (or -DBL_MAX), right edge exclusive. */
    int misplaced = 0;
    for (size_t i = 0; i < n; i++) {
        double x = vals[i];
        if (!isfinite(x)) continue;
        size_t b = 0;
        while (b < v->num_buckets && !(x < v->bucket_limit[b])) b++;
        double left = b == 0 ? -DBL_MAX : v->bucket_limit[b - 1];
        if (b == v->num_buckets || v->bucket[b] <= 0 || !(left <= x)) misplaced++;
    }
    CHECK_INT_EQ(misplaced, 0);
}

static void test_round_trip(void) {
    char dir[512];
    join(dir, sizeof dir, tmp_root, "rt/nested/train");
    calf_error err;
    calf_error_clear(&err);
    calf_summary_writer *w = calf_summary_writer_open(dir, 3600, &err);
    CHECK(w != NULL);
    if (!w) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s", calf_summary_writer_path(w));
    /* File name: events.out.tfevents.<secs>.<usecs>.<host>.<pid>.<n> */
    const char *base = strrchr(path, '/') + 1;
    CHECK(strncmp(base, "events.out.tfevents.", 20) == 0);
    char pid_part[32];
    snprintf(pid_part, sizeof pid_part, ".%ld.", (long)getpid());
    CHECK(contains(base, pid_part));

    calf_rng rng;
    calf_rng_seed(&rng, 7, 0, 1);
    float normal[1000];
    for (int i = 0; i < 1000; i++) normal[i] = (float)calf_rng_normal(&rng);
    const float special[] = {0.0f, -0.0f, 1e-13f, -1e-13f, 1.0f, 1.0f, 3.5e30f, -3.5e30f,
                             NAN, INFINITY, -INFINITY, 2.0f};
    const size_t nspecial = sizeof special / sizeof special[0];

    for (int s = 0; s < 5; s++) {
        CHECK_INT_EQ(calf_summary_writer_add_scalar(w, "loss/total", s * 10, 100.0 + s,
                                                    1.0 / (s + 1)), CALF_OK);
        CHECK_INT_EQ(calf_summary_writer_add_scalar(w, "returns", s * 10, 100.0 + s, -s * 2.5),
                     CALF_OK);
    }
    /* flush_secs = 3600 and a few hundred bytes buffered: nothing beyond the
     * file_version record has reached the file yet. */
    size_t n0;
    unsigned char *f0 = read_file(path, &n0);
    span sp[2];
    CHECK(f0 && split_records(f0, n0, sp, 2) == 1);
    free(f0);
    CHECK_INT_EQ(calf_summary_writer_add_histogram(w, "weights", 40, 200.0, normal, 1000),
                 CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_add_histogram(w, "special", 41, 201.0, special, nspecial),
                 CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_add_histogram(w, "empty", 42, 202.0, NULL, 0), CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_flush(w, &err), CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_close(w, &err), CALF_OK);

    events_reader r;
    CHECK_INT_EQ(events_reader_open(&r, path, &err), CALF_OK);
    const events_record *rec;
    int idx = 0;
    uint64_t expect_off = 0;
    while (events_reader_next(&r, &rec, &err) == CALF_OK && rec) {
        CHECK_INT_EQ(rec->offset, expect_off);
        expect_off += rec->len + 16;
        if (idx == 0) {
            CHECK_STR_EQ(rec->file_version, "brain.Event:2");
            CHECK(!rec->has_summary);
            CHECK_INT_EQ(rec->step, 0);
        } else if (idx <= 10) {
            int s = (idx - 1) / 2;
            CHECK(rec->file_version == NULL);
            CHECK_INT_EQ(rec->num_values, 1);
            CHECK_INT_EQ(rec->step, s * 10);
            CHECK(rec->wall_time == 100.0 + s);
            if (rec->num_values == 1) {
                const events_value *v = &rec->values[0];
                CHECK_INT_EQ(v->kind, EVENTS_VALUE_SIMPLE);
                if ((idx - 1) % 2 == 0) {
                    CHECK_STR_EQ(v->tag, "loss/total");
                    CHECK(v->simple_value == (float)(1.0 / (s + 1)));
                } else {
                    CHECK_STR_EQ(v->tag, "returns");
                    CHECK(v->simple_value == (float)(-s * 2.5));
                }
            }
        } else if (idx == 11) {
            CHECK_INT_EQ(rec->step, 40);
            CHECK(rec->num_values == 1 && !strcmp(rec->values[0].tag, "weights"));
            if (rec->num_values == 1) check_histogram(&rec->values[0], normal, 1000);
        } else if (idx == 12) {
            CHECK_INT_EQ(rec->step, 41);
            CHECK(rec->num_values == 1 && !strcmp(rec->values[0].tag, "special"));
            if (rec->num_values == 1) {
                check_histogram(&rec->values[0], special, nspecial);
                CHECK(rec->values[0].histo_num == 9); /* NaN and +-inf left out */
            }
        } else if (idx == 13) {
            CHECK_INT_EQ(rec->step, 42);
            CHECK(rec->num_values == 1 && !strcmp(rec->values[0].tag, "empty"));
            if (rec->num_values == 1) {
                const events_value *v = &rec->values[0];
                CHECK_INT_EQ(v->kind, EVENTS_VALUE_HISTO);
                CHECK(v->histo_num == 0);
                CHECK(v->histo_min == DBL_MAX && v->histo_max == -DBL_MAX);
                CHECK(v->num_buckets == 1 && v->bucket_limit[0] == DBL_MAX &&
                      v->bucket[0] == 0);
            }
        }
        idx++;
    }
    CHECK_INT_EQ(err.status, CALF_OK);
    CHECK_INT_EQ(idx, 14);
    events_reader_close(&r);

    /* The text dump. */
    char *text = NULL;
    size_t tlen = 0;
    FILE *mem = open_memstream(&text, &tlen);
    CHECK(mem != NULL);
    if (mem) {
        CHECK_INT_EQ(calf_events_dump((const char *[]){path}, 1, NULL, mem, &err), CALF_OK);
        fclose(mem);
        const char *head = "file_version brain.Event:2\n0 loss/total 1\n0 returns 0\n";
        CHECK(strncmp(text, head, strlen(head)) == 0);
        CHECK(contains(text, "\n10 loss/total 0.5\n10 returns -2.5\n"));
        CHECK(contains(text, "\n30 loss/total 0.25\n"));
        /* The sum is taken in order, so 2 is absorbed by 3.5e30 and only the last 2
         * survives. */
        char line[160];
        snprintf(line, sizeof line, "\n41 special histogram num=9 min=%.9g max=%.9g sum=2\n",
                 (double)-3.5e30f, (double)3.5e30f);
        CHECK(contains(text, line));
        CHECK(contains(text, "\n42 empty histogram num=0 "));
        int lines = 0;
        for (const char *c = text; *c; c++) lines += *c == '\n';
        CHECK_INT_EQ(lines, 14);
        free(text);
    }

    /* A second writer on the same directory, in the same second, gets its own file. */
    calf_summary_writer *a = calf_summary_writer_open(dir, 0, &err);
    calf_summary_writer *b = calf_summary_writer_open(dir, 0, &err);
    CHECK(a && b);
    if (a && b) CHECK(strcmp(calf_summary_writer_path(a), calf_summary_writer_path(b)) != 0);
    CHECK_INT_EQ(calf_summary_writer_close(a, &err), CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_close(b, &err), CALF_OK);
    CHECK_INT_EQ(count_entries(dir, NULL, 0), 3);
    CHECK_INT_EQ(calf_summary_writer_close(NULL, &err), CALF_OK);
}

/* ------------------------------------------------------------------ record context */

typedef struct run_probe {
    int calls;
    bool enabled;
    int result;
} run_probe;

static int probe_fn(void *arg) {
    run_probe *p = arg;
    p->calls++;
    p->enabled = calf_summary_enabled();
    float v[3] = {1, 2, 3};
    calf_summary_scalar("probe/scalar", 5, 0.25);
    calf_summary_histogram("probe/histo", 5, v, 3);
    return p->result;
}

static void test_record_context(void) {
    calf_error err;
    calf_error_clear(&err);
    char root[512], dir[512];

    /* rank 1 of 2: fn runs; no directory, no file, no writer. */
    calf_context_reset_for_testing();
    CHECK_INT_EQ(calf_context_set_distributed(1, 2, 1, &err), CALF_OK);
    join(root, sizeof root, tmp_root, "rank1");
    join(dir, sizeof dir, root, "train");
    run_probe p = {0, true, CALF_OK};
    CHECK_INT_EQ(calf_summary_run(dir, 0, probe_fn, &p, &err), CALF_OK);
    CHECK_INT_EQ(p.calls, 1);
    CHECK(!p.enabled);
    CHECK(!exists(root));
    CHECK(calf_summary_current() == NULL);
    p.result = 42; /* fn's result comes back unchanged */
    CHECK_INT_EQ(calf_summary_run(dir, 0, probe_fn, &p, &err), 42);
    CHECK(!exists(root));
    calf_summary_scalar("outside", 1, 1.0); /* no current writer: a no-op */

    /* rank 0 of 2 and not distributed: exactly one events file with fn's values. */
    for (int mode = 0; mode < 2; mode++) {
        calf_context_reset_for_testing();
        if (mode == 0) CHECK_INT_EQ(calf_context_set_distributed(0, 2, 0, &err), CALF_OK);
        join(root, sizeof root, tmp_root, mode == 0 ? "rank0" : "single");
        join(dir, sizeof dir, root, "train");
        run_probe q = {0, false, CALF_OK};
        CHECK_INT_EQ(calf_summary_run(dir, 0, probe_fn, &q, &err), CALF_OK);
        CHECK_INT_EQ(q.calls, 1);
        CHECK(q.enabled);
        CHECK(calf_summary_current() == NULL); /* previous (none) restored */
        char file[1024];
        CHECK_INT_EQ(count_entries(dir, file, sizeof file), 1);
        events_reader r;
        if (events_reader_open(&r, file, &err) == CALF_OK) {
            const events_record *rec;
            int n = 0;
            bool saw_scalar = false, saw_histo = false;
            while (events_reader_next(&r, &rec, &err) == CALF_OK && rec) {
                n++;
                for (size_t i = 0; i < rec->num_values; i++) {
                    if (!strcmp(rec->values[i].tag, "probe/scalar"))
                        saw_scalar = rec->values[i].simple_value == 0.25f && rec->step == 5;
                    if (!strcmp(rec->values[i].tag, "probe/histo"))
                        saw_histo = rec->values[i].histo_num == 3 && rec->values[i].histo_sum == 6;
                }
            }
            CHECK_INT_EQ(err.status, CALF_OK);
            CHECK_INT_EQ(n, 3);
            CHECK(saw_scalar);
            CHECK(saw_histo);
            events_reader_close(&r);
        }
    }

    /* Contexts nest: an outer current writer is restored after the inner run. */
    join(dir, sizeof dir, tmp_root, "outer");
    calf_summary_writer *outer = calf_summary_writer_open(dir, 0, &err);
    CHECK(outer != NULL);
    calf_summary_set_current(outer);
    join(dir, sizeof dir, tmp_root, "inner");
    run_probe q = {0, false, CALF_OK};
    CHECK_INT_EQ(calf_summary_run(dir, 0, probe_fn, &q, &err), CALF_OK);
    CHECK(calf_summary_current() == outer);
    CHECK_INT_EQ(calf_summary_writer_close(outer, &err), CALF_OK);
    CHECK(calf_summary_current() == NULL); /* closing the current writer unsets it */

    /* A directory that cannot be created is the run's error, and fn does not run. */
    join(dir, sizeof dir, tmp_root, "plainfile");
    CHECK_INT_EQ(write_file(dir, (const unsigned char *)"x", 1), 0);
    join(root, sizeof root, dir, "train");
    run_probe z = {0, false, CALF_OK};
    calf_error_clear(&err);
    CHECK_INT_EQ(calf_summary_run(root, 0, probe_fn, &z, &err), CALF_EIO);
    CHECK_INT_EQ(z.calls, 0);
    CHECK(contains(err.msg, "cannot create directory") && contains(err.msg, "plainfile"));
    calf_context_reset_for_testing();
}

/* ------------------------------------------------------------------ the dump */

/* What calf_events_dump printed on out and on warn, and what it returned. */
typedef struct dumped {
    int rc;
    calf_error err;
    char *out, *warn; /* NUL-terminated; freed by dumped_free */
} dumped;

static dumped dump_files(const char *const *paths, size_t n, bool raw, bool csv) {
    dumped d;
    memset(&d, 0, sizeof d);
    calf_error_clear(&d.err);
    size_t olen = 0, wlen = 0;
    FILE *out = open_memstream(&d.out, &olen);
    FILE *warn = open_memstream(&d.warn, &wlen);
    if (!out || !warn) {
        fprintf(stderr, "open_memstream failed\n");
        exit(1);
    }
    calf_events_dump_options opt = {raw, csv, warn};
    d.rc = calf_events_dump(paths, n, &opt, out, &d.err);
    fclose(out);
    fclose(warn);
    return d;
}

static dumped dump_file(const char *path, bool raw, bool csv) {
    return dump_files((const char *[]){path}, 1, raw, csv);
}

static void dumped_free(dumped *d) {
    free(d->out);
    free(d->warn);
}

#define CHECK_DUMP(d, want_rc, want_out, want_warn)                            \
    do {                                                                       \
        CHECK_INT_EQ((d).rc, want_rc);                                         \
        CHECK_STR_EQ((d).out, want_out);                                       \
        CHECK_STR_EQ((d).warn, want_warn);                                     \
        if ((d).rc != (want_rc)) fprintf(stderr, "  error: %s\n", (d).err.msg); \
    } while (0)

/* ------------------------------------------------------------------ restart markers */

static void test_session_start_bytes(void) {
    char dir[512];
    join(dir, sizeof dir, tmp_root, "exact_session");
    calf_error err;
    calf_error_clear(&err);
    calf_summary_writer *w = calf_summary_writer_open(dir, 0, &err);
    CHECK(w != NULL);
    if (!w) return;
    char path[1024];
    snprintf(path, sizeof path, "%s", calf_summary_writer_path(w));
    CHECK_INT_EQ(calf_summary_writer_add_session_start(w, 7, 1.5), CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_add_session_start(w, 0, 0.0), CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_close(w, &err), CALF_OK);
    size_t n;
    unsigned char *file = read_file(path, &n);
    CHECK(file != NULL);
    if (!file) return;
    span rec[4];
    CHECK_INT_EQ(split_records(file, n, rec, 4), 3);
    /* Event{wall_time 1.5, step 7, session_log (field 7) {status (field 1) START = 1}}. */
    const unsigned char ev1[] = {
        0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x3f, /* 1: double 1.5 */
        0x10, 0x07,                                           /* 2: varint 7 */
        0x3a, 0x02,                                           /* 7: SessionLog, 2 bytes */
        0x08, 0x01,                                           /*  1: varint START */
    };
    /* At step 0 and time 0 both are left out (proto3 defaults); session_log, a member
     * of the oneof, is not. */
    const unsigned char ev2[] = {0x3a, 0x02, 0x08, 0x01};
    unsigned char want[64];
    size_t wl = frame(want, ev1, sizeof ev1);
    CHECK(rec[1].len == wl && memcmp(file + rec[1].off, want, wl) == 0);
    wl = frame(want, ev2, sizeof ev2);
    CHECK(rec[2].len == wl && memcmp(file + rec[2].off, want, wl) == 0);
    CHECK_INT_EQ(rec[2].off + rec[2].len, n);
    free(file);
}

static void test_session_round_trip(void) {
    char dir[512];
    join(dir, sizeof dir, tmp_root, "session_rt");
    calf_error err;
    calf_error_clear(&err);
    calf_summary_writer *w = calf_summary_writer_open(dir, 3600, &err);
    CHECK(w != NULL);
    if (!w) return;
    char path[1024];
    snprintf(path, sizeof path, "%s", calf_summary_writer_path(w));
    CHECK_INT_EQ(calf_summary_writer_add_session_start(w, 0, 100.5), CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_add_scalar(w, "a", 1, 101.0, 0.5), CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_add_session_start(w, 3, 102.25), CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_add_session_start(w, -2, 103.0), CALF_OK);
    calf_summary_session_start(9); /* no current writer: nothing written */
    calf_summary_set_current(w);
    double before = (double)time(NULL);
    calf_summary_session_start(11);
    double after = (double)time(NULL) + 1;
    calf_summary_set_current(NULL);
    CHECK_INT_EQ(calf_summary_writer_close(w, &err), CALF_OK);

    events_reader r;
    CHECK_INT_EQ(events_reader_open(&r, path, &err), CALF_OK);
    const events_record *rec;
    const int64_t want_step[] = {0, 0, 1, 3, -2, 11};
    int idx = 0;
    while (events_reader_next(&r, &rec, &err) == CALF_OK && rec) {
        if (idx < 6) CHECK_INT_EQ(rec->step, want_step[idx]);
        bool marker = idx == 1 || idx >= 3;
        CHECK_INT_EQ(rec->has_session_log, marker);
        CHECK_INT_EQ(rec->session_status, marker ? EVENTS_SESSION_START : 0);
        if (marker) {
            CHECK(!rec->has_summary && rec->num_values == 0 && rec->file_version == NULL);
        }
        if (idx == 1) CHECK(rec->wall_time == 100.5);
        if (idx == 3) CHECK(rec->wall_time == 102.25);
        if (idx == 5) CHECK(rec->wall_time >= before && rec->wall_time <= after);
        if (idx == 2) CHECK(rec->has_summary && rec->num_values == 1 && rec->wall_time == 101.0);
        idx++;
    }
    CHECK_INT_EQ(err.status, CALF_OK);
    CHECK_INT_EQ(idx, 6);
    events_reader_close(&r);

    dumped d = dump_file(path, true, false);
    CHECK_DUMP(d, CALF_OK,
               "file_version brain.Event:2\n0 session_start\n1 a 0.5\n3 session_start\n"
               "-2 session_start\n11 session_start\n",
               "");
    dumped_free(&d);
    /* as TensorBoard shows it: the START at 3 keeps step 1, the one at -2 does not */
    d = dump_file(path, false, false);
    CHECK_DUMP(d, CALF_OK,
               "file_version brain.Event:2\n0 session_start\n3 session_start\n"
               "-2 session_start\n11 session_start\n",
               "");
    dumped_free(&d);
}

/* SessionLog decoding, and Event.what as the oneof it is. */
static void test_session_decode(void) {
    events_record rec;
    memset(&rec, 0, sizeof rec);
    calf_error err;
    calf_error_clear(&err);
    const unsigned char stop[] = {0x3a, 0x02, 0x08, 0x02};
    CHECK_INT_EQ(events_decode_event(stop, sizeof stop, &rec, &err), CALF_OK);
    CHECK(rec.has_session_log && rec.session_status == EVENTS_SESSION_STOP);
    const unsigned char empty[] = {0x10, 0x05, 0x3a, 0x00};
    CHECK_INT_EQ(events_decode_event(empty, sizeof empty, &rec, &err), CALF_OK);
    CHECK(rec.has_session_log && rec.session_status == 0 && rec.step == 5);
    /* status -1 as the ten-byte varint an int32 enum is written as */
    const unsigned char neg[] = {0x3a, 0x0b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
                                 0xff, 0xff, 0xff, 0xff, 0x01};
    CHECK_INT_EQ(events_decode_event(neg, sizeof neg, &rec, &err), CALF_OK);
    CHECK_INT_EQ(rec.session_status, -1);
    /* checkpoint_path (2) and msg (3) are skipped; status may come after them */
    const unsigned char ckpt[] = {0x3a, 0x08, 0x12, 0x02, 'a', 'b', 0x08, 0x03, 0x1a, 0x00};
    CHECK_INT_EQ(events_decode_event(ckpt, sizeof ckpt, &rec, &err), CALF_OK);
    CHECK_INT_EQ(rec.session_status, EVENTS_SESSION_CHECKPOINT);
    /* status with the wrong wire type (fixed64) is a bad Event */
    const unsigned char badwt[] = {0x3a, 0x09, 0x09, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK_INT_EQ(events_decode_event(badwt, sizeof badwt, &rec, &err), CALF_EINVAL);
    CHECK(contains(err.msg, "SessionLog"));
    /* an Event without session_log reads 0 (the last decode's state is not kept) */
    const unsigned char plain[] = {0x10, 0x01};
    CHECK_INT_EQ(events_decode_event(plain, sizeof plain, &rec, &err), CALF_OK);
    CHECK(!rec.has_session_log && rec.session_status == 0);
    /* the oneof: the last member read is the one the Event has */
    const unsigned char sum_then_log[] = {0x2a, 0x0a, 0x0a, 0x08, 0x0a, 0x01, 'a', 0x15,
                                          0x00, 0x00, 0x00, 0x40, 0x3a, 0x02, 0x08, 0x01};
    CHECK_INT_EQ(events_decode_event(sum_then_log, sizeof sum_then_log, &rec, &err), CALF_OK);
    CHECK(!rec.has_summary && rec.num_values == 0);
    CHECK(rec.has_session_log && rec.session_status == EVENTS_SESSION_START);
    const unsigned char log_then_sum[] = {0x3a, 0x02, 0x08, 0x01, 0x2a, 0x0a, 0x0a, 0x08,
                                          0x0a, 0x01, 'a', 0x15, 0x00, 0x00, 0x00, 0x40};
    CHECK_INT_EQ(events_decode_event(log_then_sum, sizeof log_then_sum, &rec, &err), CALF_OK);
    CHECK(rec.has_summary && rec.num_values == 1 && !rec.has_session_log);
    const unsigned char ver_then_log[] = {0x1a, 0x01, 'v', 0x3a, 0x02, 0x08, 0x01};
    CHECK_INT_EQ(events_decode_event(ver_then_log, sizeof ver_then_log, &rec, &err), CALF_OK);
    CHECK(rec.file_version == NULL && rec.has_session_log);
    const unsigned char log_then_graph[] = {0x3a, 0x02, 0x08, 0x01, 0x22, 0x01, 'g'};
    CHECK_INT_EQ(events_decode_event(log_then_graph, sizeof log_then_graph, &rec, &err), CALF_OK);
    CHECK(!rec.has_session_log && rec.session_status == 0);
    events_record_free(&rec);
}

/* ------------------------------------------------------------------ purge */

/* Event{step, summary{value{tag, simple_value v}}} by hand: 0 < step < 128, short tag. */
static size_t ev_scalar(unsigned char *out, int step, const char *tag, float v) {
    size_t tl = strlen(tag), m = 0;
    uint32_t bits;
    memcpy(&bits, &v, 4);
    out[m++] = 0x10;
    out[m++] = (unsigned char)step;
    out[m++] = 0x2a;
    out[m++] = (unsigned char)(tl + 9); /* Summary: key, length, Value */
    out[m++] = 0x0a;
    out[m++] = (unsigned char)(tl + 7); /* Value: tag (2 + tl), simple_value (5) */
    out[m++] = 0x0a;
    out[m++] = (unsigned char)tl;
    memcpy(out + m, tag, tl);
    m += tl;
    out[m++] = 0x15;
    le_put(out + m, bits, 4);
    return m + 4;
}

/* One launch of a run: a writer on dir that writes a START at start_step (unless < 0)
 * and then "loss" = offset + s for s in [from, to]; its path goes to path. */
static void write_launch(const char *dir, int64_t start_step, int from, int to, double offset,
                         char *path, size_t cap) {
    calf_error err;
    calf_error_clear(&err);
    calf_summary_writer *w = calf_summary_writer_open(dir, 0, &err);
    CHECK(w != NULL);
    if (!w) {
        path[0] = '\0';
        return;
    }
    snprintf(path, cap, "%s", calf_summary_writer_path(w));
    double wall = 1700000000.125;
    if (start_step >= 0)
        CHECK_INT_EQ(calf_summary_writer_add_session_start(w, start_step, wall), CALF_OK);
    for (int s = from; s <= to; s++) {
        CHECK_INT_EQ(calf_summary_writer_add_scalar(w, "loss", s, wall + s, offset + s), CALF_OK);
        if (offset == 0) {
            CHECK_INT_EQ(calf_summary_writer_add_scalar(w, "ret", s, wall + s, -s), CALF_OK);
            if (s == 4) {
                const float h[3] = {1, 2, 3};
                CHECK_INT_EQ(calf_summary_writer_add_histogram(w, "w", s, wall + s, h, 3),
                             CALF_OK);
            }
        }
    }
    CHECK_INT_EQ(calf_summary_writer_close(w, &err), CALF_OK);
}

static void test_purge(void) {
    char dir[512], a[1024], b[1024], c[1024], a0[1024];
    join(dir, sizeof dir, tmp_root, "purge/train");
    /* Launch 1 got to step 5 and died; its last checkpoint covered step 2. Launch 2
     * resumed at step 3 and died after step 6 with a checkpoint at 4; launch 3 resumed
     * at 5. Launch 2 also wrote a value at step 1 after its marker. */
    write_launch(dir, 0, 1, 5, 0, a, sizeof a);
    write_launch(dir, 3, 3, 6, 10, b, sizeof b);
    { /* launch 2's "late" value, a record appended to its file */
        size_t n;
        unsigned char *f = read_file(b, &n);
        CHECK(f != NULL);
        unsigned char ev[32], rec[64];
        size_t rl = frame(rec, ev, ev_scalar(ev, 1, "late", 7));
        unsigned char *g = f ? malloc(n + rl) : NULL;
        if (g) {
            memcpy(g, f, n);
            memcpy(g + n, rec, rl);
            CHECK_INT_EQ(write_file(b, g, n + rl), 0);
        }
        free(g);
        free(f);
    }
    write_launch(dir, 5, 5, 6, 20, c, sizeof c);

    const char *const run[] = {a, b, c};
    const char *view =
        "file_version brain.Event:2\n0 session_start\n1 loss 1\n1 ret -1\n2 loss 2\n2 ret -2\n"
        "file_version brain.Event:2\n3 session_start\n3 loss 13\n4 loss 14\n1 late 7\n"
        "file_version brain.Event:2\n5 session_start\n5 loss 25\n6 loss 26\n";
    const char *raw =
        "file_version brain.Event:2\n0 session_start\n1 loss 1\n1 ret -1\n2 loss 2\n2 ret -2\n"
        "3 loss 3\n3 ret -3\n4 loss 4\n4 ret -4\n4 w histogram num=3 min=1 max=3 sum=6\n"
        "5 loss 5\n5 ret -5\n"
        "file_version brain.Event:2\n3 session_start\n3 loss 13\n4 loss 14\n5 loss 15\n"
        "6 loss 16\n1 late 7\n"
        "file_version brain.Event:2\n5 session_start\n5 loss 25\n6 loss 26\n";
    dumped d = dump_files(run, 3, false, false);
    CHECK_DUMP(d, CALF_OK, view, "");
    dumped_free(&d);
    d = dump_files(run, 3, true, false);
    CHECK_DUMP(d, CALF_OK, raw, "");
    dumped_free(&d);

    /* The same records in one file (a run's files concatenated): the same view. */
    char cat[1024];
    join(cat, sizeof cat, tmp_root, "purge_cat.tfevents");
    size_t total = 0, len[3];
    unsigned char *part[3], *all = NULL;
    for (int i = 0; i < 3; i++) {
        part[i] = read_file(run[i], &len[i]);
        CHECK(part[i] != NULL);
        total += part[i] ? len[i] : 0;
    }
    all = malloc(total);
    total = 0;
    for (int i = 0; i < 3; i++)
        if (part[i] && all) {
            memcpy(all + total, part[i], len[i]);
            total += len[i];
        }
    CHECK_INT_EQ(write_file(cat, all, total), 0);
    d = dump_file(cat, false, false);
    CHECK_DUMP(d, CALF_OK, view, "");
    dumped_free(&d);

    /* The CSV of the same view: scalars only, in file order. */
    d = dump_files(run, 3, false, true);
    CHECK_DUMP(d, CALF_OK,
               "tag,step,wall_time,value\n"
               "loss,1,1700000001.125,1\nret,1,1700000001.125,-1\n"
               "loss,2,1700000002.125,2\nret,2,1700000002.125,-2\n"
               "loss,3,1700000003.125,13\nloss,4,1700000004.125,14\nlate,1,0,7\n"
               "loss,5,1700000005.125,25\nloss,6,1700000006.125,26\n",
               "");
    dumped_free(&d);
    d = dump_files(run, 3, true, true);
    CHECK_INT_EQ(d.rc, CALF_OK);
    CHECK(contains(d.out, "\nloss,5,1700000005.125,5\nret,5,1700000005.125,-5\nloss,3,"));
    CHECK(contains(d.out, "\nloss,6,1700000006.125,16\nlate,1,0,7\nloss,5,"));
    CHECK(!contains(d.out, "w,") && !contains(d.out, "session"));
    dumped_free(&d);

    /* A run whose first launch wrote no marker: launch 2's START is then the run's
     * first, which TensorBoard takes as its initial start, so nothing is dropped. This
     * is why every launch writes one, the first included. */
    join(dir, sizeof dir, tmp_root, "purge_nomarker/train");
    write_launch(dir, -1, 1, 5, 0, a0, sizeof a0);
    write_launch(dir, 3, 3, 4, 10, b, sizeof b);
    d = dump_files((const char *[]){a0, b}, 2, false, false);
    dumped r = dump_files((const char *[]){a0, b}, 2, true, false);
    CHECK_DUMP(d, CALF_OK, r.out, "");
    CHECK(contains(d.out, "\n5 loss 5\n") && contains(d.out, "\n3 loss 13\n"));
    dumped_free(&d);
    dumped_free(&r);

    for (int i = 0; i < 3; i++) free(part[i]);
    free(all);
}

/* Files older than brain.Event:2 get TensorBoard's older rule: an Event with a summary
 * whose step is below the previous summary's drops its own tags' values from that step
 * on; START markers mean nothing there. */
static void test_purge_old_version(void) {
    for (int version = 1; version <= 2; version++) {
        unsigned char file[1024], ev[64];
        size_t n = 0, m;
        char fv[] = "brain.Event:1";
        fv[12] = (char)('0' + version);
        ev[0] = 0x1a;
        ev[1] = 13;
        memcpy(ev + 2, fv, 13);
        n += frame(file + n, ev, 15);
        struct { int step; const char *tag; float v; } vals[] = {
            {1, "a", 1}, {2, "a", 2}, {2, "b", 20}, {3, "a", 3}, {0, NULL, 0}, {2, "a", 4},
            {1, "b", 10}};
        for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
            if (vals[i].tag) {
                m = ev_scalar(ev, vals[i].step, vals[i].tag, vals[i].v);
            } else {
                const unsigned char start[] = {0x10, 0x02, 0x3a, 0x02, 0x08, 0x01};
                memcpy(ev, start, sizeof start);
                m = sizeof start;
            }
            n += frame(file + n, ev, m);
        }
        char path[1024];
        join(path, sizeof path, tmp_root, "old_version.tfevents");
        CHECK_INT_EQ(write_file(path, file, n), 0);
        char all[256];
        snprintf(all, sizeof all,
                 "file_version %s\n1 a 1\n2 a 2\n2 b 20\n3 a 3\n2 session_start\n2 a 4\n1 b 10\n",
                 fv);
        dumped d = dump_file(path, false, false);
        if (version == 1)
            CHECK_DUMP(d, CALF_OK,
                       "file_version brain.Event:1\n1 a 1\n2 session_start\n2 a 4\n1 b 10\n", "");
        else /* the START is the run's first, and steps going back mean nothing */
            CHECK_DUMP(d, CALF_OK, all, "");
        dumped_free(&d);
        d = dump_file(path, true, false);
        CHECK_DUMP(d, CALF_OK, all, "");
        dumped_free(&d);
    }
}

/* CSV: tags quoted as RFC 4180 has it, wall_time %.17g, value %.9g; only scalars. */
static void test_csv(void) {
    char dir[512];
    join(dir, sizeof dir, tmp_root, "csv");
    calf_error err;
    calf_error_clear(&err);
    calf_summary_writer *w = calf_summary_writer_open(dir, 0, &err);
    CHECK(w != NULL);
    if (!w) return;
    char path[1024];
    snprintf(path, sizeof path, "%s", calf_summary_writer_path(w));
    const char *tags[] = {"plain/tag", "a,b", "say \"hi\"", "two\nlines", "cr\rhere", ""};
    CHECK_INT_EQ(calf_summary_writer_add_session_start(w, 0, 0.1), CALF_OK);
    for (int i = 0; i < 6; i++)
        CHECK_INT_EQ(calf_summary_writer_add_scalar(w, tags[i], 7, 0.1, 0.1), CALF_OK);
    const float h[2] = {1, 2};
    CHECK_INT_EQ(calf_summary_writer_add_histogram(w, "h", 8, 0.1, h, 2), CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_add_scalar(w, "big", -3, 1.0e20, -3.4e38), CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_close(w, &err), CALF_OK);
    dumped d = dump_file(path, false, true);
    CHECK_DUMP(d, CALF_OK,
               "tag,step,wall_time,value\n"
               "plain/tag,7,0.10000000000000001,0.100000001\n"
               "\"a,b\",7,0.10000000000000001,0.100000001\n"
               "\"say \"\"hi\"\"\",7,0.10000000000000001,0.100000001\n"
               "\"two\nlines\",7,0.10000000000000001,0.100000001\n"
               "\"cr\rhere\",7,0.10000000000000001,0.100000001\n"
               ",7,0.10000000000000001,0.100000001\n"
               "big,-3,1e+20,-3.39999995e+38\n",
               "");
    dumped_free(&d);
}

/* The text view escapes what a terminal would act on in a tag (issue 40, item 13): a
 * newline forging a line, ESC starting a colour, a C1 CSI, bytes that are not UTF-8;
 * UTF-8 text stays as it is, and the CSV keeps the tag's bytes, quoted. */
static void test_text_escapes(void) {
    char dir[512];
    join(dir, sizeof dir, tmp_root, "escapes");
    calf_error err;
    calf_error_clear(&err);
    calf_summary_writer *w = calf_summary_writer_open(dir, 0, &err);
    CHECK(w != NULL);
    if (!w) return;
    char path[1024];
    snprintf(path, sizeof path, "%s", calf_summary_writer_path(w));
    const char *tags[] = {
        "two\n7 Metrics/AverageReturn 500", /* a forged line */
        "\x1b[31mred\x1b[0m\a",             /* a colour and a bell */
        "tab\tcr\rdel\x7f back\\slash",
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x84", /* UTF-8: as it is */
        "c1 \xc2\x9b" "2J, bad \xff\xc3( \xed\xa0\x80 \xc0\xaf", /* CSI; not UTF-8 */
    };
    for (int i = 0; i < 5; i++)
        CHECK_INT_EQ(calf_summary_writer_add_scalar(w, tags[i], i + 1, 0.5, 0.25), CALF_OK);
    const float h[1] = {1};
    CHECK_INT_EQ(calf_summary_writer_add_histogram(w, "h\x1b]0;title\x07", 6, 0.5, h, 1),
                 CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_close(w, &err), CALF_OK);
    dumped d = dump_file(path, false, false);
    CHECK_DUMP(d, CALF_OK,
               "file_version brain.Event:2\n"
               "1 two\\n7 Metrics/AverageReturn 500 0.25\n"
               "2 \\x1b[31mred\\x1b[0m\\x07 0.25\n"
               "3 tab\\tcr\\rdel\\x7f back\\\\slash 0.25\n"
               "4 caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x84 0.25\n"
               "5 c1 \\u009b2J, bad \\xff\\xc3( \\xed\\xa0\\x80 \\xc0\\xaf 0.25\n"
               "6 h\\x1b]0;title\\x07 histogram num=1 min=1 max=1 sum=1\n",
               "");
    dumped_free(&d);
    d = dump_file(path, false, true);
    CHECK_DUMP(d, CALF_OK,
               "tag,step,wall_time,value\n"
               "\"two\n7 Metrics/AverageReturn 500\",1,0.5,0.25\n"
               "\x1b[31mred\x1b[0m\a,2,0.5,0.25\n"
               "\"tab\tcr\rdel\x7f back\\slash\",3,0.5,0.25\n"
               "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x84,4,0.5,0.25\n"
               "\"c1 \xc2\x9b" "2J, bad \xff\xc3( \xed\xa0\x80 \xc0\xaf\",5,0.5,0.25\n",
               "");
    dumped_free(&d);
}

/* A FIFO named like an events file, that nothing writes: refused as an empty file, where
 * opening it waited for a writer for ever (issue 40, item 13). The alarm turns such a
 * wait into a failure. */
static void test_fifo(void) {
    char dir[512], path[600];
    join(dir, sizeof dir, tmp_root, "fifo");
    CHECK(mkdir(dir, 0777) == 0);
    join(path, sizeof path, dir, "events.out.tfevents.0000000001.000000.host.1.0");
    CHECK(mkfifo(path, 0666) == 0);
    alarm(120);
    dumped d = dump_file(path, false, false);
    CHECK_INT_EQ(d.rc, CALF_EINVAL);
    CHECK(contains(d.err.msg, "empty file"));
    dumped_free(&d);
    alarm(0);
}

/* ------------------------------------------------------------------ scalars as numbers */

/* What calf_events_scalars gave: the rows as calf events --csv writes them, the values'
 * bits, and how many calls there were. */
typedef struct scalar_rows {
    char text[4096];
    size_t len;
    uint32_t bits[16];
    double walls[16];
    int calls, stop_at;
} scalar_rows;

static int collect_scalar(void *arg, const char *tag, int64_t step, double wall_time,
                          float value) {
    scalar_rows *r = arg;
    if (r->calls < 16) {
        memcpy(&r->bits[r->calls], &value, sizeof value);
        r->walls[r->calls] = wall_time;
    }
    if (++r->calls == r->stop_at) return 42;
    int n = snprintf(r->text + r->len, sizeof r->text - r->len, "%s,%lld,%.17g,%.9g\n", tag,
                     (long long)step, wall_time, (double)value);
    if (n > 0 && (size_t)n < sizeof r->text - r->len) r->len += (size_t)n;
    return CALF_OK;
}

static void test_scalars(void) {
    char dir[512], a[1024], b[1024];
    join(dir, sizeof dir, tmp_root, "scalars/train");
    write_launch(dir, 0, 1, 5, 0, a, sizeof a);
    write_launch(dir, 3, 3, 6, 10, b, sizeof b);
    const char *const run[] = {a, b};
    /* the CSV's rows, in its order: what TensorBoard shows of the resumed run */
    scalar_rows r = {.stop_at = -1};
    calf_error err;
    calf_error_clear(&err);
    CHECK_INT_EQ(calf_events_scalars(run, 2, NULL, collect_scalar, &r, &err), CALF_OK);
    dumped d = dump_files(run, 2, false, true);
    CHECK_INT_EQ(d.rc, CALF_OK);
    CHECK_STR_EQ(r.text, d.out + strlen("tag,step,wall_time,value\n"));
    CHECK_INT_EQ(r.calls, 8);
    dumped_free(&d);

    /* the numbers as stored, not as printed */
    join(dir, sizeof dir, tmp_root, "scalars/bits");
    calf_summary_writer *w = calf_summary_writer_open(dir, 0, &err);
    CHECK(w != NULL);
    if (!w) return;
    char path[1024];
    snprintf(path, sizeof path, "%s", calf_summary_writer_path(w));
    const float vals[] = {0.1f, -3.4e38f, 1e-45f, -0.0f, INFINITY};
    for (int i = 0; i < 5; i++)
        CHECK_INT_EQ(calf_summary_writer_add_scalar(w, "v", i, 0.1 * i, vals[i]), CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_close(w, &err), CALF_OK);
    scalar_rows s = {.stop_at = -1};
    CHECK_INT_EQ(calf_events_scalars((const char *[]){path}, 1, NULL, collect_scalar, &s, &err),
                 CALF_OK);
    CHECK_INT_EQ(s.calls, 5);
    for (int i = 0; i < 5; i++) {
        uint32_t want;
        memcpy(&want, &vals[i], sizeof want);
        CHECK_INT_EQ(s.bits[i], want);
        CHECK(s.walls[i] == 0.1 * i);
    }

    /* fn stops the walk: its value is returned */
    scalar_rows stop = {.stop_at = 2};
    CHECK_INT_EQ(calf_events_scalars(run, 2, NULL, collect_scalar, &stop, &err), 42);
    CHECK_INT_EQ(stop.calls, 2);

    /* a file that cannot be read: calf_events_dump's error, and no call */
    char missing[1024];
    join(missing, sizeof missing, tmp_root, "scalars/missing");
    scalar_rows none = {.stop_at = -1};
    calf_error_clear(&err);
    CHECK_INT_EQ(calf_events_scalars((const char *[]){a, missing}, 2, NULL, collect_scalar,
                                     &none, &err),
                 CALF_EIO);
    CHECK_INT_EQ(none.calls, 0);
    CHECK(contains(err.msg, missing));
}

/* ------------------------------------------------------------------ damage */

/* The reader stops at record number good_records (at offset) with CALF_EINVAL saying
 * what; cut says whether that is a torn tail. The dump then prints the text of the
 * records before it (want_text) and either warns and succeeds (cut) or fails. */
static void expect_reader_error(const char *path, int good_records, const char *what,
                                unsigned long long offset, bool cut, const char *want_text) {
    events_reader r;
    calf_error err;
    calf_error_clear(&err);
    CHECK_INT_EQ(events_reader_open(&r, path, &err), CALF_OK);
    const events_record *rec;
    int n = 0, rc;
    while ((rc = events_reader_next(&r, &rec, &err)) == CALF_OK && rec) n++;
    CHECK_INT_EQ(n, good_records);
    CHECK_INT_EQ(rc, CALF_EINVAL);
    CHECK_INT_EQ(r.cut, cut);
    CHECK_INT_EQ(r.offset, offset);
    events_reader_close(&r);
    char off[64];
    snprintf(off, sizeof off, "offset %llu", offset);
    CHECK(contains(err.msg, what));
    CHECK(contains(err.msg, off));
    CHECK(contains(err.msg, path));
    if (!contains(err.msg, what) || !contains(err.msg, off)) fprintf(stderr, "  got: %s\n", err.msg);

    dumped d = dump_file(path, false, false);
    if (cut && good_records > 0) {
        char warning[1200];
        snprintf(warning, sizeof warning,
                 "calf: warning: %s: last record cut at offset %llu (a crash while writing?); "
                 "ignored\n",
                 path, offset);
        CHECK_DUMP(d, CALF_OK, want_text, warning);
    } else {
        /* what came before the damage is printed, and the error is the reader's */
        CHECK_DUMP(d, CALF_EINVAL, want_text, "");
        CHECK_STR_EQ(d.err.msg, err.msg);
    }
    dumped_free(&d);
}

static void test_damage(void) {
    char dir[512];
    join(dir, sizeof dir, tmp_root, "damage");
    calf_error err;
    calf_error_clear(&err);
    calf_summary_writer *w = calf_summary_writer_open(dir, 0, &err);
    CHECK(w != NULL);
    if (!w) return;
    char path[1024];
    snprintf(path, sizeof path, "%s", calf_summary_writer_path(w));
    for (int s = 0; s < 4; s++) calf_summary_writer_add_scalar(w, "x", s, 10.0, s);
    CHECK_INT_EQ(calf_summary_writer_close(w, &err), CALF_OK);
    size_t n;
    unsigned char *orig = read_file(path, &n);
    CHECK(orig != NULL);
    if (!orig) return;
    span rec[8];
    CHECK_INT_EQ(split_records(orig, n, rec, 8), 5);
    unsigned char *copy = malloc(n + 64);
    char bad[1024];
    join(bad, sizeof bad, tmp_root, "damaged.tfevents");
    /* The text of the first k records is the first k lines of this. */
    const char *const text[] = {"", "file_version brain.Event:2\n",
                                "file_version brain.Event:2\n0 x 0\n",
                                "file_version brain.Event:2\n0 x 0\n1 x 1\n",
                                "file_version brain.Event:2\n0 x 0\n1 x 1\n2 x 2\n",
                                "file_version brain.Event:2\n0 x 0\n1 x 1\n2 x 2\n3 x 3\n"};

    /* Corrupt in the middle, more records after it: an error, whatever kind. */
    memcpy(copy, orig, n);
    copy[rec[2].off + 14] ^= 0x01; /* record 2's data */
    CHECK_INT_EQ(write_file(bad, copy, n), 0);
    expect_reader_error(bad, 2, "data CRC mismatch", rec[2].off, false, text[2]);

    memcpy(copy, orig, n);
    copy[rec[3].off + 1] ^= 0x40; /* record 3's length */
    CHECK_INT_EQ(write_file(bad, copy, n), 0);
    expect_reader_error(bad, 3, "length CRC mismatch", rec[3].off, false, text[3]);

    /* The last record, complete but damaged, is damage too, not a cut: a crash can only
     * leave the file short, and this one is as long as its length says. */
    memcpy(copy, orig, n);
    copy[rec[4].off + rec[4].len - 1] ^= 0x80; /* its stored CRC */
    CHECK_INT_EQ(write_file(bad, copy, n), 0);
    expect_reader_error(bad, 4, "data CRC mismatch", rec[4].off, false, text[4]);
    memcpy(copy, orig, n);
    copy[rec[4].off + 3] ^= 0x10; /* its length: a bad length, even at the end */
    CHECK_INT_EQ(write_file(bad, copy, n), 0);
    expect_reader_error(bad, 4, "length CRC mismatch", rec[4].off, false, text[4]);
    /* A bad length cut short: the length CRC is there to check, and fails. */
    CHECK_INT_EQ(write_file(bad, copy, rec[4].off + 14), 0);
    expect_reader_error(bad, 4, "length CRC mismatch", rec[4].off, false, text[4]);

    /* Torn tails, the file ending inside the last record: in its length, between the
     * length and its CRC, in the length's CRC, right after the header, in the data,
     * right before the trailing CRC, and in it. Every record before it is shown. */
    size_t cuts[] = {rec[4].off + 1,  rec[4].off + 5,  rec[4].off + 8, rec[4].off + 10,
                     rec[4].off + 12, rec[4].off + 20, n - 4,          n - 3,
                     n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        CHECK_INT_EQ(write_file(bad, orig, cuts[i]), 0);
        expect_reader_error(bad, 4, "truncated", rec[4].off, true, text[4]);
    }
    /* Cut inside the second record: the file_version alone is shown. */
    CHECK_INT_EQ(write_file(bad, orig, rec[1].off + 7), 0);
    expect_reader_error(bad, 1, "truncated", rec[1].off, true, text[1]);
    /* Cut inside the first: no complete record, so not an events file (an error). */
    CHECK_INT_EQ(write_file(bad, orig, 30), 0);
    expect_reader_error(bad, 0, "truncated", 0, true, text[0]);

    /* A cut exactly between records is a clean, shorter file. */
    CHECK_INT_EQ(write_file(bad, orig, rec[4].off), 0);
    events_reader r;
    const events_record *er;
    int count = 0;
    CHECK_INT_EQ(events_reader_open(&r, bad, &err), CALF_OK);
    while (events_reader_next(&r, &er, &err) == CALF_OK && er) count++;
    CHECK_INT_EQ(count, 4);
    CHECK_INT_EQ(err.status, CALF_OK);
    CHECK(!r.cut);
    events_reader_close(&r);
    dumped d = dump_file(bad, false, false);
    CHECK_DUMP(d, CALF_OK, text[4], "");
    dumped_free(&d);

    /* A record whose framing is intact but whose Event is malformed: the length field
     * of the Summary claims more than the message holds. An error even as the last. */
    const unsigned char evil[] = {0x2a, 0x7f, 0x0a};
    unsigned char framed[64];
    size_t fl = frame(framed, evil, sizeof evil);
    memcpy(copy, orig, rec[1].off);
    memcpy(copy + rec[1].off, framed, fl);
    CHECK_INT_EQ(write_file(bad, copy, rec[1].off + fl), 0);
    expect_reader_error(bad, 1, "bad Event", rec[1].off, false, text[1]);

    /* A huge length with a valid length CRC in a small file: what a crash leaves when
     * only the header of a big record got out, so a cut, found before anything that
     * size is allocated. Over 1 GiB it is an implausible length: damage. */
    unsigned char head[16];
    uint64_t lens[] = {100000000, ((uint64_t)1 << 30) + 1};
    for (int i = 0; i < 2; i++) {
        le_put(head, lens[i], 8);
        le_put(head + 8, ref_mask(ref_crc32c(head, 8)), 4);
        memset(head + 12, 0, 4);
        memcpy(copy, orig, rec[1].off);
        memcpy(copy + rec[1].off, head, sizeof head);
        CHECK_INT_EQ(write_file(bad, copy, rec[1].off + sizeof head), 0);
        if (i == 0) expect_reader_error(bad, 1, "truncated record", rec[1].off, true, text[1]);
        else expect_reader_error(bad, 1, "implausible record length", rec[1].off, false, text[1]);
    }

    /* Several files: a cut tail in the first is a warning and the second is still read;
     * damage in the second stops there, after the first has been shown. */
    char good[1024];
    join(good, sizeof good, tmp_root, "good.tfevents");
    CHECK_INT_EQ(write_file(good, orig, n), 0);
    CHECK_INT_EQ(write_file(bad, orig, n - 2), 0);
    d = dump_files((const char *[]){bad, good}, 2, false, false);
    char want[512], warning[1200];
    snprintf(want, sizeof want, "%s%s", text[4], text[5]);
    snprintf(warning, sizeof warning,
             "calf: warning: %s: last record cut at offset %zu (a crash while writing?); "
             "ignored\n",
             bad, rec[4].off);
    CHECK_DUMP(d, CALF_OK, want, warning);
    dumped_free(&d);
    memcpy(copy, orig, n);
    copy[rec[2].off + 14] ^= 0x01;
    CHECK_INT_EQ(write_file(bad, copy, n), 0);
    d = dump_files((const char *[]){good, bad, good}, 3, false, false);
    snprintf(want, sizeof want, "%s%s", text[5], text[2]);
    CHECK_DUMP(d, CALF_EINVAL, want, "");
    CHECK(contains(d.err.msg, bad) && contains(d.err.msg, "data CRC mismatch"));
    dumped_free(&d);

    calf_error_clear(&err);
    CHECK_INT_EQ(events_reader_open(&r, "/nonexistent/calf/events", &err), CALF_EIO);
    CHECK(contains(err.msg, "/nonexistent/calf/events"));
    d = dump_file("/nonexistent/calf/events", false, true);
    CHECK_DUMP(d, CALF_EIO, "", "");
    CHECK(contains(d.err.msg, "/nonexistent/calf/events"));
    dumped_free(&d);
    /* An empty file is not an events file. */
    CHECK_INT_EQ(write_file(bad, orig, 0), 0);
    d = dump_file(bad, false, false);
    CHECK_DUMP(d, CALF_EINVAL, "", "");
    CHECK(contains(d.err.msg, "empty file, not an events file"));
    dumped_free(&d);
    /* Output that cannot be written is CALF_EIO, found at the latest by the flush. */
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        calf_error_clear(&err);
        CHECK_INT_EQ(calf_events_dump((const char *[]){good}, 1, NULL, full, &err), CALF_EIO);
        CHECK(contains(err.msg, "events: write: "));
        fclose(full);
    }
    free(copy);
    free(orig);
}

/* A full disk (RLIMIT_FSIZE): the error is remembered, reported by flush and close,
 * and every record written before it still reads back. */
static void test_write_error(void) {
    char dir[512];
    join(dir, sizeof dir, tmp_root, "full");
    calf_error err;
    calf_error_clear(&err);
    calf_summary_writer *w = calf_summary_writer_open(dir, 0, &err);
    CHECK(w != NULL);
    if (!w) return;
    char path[1024];
    snprintf(path, sizeof path, "%s", calf_summary_writer_path(w));
    struct rlimit old;
    CHECK_INT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = old;
    lim.rlim_cur = 1000;
    CHECK_INT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int first_fail = -1;
    for (int s = 0; s < 100 && first_fail < 0; s++)
        if (calf_summary_writer_add_scalar(w, "x", s, 10.0, s) != CALF_OK) first_fail = s;
    /* The error sticks: further writes are refused, not half-written. */
    CHECK(calf_summary_writer_add_scalar(w, "x", 1000, 10.0, 1) == CALF_EIO);
    calf_summary_scalar("x", 1001, 1.0); /* not current: no-op */
    calf_error_clear(&err);
    CHECK_INT_EQ(calf_summary_writer_flush(w, &err), CALF_EIO);
    CHECK(contains(err.msg, path));
    calf_error_clear(&err);
    CHECK_INT_EQ(calf_summary_writer_close(w, &err), CALF_EIO);
    CHECK(contains(err.msg, path));
    CHECK_INT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, old_handler);
    CHECK(first_fail > 0);

    /* All whole records read back; at most the last one is torn. */
    events_reader r;
    const events_record *rec;
    int good = 0, rc;
    calf_error_clear(&err);
    CHECK_INT_EQ(events_reader_open(&r, path, &err), CALF_OK);
    while ((rc = events_reader_next(&r, &rec, &err)) == CALF_OK && rec) {
        if (good > 0) CHECK_INT_EQ(rec->step, good - 1);
        good++;
    }
    events_reader_close(&r);
    CHECK(rc == CALF_OK || contains(err.msg, "truncated"));
    CHECK_INT_EQ(good, first_fail + 1); /* file_version + each successful scalar */
}

/* A pipe has no size to bound a record by: the reader grows its buffer as the bytes
 * come and reads a record of 300 KB (a long tag) through it as it reads the file. */
static void test_pipe(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/pipe", tmp_root);
    calf_error err;
    calf_error_clear(&err);
    calf_summary_writer *w = calf_summary_writer_open(dir, 0, &err);
    CHECK(w != NULL);
    if (!w) return;
    size_t tag_len = 300000;
    char *tag = malloc(tag_len + 1);
    CHECK(tag != NULL);
    if (!tag) return;
    memset(tag, 't', tag_len);
    tag[tag_len] = '\0';
    CHECK_INT_EQ(calf_summary_writer_add_scalar(w, tag, 7, 1.5, 0.25f), CALF_OK);
    CHECK_INT_EQ(calf_summary_writer_add_scalar(w, "short", 8, 2.5, 0.5f), CALF_OK);
    char path[1024];
    snprintf(path, sizeof path, "%s", calf_summary_writer_path(w));
    CHECK_INT_EQ(calf_summary_writer_close(w, &err), CALF_OK);
    FILE *in = fopen(path, "rb");
    CHECK(in != NULL);
    int fds[2];
    CHECK(pipe(fds) == 0);
    if (!in) return;
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) { /* the writer end: the file's bytes, then end of file */
        close(fds[0]);
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0)
            if (write(fds[1], buf, n) != (ssize_t)n) _exit(1);
        _exit(0);
    }
    fclose(in);
    close(fds[1]);
    char fd_path[64];
    snprintf(fd_path, sizeof fd_path, "/dev/fd/%d", fds[0]);
    const char *paths[1] = {fd_path};
    const char *file_paths[1] = {path};
    calf_events_dump_options opt = {false, true, NULL};
    FILE *a = tmpfile(), *b = tmpfile();
    CHECK(a != NULL && b != NULL);
    if (!a || !b) return;
    CHECK_INT_EQ(calf_events_dump(paths, 1, &opt, a, &err), CALF_OK);
    CHECK_INT_EQ(calf_events_dump(file_paths, 1, &opt, b, &err), CALF_OK);
    close(fds[0]);
    int status = -1;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    long na = ftell(a), nb = ftell(b);
    CHECK(na > (long)tag_len && na == nb);
    rewind(a);
    rewind(b);
    bool same = true;
    for (int ca, cb; same && (ca = fgetc(a)) != EOF;) {
        cb = fgetc(b);
        same = ca == cb;
    }
    CHECK(same);
    fclose(a);
    fclose(b);
    free(tag);
}

/* A directory's files sort by name in the order they were opened, as TensorBoard and
 * the trainer's restart check read them: the process's first 12 writers opened in a row
 * (their counter reaches 10 and 11, which sort before 2 by digits), and names of the form
 * events.out.tfevents.<10-digit seconds>.<6-digit microseconds>.<host>.<pid>.<n>. */
static void test_name_order(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/order", tmp_root);
    enum { N = 12 };
    char names[N][256];
    for (int i = 0; i < N; i++) {
        calf_error err;
        calf_error_clear(&err);
        calf_summary_writer *w = calf_summary_writer_open(dir, 0, &err);
        CHECK(w != NULL);
        if (!w) return;
        const char *base = strrchr(calf_summary_writer_path(w), '/') + 1;
        snprintf(names[i], sizeof names[i], "%s", base);
        CHECK_INT_EQ(calf_summary_writer_close(w, &err), CALF_OK);
        const char *t = names[i] + strlen("events.out.tfevents.");
        bool shaped = strncmp(names[i], "events.out.tfevents.", 20) == 0;
        for (int k = 0; k < 17 && shaped; k++)
            shaped = k == 10 ? t[k] == '.' : t[k] >= '0' && t[k] <= '9';
        CHECK(shaped && t[17] == '.');
        if (i > 0) CHECK(strcmp(names[i - 1], names[i]) < 0);
        if (i > 0 && strcmp(names[i - 1], names[i]) >= 0)
            fprintf(stderr, "  %s sorts before %s\n", names[i], names[i - 1]);
    }
}

int main(void) {
    make_tmp_root();
    test_name_order(); /* first: the writers' counter starts at 0 */
    build_tf_limits();
    test_crc32c();
    test_mask();
    test_byte_exact();
    test_round_trip();
    test_record_context();
    test_session_start_bytes();
    test_session_round_trip();
    test_session_decode();
    test_purge();
    test_purge_old_version();
    test_csv();
    test_text_escapes();
    test_fifo();
    test_scalars();
    test_damage();
    test_write_error();
    test_pipe();
    rm_rf(tmp_root);
    return test_report("test_summary");
}
