/* bytes.h: little-endian integers in byte buffers: the one byte order of every file
 * calf writes (checkpoints, env records, TensorBoard records), whatever the host's. */
#ifndef CALF_BYTES_H
#define CALF_BYTES_H

#include <stdint.h>

/* The low nbytes (1..8) of v into out, least significant first. */
static inline void bytes_put_le(unsigned char *out, uint64_t v, int nbytes) {
    for (int i = 0; i < nbytes; i++) out[i] = (unsigned char)(v >> (8 * i));
}

static inline uint64_t bytes_get_le(const unsigned char *p, int nbytes) {
    uint64_t v = 0;
    for (int i = 0; i < nbytes; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#endif
