/* checkpoint.c: the checkpoint container. Files are untrusted input on the way in (every
 * size is checked against the file before anything is allocated or read) and are
 * never visible half-written on the way out (temporary name, fsync, rename, fsync of
 * the directory), so resuming either finds a whole checkpoint or a clear reason. */
#include "records/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bytes.h"
#include "records/crc32c.h"
#include "base/fsutil.h"
#include "base/mem.h"

/* ---------------------------------------------------------------- payload builder */

void ckpt_buf_init(ckpt_buf *b) {
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->failed = false;
}

void ckpt_buf_free(ckpt_buf *b) {
    if (!b) return;
    free(b->data);
    ckpt_buf_init(b);
}

/* Appends that cannot get memory set b->failed (bytes.h) and write nothing. */
static void put_le(ckpt_buf *b, uint64_t v, int nbytes) {
    unsigned char *at = bytes_buf_room(b, (size_t)nbytes);
    if (at) bytes_put_le(at, v, nbytes);
}

void ckpt_put_u32(ckpt_buf *b, uint32_t v) { put_le(b, v, 4); }
void ckpt_put_u64(ckpt_buf *b, uint64_t v) { put_le(b, v, 8); }
void ckpt_put_i64(ckpt_buf *b, int64_t v) { put_le(b, (uint64_t)v, 8); }

void ckpt_put_f64(ckpt_buf *b, double v) {
    unsigned char *at = bytes_buf_room(b, 8);
    if (at) bytes_put_f64(at, v);
}

void ckpt_put_bytes(ckpt_buf *b, const void *p, size_t n) {
    CALF_ASSERT(p != NULL || n == 0);
    unsigned char *at = n ? bytes_buf_room(b, n) : NULL;
    if (at) memcpy(at, p, n);
}

void ckpt_put_f32s(ckpt_buf *b, const float *p, size_t n) {
    CALF_ASSERT(p != NULL || n == 0);
    CALF_ASSERT(n <= SIZE_MAX / 4);
    ckpt_put_u64(b, (uint64_t)n);
    unsigned char *out = n ? bytes_buf_room(b, n * 4) : NULL;
    if (!out) return;
    for (size_t i = 0; i < n; i++) bytes_put_f32(out + 4 * i, p[i]);
}

void ckpt_put_tag(ckpt_buf *b, const char *tag) {
    CALF_ASSERT(tag != NULL && strlen(tag) == 4);
    unsigned char *at = bytes_buf_room(b, 4);
    if (at) memcpy(at, tag, 4);
}

/* ----------------------------------------------------------------- payload reader */

void ckpt_reader_init(ckpt_reader *r, const void *p, size_t len, const char *name,
                      calf_error *err) {
    CALF_ASSERT(p != NULL || len == 0);
    r->p = p;
    r->len = len;
    r->pos = 0;
    r->name = name ? name : "checkpoint payload";
    r->err = err;
    r->status = CALF_OK;
}

/* Claim n bytes at the cursor, or fail (stickily) saying what did not fit. */
static const unsigned char *take(ckpt_reader *r, size_t n, const char *what) {
    if (r->status != CALF_OK) return NULL;
    CALF_ASSERT(r->pos <= r->len);
    if (n > r->len - r->pos) {
        r->status = calf_error_set(r->err, CALF_EINVAL,
                                   "%s: overrun reading %s: need %zu bytes at offset %zu, "
                                   "only %zu left",
                                   r->name, what, n, r->pos, r->len - r->pos);
        return NULL;
    }
    const unsigned char *at = r->p + r->pos;
    r->pos += n;
    return at;
}

int ckpt_get_u32(ckpt_reader *r, uint32_t *v) {
    const unsigned char *p = take(r, 4, "u32");
    *v = p ? (uint32_t)bytes_get_le(p, 4) : 0;
    return r->status;
}

int ckpt_get_u64(ckpt_reader *r, uint64_t *v) {
    const unsigned char *p = take(r, 8, "u64");
    *v = p ? bytes_get_le(p, 8) : 0;
    return r->status;
}

int ckpt_get_i64(ckpt_reader *r, int64_t *v) {
    const unsigned char *p = take(r, 8, "i64");
    *v = p ? (int64_t)bytes_get_le(p, 8) : 0;
    return r->status;
}

int ckpt_get_f64(ckpt_reader *r, double *v) {
    const unsigned char *p = take(r, 8, "f64");
    *v = p ? bytes_get_f64(p) : 0.0;
    return r->status;
}

int ckpt_get_bytes(ckpt_reader *r, void *dst, size_t n) {
    CALF_ASSERT(dst != NULL || n == 0);
    const unsigned char *p = take(r, n, "bytes");
    if (n) {
        if (p) memcpy(dst, p, n);
        else memset(dst, 0, n);
    }
    return r->status;
}

int ckpt_get_f32s(ckpt_reader *r, float *dst, size_t n) {
    CALF_ASSERT(dst != NULL || n == 0);
    size_t at = r->pos;
    uint64_t stored;
    if (ckpt_get_u64(r, &stored) == CALF_OK && stored != (uint64_t)n)
        r->status = calf_error_set(r->err, CALF_EINVAL,
                                   "%s: float array at offset %zu holds %" PRIu64
                                   " values, expected %zu",
                                   r->name, at, stored, n);
    /* n * 4 cannot overflow past a bound it would have to fit under anyway. */
    const unsigned char *p = n <= SIZE_MAX / 4 ? take(r, n * 4, "float array") : NULL;
    if (!p && r->status == CALF_OK)
        r->status = calf_error_set(r->err, CALF_EINVAL, "%s: float array of %zu values is too large",
                                   r->name, n);
    for (size_t i = 0; i < n; i++) dst[i] = p ? bytes_get_f32(p + 4 * i) : 0.0f;
    return r->status;
}

int ckpt_get_tag(ckpt_reader *r, const char *tag) {
    CALF_ASSERT(tag != NULL && strlen(tag) == 4);
    size_t at = r->pos;
    const unsigned char *p = take(r, 4, "section tag");
    if (p && memcmp(p, tag, 4) != 0) {
        char got[5];
        for (int i = 0; i < 4; i++) got[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? (char)p[i] : '?';
        got[4] = '\0';
        r->status = calf_error_set(r->err, CALF_EINVAL,
                                   "%s: expected section \"%s\" at offset %zu, found \"%s\"",
                                   r->name, tag, at, got);
    }
    return r->status;
}

int ckpt_reader_finish(ckpt_reader *r) {
    if (r->status == CALF_OK && r->pos != r->len)
        r->status = calf_error_set(r->err, CALF_EINVAL,
                                   "%s: %zu unread bytes at offset %zu: structure mismatch",
                                   r->name, r->len - r->pos, r->pos);
    return r->status;
}

/* -------------------------------------------------------------------------- files */

/* The directory part of path ("." when there is none); malloc'd, NULL (err set) when
 * memory runs out. */
static char *parent_dir(const char *path, calf_error *err) {
    const char *slash = strrchr(path, '/');
    if (!slash) return mem_strdup(".", err);
    if (slash == path) return mem_strdup("/", err);
    size_t n = (size_t)(slash - path);
    char *d = mem_alloc(n + 1, err);
    if (!d) return NULL;
    memcpy(d, path, n);
    d[n] = '\0';
    return d;
}

static int write_all(int fd, const void *p, size_t n, const char *path, calf_error *err) {
    const unsigned char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return calf_error_set(err, CALF_EIO, "checkpoint: write %s: %s", path,
                                  strerror(errno));
        }
        c += w;
        n -= (size_t)w;
    }
    return CALF_OK;
}

static int fsync_dir(const char *dir, calf_error *err) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return calf_error_set(err, CALF_EIO, "checkpoint: open directory %s: %s", dir,
                              strerror(errno));
    int rc = CALF_OK;
    if (fsync(fd) != 0)
        rc = calf_error_set(err, CALF_EIO, "checkpoint: fsync directory %s: %s", dir,
                            strerror(errno));
    if (close(fd) != 0 && rc == CALF_OK)
        rc = calf_error_set(err, CALF_EIO, "checkpoint: close directory %s: %s", dir,
                            strerror(errno));
    return rc;
}

static void encode_header(unsigned char h[CKPT_HEADER_SIZE], uint64_t digest,
                          int64_t iteration, uint64_t payload_size) {
    memcpy(h, CKPT_MAGIC, 8);
    bytes_put_le(h + 8, CKPT_FORMAT_VERSION, 4);
    bytes_put_le(h + 12, CKPT_HEADER_SIZE, 4);
    bytes_put_le(h + 16, digest, 8);
    bytes_put_le(h + 24, (uint64_t)iteration, 8);
    bytes_put_le(h + 32, payload_size, 8);
}

int ckpt_writer_open(ckpt_writer *w, const char *path, uint64_t digest, int64_t iteration,
                     uint64_t payload_size, calf_error *err) {
    CALF_ASSERT(path != NULL);
    memset(w, 0, sizeof *w);
    w->fd = -1;
    w->dir = parent_dir(path, err);
    int rc = w->dir ? fs_mkdir_p(w->dir, err) : CALF_ENOMEM;
    size_t tcap = strlen(path) + 32;
    if (rc == CALF_OK && (!(w->path = mem_strdup(path, err)) || !(w->tmp = mem_alloc(tcap, err))))
        rc = CALF_ENOMEM;
    if (rc != CALF_OK) {
        free(w->tmp);
        w->tmp = NULL; /* nothing to remove */
        ckpt_writer_abort(w);
        return rc;
    }
    int tlen = snprintf(w->tmp, tcap, "%s.tmp.%ld", path, (long)getpid());
    CALF_ASSERT(tlen > 0 && (size_t)tlen < tcap);
    /* O_NOFOLLOW: never write through a link planted at the temporary name */
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (w->fd < 0) {
        rc = calf_error_set(err, CALF_EIO, "checkpoint: create %s: %s", w->tmp, strerror(errno));
        free(w->tmp);
        w->tmp = NULL; /* nothing to remove */
        ckpt_writer_abort(w);
        return rc;
    }
    unsigned char head[CKPT_HEADER_SIZE];
    encode_header(head, digest, iteration, payload_size);
    w->crc = crc32c(head, sizeof head);
    w->left = payload_size;
    rc = write_all(w->fd, head, sizeof head, w->tmp, err);
    if (rc != CALF_OK) ckpt_writer_abort(w);
    return rc;
}

int ckpt_writer_put(ckpt_writer *w, const void *p, size_t n, calf_error *err) {
    CALF_ASSERT(w->fd >= 0 && (p != NULL || n == 0));
    if (n > w->left) {
        ckpt_writer_abort(w);
        return calf_error_set(err, CALF_EINVAL, "checkpoint: more payload than the header promised");
    }
    w->crc = crc32c_update(w->crc, p, n);
    w->left -= n;
    int rc = write_all(w->fd, p, n, w->tmp, err);
    if (rc != CALF_OK) ckpt_writer_abort(w);
    return rc;
}

int ckpt_writer_commit(ckpt_writer *w, calf_error *err) {
    CALF_ASSERT(w->fd >= 0);
    int rc = CALF_OK;
    if (w->left != 0)
        rc = calf_error_set(err, CALF_EINVAL, "checkpoint %s: %llu payload bytes missing", w->tmp,
                            (unsigned long long)w->left);
    unsigned char tail[4];
    bytes_put_le(tail, w->crc, 4);
    if (rc == CALF_OK) rc = write_all(w->fd, tail, sizeof tail, w->tmp, err);
    /* The data must be on disk before the rename makes it the checkpoint, or a power
     * loss could leave a whole-looking name over missing blocks. */
    if (rc == CALF_OK && fsync(w->fd) != 0)
        rc = calf_error_set(err, CALF_EIO, "checkpoint: fsync %s: %s", w->tmp, strerror(errno));
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0 && rc == CALF_OK)
        rc = calf_error_set(err, CALF_EIO, "checkpoint: close %s: %s", w->tmp, strerror(errno));
    if (rc == CALF_OK && rename(w->tmp, w->path) != 0)
        rc = calf_error_set(err, CALF_EIO, "checkpoint: rename %s to %s: %s", w->tmp, w->path,
                            strerror(errno));
    if (rc != CALF_OK) {
        ckpt_writer_abort(w);
        return rc;
    }
    /* The rename is durable only once the directory entry is. A failure here still
     * leaves a whole file under path, just possibly not yet on disk. */
    rc = fsync_dir(w->dir, err);
    free(w->tmp);
    w->tmp = NULL;
    ckpt_writer_abort(w); /* frees the rest; the file is in place */
    return rc;
}

void ckpt_writer_abort(ckpt_writer *w) {
    if (w->fd >= 0) close(w->fd);
    if (w->tmp) unlink(w->tmp); /* best effort: the failure being reported matters more */
    free(w->tmp);
    free(w->path);
    free(w->dir);
    memset(w, 0, sizeof *w);
    w->fd = -1;
}

int ckpt_write_atomic(const char *path, uint64_t digest, int64_t iteration,
                      const void *payload, size_t n, calf_error *err) {
    CALF_ASSERT(path != NULL && (payload != NULL || n == 0));
    ckpt_writer w;
    int rc = ckpt_writer_open(&w, path, digest, iteration, (uint64_t)n, err);
    if (rc == CALF_OK) rc = ckpt_writer_put(&w, payload, n, err);
    if (rc == CALF_OK) rc = ckpt_writer_commit(&w, err);
    return rc;
}

/* Read up to n bytes; *got < n only at end of file. */
static int read_all(int fd, void *p, size_t n, size_t *got, const char *path,
                    calf_error *err) {
    unsigned char *c = p;
    *got = 0;
    while (*got < n) {
        ssize_t r = read(fd, c + *got, n - *got);
        if (r < 0) {
            if (errno == EINTR) continue;
            return calf_error_set(err, CALF_EIO, "checkpoint: read %s: %s", path,
                                  strerror(errno));
        }
        if (r == 0) break;
        *got += (size_t)r;
    }
    return CALF_OK;
}

/* Validate the whole file (header, sizes, CRC over every byte, read in pieces) and, when
 * payload is not NULL, return its first min(keep, payload size) bytes. */
static int read_validated(int fd, const char *path, ckpt_header *hdr, size_t keep,
                          unsigned char **payload, size_t *n, calf_error *err) {
    struct stat st;
    if (fstat(fd, &st) != 0)
        return calf_error_set(err, CALF_EIO, "checkpoint: stat %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return calf_error_set(err, CALF_EINVAL, "checkpoint %s: not a regular file", path);
    uint64_t fsize = (uint64_t)st.st_size;

    unsigned char head[CKPT_HEADER_SIZE];
    size_t got;
    int rc = read_all(fd, head, sizeof head, &got, path, err);
    if (rc != CALF_OK) return rc;
    if (got == 0)
        return calf_error_set(err, CALF_EINVAL, "checkpoint %s: truncated: empty file", path);
    if (memcmp(head, CKPT_MAGIC, got < 8 ? got : 8) != 0)
        return calf_error_set(err, CALF_EINVAL, "checkpoint %s: not a calf checkpoint (bad magic)",
                              path);
    if (got < sizeof head)
        return calf_error_set(err, CALF_EINVAL,
                              "checkpoint %s: truncated: %zu bytes, shorter than the %u-byte header",
                              path, got, CKPT_HEADER_SIZE);
    hdr->version = (uint32_t)bytes_get_le(head + 8, 4);
    hdr->header_size = (uint32_t)bytes_get_le(head + 12, 4);
    hdr->digest = bytes_get_le(head + 16, 8);
    hdr->iteration = (int64_t)bytes_get_le(head + 24, 8);
    hdr->payload_size = bytes_get_le(head + 32, 8);
    if (hdr->version != CKPT_FORMAT_VERSION)
        return calf_error_set(err, CALF_EINVAL,
                              "checkpoint %s: unsupported version %" PRIu32 " (this build reads %u)",
                              path, hdr->version, CKPT_FORMAT_VERSION);
    if (hdr->header_size != CKPT_HEADER_SIZE)
        return calf_error_set(err, CALF_EINVAL,
                              "checkpoint %s: corrupt header: header size %" PRIu32
                              ", version 1 has %u",
                              path, hdr->header_size, CKPT_HEADER_SIZE);
    /* Compare sizes before allocating: the header is not trusted until the CRC passes. */
    uint64_t body = fsize >= CKPT_HEADER_SIZE + 4 ? fsize - CKPT_HEADER_SIZE - 4 : 0;
    if (fsize < CKPT_HEADER_SIZE + 4 || hdr->payload_size > body)
        return calf_error_set(err, CALF_EINVAL,
                              "checkpoint %s: truncated: header promises a %" PRIu64
                              "-byte payload, file is %" PRIu64 " bytes",
                              path, hdr->payload_size, fsize);
    if (hdr->payload_size < body)
        return calf_error_set(err, CALF_EINVAL,
                              "checkpoint %s: %" PRIu64 " trailing bytes after the payload and CRC",
                              path, body - hdr->payload_size);
    /* Read the payload in pieces through the CRC, keeping its first `keep` bytes. */
    size_t want = !payload ? 0 : hdr->payload_size < (uint64_t)keep ? (size_t)hdr->payload_size : keep;
    unsigned char *buf = NULL;
    if (payload) {
        buf = malloc(want ? want : 1);
        if (!buf)
            return calf_error_set(err, CALF_ENOMEM,
                                  "checkpoint %s: no memory for a %zu-byte payload", path, want);
    }
    enum { PIECE = 1 << 20 };
    unsigned char *piece = mem_alloc(PIECE, err);
    if (!piece) rc = CALF_ENOMEM;
    uint32_t computed = crc32c(head, sizeof head);
    uint64_t done = 0;
    while (rc == CALF_OK && done < hdr->payload_size) {
        uint64_t left = hdr->payload_size - done;
        size_t m = left < PIECE ? (size_t)left : PIECE;
        /* the kept part goes straight to the caller's buffer */
        unsigned char *to = done < want ? buf + done : piece;
        if (done < want && m > want - done) m = (size_t)(want - done);
        rc = read_all(fd, to, m, &got, path, err);
        if (rc == CALF_OK && got < m)
            rc = calf_error_set(err, CALF_EINVAL,
                                "checkpoint %s: truncated while reading (file shrank?)", path);
        if (rc == CALF_OK) computed = crc32c_update(computed, to, m);
        done += m;
    }
    free(piece);
    unsigned char tail[4];
    size_t tgot = 0;
    if (rc == CALF_OK) rc = read_all(fd, tail, sizeof tail, &tgot, path, err);
    if (rc == CALF_OK && tgot < sizeof tail)
        rc = calf_error_set(err, CALF_EINVAL, "checkpoint %s: truncated while reading (file shrank?)",
                            path);
    if (rc == CALF_OK) {
        uint32_t stored = (uint32_t)bytes_get_le(tail, 4);
        if (stored != computed)
            rc = calf_error_set(err, CALF_EINVAL,
                                "checkpoint %s: CRC mismatch (stored %08" PRIx32 ", computed %08" PRIx32
                                "): the file is corrupt",
                                path, stored, computed);
    }
    if (rc != CALF_OK) {
        free(buf);
        return rc;
    }
    if (payload) {
        *payload = buf;
        *n = want;
    }
    return CALF_OK;
}

int ckpt_read(const char *path, ckpt_header *hdr, unsigned char **payload, size_t *n,
              calf_error *err) {
    CALF_ASSERT(path != NULL && hdr != NULL && payload != NULL && n != NULL);
    *payload = NULL;
    *n = 0;
    memset(hdr, 0, sizeof *hdr);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return calf_error_set(err, CALF_EIO, "checkpoint: open %s: %s", path, strerror(errno));
    int rc = read_validated(fd, path, hdr, SIZE_MAX, payload, n, err);
    close(fd); /* read-only: a failed close loses nothing */
    return rc;
}

int ckpt_read_head(const char *path, ckpt_header *hdr, size_t keep, unsigned char **payload,
                   size_t *n, calf_error *err) {
    CALF_ASSERT(path != NULL && hdr != NULL);
    if (payload) *payload = NULL;
    if (n) *n = 0;
    memset(hdr, 0, sizeof *hdr);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return calf_error_set(err, CALF_EIO, "checkpoint: open %s: %s", path, strerror(errno));
    int rc = read_validated(fd, path, hdr, keep, payload, n, err);
    close(fd);
    return rc;
}

int ckpt_read_range(const char *path, uint64_t offset, void *dst, size_t n, calf_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return calf_error_set(err, CALF_EIO, "checkpoint: open %s: %s", path, strerror(errno));
    struct stat st;
    int rc = CALF_OK;
    if (fstat(fd, &st) != 0)
        rc = calf_error_set(err, CALF_EIO, "checkpoint: stat %s: %s", path, strerror(errno));
    uint64_t payload = (uint64_t)st.st_size >= CKPT_HEADER_SIZE + 4
                           ? (uint64_t)st.st_size - CKPT_HEADER_SIZE - 4 : 0;
    if (rc == CALF_OK && (offset > payload || n > payload - offset))
        rc = calf_error_set(err, CALF_EINVAL,
                            "checkpoint %s: bytes %llu..%llu lie beyond its %llu-byte payload",
                            path, (unsigned long long)offset, (unsigned long long)(offset + n),
                            (unsigned long long)payload);
    unsigned char *c = dst;
    size_t got = 0;
    while (rc == CALF_OK && got < n) {
        ssize_t r = pread(fd, c + got, n - got, (off_t)(CKPT_HEADER_SIZE + offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            rc = calf_error_set(err, CALF_EIO, "checkpoint: read %s: %s", path, strerror(errno));
        else if (r == 0)
            rc = calf_error_set(err, CALF_EINVAL, "checkpoint %s: truncated while reading (file "
                                "shrank?)", path);
        else
            got += (size_t)r;
    }
    close(fd);
    return rc;
}

int ckpt_path(char *out, size_t cap, const char *dir, int64_t iteration, calf_error *err) {
    int len = snprintf(out, cap, "%s/ckpt-%" PRId64, dir, iteration);
    if (len < 0 || (size_t)len >= cap)
        return calf_error_set(err, CALF_EINVAL, "checkpoint path for %s iteration %" PRId64
                              " longer than %zu bytes", dir, iteration, cap);
    return CALF_OK;
}

/* Parse "ckpt-<n>" with n canonical decimal (no sign, no leading zeros), so that
 * ckpt_path(n) names the same file and "ckpt-5.tmp.123" is never taken for ckpt-5. */
static bool parse_ckpt_name(const char *name, int64_t *iter) {
    if (strncmp(name, "ckpt-", 5) != 0) return false;
    const char *d = name + 5;
    size_t nd = strspn(d, "0123456789");
    if (nd == 0 || d[nd] != '\0' || nd > 19 || (d[0] == '0' && nd > 1)) return false;
    errno = 0;
    char *end;
    long long v = strtoll(d, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0) return false;
    *iter = (int64_t)v;
    return true;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int ckpt_list(const char *dir, int64_t **iters, int *count, calf_error *err) {
    CALF_ASSERT(dir != NULL && iters != NULL && count != NULL);
    *iters = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return CALF_OK;
        return calf_error_set(err, CALF_EIO, "checkpoint: opendir %s: %s", dir, strerror(errno));
    }
    int64_t *list = NULL;
    size_t n = 0, cap = 0;
    int rc = CALF_OK;
    size_t pcap = strlen(dir) + 64;
    char *path = mem_alloc(pcap, err);
    if (!path) rc = CALF_ENOMEM;
    for (; rc == CALF_OK;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) {
            if (errno != 0)
                rc = calf_error_set(err, CALF_EIO, "checkpoint: readdir %s: %s", dir,
                                    strerror(errno));
            break;
        }
        int64_t it;
        if (!parse_ckpt_name(e->d_name, &it)) continue;
        if (ckpt_path(path, pcap, dir, it, NULL) != CALF_OK) continue;
        struct stat st;
        /* A directory or a dangling entry by that name is not a checkpoint; one that
         * vanished since readdir (a concurrent prune) is simply gone. */
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (n == cap) {
            size_t grown = cap ? cap * 2 : 16;
            int64_t *more = mem_realloc(list, grown * sizeof *list, err);
            if (!more) {
                rc = CALF_ENOMEM;
                break;
            }
            list = more;
            cap = grown;
        }
        list[n++] = it;
    }
    if (closedir(d) != 0 && rc == CALF_OK)
        rc = calf_error_set(err, CALF_EIO, "checkpoint: closedir %s: %s", dir, strerror(errno));
    free(path);
    if (rc == CALF_OK && n > (size_t)INT32_MAX)
        rc = calf_error_set(err, CALF_EINVAL, "checkpoint: %s holds too many checkpoints", dir);
    if (rc != CALF_OK) {
        free(list);
        return rc;
    }
    if (n) qsort(list, n, sizeof *list, cmp_i64);
    *iters = list;
    *count = (int)n;
    return CALF_OK;
}

int ckpt_prune(const char *dir, int keep, int64_t newest, calf_error *err) {
    if (keep <= 0) return CALF_OK;
    int64_t *iters;
    int count;
    int rc = ckpt_list(dir, &iters, &count, err);
    if (rc != CALF_OK) return rc;
    /* only checkpoints up to `newest` count: a stray higher-numbered file (say, a corrupt
     * one from an earlier run) must not push the checkpoint just written out */
    int upto = 0;
    while (upto < count && iters[upto] <= newest) upto++;
    size_t pcap = strlen(dir) + 64;
    char *path = mem_alloc(pcap, err);
    if (!path) rc = CALF_ENOMEM;
    for (int i = 0; i < upto - keep && rc == CALF_OK; i++) {
        rc = ckpt_path(path, pcap, dir, iters[i], err);
        if (rc == CALF_OK && unlink(path) != 0 && errno != ENOENT)
            rc = calf_error_set(err, CALF_EIO, "checkpoint: unlink %s: %s", path,
                                strerror(errno));
    }
    free(path);
    free(iters);
    return rc;
}

int ckpt_find_latest_valid(const char *dir, char *path_out, size_t cap, ckpt_header *hdr,
                           unsigned char **payload, size_t *n, bool *found, FILE *warn,
                           calf_error *err) {
    return ckpt_find_latest_usable(dir, path_out, cap, hdr, payload, n, found, NULL, NULL, warn,
                                   err);
}

int ckpt_find_latest_usable(const char *dir, char *path_out, size_t cap, ckpt_header *hdr,
                            unsigned char **payload, size_t *n, bool *found, ckpt_check check,
                            void *arg, FILE *warn, calf_error *err) {
    CALF_ASSERT(dir != NULL && path_out != NULL && cap > 0 && hdr != NULL && found != NULL &&
                (payload == NULL) == (n == NULL));
    *found = false;
    if (payload) *payload = NULL;
    if (n) *n = 0;
    path_out[0] = '\0';
    int64_t *iters;
    int count;
    int rc = ckpt_list(dir, &iters, &count, err);
    if (rc != CALF_OK) return rc;
    calf_error first;
    calf_error_clear(&first);
    for (int i = count - 1; i >= 0; i--) {
        if ((rc = ckpt_path(path_out, cap, dir, iters[i], err)) != CALF_OK) break;
        calf_error e;
        calf_error_clear(&e);
        int hrc = ckpt_read_head(path_out, hdr, SIZE_MAX, payload, n, &e);
        if (hrc == CALF_ENOMEM) { /* not a damaged file: an older one would be the wrong one */
            path_out[0] = '\0';
            rc = calf_error_set(err, hrc, "%s", e.msg);
            break;
        }
        if (hrc == CALF_OK) {
            int crc = hdr->iteration == iters[i] && check ? check(path_out, hdr, arg, &e) : CALF_OK;
            if (crc == CALF_ENOMEM) {
                if (payload) {
                    free(*payload);
                    *payload = NULL;
                    *n = 0;
                }
                path_out[0] = '\0';
                rc = calf_error_set(err, crc, "%s", e.msg);
                break;
            }
            if (hdr->iteration == iters[i] && crc == CALF_OK) {
                *found = true;
                break;
            }
            if (hdr->iteration == iters[i]) { /* the check's message, in e */
                if (payload) {
                    free(*payload);
                    *payload = NULL;
                    *n = 0;
                }
                if (first.status == CALF_OK) first = e;
                if (warn && i > 0)
                    fprintf(warn, "calf: warning: skipping %s; trying an older checkpoint\n", e.msg);
                continue;
            }
            /* a file renamed or copied over another: resuming from it would restart the
             * run at another iteration than the directory says */
            calf_error_set(&e, CALF_EINVAL, "%s: holds iteration %" PRId64 ", not the %" PRId64
                           " its name says", path_out, hdr->iteration, iters[i]);
            if (payload) {
                free(*payload);
                *payload = NULL;
                *n = 0;
            }
        }
        if (first.status == CALF_OK) first = e;
        if (warn && i > 0) /* the last one's failure is the error below */
            fprintf(warn, "calf: warning: skipping %s; trying an older checkpoint\n", e.msg);
    }
    if (rc == CALF_OK && !*found && count > 0) {
        path_out[0] = '\0';
        rc = calf_error_set(err, CALF_EINVAL,
                            "checkpoint: none of the %d checkpoints in %s is valid; newest: %s",
                            count, dir, first.msg);
    }
    free(iters);
    return rc;
}
