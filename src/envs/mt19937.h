/* mt19937.h: the Mersenne Twister MT19937 (Matsumoto & Nishimura 1998) and the draws
 * NumPy's legacy RandomState makes from it, bit for bit, so an env can replay episodes
 * of a Python program seeded with RandomState(K) (MinAtar's games, envs/minatar.h). */
#ifndef CALF_MT19937_H
#define CALF_MT19937_H

#include <math.h>
#include <stdint.h>

#define MT19937_N 624

/* Plain data: a checkpoint copies it and the stream continues exactly. */
typedef struct mt19937 {
    uint32_t key[MT19937_N];
    int32_t pos; /* next word of key to temper; MT19937_N: regenerate first */
} mt19937;

/* numpy.random.RandomState(k) and RandomState.seed(k) for an integer 0 <= k < 2^32:
 * the reference init_genrand(k), the stream positioned to regenerate at the first draw. */
void mt19937_seed(mt19937 *mt, uint32_t k);
/* One twist over the whole key: the next 624 untempered words, pos back to 0. */
void mt19937_twist(mt19937 *mt);

/* genrand_int32's tempering of one word of the key. */
static inline uint32_t mt19937_temper(uint32_t y) {
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* The next 32-bit output (genrand_int32). Inline, as every MinAtar step draws two. */
static inline uint32_t mt19937_next(mt19937 *mt) {
    /* >= rather than ==: a corrupted position regenerates instead of reading past key */
    if (mt->pos < 0 || mt->pos >= MT19937_N) mt19937_twist(mt);
    return mt19937_temper(mt->key[mt->pos++]);
}

/* RandomState.rand() / random_sample(): two outputs a, b (in that order) give
 * ((a >> 5) * 2^26 + (b >> 6)) / 2^53, uniform in [0, 1) with 53 bits. */
static inline double mt19937_rand(mt19937 *mt) {
    uint32_t a = mt19937_next(mt) >> 5, b = mt19937_next(mt) >> 6;
    return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}
/* The 53-bit integer x of RandomState.rand() = x / 2^53 (the same two outputs). */
static inline uint64_t mt19937_rand53(mt19937 *mt) {
    uint64_t a = mt19937_next(mt) >> 5, b = mt19937_next(mt) >> 6;
    return a << 26 | b;
}
/* The T with x / 2^53 < p exactly when x < T, for p in [0, 1]: ceil(p * 2^53), p * 2^53
 * being exact in double. A constant p folds to a constant. */
static inline uint64_t mt19937_threshold(double p) {
    return (uint64_t)ceil(p * 9007199254740992.0);
}
/* RandomState.rand() < p, decided in integers (no conversion to double). With x = a * 2^26
 * + b (a, b as in mt19937_rand53) and T = ta * 2^26 + tb, x < T exactly when a < ta, or
 * a == ta and b < tb: the second output is always consumed (the stream moves two words,
 * as rand() moves it) but tempered only on a tie, once in 2^27 draws. */
static inline int mt19937_rand_below(mt19937 *mt, double p) {
    const uint64_t t = mt19937_threshold(p);
    if (mt->pos < 0 || mt->pos > MT19937_N - 2) return mt19937_rand53(mt) < t; /* a twist between */
    const uint32_t ta = (uint32_t)(t >> 26), tb = (uint32_t)(t & ((1u << 26) - 1));
    const uint32_t a = mt19937_temper(mt->key[mt->pos]) >> 5, b_word = mt->key[mt->pos + 1];
    mt->pos += 2;
    return a != ta ? a < ta : (mt19937_temper(b_word) >> 6) < tb;
}
/* RandomState.randint(low, high) for high - low = n >= 1 (one value; randint(low, high,
 * size) is that value size times over): low + v where v comes from masked rejection
 * (legacy NumPy's only method): mask = the smallest 2^j - 1 >= n - 1, draw 32-bit
 * outputs until (output & mask) <= n - 1. n = 1 draws nothing. Valid for n <= 2^32. */
int64_t mt19937_randint(mt19937 *mt, int64_t low, int64_t high);

#endif
