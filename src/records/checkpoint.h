/* checkpoint.h: the checkpoint file container: a fixed little-endian header, an opaque
 * payload and a CRC32C, written atomically; plus a bounds-checked payload builder and
 * reader, and the ckpt-<iteration> directory (list, prune, newest valid one).
 * Identical content gives identical bytes: no time, host or pid goes into a file. */
#ifndef CALF_CHECKPOINT_H
#define CALF_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/bytes.h"
#include "calf/error.h"

/* File layout (all integers little-endian):
 *   offset  0  magic "CALFCKPT"        8 bytes
 *   offset  8  u32 format version       CKPT_FORMAT_VERSION
 *   offset 12  u32 header size          CKPT_HEADER_SIZE
 *   offset 16  u64 config digest
 *   offset 24  i64 iteration
 *   offset 32  u64 payload size
 *   offset 40  payload
 *   then       u32 CRC32C of header + payload */
#define CKPT_MAGIC "CALFCKPT"
#define CKPT_FORMAT_VERSION 1u
#define CKPT_HEADER_SIZE 40u

typedef struct ckpt_header {
    uint32_t version;
    uint32_t header_size;
    uint64_t digest;     /* the config digest the writer was given */
    int64_t iteration;
    uint64_t payload_size;
} ckpt_header;

/* ---- payload builder: appends little-endian values; grows (panics on OOM) ---- */
typedef bytes_buf ckpt_buf; /* data (len) owned; free with ckpt_buf_free */

void ckpt_buf_init(ckpt_buf *b);
void ckpt_buf_free(ckpt_buf *b); /* leaves b empty and reusable */
void ckpt_put_u32(ckpt_buf *b, uint32_t v);
void ckpt_put_u64(ckpt_buf *b, uint64_t v);
void ckpt_put_i64(ckpt_buf *b, int64_t v);
void ckpt_put_f64(ckpt_buf *b, double v); /* bit pattern, NaN payloads included */
void ckpt_put_bytes(ckpt_buf *b, const void *p, size_t n);
/* A u64 count n, then n floats (bit patterns). ckpt_get_f32s checks the count. */
void ckpt_put_f32s(ckpt_buf *b, const float *p, /* (n) */ size_t n);
/* A four-character section marker ("PRMS", "ADAM", ...) so a reader can check it is
 * where it thinks it is in the structure. tag must be exactly 4 characters. */
void ckpt_put_tag(ckpt_buf *b, const char *tag);

/* ---- payload reader: every get checks bounds first and never reads past len ----
 * The first failure is CALF_EINVAL with a message naming what, the offset and `name`;
 * it is sticky: later gets fail with the same status and keep the first message, so a
 * caller may do a run of gets and check once. Outputs are zeroed on failure. */
typedef struct ckpt_reader {
    const unsigned char *p; /* (len) not owned */
    size_t len, pos;
    const char *name;       /* for messages, e.g. the file path; not owned */
    calf_error *err;        /* may be NULL */
    int status;             /* CALF_OK until the first failure */
} ckpt_reader;

void ckpt_reader_init(ckpt_reader *r, const void *p, size_t len, const char *name,
                      calf_error *err);
int ckpt_get_u32(ckpt_reader *r, uint32_t *v);
int ckpt_get_u64(ckpt_reader *r, uint64_t *v);
int ckpt_get_i64(ckpt_reader *r, int64_t *v);
int ckpt_get_f64(ckpt_reader *r, double *v);
int ckpt_get_bytes(ckpt_reader *r, void *dst, size_t n);
/* Expects exactly n floats (the stored count must equal n). */
int ckpt_get_f32s(ckpt_reader *r, float *dst, /* (n) */ size_t n);
int ckpt_get_tag(ckpt_reader *r, const char *tag);
/* Fails if any payload bytes are left unread: a structure mismatch. */
int ckpt_reader_finish(ckpt_reader *r);

/* ---- files ---- */

/* Write the container to path atomically: create parent directories, write
 * "<path>.tmp.<pid>", fflush + fsync, rename over path, fsync the directory. On any
 * failure the temporary file is removed and path is untouched (an older checkpoint
 * under that name stays as it was). */
int ckpt_write_atomic(const char *path, uint64_t digest, int64_t iteration,
                      const void *payload, /* (n) */ size_t n, calf_error *err);

/* The same in pieces, for a payload too large to build in memory: open writes the header
 * (payload_size is the total the puts will add up to) to "<path>.tmp.<pid>"; put appends
 * payload bytes (the CRC runs along); commit writes the CRC, fsyncs, renames over path and
 * fsyncs the directory. Any failure (or abort) removes the temporary file, leaves path
 * untouched and releases w. */
typedef struct ckpt_writer {
    int fd;
    char *path, *tmp, *dir;
    uint32_t crc;
    uint64_t left;       /* payload bytes still to come */
} ckpt_writer;
int ckpt_writer_open(ckpt_writer *w, const char *path, uint64_t digest, int64_t iteration,
                     uint64_t payload_size, calf_error *err);
int ckpt_writer_put(ckpt_writer *w, const void *p, /* (n) */ size_t n, calf_error *err);
int ckpt_writer_commit(ckpt_writer *w, calf_error *err);
void ckpt_writer_abort(ckpt_writer *w); /* safe after a failure or a commit */

/* Read and validate path: magic, version, header size, payload size against the file
 * size (before allocating anything), CRC. On success *payload is malloc'd, owned by
 * the caller (free()), *n its size. Errors (CALF_EINVAL unless the OS failed) say
 * "not a calf checkpoint", "unsupported version N", "truncated", "trailing bytes",
 * "corrupt header" or "CRC mismatch", with the path. */
int ckpt_read(const char *path, ckpt_header *hdr, unsigned char **payload, size_t *n,
              calf_error *err);

/* Validate path as ckpt_read does, reading the payload in pieces, and keep only its first
 * min(keep, payload size) bytes in *payload (malloc'd, the caller frees; *n their count).
 * payload and n NULL: validate only. Memory stays bounded whatever the file's size. */
int ckpt_read_head(const char *path, ckpt_header *hdr, size_t keep, unsigned char **payload,
                   size_t *n, calf_error *err);
/* Payload bytes [offset, offset + n) of path (not validated here: call ckpt_read_head
 * first); beyond the payload is CALF_EINVAL. */
int ckpt_read_range(const char *path, uint64_t offset, void *dst, /* (n) */ size_t n,
                    calf_error *err);

/* "dir/ckpt-<iteration>" into out; CALF_EINVAL if it does not fit in cap. */
int ckpt_path(char *out, size_t cap, const char *dir, int64_t iteration, calf_error *err);

/* Iterations of the regular files named exactly ckpt-<iteration> (canonical decimal,
 * iteration >= 0) in dir, ascending; temporary files and anything else are ignored. A
 * missing dir is an empty list. *iters is malloc'd (NULL when *count is 0), owned by
 * the caller. */
int ckpt_list(const char *dir, int64_t **iters, int *count, calf_error *err);

/* Delete all but the newest `keep` checkpoints among those numbered <= newest (the one
 * just written); higher-numbered files are left alone. keep <= 0 keeps all. */
int ckpt_prune(const char *dir, int keep, int64_t newest, calf_error *err);

/* Load the newest checkpoint in dir that passes ckpt_read. Each newer one that fails
 * gets a one-line warning on warn (if not NULL) naming the file and why, and the next
 * older one is tried (payload and n NULL: validate only, keep nothing). *found is false
 * and CALF_OK is returned when dir holds no
 * checkpoint at all (a fresh start); if checkpoints exist but none is valid, that is
 * CALF_EINVAL. Running out of memory while reading one is CALF_ENOMEM at once, not a
 * reason to take an older one. On success path_out holds the file's path and *payload
 * (malloc'd, the caller frees) its payload. */
int ckpt_find_latest_valid(const char *dir, char *path_out, size_t cap, ckpt_header *hdr,
                           unsigned char **payload, size_t *n, bool *found, FILE *warn,
                           calf_error *err);
/* ckpt_find_latest_valid, where a file that passes ckpt_read must also pass check (its
 * path and header, arg; a non-OK status with a message in err skips it like a damaged
 * one: what a CRC cannot see, such as contents no run could have written). */
typedef int (*ckpt_check)(const char *path, const ckpt_header *hdr, void *arg, calf_error *err);
int ckpt_find_latest_usable(const char *dir, char *path_out, size_t cap, ckpt_header *hdr,
                            unsigned char **payload, size_t *n, bool *found, ckpt_check check,
                            void *arg, FILE *warn, calf_error *err);

#endif
