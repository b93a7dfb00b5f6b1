/* test_checkpoint.c: the checkpoint container: layout by hand from the format, round
 * trip, identical bytes for identical content, every payload-reader overrun, damaged
 * files (truncations, flipped bytes, bad header fields), the ckpt-<iter> directory
 * (list, prune, fall back past a corrupt newest file) and failed writes (a link planted
 * at the temporary name among them). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "records/checkpoint.h"
#include "records/crc32c.h"
#include "test_files.h"
#include "test_util.h"

/* ------------------------------------------------------------------ helpers */

static char tmp_root[256];

static void make_tmp_root(void) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    int n = snprintf(tmp_root, sizeof tmp_root, "%s/calf_test_checkpoint_XXXXXX", base);
    if (n < 0 || (size_t)n >= sizeof tmp_root || !mkdtemp(tmp_root)) {
        fprintf(stderr, "cannot create a temporary directory under %s\n", base);
        exit(1);
    }
}





static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static bool contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

static uint64_t le(const unsigned char *p, int nbytes) {
    uint64_t v = 0;
    for (int i = 0; i < nbytes; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void le_put(unsigned char *out, uint64_t v, int nbytes) {
    for (int i = 0; i < nbytes; i++) out[i] = (unsigned char)(v >> (8 * i));
}

/* A payload exercising every put, and the matching decode. */
static const float sample_f32[5] = {1.0f, -0.0f, 3.25f, 1e-30f, -7.5e20f};

static void build_sample(ckpt_buf *b) {
    ckpt_put_tag(b, "HEAD");
    ckpt_put_u32(b, 0xdeadbeefu);
    ckpt_put_u64(b, 0x0123456789abcdefULL);
    ckpt_put_i64(b, -42);
    ckpt_put_f64(b, -0.0);
    uint64_t nan_bits = 0x7ff8000000abcdefULL; /* a NaN with a payload survives */
    double nan_val;
    memcpy(&nan_val, &nan_bits, 8);
    ckpt_put_f64(b, nan_val);
    ckpt_put_bytes(b, "xyz", 3);
    ckpt_put_tag(b, "PRMS");
    ckpt_put_f32s(b, sample_f32, 5);
    ckpt_put_f32s(b, NULL, 0);
}

/* Decode the sample; returns the reader's final status and counts value mismatches. */
static int decode_sample(const void *p, size_t n, calf_error *err, int *mismatches) {
    ckpt_reader r;
    ckpt_reader_init(&r, p, n, "sample", err);
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    double d0, d1;
    char bytes[3];
    float f[5];
    int bad = 0;
    ckpt_get_tag(&r, "HEAD");
    ckpt_get_u32(&r, &u32);
    ckpt_get_u64(&r, &u64);
    ckpt_get_i64(&r, &i64);
    ckpt_get_f64(&r, &d0);
    ckpt_get_f64(&r, &d1);
    ckpt_get_bytes(&r, bytes, 3);
    ckpt_get_tag(&r, "PRMS");
    ckpt_get_f32s(&r, f, 5);
    ckpt_get_f32s(&r, NULL, 0);
    int rc = ckpt_reader_finish(&r);
    if (rc == CALF_OK) {
        uint64_t b0, b1;
        memcpy(&b0, &d0, 8);
        memcpy(&b1, &d1, 8);
        bad += u32 != 0xdeadbeefu;
        bad += u64 != 0x0123456789abcdefULL;
        bad += i64 != -42;
        bad += b0 != 0x8000000000000000ULL;
        bad += b1 != 0x7ff8000000abcdefULL;
        bad += memcmp(bytes, "xyz", 3) != 0;
        bad += memcmp(f, sample_f32, sizeof f) != 0;
    } else {
        /* A failed get leaves zeros, never stale or uninitialised values. */
        bad += r.pos > r.len;
    }
    if (mismatches) *mismatches = bad;
    return rc;
}

/* ------------------------------------------------------------------ tests */

static void test_round_trip_and_layout(void) {
    ckpt_buf b;
    ckpt_buf_init(&b);
    build_sample(&b);
    int bad = -1;
    calf_error err;
    calf_error_clear(&err);
    CHECK_INT_EQ(decode_sample(b.data, b.len, &err, &bad), CALF_OK);
    CHECK_INT_EQ(bad, 0);

    char dir[512], path[512];
    join(dir, sizeof dir, tmp_root, "rt/a/b/algorithm"); /* parents created */
    CHECK_INT_EQ(ckpt_path(path, sizeof path, dir, 5, &err), CALF_OK);
    CHECK(contains(path, "/algorithm/ckpt-5"));
    CHECK_INT_EQ(ckpt_write_atomic(path, 0x1122334455667788ULL, 5, b.data, b.len, &err),
                 CALF_OK);
    CHECK_INT_EQ(count_entries(dir), 1); /* no temporary file left behind */

    /* Layout, byte by byte, from the format description. */
    size_t n;
    unsigned char *file = read_file(path, &n);
    CHECK(file != NULL);
    if (!file) return;
    CHECK_INT_EQ(n, 40 + b.len + 4);
    CHECK(memcmp(file, "CALFCKPT", 8) == 0);
    CHECK_INT_EQ(le(file + 8, 4), 1);
    CHECK_INT_EQ(le(file + 12, 4), 40);
    CHECK(le(file + 16, 8) == 0x1122334455667788ULL);
    CHECK_INT_EQ((int64_t)le(file + 24, 8), 5);
    CHECK_INT_EQ(le(file + 32, 8), b.len);
    CHECK(memcmp(file + 40, b.data, b.len) == 0);
    CHECK_INT_EQ(le(file + n - 4, 4), crc32c(file, n - 4));
    free(file);

    ckpt_header h;
    unsigned char *payload;
    size_t pn;
    CHECK_INT_EQ(ckpt_read(path, &h, &payload, &pn, &err), CALF_OK);
    CHECK_INT_EQ(h.version, 1);
    CHECK_INT_EQ(h.header_size, 40);
    CHECK(h.digest == 0x1122334455667788ULL);
    CHECK_INT_EQ(h.iteration, 5);
    CHECK_INT_EQ(h.payload_size, b.len);
    CHECK_INT_EQ(pn, b.len);
    CHECK(payload && memcmp(payload, b.data, b.len) == 0);
    CHECK_INT_EQ(decode_sample(payload, pn, &err, &bad), CALF_OK);
    CHECK_INT_EQ(bad, 0);
    free(payload);

    /* An empty payload and a negative iteration are legal. */
    join(path, sizeof path, dir, "empty");
    CHECK_INT_EQ(ckpt_write_atomic(path, 0, -3, NULL, 0, &err), CALF_OK);
    CHECK_INT_EQ(ckpt_read(path, &h, &payload, &pn, &err), CALF_OK);
    CHECK_INT_EQ(pn, 0);
    CHECK_INT_EQ(h.iteration, -3);
    CHECK(payload != NULL);
    free(payload);

    /* Identical content, identical bytes: twice to two names, and over itself. */
    char p1[512], p2[512];
    join(p1, sizeof p1, tmp_root, "same1/ckpt-9");
    join(p2, sizeof p2, tmp_root, "same2/ckpt-9");
    CHECK_INT_EQ(ckpt_write_atomic(p1, 77, 9, b.data, b.len, &err), CALF_OK);
    CHECK_INT_EQ(ckpt_write_atomic(p2, 77, 9, b.data, b.len, &err), CALF_OK);
    size_t n1, n2;
    unsigned char *f1 = read_file(p1, &n1), *f2 = read_file(p2, &n2);
    CHECK(f1 && f2 && n1 == n2 && memcmp(f1, f2, n1) == 0);
    free(f2);
    CHECK_INT_EQ(ckpt_write_atomic(p1, 77, 9, b.data, b.len, &err), CALF_OK);
    f2 = read_file(p1, &n2);
    CHECK(f1 && f2 && n1 == n2 && memcmp(f1, f2, n1) == 0);
    free(f1);
    free(f2);

    ckpt_buf_free(&b);
    CHECK(b.data == NULL && b.len == 0);
    ckpt_buf_free(NULL);
}

static void test_reader_overruns(void) {
    ckpt_buf b;
    ckpt_buf_init(&b);
    build_sample(&b);
    calf_error err;

    /* Every strict prefix fails cleanly. Each prefix lives in its own exact-size heap
     * block, so a read one byte too far is caught by the sanitizer build. */
    int clean = 0, bad_status = 0, no_offset = 0, mism = 0;
    for (size_t cut = 0; cut < b.len; cut++) {
        unsigned char *p = malloc(cut ? cut : 1);
        if (cut) memcpy(p, b.data, cut);
        calf_error_clear(&err);
        int rc = decode_sample(p, cut, &err, &mism);
        if (rc == CALF_EINVAL && err.status == CALF_EINVAL) clean++;
        else bad_status++;
        if (!contains(err.msg, "offset") || !contains(err.msg, "sample")) no_offset++;
        free(p);
    }
    CHECK_INT_EQ(clean, (long long)b.len);
    CHECK_INT_EQ(bad_status, 0);
    CHECK_INT_EQ(no_offset, 0);

    /* One more byte than the structure is a structure mismatch at finish. */
    ckpt_put_u32(&b, 0);
    calf_error_clear(&err);
    CHECK_INT_EQ(decode_sample(b.data, b.len - 3, &err, NULL), CALF_EINVAL);
    CHECK(contains(err.msg, "1 unread bytes"));

    /* Each get on its own: overrun, zeroed output, sticky first message. */
    const unsigned char three[3] = {1, 2, 3};
    ckpt_reader r;
    calf_error_clear(&err);
    ckpt_reader_init(&r, three, 3, "tiny", &err);
    uint32_t u32 = 99;
    CHECK_INT_EQ(ckpt_get_u32(&r, &u32), CALF_EINVAL);
    CHECK_INT_EQ(u32, 0);
    CHECK_INT_EQ(r.pos, 0);
    CHECK(contains(err.msg, "need 4 bytes at offset 0, only 3 left"));
    char first[1024];
    snprintf(first, sizeof first, "%s", err.msg);
    uint8_t one = 7;
    CHECK_INT_EQ(ckpt_get_bytes(&r, &one, 1), CALF_EINVAL); /* would fit, but sticky */
    CHECK_INT_EQ(one, 0);
    CHECK_STR_EQ(err.msg, first);

    const unsigned char seven[7] = {0};
    uint64_t u64 = 1;
    int64_t i64 = 1;
    double d = 1;
    float f[2] = {1, 1};
    ckpt_reader_init(&r, seven, 7, NULL, &err);
    CHECK_INT_EQ(ckpt_get_u64(&r, &u64), CALF_EINVAL);
    CHECK_INT_EQ(u64, 0);
    ckpt_reader_init(&r, seven, 7, NULL, &err);
    CHECK_INT_EQ(ckpt_get_i64(&r, &i64), CALF_EINVAL);
    CHECK_INT_EQ(i64, 0);
    ckpt_reader_init(&r, seven, 7, NULL, &err);
    CHECK_INT_EQ(ckpt_get_f64(&r, &d), CALF_EINVAL);
    CHECK(d == 0);
    ckpt_reader_init(&r, seven, 7, NULL, &err);
    CHECK_INT_EQ(ckpt_get_tag(&r, "ABCD"), CALF_EINVAL); /* zeros, not "ABCD" */
    CHECK(contains(err.msg, "expected section \"ABCD\" at offset 0"));
    ckpt_reader_init(&r, seven, 7, NULL, NULL); /* err may be NULL */
    CHECK_INT_EQ(ckpt_get_bytes(&r, f, 8), CALF_EINVAL);

    /* Float arrays: the stored count must match, and a huge count cannot overrun. */
    ckpt_buf a;
    ckpt_buf_init(&a);
    ckpt_put_f32s(&a, f, 2);
    calf_error_clear(&err);
    ckpt_reader_init(&r, a.data, a.len, "arr", &err);
    float three_f[3];
    CHECK_INT_EQ(ckpt_get_f32s(&r, three_f, 3), CALF_EINVAL);
    CHECK(contains(err.msg, "holds 2 values, expected 3"));
    ckpt_buf_free(&a);
    ckpt_put_u64(&a, (uint64_t)1 << 62);
    ckpt_put_u32(&a, 0);
    calf_error_clear(&err);
    ckpt_reader_init(&r, a.data, a.len, "arr", &err);
    CHECK_INT_EQ(ckpt_get_f32s(&r, f, 2), CALF_EINVAL);
    CHECK(contains(err.msg, "expected 2"));
    ckpt_buf_free(&a);
    ckpt_put_u64(&a, 2);
    ckpt_put_u32(&a, 0); /* claims 2 floats, holds 1 */
    calf_error_clear(&err);
    ckpt_reader_init(&r, a.data, a.len, "arr", &err);
    CHECK_INT_EQ(ckpt_get_f32s(&r, f, 2), CALF_EINVAL);
    CHECK(contains(err.msg, "need 8 bytes at offset 8, only 4 left"));
    CHECK(f[0] == 0 && f[1] == 0);
    ckpt_buf_free(&a);
    ckpt_buf_free(&b);
}

/* Write a valid checkpoint and return its bytes. */
static unsigned char *valid_file(const char *path, size_t *n) {
    ckpt_buf b;
    ckpt_buf_init(&b);
    build_sample(&b);
    calf_error err;
    CHECK_INT_EQ(ckpt_write_atomic(path, 1234, 8, b.data, b.len, &err), CALF_OK);
    ckpt_buf_free(&b);
    return read_file(path, n);
}

static void expect_read_error(const char *path, const char *what) {
    ckpt_header h;
    unsigned char *payload = (unsigned char *)"sentinel";
    size_t n = 99;
    calf_error err;
    calf_error_clear(&err);
    CHECK_INT_EQ(ckpt_read(path, &h, &payload, &n, &err), CALF_EINVAL);
    CHECK(payload == NULL && n == 0);
    CHECK(contains(err.msg, what));
    CHECK(contains(err.msg, path));
    if (!contains(err.msg, what)) fprintf(stderr, "  wanted \"%s\", got: %s\n", what, err.msg);
}

static void test_damaged_files(void) {
    char good[512], bad[512];
    join(good, sizeof good, tmp_root, "dmg/ckpt-8");
    join(bad, sizeof bad, tmp_root, "dmg/bad");
    size_t n;
    unsigned char *orig = valid_file(good, &n);
    CHECK(orig != NULL);
    if (!orig) return;
    unsigned char *copy = malloc(n + 1);

    size_t cuts[] = {0, 4, 8, 20, 39, 40, 41, n / 2, n - 4, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        CHECK_INT_EQ(write_file(bad, orig, cuts[i]), 0);
        expect_read_error(bad, "truncated");
    }
    memcpy(copy, orig, n);
    copy[n] = 0;
    CHECK_INT_EQ(write_file(bad, copy, n + 1), 0);
    expect_read_error(bad, "1 trailing bytes");

    /* A flipped bit anywhere that is not a size field is a CRC mismatch. */
    size_t flips[] = {16, 23, 24, 31, 40, 50, n - 5, n - 4, n - 1};
    for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
        memcpy(copy, orig, n);
        copy[flips[i]] ^= 0x10;
        CHECK_INT_EQ(write_file(bad, copy, n), 0);
        expect_read_error(bad, "CRC mismatch");
    }
    memcpy(copy, orig, n);
    copy[3] ^= 0x01;
    CHECK_INT_EQ(write_file(bad, copy, n), 0);
    expect_read_error(bad, "not a calf checkpoint");
    CHECK_INT_EQ(write_file(bad, (const unsigned char *)"hello", 5), 0);
    expect_read_error(bad, "not a calf checkpoint");

    memcpy(copy, orig, n);
    le_put(copy + 8, 2, 4);
    CHECK_INT_EQ(write_file(bad, copy, n), 0);
    expect_read_error(bad, "unsupported version 2");

    memcpy(copy, orig, n);
    le_put(copy + 12, 48, 4);
    CHECK_INT_EQ(write_file(bad, copy, n), 0);
    expect_read_error(bad, "corrupt header");

    /* An absurd payload size is refused before anything is allocated (the sanitizer
     * build would abort on a 2^62-byte allocation). */
    memcpy(copy, orig, n);
    le_put(copy + 32, (uint64_t)1 << 62, 8);
    CHECK_INT_EQ(write_file(bad, copy, n), 0);
    expect_read_error(bad, "truncated");
    memcpy(copy, orig, n);
    le_put(copy + 32, 1, 8);
    CHECK_INT_EQ(write_file(bad, copy, n), 0);
    expect_read_error(bad, "trailing bytes");

    /* Not a file at all. */
    char sub[512];
    join(sub, sizeof sub, tmp_root, "dmg/adir");
    CHECK_INT_EQ(mkdir(sub, 0755), 0);
    expect_read_error(sub, "not a regular file");
    ckpt_header h;
    unsigned char *payload;
    calf_error err;
    CHECK_INT_EQ(ckpt_read("/nonexistent/calf/ckpt-1", &h, &payload, &n, &err), CALF_EIO);
    CHECK(contains(err.msg, "/nonexistent/calf/ckpt-1"));
    free(copy);
    free(orig);
}

static void touch(const char *dir, const char *name) {
    char p[512];
    join(p, sizeof p, dir, name);
    CHECK_INT_EQ(write_file(p, (const unsigned char *)"x", 1), 0);
}

static void write_iter(const char *dir, int64_t it) {
    char p[512];
    calf_error err;
    CHECK_INT_EQ(ckpt_path(p, sizeof p, dir, it, &err), CALF_OK);
    unsigned char payload[16];
    le_put(payload, (uint64_t)it, 8);
    le_put(payload + 8, ~(uint64_t)it, 8);
    CHECK_INT_EQ(ckpt_write_atomic(p, 55, it, payload, sizeof payload, &err), CALF_OK);
}

static bool list_is(const char *dir, const int64_t *want, int nwant) {
    int64_t *it;
    int count;
    calf_error err;
    calf_error_clear(&err);
    if (ckpt_list(dir, &it, &count, &err) != CALF_OK) return false;
    bool ok = count == nwant;
    for (int i = 0; ok && i < count; i++) ok = it[i] == want[i];
    free(it);
    return ok;
}

static void test_list_and_prune(void) {
    char dir[512];
    join(dir, sizeof dir, tmp_root, "list");
    int64_t *it = (int64_t *)1;
    int count = -1;
    calf_error err;
    calf_error_clear(&err);
    CHECK_INT_EQ(ckpt_list(dir, &it, &count, &err), CALF_OK); /* missing dir: empty */
    CHECK(it == NULL && count == 0);

    write_iter(dir, 10);
    write_iter(dir, 2);
    write_iter(dir, 1);
    write_iter(dir, 0);
    /* What a crash or a stranger leaves behind is not a checkpoint. */
    touch(dir, "ckpt-3.tmp.12345");
    touch(dir, "ckpt-007");
    touch(dir, "ckpt-");
    touch(dir, "ckpt-x");
    touch(dir, "ckpt--4");
    touch(dir, "ckpt-+4");
    touch(dir, "ckpt-99999999999999999999");
    touch(dir, "notes.txt");
    char sub[512];
    join(sub, sizeof sub, dir, "ckpt-50");
    CHECK_INT_EQ(mkdir(sub, 0755), 0);
    const int64_t want[] = {0, 1, 2, 10};
    CHECK(list_is(dir, want, 4));

    /* Prune keeps the newest N; keep <= 0 keeps everything. */
    CHECK_INT_EQ(ckpt_prune(dir, 0, INT64_MAX, &err), CALF_OK);
    CHECK(list_is(dir, want, 4));
    CHECK_INT_EQ(ckpt_prune(dir, -1, INT64_MAX, &err), CALF_OK);
    CHECK(list_is(dir, want, 4));
    CHECK_INT_EQ(ckpt_prune(dir, 10, INT64_MAX, &err), CALF_OK);
    CHECK(list_is(dir, want, 4));
    CHECK_INT_EQ(ckpt_prune(dir, 2, INT64_MAX, &err), CALF_OK);
    const int64_t want2[] = {2, 10};
    CHECK(list_is(dir, want2, 2));
    char tmpf[512];
    join(tmpf, sizeof tmpf, dir, "ckpt-3.tmp.12345");
    CHECK(exists(tmpf)); /* prune touches only checkpoints */
    CHECK(exists(sub));
    CHECK_INT_EQ(ckpt_prune(dir, 1, INT64_MAX, &err), CALF_OK);
    const int64_t want1[] = {10};
    CHECK(list_is(dir, want1, 1));
    /* checkpoints above `newest` do not count and are not touched */
    touch(dir, "ckpt-11");
    touch(dir, "ckpt-12");
    touch(dir, "ckpt-1000");
    CHECK_INT_EQ(ckpt_prune(dir, 1, 12, &err), CALF_OK);
    const int64_t want3[] = {12, 1000};
    CHECK(list_is(dir, want3, 2));

    /* A file where the directory should be is an error, not an empty list. */
    char file[512];
    join(file, sizeof file, tmp_root, "list_is_a_file");
    CHECK_INT_EQ(write_file(file, (const unsigned char *)"x", 1), 0);
    calf_error_clear(&err);
    CHECK_INT_EQ(ckpt_list(file, &it, &count, &err), CALF_EIO);
    CHECK(contains(err.msg, "list_is_a_file"));

    char small[8];
    CHECK_INT_EQ(ckpt_path(small, sizeof small, dir, 1, &err), CALF_EINVAL);
}

static void test_find_latest_valid(void) {
    char dir[512], path[512];
    join(dir, sizeof dir, tmp_root, "find");
    ckpt_header h;
    unsigned char *payload;
    size_t n;
    bool found = true;
    calf_error err;
    calf_error_clear(&err);

    /* No directory, then an empty one: a fresh start, not an error. */
    CHECK_INT_EQ(ckpt_find_latest_valid(dir, path, sizeof path, &h, &payload, &n, &found,
                                        stderr, &err), CALF_OK);
    CHECK(!found && payload == NULL && path[0] == '\0');
    CHECK_INT_EQ(mkdir(dir, 0755), 0);
    touch(dir, "ckpt-9.tmp.1");
    found = true;
    CHECK_INT_EQ(ckpt_find_latest_valid(dir, path, sizeof path, &h, &payload, &n, &found,
                                        stderr, &err), CALF_OK);
    CHECK(!found);

    write_iter(dir, 1);
    write_iter(dir, 2);
    write_iter(dir, 3);
    CHECK_INT_EQ(ckpt_find_latest_valid(dir, path, sizeof path, &h, &payload, &n, &found,
                                        stderr, &err), CALF_OK);
    CHECK(found);
    CHECK_INT_EQ(h.iteration, 3);
    CHECK(contains(path, "/ckpt-3"));
    CHECK(n == 16 && payload && le(payload, 8) == 3);
    free(payload);

    /* A valid checkpoint under another iteration's name (ckpt-3's bytes as ckpt-4) is
     * skipped with a warning saying so: ckpt-3 again. */
    char p3[512], p2[512], p4[512];
    CHECK_INT_EQ(ckpt_path(p3, sizeof p3, dir, 3, &err), CALF_OK);
    CHECK_INT_EQ(ckpt_path(p4, sizeof p4, dir, 4, &err), CALF_OK);
    size_t fn;
    unsigned char *bytes = read_file(p3, &fn);
    CHECK(bytes != NULL);
    if (!bytes) return;
    CHECK_INT_EQ(write_file(p4, bytes, fn), 0);
    free(bytes);
    char *warn = NULL;
    size_t wlen = 0;
    FILE *w = open_memstream(&warn, &wlen);
    CHECK(w != NULL);
    if (!w) return;
    CHECK_INT_EQ(ckpt_find_latest_valid(dir, path, sizeof path, &h, &payload, &n, &found, w,
                                        &err), CALF_OK);
    fflush(w);
    CHECK(found);
    CHECK_INT_EQ(h.iteration, 3);
    CHECK_STR_EQ(path, p3);
    CHECK(n == 16 && payload && le(payload, 8) == 3);
    free(payload);
    CHECK(contains(warn, p4) && contains(warn, "holds iteration 3, not the 4 its name says"));
    CHECK_INT_EQ(unlink(p4), 0);
    size_t renamed = strlen(warn); /* the warnings below come after this one */

    /* Corrupt the newest: fall back to ckpt-2 with one warning line naming ckpt-3. */
    CHECK_INT_EQ(ckpt_path(p2, sizeof p2, dir, 2, &err), CALF_OK);
    bytes = read_file(p3, &fn);
    CHECK(bytes != NULL);
    if (!bytes) return;
    bytes[fn - 10] ^= 0xff;
    CHECK_INT_EQ(write_file(p3, bytes, fn), 0);
    free(bytes);
    CHECK_INT_EQ(ckpt_find_latest_valid(dir, path, sizeof path, &h, &payload, &n, &found, w,
                                        &err), CALF_OK);
    fflush(w);
    CHECK(found);
    CHECK_INT_EQ(h.iteration, 2);
    CHECK_STR_EQ(path, p2);
    CHECK(payload && le(payload, 8) == 2);
    free(payload);
    CHECK(contains(warn + renamed, p3) && contains(warn + renamed, "CRC mismatch"));
    int lines = 0;
    for (const char *c = warn + renamed; *c; c++) lines += *c == '\n';
    CHECK_INT_EQ(lines, 1);

    /* Truncate ckpt-2 too: ckpt-1, with a second warning. */
    bytes = read_file(p2, &fn);
    CHECK(bytes != NULL);
    if (bytes) CHECK_INT_EQ(write_file(p2, bytes, fn / 2), 0);
    free(bytes);
    CHECK_INT_EQ(ckpt_find_latest_valid(dir, path, sizeof path, &h, &payload, &n, &found, w,
                                        &err), CALF_OK);
    fflush(w);
    CHECK(found);
    CHECK_INT_EQ(h.iteration, 1);
    free(payload);
    CHECK(contains(warn, p2) && contains(warn, "truncated"));

    /* Nothing valid left: an error (not a fresh start), naming the directory. */
    char p1[512];
    CHECK_INT_EQ(ckpt_path(p1, sizeof p1, dir, 1, &err), CALF_OK);
    CHECK_INT_EQ(write_file(p1, (const unsigned char *)"garbage!", 8), 0);
    calf_error_clear(&err);
    fflush(w);
    size_t warned = strlen(warn);
    CHECK_INT_EQ(ckpt_find_latest_valid(dir, path, sizeof path, &h, &payload, &n, &found, w,
                                        &err), CALF_EINVAL);
    CHECK(!found && payload == NULL && path[0] == '\0');
    CHECK(contains(err.msg, dir) && contains(err.msg, "none of the 3"));
    /* the newer two are skipped with a warning; the oldest's failure is the error alone,
     * not a warning about trying an older one that does not exist */
    fflush(w);
    lines = 0;
    for (const char *c = warn + warned; *c; c++) lines += *c == '\n';
    CHECK_INT_EQ(lines, 2);
    CHECK(!contains(warn, p1));
    fclose(w);
    free(warn);
}

static void test_failed_writes(void) {
    calf_error err;
    unsigned char payload[64] = {1, 2, 3};

    /* The parent "directory" is a regular file. */
    char file[512], path[512];
    join(file, sizeof file, tmp_root, "fw_file");
    CHECK_INT_EQ(write_file(file, (const unsigned char *)"x", 1), 0);
    join(path, sizeof path, file, "algorithm/ckpt-1");
    calf_error_clear(&err);
    CHECK_INT_EQ(ckpt_write_atomic(path, 1, 1, payload, sizeof payload, &err), CALF_EIO);
    CHECK(contains(err.msg, "cannot create directory") && contains(err.msg, "fw_file"));
    CHECK(!exists(path));

    /* The final name is taken by a directory: rename fails, the temp file goes. */
    char dir[512];
    join(dir, sizeof dir, tmp_root, "fw_dir");
    join(path, sizeof path, dir, "ckpt-1");
    CHECK_INT_EQ(mkdir(dir, 0755), 0);
    CHECK_INT_EQ(mkdir(path, 0755), 0);
    calf_error_clear(&err);
    CHECK_INT_EQ(ckpt_write_atomic(path, 1, 1, payload, sizeof payload, &err), CALF_EIO);
    CHECK(contains(err.msg, "rename"));
    CHECK_INT_EQ(count_entries(dir), 1);

    /* The disk fills up mid-write (RLIMIT_FSIZE): an error, no temp file, and the
     * checkpoint already under that name is untouched. */
    join(dir, sizeof dir, tmp_root, "fw_full");
    join(path, sizeof path, dir, "ckpt-2");
    CHECK_INT_EQ(ckpt_write_atomic(path, 5, 2, payload, sizeof payload, &err), CALF_OK);
    size_t n_before;
    unsigned char *before = read_file(path, &n_before);
    size_t big_n = 1 << 16;
    unsigned char *big = calloc(big_n, 1);
    struct rlimit old, lim;
    CHECK_INT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 4096;
    CHECK_INT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
    calf_error_clear(&err);
    int rc = ckpt_write_atomic(path, 6, 2, big, big_n, &err);
    CHECK_INT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, old_handler);
    CHECK_INT_EQ(rc, CALF_EIO);
    CHECK(contains(err.msg, "write") && contains(err.msg, ".tmp."));
    CHECK_INT_EQ(count_entries(dir), 1);
    size_t n_after;
    unsigned char *after = read_file(path, &n_after);
    CHECK(before && after && n_before == n_after && memcmp(before, after, n_after) == 0);
    free(before);
    free(after);
    free(big);

    /* A symbolic link planted at the temporary name (a shared run dir): the write fails
     * rather than landing in the file it points to, for checkpoints and for the atomic
     * file writes (config.gin) alike. */
    char victim[512], tmp[600];
    join(victim, sizeof victim, tmp_root, "fw_victim");
    CHECK_INT_EQ(write_file(victim, (const unsigned char *)"precious", 8), 0);
    join(dir, sizeof dir, tmp_root, "fw_link");
    CHECK_INT_EQ(mkdir(dir, 0755), 0);
    join(path, sizeof path, dir, "ckpt-1");
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CHECK_INT_EQ(symlink(victim, tmp), 0);
    calf_error_clear(&err);
    CHECK_INT_EQ(ckpt_write_atomic(path, 1, 1, payload, sizeof payload, &err), CALF_EIO);
    CHECK(contains(err.msg, "symbolic links") && contains(err.msg, ".tmp."));
    join(path, sizeof path, dir, "config.gin");
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CHECK_INT_EQ(symlink(victim, tmp), 0);
    calf_error_clear(&err);
    CHECK_INT_EQ(fs_write_file_atomic(path, "x = 1\n", 6, &err), CALF_EIO);
    CHECK(contains(err.msg, "symbolic links") && contains(err.msg, ".tmp."));
    size_t nv;
    unsigned char *v = read_file(victim, &nv);
    CHECK(v && nv == 8 && memcmp(v, "precious", 8) == 0);
    free(v);

    /* A directory we may not write to (meaningless as root, who may). */
    if (geteuid() != 0) {
        join(dir, sizeof dir, tmp_root, "fw_ro");
        CHECK_INT_EQ(mkdir(dir, 0555), 0);
        join(path, sizeof path, dir, "ckpt-1");
        calf_error_clear(&err);
        CHECK_INT_EQ(ckpt_write_atomic(path, 1, 1, payload, sizeof payload, &err), CALF_EIO);
        CHECK(contains(err.msg, "fw_ro"));
        CHECK_INT_EQ(count_entries(dir), 0);
    }
}

/* The writer in pieces makes the file ckpt_write_atomic makes; a wrong total leaves no
 * file and no temporary one; the head reader keeps a prefix but checks every byte; the
 * range reader stays inside the payload. */
static void test_streaming(void) {
    unsigned char payload[3000];
    for (size_t i = 0; i < sizeof payload; i++) payload[i] = (unsigned char)(i * 7 + 3);
    char dir[512], whole[600], pieces[600];
    join(dir, sizeof dir, tmp_root, "stream");
    join(whole, sizeof whole, dir, "ckpt-5");
    join(pieces, sizeof pieces, dir, "ckpt-6");
    calf_error err;
    CHECK_INT_EQ(ckpt_write_atomic(whole, 0xabcdef, 5, payload, sizeof payload, &err), CALF_OK);
    ckpt_writer w;
    CHECK_INT_EQ(ckpt_writer_open(&w, pieces, 0xabcdef, 5, sizeof payload, &err), CALF_OK);
    CHECK_INT_EQ(ckpt_writer_put(&w, payload, 1, &err), CALF_OK);
    CHECK_INT_EQ(ckpt_writer_put(&w, payload + 1, 0, &err), CALF_OK);
    CHECK_INT_EQ(ckpt_writer_put(&w, payload + 1, 1999, &err), CALF_OK);
    CHECK_INT_EQ(ckpt_writer_put(&w, payload + 2000, 1000, &err), CALF_OK);
    CHECK_INT_EQ(ckpt_writer_commit(&w, &err), CALF_OK);
    size_t na, nb;
    unsigned char *a = read_file(whole, &na), *b = read_file(pieces, &nb);
    CHECK(a && b && na == nb && na == CKPT_HEADER_SIZE + sizeof payload + 4 && !memcmp(a, b, na));
    free(a);
    free(b);

    /* too much, too little: an error, and nothing new in the directory */
    char short_path[600];
    join(short_path, sizeof short_path, dir, "ckpt-7");
    CHECK_INT_EQ(ckpt_writer_open(&w, short_path, 1, 7, 10, &err), CALF_OK);
    CHECK_INT_EQ(ckpt_writer_put(&w, payload, 11, &err), CALF_EINVAL);
    CHECK(contains(err.msg, "more payload than the header promised"));
    CHECK_INT_EQ(ckpt_writer_open(&w, short_path, 1, 7, 10, &err), CALF_OK);
    CHECK_INT_EQ(ckpt_writer_put(&w, payload, 9, &err), CALF_OK);
    CHECK_INT_EQ(ckpt_writer_commit(&w, &err), CALF_EINVAL);
    CHECK(contains(err.msg, "1 payload bytes missing"));
    CHECK_INT_EQ(ckpt_writer_open(&w, short_path, 1, 7, 10, &err), CALF_OK);
    ckpt_writer_abort(&w);
    CHECK(!exists(short_path));
    CHECK_INT_EQ(count_entries(dir), 2);

    /* a prefix, validated over the whole file */
    ckpt_header hdr;
    unsigned char *head = NULL;
    size_t n = 0;
    CHECK_INT_EQ(ckpt_read_head(whole, &hdr, 100, &head, &n, &err), CALF_OK);
    CHECK(n == 100 && head && !memcmp(head, payload, 100) && hdr.iteration == 5 &&
          hdr.payload_size == sizeof payload);
    free(head);
    CHECK_INT_EQ(ckpt_read_head(whole, &hdr, 0, NULL, NULL, &err), CALF_OK);
    /* a byte flipped past the kept prefix is still found */
    unsigned char *f = read_file(pieces, &nb);
    f[CKPT_HEADER_SIZE + 2999] ^= 1;
    CHECK_INT_EQ(write_file(pieces, f, nb), 0);
    free(f);
    head = NULL;
    CHECK_INT_EQ(ckpt_read_head(pieces, &hdr, 100, &head, &n, &err), CALF_EINVAL);
    CHECK(contains(err.msg, "CRC mismatch") && head == NULL);
    CHECK_INT_EQ(ckpt_read_head(pieces, &hdr, 0, NULL, NULL, &err), CALF_EINVAL);

    /* ranges */
    unsigned char got[16];
    CHECK_INT_EQ(ckpt_read_range(whole, 2990, got, 10, &err), CALF_OK);
    CHECK(!memcmp(got, payload + 2990, 10));
    CHECK_INT_EQ(ckpt_read_range(whole, 2991, got, 10, &err), CALF_EINVAL);
    CHECK(contains(err.msg, "beyond its 3000-byte payload"));
    CHECK_INT_EQ(ckpt_read_range(whole, UINT64_MAX, got, 1, &err), CALF_EINVAL);
}

int main(void) {
    make_tmp_root();
    test_streaming();
    test_round_trip_and_layout();
    test_reader_overruns();
    test_damaged_files();
    test_list_and_prune();
    test_find_latest_valid();
    test_failed_writes();
    rm_rf(tmp_root);
    return test_report("test_checkpoint");
}
