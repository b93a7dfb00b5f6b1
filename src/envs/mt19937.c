/* mt19937.c: MT19937 as its authors' reference code defines it (init_genrand seeding,
 * the twist; genrand_int32's tempering is inline in mt19937.h), and NumPy's legacy
 * RandomState randint over it. */
#include "envs/mt19937.h"

#define MT_M 397
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu

void mt19937_seed(mt19937 *mt, uint32_t k) {
    mt->key[0] = k;
    for (int i = 1; i < MT19937_N; i++) {
        uint32_t prev = mt->key[i - 1];
        mt->key[i] = 1812433253u * (prev ^ (prev >> 30)) + (uint32_t)i;
    }
    mt->pos = MT19937_N;
}

void mt19937_twist(mt19937 *mt) {
    uint32_t *s = mt->key;
    int i = 0;
    for (; i < MT19937_N - MT_M; i++) {
        uint32_t y = (s[i] & MT_UPPER) | (s[i + 1] & MT_LOWER);
        s[i] = s[i + MT_M] ^ (y >> 1) ^ (-(y & 1u) & MT_MATRIX_A);
    }
    for (; i < MT19937_N - 1; i++) {
        uint32_t y = (s[i] & MT_UPPER) | (s[i + 1] & MT_LOWER);
        s[i] = s[i + MT_M - MT19937_N] ^ (y >> 1) ^ (-(y & 1u) & MT_MATRIX_A);
    }
    uint32_t y = (s[MT19937_N - 1] & MT_UPPER) | (s[0] & MT_LOWER);
    s[MT19937_N - 1] = s[MT_M - 1] ^ (y >> 1) ^ (-(y & 1u) & MT_MATRIX_A);
    mt->pos = 0;
}

int64_t mt19937_randint(mt19937 *mt, int64_t low, int64_t high) {
    uint64_t rng = (uint64_t)(high - low - 1); /* the largest offset */
    if (rng == 0) return low;
    uint32_t mask = (uint32_t)rng;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    uint32_t v;
    if (rng == 0xffffffffu) return low + (int64_t)mt19937_next(mt);
    do v = mt19937_next(mt) & mask;
    while (v > rng);
    return low + (int64_t)v;
}
