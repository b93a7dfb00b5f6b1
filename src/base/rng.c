/* rng.c: xoshiro256** streams seeded by splitmix64 over (seed, index, purpose).
 * Chosen for speed, 256 bits of plain state, and good statistical quality. */
#include "calf/rng.h"

#include <math.h>

#include "base/cmath.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void calf_rng_seed(calf_rng *r, uint64_t seed, uint64_t index, uint64_t purpose) {
    /* Mix the three parts through splitmix64 one after another so that nearby
     * triples such as (s, i+1, p) and (s+1, i, p) land far apart. */
    uint64_t x = seed;
    uint64_t h = splitmix64(&x);
    x = h ^ (index * 0xd1342543de82ef95ULL);
    h = splitmix64(&x);
    x = h ^ (purpose * 0xaf251af3b0f025b5ULL);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
    /* xoshiro's state must not be all zero; splitmix64 makes that astronomically
     * unlikely, but keep the invariant explicit. */
    if ((r->s[0] | r->s[1] | r->s[2] | r->s[3]) == 0) r->s[0] = 1;
}

uint64_t calf_rng_next(calf_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float calf_rng_uniform_float(calf_rng *r) {
    return (float)(calf_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

double calf_rng_uniform_double(calf_rng *r) {
    return (double)(calf_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

double calf_rng_uniform_range(calf_rng *r, double lo, double hi) {
    return lo + (hi - lo) * calf_rng_uniform_double(r);
}

uint32_t calf_rng_below(calf_rng *r, uint32_t n) {
    /* Lemire's multiply-shift with rejection of the biased low range. */
    uint64_t m = (uint64_t)(uint32_t)(calf_rng_next(r) >> 32) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (uint64_t)(uint32_t)(calf_rng_next(r) >> 32) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

double calf_rng_normal(calf_rng *r) {
    /* 1 - u lies in (0, 1], so the log is finite. */
    double u1 = 1.0 - calf_rng_uniform_double(r);
    double u2 = calf_rng_uniform_double(r);
    return sqrt(-2.0 * cm_log(u1)) * cm_cos(6.283185307179586 * u2);
}
