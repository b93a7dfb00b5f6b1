/* bytes.h: little-endian integers and floats in byte buffers: the one byte order of
 * every file calf writes (checkpoints, env records, TensorBoard records), whatever the
 * host's. */
#ifndef CALF_BYTES_H
#define CALF_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "calf/error.h"
#include "calf/rng.h"

/* A growable byte buffer (checkpoint payloads, encoded TensorBoard records). A zeroed
 * struct is an empty buffer; free(data) releases it. Running out of memory is sticky:
 * `failed` is set, later appends do nothing, and whoever uses the bytes checks it once. */
typedef struct bytes_buf {
    unsigned char *data; /* (len) owned */
    size_t len, cap;
    bool failed;         /* an append could not get memory: the contents are incomplete */
} bytes_buf;

/* Room for n more bytes at the end: returns where they go and counts them in len; NULL
 * (and b->failed) when memory runs out or an earlier append failed. */
static inline unsigned char *bytes_buf_room(bytes_buf *b, size_t n) {
    if (b->failed || n > SIZE_MAX / 2 - b->len) {
        b->failed = true;
        return NULL;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        unsigned char *d = realloc(b->data, cap);
        if (!d) {
            b->failed = true;
            return NULL;
        }
        b->data = d;
        b->cap = cap;
    }
    unsigned char *at = b->data + b->len;
    b->len += n;
    return at;
}

/* Append the bytes of a C string (without its terminator); sticky on failure. */
static inline void bytes_buf_put_str(bytes_buf *b, const char *s) {
    size_t n = strlen(s);
    unsigned char *at = n ? bytes_buf_room(b, n) : NULL;
    if (at) memcpy(at, s, n);
}

/* The low nbytes (1..8) of v into out, least significant first. */
static inline void bytes_put_le(unsigned char *out, uint64_t v, int nbytes) {
    for (int i = 0; i < nbytes; i++) out[i] = (unsigned char)(v >> (8 * i));
}

static inline uint64_t bytes_get_le(const unsigned char *p, int nbytes) {
    uint64_t v = 0;
    for (int i = 0; i < nbytes; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A float (double) as its IEEE 754 bit pattern, little-endian: 4 (8) bytes. The bits go
 * through unchanged, NaN payloads and the sign of zero included. */
static inline void bytes_put_f32(unsigned char *out, float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    bytes_put_le(out, bits, 4);
}

static inline float bytes_get_f32(const unsigned char *p) {
    uint32_t bits = (uint32_t)bytes_get_le(p, 4);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline void bytes_put_f64(unsigned char *out, double d) {
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    bytes_put_le(out, bits, 8);
}

static inline double bytes_get_f64(const unsigned char *p) {
    uint64_t bits = bytes_get_le(p, 8);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* A calf_rng in a checkpoint record: its four words, little-endian (BYTES_RNG bytes). */
enum { BYTES_RNG = 32 };

static inline void bytes_put_rng(unsigned char *p, const calf_rng *r) {
    for (int w = 0; w < 4; w++) bytes_put_le(p + 8 * w, r->s[w], 8);
}

/* False for the all-zero state, which a stream never reaches: only a damaged file holds
 * one (r is filled either way). */
static inline bool bytes_get_rng(const unsigned char *p, calf_rng *r) {
    uint64_t any = 0;
    for (int w = 0; w < 4; w++) {
        r->s[w] = bytes_get_le(p + 8 * w, 8);
        any |= r->s[w];
    }
    return any != 0;
}

#endif
