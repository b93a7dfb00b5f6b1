/* test_replay.c: the per-env replay rings (layout, wrap-around, the same env's data
 * whichever process holds it), the sampler's documented stream and its uniformity over
 * every transition of the job (a chi-square test that broken samplers fail), the owned
 * selection's canonical order, checkpoint records across splits, damaged ones refused
 * with a message, replays of byte observations (their size, their records) and of next
 * action masks (kept, wrapped, split, their records and damaged mask bytes). */
#include <stdint.h>

#include "algorithms/replay.h"
#include "records/checkpoint.h"
#include "test_util.h"

enum { OD = 3, AD = 2 };

/* The transition global env `env` makes at step `step`, from those two alone. */
static void make_row(int env, int step, float *obs, float *act, float *rew, uint8_t *term,
                     float *next_obs) {
    for (int k = 0; k < OD; k++) {
        obs[k] = (float)(env * 100 + step) + 0.25f * (float)k;
        next_obs[k] = obs[k] + 0.5f;
    }
    for (int k = 0; k < AD; k++) act[k] = -(float)env - 0.01f * (float)step + (float)k;
    *rew = (float)(env * 10 + step) * 0.5f;
    *term = (uint8_t)((env + step) % 3 == 0 ? 1 : 0);
}

/* One step of the owned envs of rb, as the env loop would hand it over. */
static void add_step(replay *rb, int step) {
    float obs[16 * OD], act[16 * AD], rew[16], nobs[16 * OD];
    uint8_t term[16];
    CALF_ASSERT(rb->env_count <= 16);
    for (int e = 0; e < rb->env_count; e++)
        make_row(rb->env_begin + e, step, obs + e * OD, act + e * AD, rew + e, term + e,
                 nobs + e * OD);
    replay_add_step(rb, obs, act, rew, term, nobs, NULL);
}

/* rb holds (env, pos) = the row of step `step` */
static int holds_step(const replay *rb, int env, int64_t pos, int step) {
    float obs[OD], act[AD], rew, nobs[OD];
    uint8_t term;
    make_row(env, step, obs, act, &rew, &term, nobs);
    replay_item it;
    replay_get(rb, env, pos, &it);
    return memcmp(it.obs, obs, sizeof obs) == 0 && memcmp(it.act, act, sizeof act) == 0 &&
           it.reward == rew && it.terminated == term &&
           memcmp(it.next_obs, nobs, sizeof nobs) == 0;
}

static void test_layout(void) {
    /* 2 envs x 3 slots, obs 3, act 1: obs 72 B at 0, next_obs at 128, act (24) at 256,
     * reward (24) at 320, terminated (6) at 384, total rounded to 448 */
    CHECK_INT_EQ(replay_bytes(2, 3, 3, CALF_DTYPE_F32, 1, 0), 448);
    CHECK_INT_EQ(replay_bytes(1, 1, 1, CALF_DTYPE_F32, 1, 0), 64 * 4 + 1 + 63);
    CHECK_INT_EQ(replay_bytes(0, 3, 3, CALF_DTYPE_F32, 1, 0), 0);
    CHECK_INT_EQ(replay_bytes(2, 0, 3, CALF_DTYPE_F32, 1, 0), 0);
    CHECK_INT_EQ(replay_bytes(2, 3, 0, CALF_DTYPE_F32, 1, 0), 0);
    CHECK_INT_EQ(replay_bytes(1 << 30, INT64_MAX / 2, 3, CALF_DTYPE_F32, 1, 0), 0); /* does not fit */
    replay rb;
    calf_error err = {0};
    CHECK_INT_EQ(replay_create(&rb, 4, 1, 2, 3, 3, CALF_DTYPE_F32, 1, 0, &err), CALF_OK);
    CHECK((uintptr_t)rb.obs % 64 == 0 && (uintptr_t)rb.next_obs % 64 == 0);
    CHECK((uintptr_t)rb.act % 64 == 0 && (uintptr_t)rb.reward % 64 == 0);
    CHECK((uintptr_t)rb.terminated % 64 == 0);
    CHECK((unsigned char *)rb.terminated + 6 <= (unsigned char *)rb.owned + 448);
    CHECK(rb.stored == 0 && rb.next_slot == 0);
    replay_free(&rb);
    CHECK(rb.owned == NULL && rb.obs == NULL);
    replay_free(&rb); /* twice is fine, and NULL */
    replay_free(NULL);
    /* a size past the address space is an error with a message, not a crash */
    CHECK_INT_EQ(
        replay_create(&rb, 1 << 30, 0, 1 << 30, INT64_MAX / 2, 3, CALF_DTYPE_F32, 1, 0, &err),
        CALF_EINVAL);
    CHECK(strstr(err.msg, "too large") != NULL);
    CHECK(rb.owned == NULL);
    /* caller's memory: not owned */
    static _Alignas(64) unsigned char mem[448];
    replay_init(&rb, 2, 0, 2, 3, 3, CALF_DTYPE_F32, 1, 0, mem);
    CHECK(rb.owned == NULL && (unsigned char *)rb.obs == mem);
    CHECK((unsigned char *)rb.terminated == mem + 384);
    replay_free(&rb); /* frees nothing */
}

static void test_wrap(void) {
    replay rb;
    CHECK_INT_EQ(replay_create(&rb, 2, 0, 2, 3, OD, CALF_DTYPE_F32, AD, 0, NULL), CALF_OK);
    add_step(&rb, 0);
    add_step(&rb, 1);
    CHECK(rb.stored == 2 && rb.next_slot == 2);
    CHECK_INT_EQ(replay_slot(&rb, 0), 0);
    CHECK(holds_step(&rb, 1, 0, 0) && holds_step(&rb, 1, 1, 1));
    add_step(&rb, 2);
    add_step(&rb, 3);
    add_step(&rb, 4);
    /* capacity 3 after 5 steps: steps 0 and 1 are gone, oldest first */
    CHECK(rb.stored == 3 && rb.next_slot == 2);
    for (int env = 0; env < 2; env++)
        for (int pos = 0; pos < 3; pos++) CHECK(holds_step(&rb, env, pos, pos + 2));
    CHECK_INT_EQ(replay_slot(&rb, 0), 2); /* step 2 sits in slot 2 */
    CHECK_INT_EQ(replay_slot(&rb, 1), 0); /* step 3 overwrote step 0 */
    CHECK_INT_EQ(replay_slot(&rb, 2), 1);
    /* a terminated byte other than 0 is stored as 1 */
    float o[2 * OD] = {0}, a[2 * AD] = {0}, r[2] = {0};
    uint8_t t[2] = {7, 0};
    replay_add_step(&rb, o, a, r, t, o, NULL);
    replay_item it;
    replay_get(&rb, 0, 2, &it);
    CHECK(it.terminated == 1 && it.reward == 0.0f);
    replay_get(&rb, 1, 2, &it);
    CHECK(it.terminated == 0);
    CHECK(holds_step(&rb, 0, 0, 3)); /* and step 2 went */
    replay_free(&rb);
}

/* The same global env's data, read from a 1-process replay and from splits. */
static void test_ownership(void) {
    enum { E = 5, CAP = 4, STEPS = 7 };
    const int splits[3][4] = {{0, 5, 5, 5}, {0, 3, 5, 5}, {0, 1, 2, 5}}; /* block ends */
    replay whole;
    CHECK_INT_EQ(replay_create(&whole, E, 0, E, CAP, OD, CALF_DTYPE_F32, AD, 0, NULL), CALF_OK);
    for (int s = 0; s < STEPS; s++) add_step(&whole, s);
    for (int sp = 0; sp < 3; sp++) {
        replay part[4];
        int begin = 0, n = 0;
        for (int p = 0; p < 4 && begin < E; p++) {
            int end = splits[sp][p];
            if (end == begin) continue;
            CHECK_INT_EQ(replay_create(&part[n], E, begin, end - begin, CAP, OD, CALF_DTYPE_F32,
                                       AD, 0, NULL),
                         CALF_OK);
            n++;
            begin = end;
        }
        for (int s = 0; s < STEPS; s++)
            for (int p = 0; p < n; p++) add_step(&part[p], s);
        for (int p = 0; p < n; p++) {
            CHECK(part[p].stored == whole.stored && part[p].next_slot == whole.next_slot);
            for (int env = part[p].env_begin; env < part[p].env_begin + part[p].env_count;
                 env++)
                for (int64_t pos = 0; pos < whole.stored; pos++) {
                    replay_item a, b;
                    replay_get(&whole, env, pos, &a);
                    replay_get(&part[p], env, pos, &b);
                    CHECK(memcmp(a.obs, b.obs, OD * sizeof(float)) == 0);
                    CHECK(memcmp(a.act, b.act, AD * sizeof(float)) == 0);
                    CHECK(memcmp(a.next_obs, b.next_obs, OD * sizeof(float)) == 0);
                    CHECK(a.reward == b.reward && a.terminated == b.terminated);
                    CHECK(holds_step(&part[p], env, pos, (int)pos + STEPS - CAP));
                }
        }
        for (int p = 0; p < n; p++) replay_free(&part[p]);
    }
    replay_free(&whole);
}

/* ---- sampling ---- */

static void test_sampler_contract(void) {
    CHECK(replay_stream_index(0, 0) == 0);
    CHECK(replay_stream_index(0, 5) == 5);
    CHECK(replay_stream_index(3, 7) == ((uint64_t)3 << 20 | 7));
    CHECK(replay_stream_index(1, 0) != replay_stream_index(0, (1 << 20) - 1));
    CHECK(replay_stream_index(((int64_t)1 << 43) - 1, (1 << 20) - 1) == UINT64_MAX >> 1);

    /* the documented stream, step by step */
    enum { B = 50 };
    const uint64_t seed = 12345;
    const int E = 6;
    const int64_t stored = 9;
    int env[B];
    int64_t pos[B];
    replay_sample(seed, 17, 3, E, stored, B, env, pos);
    calf_rng r;
    calf_rng_seed(&r, seed, ((uint64_t)17 << 20) | 3, CALF_RNG_REPLAY);
    const uint64_t n = (uint64_t)E * stored, t = (0 - n) % n;
    int same = 1;
    for (int j = 0; j < B; j++) {
        uint64_t x;
        do x = calf_rng_next(&r);
        while (x < t);
        uint64_t k = x % n;
        same &= env[j] == (int)(k / stored) && pos[j] == (int64_t)(k % stored);
    }
    CHECK(same);
    /* the same inputs, the same draws; a shorter list is a prefix */
    int env2[B];
    int64_t pos2[B];
    replay_sample(seed, 17, 3, E, stored, B, env2, pos2);
    CHECK(memcmp(env, env2, sizeof env) == 0 && memcmp(pos, pos2, sizeof pos) == 0);
    replay_sample(seed, 17, 3, E, stored, 20, env2, pos2);
    CHECK(memcmp(env, env2, 20 * sizeof env[0]) == 0 && memcmp(pos, pos2, 20 * sizeof pos[0]) == 0);
    /* another update, iteration or seed: other draws */
    const int64_t other[3][2] = {{17, 4}, {18, 3}, {17, 3}};
    for (int c = 0; c < 3; c++) {
        replay_sample(c == 2 ? seed + 1 : seed, other[c][0], (int)other[c][1], E, stored, B, env2,
                      pos2);
        CHECK(memcmp(env, env2, sizeof env) != 0 || memcmp(pos, pos2, sizeof pos) != 0);
    }
    for (int j = 0; j < B; j++) CHECK(env[j] >= 0 && env[j] < E && pos[j] >= 0 && pos[j] < stored);
    replay_sample(seed, 0, 0, E, stored, 0, env2, pos2); /* B = 0 */
}

static void test_below64(void) {
    calf_rng r;
    calf_rng_seed(&r, 7, 0, CALF_RNG_REPLAY);
    for (int i = 0; i < 100; i++) CHECK(replay_below64(&r, 1) == 0);
    /* n = 2^63 + 1: 2^64 mod n = 2^63 - 1, so nearly half the raw draws are rejected;
     * every accepted one is below n, and the rejections really happen */
    const uint64_t n = ((uint64_t)1 << 63) + 1;
    calf_rng a, b;
    calf_rng_seed(&a, 7, 1, CALF_RNG_REPLAY);
    b = a;
    int rejected = 0, high = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t v = replay_below64(&a, n);
        CHECK(v < n);
        high += v >= ((uint64_t)1 << 61) * 3; /* the top quarter of [0, n) */
        uint64_t x;
        while ((x = calf_rng_next(&b)) < ((uint64_t)1 << 63) - 1) rejected++;
        CHECK(x % n == v);
    }
    CHECK(rejected > 800 && rejected < 1200);
    CHECK(high > 180 && high < 320);
    /* and a value of n above 2^32, where a 32-bit draw would not reach */
    calf_rng_seed(&r, 7, 2, CALF_RNG_REPLAY);
    const uint64_t big = (uint64_t)3 << 33;
    int above = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t v = replay_below64(&r, big);
        CHECK(v < big);
        above += v >= ((uint64_t)1 << 33) * 2;
    }
    CHECK(above > 270 && above < 400);
}

/* Chi-square of counts over E x stored cells against the uniform expectation. */
static double chi_square(const long *count, int cells, long total) {
    double expect = (double)total / cells, x2 = 0.0;
    for (int c = 0; c < cells; c++) x2 += (count[c] - expect) * (count[c] - expect) / expect;
    return x2;
}

enum { CHI_E = 5, CHI_STORED = 7, CHI_CAP = 10, CHI_B = 700, CHI_UPDATES = 100 };
/* 34 degrees of freedom: mean 34, sd 8.2; 80 lies above the 0.99999 quantile (about
 * 77), while the broken samplers below score in the hundreds or more. */
static const double CHI_LIMIT = 80.0;

typedef void (*sampler_fn)(uint64_t seed, int64_t it, int up, int E, int64_t stored, int B,
                           int *env, int64_t *pos);

/* Broken on purpose, to show the test can fail: */
/* 8 random bits, reduced modulo E * stored (cells 0..10 of 35 get 8/256, the rest 7/256) */
static void modulo_bias_sampler(uint64_t seed, int64_t it, int up, int E, int64_t stored, int B,
                                int *env, int64_t *pos) {
    calf_rng r;
    calf_rng_seed(&r, seed, replay_stream_index(it, up), CALF_RNG_REPLAY);
    for (int j = 0; j < B; j++) {
        uint64_t k = (calf_rng_next(&r) >> 56) % ((uint64_t)E * stored);
        env[j] = (int)(k / stored);
        pos[j] = (int64_t)(k % stored);
    }
}
/* the env from the capacity instead of the stored count: the high envs starve */
static void env_major_sampler(uint64_t seed, int64_t it, int up, int E, int64_t stored, int B,
                              int *env, int64_t *pos) {
    calf_rng r;
    calf_rng_seed(&r, seed, replay_stream_index(it, up), CALF_RNG_REPLAY);
    for (int j = 0; j < B; j++) {
        uint64_t k = replay_below64(&r, (uint64_t)E * stored);
        env[j] = (int)(k / CHI_CAP);
        pos[j] = (int64_t)(k % stored);
    }
}
/* always the newest transition of a uniform env */
static void newest_sampler(uint64_t seed, int64_t it, int up, int E, int64_t stored, int B,
                           int *env, int64_t *pos) {
    calf_rng r;
    calf_rng_seed(&r, seed, replay_stream_index(it, up), CALF_RNG_REPLAY);
    for (int j = 0; j < B; j++) {
        env[j] = (int)replay_below64(&r, (uint64_t)E);
        pos[j] = stored - 1;
    }
}

static double sampler_chi_square(sampler_fn f) {
    long count[CHI_E * CHI_STORED] = {0};
    int env[CHI_B];
    int64_t pos[CHI_B];
    for (int up = 0; up < CHI_UPDATES; up++) {
        f(2024, 40 + up / 4, up % 4, CHI_E, CHI_STORED, CHI_B, env, pos);
        for (int j = 0; j < CHI_B; j++) {
            CALF_ASSERT(env[j] >= 0 && env[j] < CHI_E && pos[j] >= 0 && pos[j] < CHI_STORED);
            count[env[j] * CHI_STORED + pos[j]]++;
        }
    }
    return chi_square(count, CHI_E * CHI_STORED, (long)CHI_B * CHI_UPDATES);
}

static void test_uniformity(void) {
    double x2 = sampler_chi_square(replay_sample);
    printf("chi-square: sampler %.1f (limit %.0f)", x2, CHI_LIMIT);
    CHECK(x2 < CHI_LIMIT);
    CHECK(x2 > 10.0); /* suspiciously perfect would be a bug too (34 +- 8.2) */
    double bad[3] = {sampler_chi_square(modulo_bias_sampler), sampler_chi_square(env_major_sampler),
                     sampler_chi_square(newest_sampler)};
    printf(", modulo bias %.1f, env from capacity %.1f, always newest %.1f\n", bad[0], bad[1],
           bad[2]);
    for (int i = 0; i < 3; i++) CHECK(bad[i] > CHI_LIMIT);

    /* past 2^32 transitions in all: envs and position deciles stay uniform */
    enum { E = 3, DEC = 10, B = 3000 };
    const int64_t stored = (int64_t)3 << 30; /* E * stored = 9 * 2^30 > 2^33 */
    long count[E * DEC] = {0};
    int env[B];
    int64_t pos[B];
    replay_sample(99, 5, 0, E, stored, B, env, pos);
    for (int j = 0; j < B; j++) {
        CHECK(env[j] >= 0 && env[j] < E && pos[j] >= 0 && pos[j] < stored);
        count[env[j] * DEC + (int)(pos[j] * DEC / stored)]++;
    }
    /* 29 degrees of freedom: 0.99999 quantile about 70 */
    CHECK(chi_square(count, E * DEC, B) < 70.0);
}

/* ---- the owned selection ---- */

static void test_select_owned(void) {
    enum { E = 5, B = 40 };
    int env[B];
    int64_t pos[B];
    replay_sample(3, 1, 0, E, 6, B, env, pos);
    /* one process: all samples, env ascending, sample order within an env */
    int off[E + 1], order[B];
    int n = replay_select_owned(B, env, 0, E, off, order);
    CHECK_INT_EQ(n, B);
    CHECK_INT_EQ(off[0], 0);
    CHECK_INT_EQ(off[E], B);
    for (int e = 0; e < E; e++) {
        int cnt = 0;
        for (int j = 0; j < B; j++) cnt += env[j] == e;
        CHECK_INT_EQ(off[e + 1] - off[e], cnt);
        for (int i = off[e]; i < off[e + 1]; i++) {
            CHECK_INT_EQ(env[order[i]], e);
            if (i > off[e]) CHECK(order[i] > order[i - 1]); /* stable */
        }
    }
    /* any split: the processes' lists, in process order, are the 1-process list */
    const int blocks[3][2] = {{0, 2}, {2, 1}, {3, 2}};
    int cat[B], m = 0;
    for (int p = 0; p < 3; p++) {
        int o[3], ord[B];
        int k = replay_select_owned(B, env, blocks[p][0], blocks[p][1], o, ord);
        CHECK_INT_EQ(o[blocks[p][1]], k);
        for (int e = 0; e < blocks[p][1]; e++)
            CHECK_INT_EQ(o[e + 1] - o[e], off[blocks[p][0] + e + 1] - off[blocks[p][0] + e]);
        for (int i = 0; i < k; i++) cat[m++] = ord[i];
    }
    CHECK_INT_EQ(m, B);
    CHECK(memcmp(cat, order, sizeof order) == 0);
    /* an env with no samples gets an empty range; B = 0 selects nothing */
    const int few[4] = {4, 1, 4, 1};
    int o5[E + 1], ord5[4];
    CHECK_INT_EQ(replay_select_owned(4, few, 0, E, o5, ord5), 4);
    const int want_off[E + 1] = {0, 0, 2, 2, 2, 4}, want_ord[4] = {1, 3, 0, 2};
    CHECK(memcmp(o5, want_off, sizeof o5) == 0 && memcmp(ord5, want_ord, sizeof ord5) == 0);
    CHECK_INT_EQ(replay_select_owned(0, few, 0, E, o5, ord5), 0);
    CHECK_INT_EQ(o5[E], 0);

    /* gathering the selection: the same rows from a split as from the whole */
    replay whole, lo, hi;
    CHECK_INT_EQ(replay_create(&whole, E, 0, E, 6, OD, CALF_DTYPE_F32, AD, 0, NULL), CALF_OK);
    CHECK_INT_EQ(replay_create(&lo, E, 0, 2, 6, OD, CALF_DTYPE_F32, AD, 0, NULL), CALF_OK);
    CHECK_INT_EQ(replay_create(&hi, E, 2, 3, 6, OD, CALF_DTYPE_F32, AD, 0, NULL), CALF_OK);
    for (int s = 0; s < 8; s++) add_step(&whole, s), add_step(&lo, s), add_step(&hi, s);
    float ow[B * OD], aw[B * AD], rw[B], nw[B * OD];
    uint8_t tw[B];
    replay_gather(&whole, B, order, env, pos, ow, aw, rw, tw, nw, NULL);
    float os[B * OD], as[B * AD], rs[B], ns[B * OD];
    uint8_t ts[B];
    int ordlo[B], ordhi[B], offlo[3], offhi[4];
    int k = replay_select_owned(B, env, 0, 2, offlo, ordlo);
    replay_gather(&lo, k, ordlo, env, pos, os, as, rs, ts, ns, NULL);
    int k2 = replay_select_owned(B, env, 2, 3, offhi, ordhi);
    replay_gather(&hi, k2, ordhi, env, pos, os + k * OD, as + k * AD, rs + k, ts + k,
                  ns + k * OD, NULL);
    CHECK_INT_EQ(k + k2, B);
    CHECK(memcmp(ow, os, sizeof ow) == 0 && memcmp(aw, as, sizeof aw) == 0);
    CHECK(memcmp(rw, rs, sizeof rw) == 0 && memcmp(tw, ts, sizeof tw) == 0);
    CHECK(memcmp(nw, ns, sizeof nw) == 0);
    /* row i of the gather is sample order[i] */
    replay_item it;
    replay_get(&whole, env[order[7]], pos[order[7]], &it);
    CHECK(memcmp(ow + 7 * OD, it.obs, OD * sizeof(float)) == 0 && rw[7] == it.reward);
    /* idx NULL: rows in sample order; NULL outputs are skipped */
    replay_gather(&whole, 3, NULL, env, pos, ow, NULL, NULL, NULL, NULL, NULL);
    replay_get(&whole, env[2], pos[2], &it);
    CHECK(memcmp(ow + 2 * OD, it.obs, OD * sizeof(float)) == 0);
    replay_free(&whole);
    replay_free(&lo);
    replay_free(&hi);
}

/* ---- checkpoints ---- */

/* The replay section of a checkpoint written by processes with the given blocks: the
 * counters (from any process: they agree), then each env's record from its owner. */
static void save_split(replay *procs, int nprocs, ckpt_buf *b) {
    replay_save_counters(&procs[0], b);
    for (int p = 0; p < nprocs; p++)
        for (int e = 0; e < procs[p].env_count; e++) {
            unsigned char *at = bytes_buf_room(b, replay_env_record_bytes(&procs[p]));
            CHECK(at != NULL);
            if (at) replay_save_env(&procs[p], procs[p].env_begin + e, at);
        }
}

/* Every process reads the whole section, keeping its own envs. */
static int load_all(replay *rb, const ckpt_buf *b, calf_error *err) {
    ckpt_reader r;
    ckpt_reader_init(&r, b->data, b->len, "ckpt-7", err);
    replay_load_counters(rb, &r);
    for (int env = 0; env < rb->num_envs; env++) replay_load_env(rb, &r, env);
    return ckpt_reader_finish(&r);
}

static int make_split(replay *procs, int E, const int *sizes, int nprocs, int64_t cap) {
    int begin = 0;
    for (int p = 0; p < nprocs; p++) {
        if (replay_create(&procs[p], E, begin, sizes[p], cap, OD, CALF_DTYPE_F32, AD, 0, NULL) !=
            CALF_OK)
            return 0;
        begin += sizes[p];
    }
    return begin == E;
}

static void free_split(replay *procs, int nprocs) {
    for (int p = 0; p < nprocs; p++) replay_free(&procs[p]);
}

static void check_split_holds(replay *procs, int nprocs, int first_step) {
    for (int p = 0; p < nprocs; p++)
        for (int e = 0; e < procs[p].env_count; e++)
            for (int64_t pos = 0; pos < procs[p].stored; pos++)
                CHECK(holds_step(&procs[p], procs[p].env_begin + e, pos, first_step + (int)pos));
}

static void roundtrip(int steps) {
    enum { E = 5, CAP = 4 };
    const int two[2] = {3, 2}, three[3] = {2, 1, 2}, one[1] = {5};
    replay src[2], one_p[1], three_p[3];
    CHECK(make_split(src, E, two, 2, CAP));
    for (int s = 0; s < steps; s++) add_step(&src[0], s), add_step(&src[1], s);
    ckpt_buf b;
    ckpt_buf_init(&b);
    save_split(src, 2, &b);
    /* the bytes do not depend on the split that wrote them */
    CHECK(make_split(one_p, E, one, 1, CAP));
    for (int s = 0; s < steps; s++) add_step(&one_p[0], s);
    ckpt_buf b1;
    ckpt_buf_init(&b1);
    save_split(one_p, 1, &b1);
    CHECK(b.len == b1.len && memcmp(b.data, b1.data, b.len) == 0);
    replay_free(&one_p[0]);
    /* the size is what the format says */
    int64_t st = steps < CAP ? steps : CAP;
    CHECK_INT_EQ(b.len, 36 + E * (28 + st * (4 * (2 * OD + AD + 1) + 1)));

    /* restore onto 1 and onto 3 processes */
    calf_error err = {0};
    CHECK(make_split(one_p, E, one, 1, CAP));
    CHECK(make_split(three_p, E, three, 3, CAP));
    CHECK_INT_EQ(load_all(&one_p[0], &b, &err), CALF_OK);
    for (int p = 0; p < 3; p++) CHECK_INT_EQ(load_all(&three_p[p], &b, &err), CALF_OK);
    int first = steps - (int)st;
    check_split_holds(one_p, 1, first);
    check_split_holds(three_p, 3, first);
    CHECK(one_p[0].stored == st && three_p[2].stored == st);
    /* and they carry on as the uninterrupted one does */
    for (int s = steps; s < steps + 3; s++) {
        add_step(&src[0], s), add_step(&src[1], s), add_step(&one_p[0], s);
        for (int p = 0; p < 3; p++) add_step(&three_p[p], s);
    }
    int64_t st2 = steps + 3 < CAP ? steps + 3 : CAP;
    check_split_holds(src, 2, steps + 3 - (int)st2);
    check_split_holds(one_p, 1, steps + 3 - (int)st2);
    check_split_holds(three_p, 3, steps + 3 - (int)st2);
    ckpt_buf b3;
    ckpt_buf_init(&b3);
    save_split(three_p, 3, &b3);
    ckpt_buf_free(&b);
    save_split(src, 2, &b);
    CHECK(b.len == b3.len && memcmp(b.data, b3.data, b.len) == 0);
    ckpt_buf_free(&b);
    ckpt_buf_free(&b1);
    ckpt_buf_free(&b3);
    free_split(src, 2);
    free_split(one_p, 1);
    free_split(three_p, 3);
}

static void test_checkpoint_roundtrip(void) {
    roundtrip(6); /* wrapped */
    roundtrip(2); /* partly filled */
    roundtrip(4); /* exactly full */
    roundtrip(0); /* empty */
}

/* Load a damaged copy of b into a fresh 2-env replay; expect failure mentioning what. */
static void expect_refused(const ckpt_buf *b, int64_t cap, const char *what) {
    replay rb;
    CALF_ASSERT(replay_create(&rb, 2, 1, 1, cap, OD, CALF_DTYPE_F32, AD, 0, NULL) == CALF_OK);
    calf_error err = {0};
    int st = load_all(&rb, b, &err);
    CHECK_INT_EQ(st, CALF_EINVAL);
    CHECK(strstr(err.msg, "ckpt-7") != NULL);
    if (strstr(err.msg, what) == NULL) {
        fprintf(stderr, "expected \"%s\" in: %s\n", what, err.msg);
        CHECK(0);
    }
    replay_free(&rb);
}

static void test_checkpoint_damage(void) {
    enum { CAP = 3 };
    const int sizes[2] = {1, 1};
    replay src[2];
    CHECK(make_split(src, 2, sizes, 2, CAP));
    for (int s = 0; s < 5; s++) add_step(&src[0], s), add_step(&src[1], s);
    ckpt_buf good;
    ckpt_buf_init(&good);
    save_split(src, 2, &good);
    /* offsets: counters 36 bytes; env record: 28 header, obs 36, act 24, reward 12,
     * terminated 3, next_obs 36 = 139 */
    CHECK_INT_EQ(good.len, 36 + 2 * 139);
    {
        replay rb;
        calf_error err = {0};
        CALF_ASSERT(replay_create(&rb, 2, 1, 1, CAP, OD, CALF_DTYPE_F32, AD, 0, NULL) == CALF_OK);
        CHECK_INT_EQ(load_all(&rb, &good, &err), CALF_OK);
        check_split_holds(&rb, 1, 2);
        replay_free(&rb);
    }
    ckpt_buf bad;
    ckpt_buf_init(&bad);
    const size_t env1 = 36 + 139;
#define DAMAGED(stmt, what)                                   \
    do {                                                      \
        ckpt_buf_free(&bad);                                  \
        ckpt_put_bytes(&bad, good.data, good.len);            \
        stmt;                                                 \
        expect_refused(&bad, CAP, what);                      \
    } while (0)
    /* truncated anywhere */
    const size_t cuts[] = {0, 3, 20, 36, 40, env1 + 30, env1 + 100, good.len - 1};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) DAMAGED(bad.len = cuts[c], "");
    DAMAGED(bad.len = good.len - 1, "truncated next observation");
    DAMAGED(bad.len = 40, "overrun");
    /* trailing bytes */
    DAMAGED(ckpt_put_u32(&bad, 0), "unread bytes");
    /* a terminated flag other than 0 or 1 (env 1's second flag) */
    DAMAGED(bad.data[env1 + 28 + 36 + 24 + 12 + 1] = 2, "terminated flag 2");
    /* a NaN observation, an infinite reward, in env 1 (the owned one) and env 0 (skipped,
     * still checked) */
    const unsigned char nan_le[4] = {0x00, 0x00, 0xc0, 0x7f}, inf_le[4] = {0, 0, 0x80, 0x7f};
    DAMAGED(memcpy(bad.data + env1 + 28 + 8, nan_le, 4), "non-finite observation");
    DAMAGED(memcpy(bad.data + 36 + 28 + 36 + 24 + 4, inf_le, 4), "non-finite reward");
    DAMAGED(memcpy(bad.data + env1 + 139 - 4, nan_le, 4), "non-finite next observation");
    /* a record out of place: env 1's record where env 0's is expected */
    DAMAGED(bad.data[36 + 4] = 1, "env index");
    /* counters that disagree with this replay or with each other */
    DAMAGED(bad.data[4] = 3, "env count");
    DAMAGED(bad.data[12] = 4, "capacity");
    DAMAGED(bad.data[20] = 4, "more than its capacity");
    DAMAGED(bad.data[20] = 2, "transition count of the env"); /* records hold 3 */
    DAMAGED(bad.data[28] = 4, "observation size");
    DAMAGED(bad.data[32] = 1, "action size");
    DAMAGED(bad.data[env1 + 24] = 1, "action size");
    DAMAGED(memcpy(bad.data, "RPLX", 4), "expected section \"RPLC\"");
    DAMAGED(memcpy(bad.data + env1, "RPLC", 4), "expected section \"RPLE\"");
#undef DAMAGED
    /* a replay configured with another capacity refuses the section */
    expect_refused(&good, CAP + 1, "capacity");
    ckpt_buf_free(&bad);
    ckpt_buf_free(&good);
    free_split(src, 2);
}

/* ---- observations kept as bytes (CALF_DTYPE_U8) ---- */

/* The transition of a byte env: observations integers 0..255 (as an image env writes). */
static void make_byte_row(int env, int step, float *obs, float *act, float *rew, uint8_t *term,
                          float *next_obs) {
    make_row(env, step, obs, act, rew, term, next_obs);
    for (int k = 0; k < OD; k++) {
        obs[k] = (float)((env * 31 + step * 7 + k * 100) % 256);
        next_obs[k] = (float)((env * 31 + step * 7 + k * 100 + 255) % 256);
    }
}

static void add_byte_step(replay *rb, int step) {
    float obs[16 * OD], act[16 * AD], rew[16], nobs[16 * OD];
    uint8_t term[16];
    CALF_ASSERT(rb->env_count <= 16);
    for (int e = 0; e < rb->env_count; e++)
        make_byte_row(rb->env_begin + e, step, obs + e * OD, act + e * AD, rew + e, term + e,
                      nobs + e * OD);
    replay_add_step(rb, obs, act, rew, term, nobs, NULL);
}

/* The same transitions given as the env block's bytes (replay_add_step_u8). */
static void add_byte_step_u8(replay *rb, int step) {
    float obs[16 * OD], act[16 * AD], rew[16], nobs[16 * OD];
    uint8_t term[16], obs8[16 * OD], nobs8[16 * OD];
    CALF_ASSERT(rb->env_count <= 16);
    for (int e = 0; e < rb->env_count; e++)
        make_byte_row(rb->env_begin + e, step, obs + e * OD, act + e * AD, rew + e, term + e,
                      nobs + e * OD);
    for (int k = 0; k < rb->env_count * OD; k++)
        obs8[k] = (uint8_t)obs[k], nobs8[k] = (uint8_t)nobs[k];
    replay_add_step_u8(rb, obs8, act, rew, term, nobs8, NULL);
}

/* rb (bytes) gives back, as floats, what step `step` of env added at pos */
static int holds_byte_step(const replay *rb, int env, int64_t pos, int step) {
    float obs[OD], act[AD], rew, nobs[OD], go[OD], ga[AD], gr, gn[OD];
    uint8_t term, gt;
    make_byte_row(env, step, obs, act, &rew, &term, nobs);
    replay_gather(rb, 1, NULL, &env, &pos, go, ga, &gr, &gt, gn, NULL);
    return memcmp(go, obs, sizeof obs) == 0 && memcmp(ga, act, sizeof act) == 0 && gr == rew &&
           gt == term && memcmp(gn, nobs, sizeof nobs) == 0;
}

static void test_bytes(void) {
    /* The memory the issue names: a 100k-transition replay of MinAtar images as bytes, a
     * quarter of what floats take. Seaquest (10x10x10, DQN's one action float): obs and
     * next_obs 10^8 bytes each, action and reward 4e5 each, terminated 1e5, the total
     * rounded up to 64 bytes; 200.9 MB where floats took 800.9 MB. Freeway's 10x10x7:
     * 140.9 MB where floats took 560.9 MB. */
    CHECK_INT_EQ(replay_bytes(1, 100000, 1000, CALF_DTYPE_U8, 1, 0), 200900032);
    CHECK_INT_EQ(replay_bytes(1, 100000, 1000, CALF_DTYPE_F32, 1, 0), 800900032);
    CHECK_INT_EQ(replay_bytes(1, 100000, 700, CALF_DTYPE_U8, 1, 0), 140900032);
    CHECK_INT_EQ(replay_bytes(1, 100000, 700, CALF_DTYPE_F32, 1, 0), 560900032);
    CHECK_INT_EQ(replay_bytes(1, 100000, 700, 2, 1, 0), 0); /* no such dtype */
    replay big;
    calf_error err = {0};
    if (replay_create(&big, 1, 0, 1, 100000, 1000, CALF_DTYPE_U8, 1, 0, &err) == CALF_OK) {
        /* the allocation is the figure above, the byte arrays laid out inside it */
        const unsigned char *m = big.owned;
        CHECK((const unsigned char *)big.obs == m);
        CHECK((const unsigned char *)big.next_obs == m + 100000000);
        CHECK((const unsigned char *)big.act == m + 200000000);
        CHECK(big.terminated + 100000 <= m + 200900032);
        replay_free(&big);
    } else {
        fprintf(stderr, "test_bytes: the 200.9 MB replay was not allocated (%s); its layout "
                "is not checked\n", err.msg);
    }

    /* A byte replay gives back the floats it was given, wraps, and splits like a float one. */
    enum { E = 5, CAP = 4 };
    replay whole, lo, hi;
    CHECK_INT_EQ(replay_create(&whole, E, 0, E, CAP, OD, CALF_DTYPE_U8, AD, 0, NULL), CALF_OK);
    CHECK_INT_EQ(replay_create(&lo, E, 0, 2, CAP, OD, CALF_DTYPE_U8, AD, 0, NULL), CALF_OK);
    CHECK_INT_EQ(replay_create(&hi, E, 2, 3, CAP, OD, CALF_DTYPE_U8, AD, 0, NULL), CALF_OK);
    for (int s = 0; s < 6; s++)
        add_byte_step(&whole, s), add_byte_step(&lo, s), add_byte_step(&hi, s);
    for (int env = 0; env < E; env++)
        for (int64_t pos = 0; pos < CAP; pos++) {
            CHECK(holds_byte_step(&whole, env, pos, 2 + (int)pos));
            CHECK(holds_byte_step(env < 2 ? &lo : &hi, env, pos, 2 + (int)pos));
        }
    /* the checkpoint: bytes for observations, its own tags, the same bytes from any split */
    ckpt_buf b, b2;
    ckpt_buf_init(&b);
    ckpt_buf_init(&b2);
    save_split(&whole, 1, &b);
    replay two[2] = {lo, hi};
    save_split(two, 2, &b2);
    CHECK(b.len == b2.len && memcmp(b.data, b2.data, b.len) == 0);
    CHECK_INT_EQ(b.len, 36 + E * (28 + CAP * (2 * OD + 4 * (AD + 1) + 1)));
    CHECK(memcmp(b.data, "RPL8", 4) == 0 && memcmp(b.data + 36, "RPE8", 4) == 0);
    /* the env block's bytes stored as they are: the ring their floats make */
    replay raw8;
    CHECK_INT_EQ(replay_create(&raw8, E, 0, E, CAP, OD, CALF_DTYPE_U8, AD, 0, NULL), CALF_OK);
    for (int s = 0; s < 6; s++) add_byte_step_u8(&raw8, s);
    ckpt_buf b8;
    ckpt_buf_init(&b8);
    save_split(&raw8, 1, &b8);
    CHECK(b.len == b8.len && memcmp(b.data, b8.data, b.len) == 0);
    ckpt_buf_free(&b8);
    replay_free(&raw8);
    replay back;
    CHECK_INT_EQ(replay_create(&back, E, 1, 3, CAP, OD, CALF_DTYPE_U8, AD, 0, NULL), CALF_OK);
    CHECK_INT_EQ(load_all(&back, &b, &err), CALF_OK);
    for (int env = 1; env < 4; env++)
        for (int64_t pos = 0; pos < CAP; pos++)
            CHECK(holds_byte_step(&back, env, pos, 2 + (int)pos));
    /* neither kind loads as the other */
    replay flt;
    CHECK_INT_EQ(replay_create(&flt, E, 0, E, CAP, OD, CALF_DTYPE_F32, AD, 0, NULL), CALF_OK);
    CHECK_INT_EQ(load_all(&flt, &b, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "RPLC") != NULL);
    for (int s = 0; s < 6; s++) add_step(&flt, s);
    ckpt_buf bf;
    ckpt_buf_init(&bf);
    save_split(&flt, 1, &bf);
    replay_free(&back);
    CHECK_INT_EQ(replay_create(&back, E, 1, 3, CAP, OD, CALF_DTYPE_U8, AD, 0, NULL), CALF_OK);
    CHECK_INT_EQ(load_all(&back, &bf, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "RPL8") != NULL);
    ckpt_buf_free(&b);
    ckpt_buf_free(&b2);
    ckpt_buf_free(&bf);
    replay_free(&back);
    replay_free(&flt);
    replay_free(&whole);
    replay_free(&lo);
    replay_free(&hi);
}

/* The next mask global env `env` gives at step `step` (MD actions, one or two blocked). */
enum { MD = 3 };
static void make_mask(int env, int step, uint8_t *m) {
    for (int k = 0; k < MD; k++) m[k] = (uint8_t)((env + step + k) % 3 != 0);
    if ((env * 7 + step) % 4 == 0) m[(env + step) % MD] = 0; /* two blocked */
}

static void add_masked_step(replay *rb, int step) {
    float obs[16 * OD], act[16 * AD], rew[16], nobs[16 * OD];
    uint8_t term[16], mask[16 * MD];
    CALF_ASSERT(rb->env_count <= 16);
    for (int e = 0; e < rb->env_count; e++) {
        make_row(rb->env_begin + e, step, obs + e * OD, act + e * AD, rew + e, term + e,
                 nobs + e * OD);
        make_mask(rb->env_begin + e, step, mask + e * MD);
        if (e == 0) mask[0] = mask[0] ? 7 : 0; /* any nonzero byte is stored as 1 */
    }
    replay_add_step(rb, obs, act, rew, term, nobs, mask);
}

static int holds_masked_step(const replay *rb, int env, int64_t pos, int step) {
    uint8_t want[MD], got[MD] = {9, 9, 9};
    make_mask(env, step, want);
    replay_gather(rb, 1, NULL, &env, &pos, NULL, NULL, NULL, NULL, NULL, got);
    replay_item it;
    if (rb->obs_dtype == CALF_DTYPE_F32) {
        replay_get(rb, env, pos, &it);
        if (memcmp(it.next_mask, want, MD) != 0) return 0;
    }
    return holds_step(rb, env, pos, step) && memcmp(got, want, MD) == 0;
}

static void test_masks(void) {
    /* the masks after the five arrays, on their own 64-byte boundary: 448 + 64 for 18 bytes */
    CHECK_INT_EQ(replay_bytes(2, 3, 3, CALF_DTYPE_F32, 1, MD), 448 + 64);
    CHECK_INT_EQ(replay_bytes(2, 3, 3, CALF_DTYPE_F32, 1, -1), 0);
    enum { E = 5, CAP = 4 };
    replay whole, lo, hi, plain;
    CHECK_INT_EQ(replay_create(&whole, E, 0, E, CAP, OD, CALF_DTYPE_F32, AD, MD, NULL), CALF_OK);
    CHECK_INT_EQ(replay_create(&lo, E, 0, 2, CAP, OD, CALF_DTYPE_F32, AD, MD, NULL), CALF_OK);
    CHECK_INT_EQ(replay_create(&hi, E, 2, 3, CAP, OD, CALF_DTYPE_F32, AD, MD, NULL), CALF_OK);
    CHECK_INT_EQ(replay_create(&plain, E, 0, E, CAP, OD, CALF_DTYPE_F32, AD, 0, NULL), CALF_OK);
    CHECK(plain.next_mask == NULL && whole.next_mask != NULL);
    for (int s = 0; s < 6; s++)
        add_masked_step(&whole, s), add_masked_step(&lo, s), add_masked_step(&hi, s);
    for (int env = 0; env < E; env++)
        for (int64_t pos = 0; pos < CAP; pos++) {
            CHECK(holds_masked_step(&whole, env, pos, 2 + (int)pos));
            CHECK(holds_masked_step(env < 2 ? &lo : &hi, env, pos, 2 + (int)pos));
        }
    /* records: the masks after next_obs, their own tags, the same bytes from any split */
    ckpt_buf b, b2;
    ckpt_buf_init(&b);
    ckpt_buf_init(&b2);
    save_split(&whole, 1, &b);
    replay two[2] = {lo, hi};
    save_split(two, 2, &b2);
    CHECK(b.len == b2.len && memcmp(b.data, b2.data, b.len) == 0);
    CHECK_INT_EQ(b.len, 36 + E * (28 + CAP * (4 * (2 * OD + AD + 1) + 1 + MD)));
    CHECK(memcmp(b.data, "RPLM", 4) == 0 && memcmp(b.data + 36, "RPEM", 4) == 0);
    replay back;
    calf_error err = {0};
    CHECK_INT_EQ(replay_create(&back, E, 1, 3, CAP, OD, CALF_DTYPE_F32, AD, MD, NULL), CALF_OK);
    CHECK_INT_EQ(load_all(&back, &b, &err), CALF_OK);
    for (int env = 1; env < 4; env++)
        for (int64_t pos = 0; pos < CAP; pos++) CHECK(holds_masked_step(&back, env, pos, 2 + (int)pos));
    /* neither kind loads as the other */
    CHECK_INT_EQ(load_all(&plain, &b, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "RPLC") != NULL);
    /* a mask byte that is not 0 or 1 (env 2's last position's last action) */
    size_t rec = 28 + CAP * (4 * (2 * OD + AD + 1) + 1 + MD);
    size_t at = 36 + 3 * rec - 1;
    b.data[at] = 2;
    CHECK_INT_EQ(load_all(&back, &b, &err), CALF_EINVAL);
    char want[128];
    snprintf(want, sizeof want, "replay env 2: action mask byte 2 at offset %zu is not 0 or 1", at);
    CHECK(strstr(err.msg, want) != NULL);
    if (!strstr(err.msg, want)) fprintf(stderr, "got: %s\n", err.msg);
    ckpt_buf_free(&b);
    ckpt_buf_free(&b2);
    replay_free(&back);
    replay_free(&plain);
    replay_free(&whole);
    replay_free(&lo);
    replay_free(&hi);
}

int main(void) {
    test_layout();
    test_wrap();
    test_ownership();
    test_sampler_contract();
    test_below64();
    test_uniformity();
    test_select_owned();
    test_checkpoint_roundtrip();
    test_checkpoint_damage();
    test_bytes();
    test_masks();
    return test_report("test_replay");
}
