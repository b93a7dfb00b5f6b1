/* mt19937.c: MT19937 as its authors' reference code defines it (init_genrand seeding,
 * genrand_int32 tempering), and NumPy's legacy RandomState draws over it. */
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

/* One twist over the whole key: the next 624 untempered words. */
static void mt_regenerate(mt19937 *mt) {
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

uint32_t mt19937_next(mt19937 *mt) {
    /* >= rather than ==: a corrupted position regenerates instead of reading past key */
    if (mt->pos < 0 || mt->pos >= MT19937_N) mt_regenerate(mt);
    uint32_t y = mt->key[mt->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

double mt19937_rand(mt19937 *mt) {
    uint32_t a = mt19937_next(mt) >> 5, b = mt19937_next(mt) >> 6;
    return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
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
