/* replay.c: per-env replay rings, the process-independent sampler and the replay's
 * checkpoint records (see replay.h). */
#include "algorithms/replay.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"

/* ------------------------------------------------------------------------- layout */

/* a * b into *out, false on size_t overflow */
static int mul_size(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

/* *at rounded up to 64, then n more bytes; false on overflow. *begin gets the start. */
static int place(size_t *at, size_t n, size_t *begin) {
    size_t a = *at;
    if (a > SIZE_MAX - 63) return 0;
    a = (a + 63) & ~(size_t)63;
    if (n > SIZE_MAX - a) return 0;
    *begin = a;
    *at = a + n;
    return 1;
}

typedef struct layout {
    size_t obs, next_obs, act, reward, terminated, next_mask, total;
} layout;

/* Bytes of one observation value in a replay of obs_dtype. */
static size_t obs_elem(int obs_dtype) { return obs_dtype == CALF_DTYPE_U8 ? 1 : sizeof(float); }

static int compute_layout(int env_count, int64_t capacity, int obs_dim, int obs_dtype,
                          int act_dim, int mask_dim, layout *l) {
    if (env_count < 1 || capacity < 1 || obs_dim < 1 || act_dim < 1 || mask_dim < 0) return 0;
    if (obs_dtype != CALF_DTYPE_F32 && obs_dtype != CALF_DTYPE_U8) return 0;
    if ((uint64_t)capacity > SIZE_MAX) return 0;
    size_t rows, obs_n, act_n, rew_n, mask_n, at = 0;
    if (!mul_size((size_t)env_count, (size_t)capacity, &rows)) return 0;
    if (!mul_size(rows, (size_t)obs_dim, &obs_n) || !mul_size(obs_n, obs_elem(obs_dtype), &obs_n))
        return 0;
    if (!mul_size(rows, (size_t)act_dim, &act_n) || !mul_size(act_n, sizeof(float), &act_n))
        return 0;
    if (!mul_size(rows, sizeof(float), &rew_n) || !mul_size(rows, (size_t)mask_dim, &mask_n))
        return 0;
    if (!place(&at, obs_n, &l->obs) || !place(&at, obs_n, &l->next_obs) ||
        !place(&at, act_n, &l->act) || !place(&at, rew_n, &l->reward) ||
        !place(&at, rows, &l->terminated))
        return 0;
    l->next_mask = 0; /* without masks the layout (and its size) is what it always was */
    if (mask_dim > 0 && !place(&at, mask_n, &l->next_mask)) return 0;
    return place(&at, 0, &l->total);
}

size_t replay_bytes(int env_count, int64_t capacity, int obs_dim, int obs_dtype, int act_dim,
                    int mask_dim) {
    layout l;
    return compute_layout(env_count, capacity, obs_dim, obs_dtype, act_dim, mask_dim, &l)
               ? l.total
               : 0;
}

void replay_init(replay *rb, int num_envs, int env_begin, int env_count, int64_t capacity,
                 int obs_dim, int obs_dtype, int act_dim, int mask_dim, void *mem) {
    CALF_ASSERT(env_begin >= 0 && env_count >= 1 && env_count <= num_envs - env_begin);
    layout l;
    CALF_ASSERT(compute_layout(env_count, capacity, obs_dim, obs_dtype, act_dim, mask_dim, &l));
    CALF_ASSERT(mem != NULL && (uintptr_t)mem % 64 == 0);
    unsigned char *m = mem;
    memset(rb, 0, sizeof *rb);
    rb->num_envs = num_envs;
    rb->env_begin = env_begin;
    rb->env_count = env_count;
    rb->obs_dim = obs_dim;
    rb->act_dim = act_dim;
    rb->obs_dtype = obs_dtype;
    rb->mask_dim = mask_dim;
    rb->capacity = capacity;
    rb->obs = m + l.obs;
    rb->next_obs = m + l.next_obs;
    rb->act = (float *)(void *)(m + l.act);
    rb->reward = (float *)(void *)(m + l.reward);
    rb->terminated = m + l.terminated;
    rb->next_mask = mask_dim > 0 ? m + l.next_mask : NULL;
}

int replay_create(replay *rb, int num_envs, int env_begin, int env_count, int64_t capacity,
                  int obs_dim, int obs_dtype, int act_dim, int mask_dim, calf_error *err) {
    memset(rb, 0, sizeof *rb);
    size_t n = replay_bytes(env_count, capacity, obs_dim, obs_dtype, act_dim, mask_dim);
    if (n == 0)
        return calf_error_set(err, CALF_EINVAL,
                              "replay buffer of %d envs x %" PRId64
                              " transitions (obs %d %s, action %d floats, mask %d bytes) is too "
                              "large to address",
                              env_count, capacity, obs_dim,
                              obs_dtype == CALF_DTYPE_U8 ? "bytes" : "floats", act_dim, mask_dim);
    void *mem = aligned_alloc(64, n); /* n is a multiple of 64, as C11 asks */
    if (!mem)
        return calf_error_set(err, CALF_ENOMEM,
                              "replay buffer: out of memory allocating %zu bytes (%d envs x %" PRId64
                              " transitions)",
                              n, env_count, capacity);
    replay_init(rb, num_envs, env_begin, env_count, capacity, obs_dim, obs_dtype, act_dim,
                mask_dim, mem);
    rb->owned = mem;
    return CALF_OK;
}

void replay_free(replay *rb) {
    if (!rb) return;
    free(rb->owned);
    memset(rb, 0, sizeof *rb);
}

/* ---------------------------------------------------------------------- add, read */

/* Observation row `row` of base (rb->obs or rb->next_obs). */
static void *obs_at(const replay *rb, void *base, size_t row) {
    return (unsigned char *)base + row * (size_t)rb->obs_dim * obs_elem(rb->obs_dtype);
}

/* One observation (obs_dim floats) into a row of base, in the replay's type. */
static void obs_put(const replay *rb, void *base, size_t row, const float *x) {
    const size_t od = (size_t)rb->obs_dim;
    if (rb->obs_dtype == CALF_DTYPE_U8) {
        uint8_t *d = obs_at(rb, base, row);
        for (size_t k = 0; k < od; k++) d[k] = (uint8_t)x[k];
    } else {
        memcpy(obs_at(rb, base, row), x, od * sizeof(float));
    }
}

/* A row of base back as obs_dim floats: what obs_put was given. */
static void obs_get(const replay *rb, void *base, size_t row, float *y) {
    const size_t od = (size_t)rb->obs_dim;
    if (rb->obs_dtype == CALF_DTYPE_U8) {
        const uint8_t *s = obs_at(rb, base, row);
        for (size_t k = 0; k < od; k++) y[k] = (float)s[k];
    } else {
        memcpy(y, obs_at(rb, base, row), od * sizeof(float));
    }
}

/* replay_add_step with the observations as floats (obs, next_obs) or, for a byte
 * replay, as bytes (obs8, next_obs8; the floats then NULL). */
static void add_step(replay *rb, const float *obs, const uint8_t *obs8, const float *act,
                     const float *reward, const uint8_t *terminated, const float *next_obs,
                     const uint8_t *next_obs8, const uint8_t *next_mask) {
    const size_t od = (size_t)rb->obs_dim, ad = (size_t)rb->act_dim, md = (size_t)rb->mask_dim;
    CALF_ASSERT(md == 0 || next_mask != NULL);
    for (int e = 0; e < rb->env_count; e++) {
        size_t row = (size_t)e * (size_t)rb->capacity + (size_t)rb->next_slot;
        if (obs8) {
            memcpy(obs_at(rb, rb->obs, row), obs8 + (size_t)e * od, od);
            memcpy(obs_at(rb, rb->next_obs, row), next_obs8 + (size_t)e * od, od);
        } else {
            obs_put(rb, rb->obs, row, obs + (size_t)e * od);
            obs_put(rb, rb->next_obs, row, next_obs + (size_t)e * od);
        }
        memcpy(rb->act + row * ad, act + (size_t)e * ad, ad * sizeof(float));
        rb->reward[row] = reward[e];
        rb->terminated[row] = terminated[e] ? 1 : 0;
        for (size_t k = 0; k < md; k++)
            rb->next_mask[row * md + k] = next_mask[(size_t)e * md + k] ? 1 : 0;
    }
    rb->next_slot = rb->next_slot + 1 == rb->capacity ? 0 : rb->next_slot + 1;
    if (rb->stored < rb->capacity) rb->stored++;
}

void replay_add_step(replay *rb, const float *obs, const float *act, const float *reward,
                     const uint8_t *terminated, const float *next_obs,
                     const uint8_t *next_mask) {
    add_step(rb, obs, NULL, act, reward, terminated, next_obs, NULL, next_mask);
}

void replay_add_step_u8(replay *rb, const uint8_t *obs, const float *act, const float *reward,
                        const uint8_t *terminated, const uint8_t *next_obs,
                        const uint8_t *next_mask) {
    CALF_ASSERT(rb->obs_dtype == CALF_DTYPE_U8);
    add_step(rb, NULL, obs, act, reward, terminated, NULL, next_obs, next_mask);
}

int64_t replay_slot(const replay *rb, int64_t pos) {
    CALF_ASSERT(pos >= 0 && pos < rb->stored);
    int64_t base = rb->next_slot - rb->stored; /* the oldest's slot, maybe minus capacity */
    if (base < 0) base += rb->capacity;
    int64_t s = base + pos;
    return s >= rb->capacity ? s - rb->capacity : s;
}

/* the row of (global env, pos) in the arrays */
static size_t row_of(const replay *rb, int env, int64_t pos) {
    CALF_ASSERT(env >= rb->env_begin && env - rb->env_begin < rb->env_count);
    return (size_t)(env - rb->env_begin) * (size_t)rb->capacity + (size_t)replay_slot(rb, pos);
}

void replay_get(const replay *rb, int env, int64_t pos, replay_item *out) {
    CALF_ASSERT(rb->obs_dtype == CALF_DTYPE_F32);
    size_t row = row_of(rb, env, pos);
    out->obs = obs_at(rb, rb->obs, row);
    out->act = rb->act + row * (size_t)rb->act_dim;
    out->reward = rb->reward[row];
    out->terminated = rb->terminated[row];
    out->next_obs = obs_at(rb, rb->next_obs, row);
    out->next_mask = rb->mask_dim > 0 ? rb->next_mask + row * (size_t)rb->mask_dim : NULL;
}

void replay_gather(const replay *rb, int n, const int *idx, const int *env, const int64_t *pos,
                   float *obs, float *act, float *reward, uint8_t *terminated,
                   float *next_obs, uint8_t *next_mask) {
    CALF_ASSERT(n >= 0);
    const size_t od = (size_t)rb->obs_dim, ad = (size_t)rb->act_dim, md = (size_t)rb->mask_dim;
    for (int i = 0; i < n; i++) {
        int s = idx ? idx[i] : i;
        size_t row = row_of(rb, env[s], pos[s]);
        if (obs) obs_get(rb, rb->obs, row, obs + (size_t)i * od);
        if (act) memcpy(act + (size_t)i * ad, rb->act + row * ad, ad * sizeof(float));
        if (reward) reward[i] = rb->reward[row];
        if (terminated) terminated[i] = rb->terminated[row];
        if (next_obs) obs_get(rb, rb->next_obs, row, next_obs + (size_t)i * od);
        if (next_mask && md) memcpy(next_mask + (size_t)i * md, rb->next_mask + row * md, md);
    }
}

/* ------------------------------------------------------------------------ sampling */

uint64_t replay_stream_index(int64_t iteration, int update) {
    CALF_ASSERT(iteration >= 0 && iteration < ((int64_t)1 << 43));
    CALF_ASSERT(update >= 0 && update < (1 << 20));
    return ((uint64_t)iteration << 20) | (uint64_t)update;
}

uint64_t replay_below64(calf_rng *r, uint64_t n) {
    CALF_ASSERT(n >= 1);
    const uint64_t t = (0 - n) % n; /* 2^64 mod n */
    uint64_t x;
    do x = calf_rng_next(r);
    while (x < t);
    return x % n;
}

void replay_sample(uint64_t seed, int64_t iteration, int update, int num_envs, int64_t stored,
                   int B, int *env, int64_t *pos) {
    CALF_ASSERT(num_envs >= 1 && stored >= 1 && B >= 0);
    CALF_ASSERT(stored <= INT64_MAX / num_envs);
    calf_rng r;
    calf_rng_seed(&r, seed, replay_stream_index(iteration, update), CALF_RNG_REPLAY);
    const uint64_t n = (uint64_t)num_envs * (uint64_t)stored, s = (uint64_t)stored;
    for (int j = 0; j < B; j++) {
        uint64_t k = replay_below64(&r, n);
        env[j] = (int)(k / s);
        pos[j] = (int64_t)(k % s);
    }
}

int replay_select_owned(int B, const int *env, int env_begin, int env_count, int *offsets,
                        int *order) {
    CALF_ASSERT(B >= 0 && env_count >= 0);
    for (int e = 0; e <= env_count; e++) offsets[e] = 0;
    /* counts at offsets[e + 1], then prefix sums: offsets[e] is e's first place */
    for (int j = 0; j < B; j++) {
        int e = env[j] - env_begin;
        if (e >= 0 && e < env_count) offsets[e + 1]++;
    }
    for (int e = 0; e < env_count; e++) offsets[e + 1] += offsets[e];
    /* place in sample order, advancing offsets[e] to e's end = (e + 1)'s start ... */
    for (int j = 0; j < B; j++) {
        int e = env[j] - env_begin;
        if (e >= 0 && e < env_count) order[offsets[e]++] = j;
    }
    /* ... so shift them back by one env */
    for (int e = env_count; e > 0; e--) offsets[e] = offsets[e - 1];
    offsets[0] = 0;
    return offsets[env_count];
}

/* --------------------------------------------------------------------- checkpoints */

/* A replay of bytes, and one with masks, has tags of its own, so that no kind loads as
 * another. */
const char *replay_counters_tag(int obs_dtype, bool masked) {
    if (masked) return obs_dtype == CALF_DTYPE_U8 ? "RPM8" : "RPLM";
    return obs_dtype == CALF_DTYPE_U8 ? "RPL8" : "RPLC";
}
static const char *counters_tag(const replay *rb) {
    return replay_counters_tag(rb->obs_dtype, rb->mask_dim > 0);
}
static const char *env_tag(const replay *rb) {
    if (rb->mask_dim > 0) return rb->obs_dtype == CALF_DTYPE_U8 ? "REM8" : "RPEM";
    return rb->obs_dtype == CALF_DTYPE_U8 ? "RPE8" : "RPLE";
}

void replay_save_counters(const replay *rb, ckpt_buf *b) {
    ckpt_put_tag(b, counters_tag(rb));
    ckpt_put_u64(b, (uint64_t)rb->num_envs);
    ckpt_put_u64(b, (uint64_t)rb->capacity);
    ckpt_put_u64(b, (uint64_t)rb->stored);
    ckpt_put_u32(b, (uint32_t)rb->obs_dim);
    ckpt_put_u32(b, (uint32_t)rb->act_dim);
}

/* The fixed part of an env's record: tag, env, stored, obs_dim, act_dim. */
enum { ENV_HEAD_BYTES = 4 + 8 + 8 + 4 + 4 };

size_t replay_env_record_bytes(const replay *rb) {
    size_t per = 2 * (size_t)rb->obs_dim * obs_elem(rb->obs_dtype) +
                 (size_t)(rb->act_dim + 1) * sizeof(float) + 1 + (size_t)rb->mask_dim;
    return ENV_HEAD_BYTES + (size_t)rb->stored * per;
}

/* width floats of each of the env's stored rows, oldest first, as little-endian bits at
 * p; returns the end */
static unsigned char *put_rows(const replay *rb, unsigned char *p, const float *base,
                               size_t width) {
    for (int64_t pos = 0; pos < rb->stored; pos++) {
        const float *src = base + (size_t)replay_slot(rb, pos) * width;
        for (size_t k = 0; k < width; k++, p += 4) bytes_put_f32(p, src[k]);
    }
    return p;
}

/* The env's stored observations of base (rb->obs or rb->next_obs), oldest first, at p
 * in the replay's type (floats as little-endian bits, or bytes); returns the end. */
static unsigned char *put_obs_rows(const replay *rb, unsigned char *p, void *base, size_t ring) {
    if (rb->obs_dtype != CALF_DTYPE_U8)
        return put_rows(rb, p, obs_at(rb, base, ring), (size_t)rb->obs_dim);
    const size_t od = (size_t)rb->obs_dim;
    for (int64_t pos = 0; pos < rb->stored; pos++, p += od)
        memcpy(p, obs_at(rb, base, ring + (size_t)replay_slot(rb, pos)), od);
    return p;
}

void replay_save_env(const replay *rb, int env, unsigned char *out) {
    CALF_ASSERT(env >= rb->env_begin && env - rb->env_begin < rb->env_count);
    const size_t ring = (size_t)(env - rb->env_begin) * (size_t)rb->capacity;
    const size_t ad = (size_t)rb->act_dim;
    unsigned char *p = out;
    memcpy(p, env_tag(rb), 4);
    bytes_put_le(p + 4, (uint64_t)env, 8);
    bytes_put_le(p + 12, (uint64_t)rb->stored, 8);
    bytes_put_le(p + 20, (uint32_t)rb->obs_dim, 4);
    bytes_put_le(p + 24, (uint32_t)rb->act_dim, 4);
    p += ENV_HEAD_BYTES;
    p = put_obs_rows(rb, p, rb->obs, ring);
    p = put_rows(rb, p, rb->act + ring * ad, ad);
    p = put_rows(rb, p, rb->reward + ring, 1);
    for (int64_t pos = 0; pos < rb->stored; pos++)
        *p++ = rb->terminated[ring + (size_t)replay_slot(rb, pos)];
    p = put_obs_rows(rb, p, rb->next_obs, ring);
    const size_t md = (size_t)rb->mask_dim;
    for (int64_t pos = 0; md && pos < rb->stored; pos++, p += md)
        memcpy(p, rb->next_mask + (ring + (size_t)replay_slot(rb, pos)) * md, md);
    CALF_ASSERT((size_t)(p - out) == replay_env_record_bytes(rb));
}

/* Fail r (stickily, keeping the first message) with a formatted reason. */
#define READ_FAIL(r, ...)                                                        \
    do {                                                                         \
        if ((r)->status == CALF_OK)                                              \
            (r)->status = calf_error_set((r)->err, CALF_EINVAL, __VA_ARGS__);    \
    } while (0)

/* Check that a value read at offset at equals the expected one. */
static int expect_u64(ckpt_reader *r, uint64_t want, const char *what) {
    size_t at = r->pos;
    uint64_t v;
    if (ckpt_get_u64(r, &v) == CALF_OK && v != want)
        READ_FAIL(r, "%s: replay %s at offset %zu is %" PRIu64 ", expected %" PRIu64, r->name,
                  what, at, v, want);
    return r->status;
}

static int expect_u32(ckpt_reader *r, uint32_t want, const char *what) {
    size_t at = r->pos;
    uint32_t v;
    if (ckpt_get_u32(r, &v) == CALF_OK && v != want)
        READ_FAIL(r, "%s: replay %s at offset %zu is %" PRIu32 ", expected %" PRIu32, r->name,
                  what, at, v, want);
    return r->status;
}

int replay_load_counters(replay *rb, ckpt_reader *r) {
    ckpt_get_tag(r, counters_tag(rb));
    expect_u64(r, (uint64_t)rb->num_envs, "env count");
    expect_u64(r, (uint64_t)rb->capacity, "capacity");
    size_t at = r->pos;
    uint64_t stored;
    if (ckpt_get_u64(r, &stored) == CALF_OK && stored > (uint64_t)rb->capacity)
        READ_FAIL(r, "%s: replay holds %" PRIu64 " transitions per env at offset %zu, more than "
                  "its capacity %" PRId64,
                  r->name, stored, at, rb->capacity);
    expect_u32(r, (uint32_t)rb->obs_dim, "observation size");
    expect_u32(r, (uint32_t)rb->act_dim, "action size");
    if (r->status != CALF_OK) return r->status;
    rb->stored = (int64_t)stored;
    rb->next_slot = rb->stored == rb->capacity ? 0 : rb->stored;
    return CALF_OK;
}

/* Claim n bytes at the reader's cursor, or fail it saying what did not fit (the bound
 * check ckpt_get_bytes makes, without the copy). */
static const unsigned char *claim(ckpt_reader *r, size_t n, const char *what, int env) {
    if (r->status != CALF_OK) return NULL;
    if (n > r->len - r->pos) {
        READ_FAIL(r, "%s: replay env %d: truncated %s: need %zu bytes at offset %zu, only %zu left",
                  r->name, env, what, n, r->pos, r->len - r->pos);
        return NULL;
    }
    const unsigned char *p = r->p + r->pos;
    r->pos += n;
    return p;
}

/* Read stored rows of width floats into dst's ring slots (dst NULL: check only). */
static void get_rows(replay *rb, ckpt_reader *r, float *dst, size_t width, const char *what,
                     int env) {
    size_t at = r->pos, n = (size_t)rb->stored * width; /* bounded by replay_bytes */
    const unsigned char *p = claim(r, n * 4, what, env);
    if (!p) return;
    for (size_t i = 0; i < n; i++) {
        float v = bytes_get_f32(p + 4 * i);
        if (!isfinite(v)) {
            READ_FAIL(r, "%s: replay env %d: non-finite %s value at offset %zu", r->name, env,
                      what, at + 4 * i);
            return;
        }
        /* position pos goes to slot pos (replay_load_counters reset the write slot) */
        if (dst) dst[i] = v;
    }
}

/* Read the env's stored observations into base's ring (own; else check only). */
static void get_obs_rows(replay *rb, ckpt_reader *r, void *base, size_t ring, int own,
                         const char *what, int env) {
    if (rb->obs_dtype != CALF_DTYPE_U8) {
        get_rows(rb, r, own ? obs_at(rb, base, ring) : NULL, (size_t)rb->obs_dim, what, env);
        return;
    }
    size_t n = (size_t)rb->stored * (size_t)rb->obs_dim; /* bounded by replay_bytes */
    const unsigned char *p = claim(r, n, what, env);
    if (p && own) memcpy(obs_at(rb, base, ring), p, n); /* every byte is a value 0..255 */
}

int replay_load_env(replay *rb, ckpt_reader *r, int env) {
    CALF_ASSERT(env >= 0 && env < rb->num_envs);
    int own = env >= rb->env_begin && env - rb->env_begin < rb->env_count;
    const size_t ring = own ? (size_t)(env - rb->env_begin) * (size_t)rb->capacity : 0;
    const size_t ad = (size_t)rb->act_dim;
    ckpt_get_tag(r, env_tag(rb));
    expect_u64(r, (uint64_t)env, "env index");
    expect_u64(r, (uint64_t)rb->stored, "transition count of the env");
    expect_u32(r, (uint32_t)rb->obs_dim, "observation size");
    expect_u32(r, (uint32_t)rb->act_dim, "action size");
    get_obs_rows(rb, r, rb->obs, ring, own, "observation", env);
    get_rows(rb, r, own ? rb->act + ring * ad : NULL, ad, "action", env);
    get_rows(rb, r, own ? rb->reward + ring : NULL, 1, "reward", env);
    size_t at = r->pos;
    const unsigned char *t = claim(r, (size_t)rb->stored, "terminated flags", env);
    for (int64_t pos = 0; t && pos < rb->stored; pos++) {
        if (t[pos] > 1) {
            READ_FAIL(r, "%s: replay env %d: terminated flag %u at offset %zu is not 0 or 1",
                      r->name, env, (unsigned)t[pos], at + (size_t)pos);
            break;
        }
        if (own) rb->terminated[ring + (size_t)pos] = t[pos];
    }
    get_obs_rows(rb, r, rb->next_obs, ring, own, "next observation", env);
    const size_t md = (size_t)rb->mask_dim, n = (size_t)rb->stored * md;
    at = r->pos;
    const unsigned char *m = md ? claim(r, n, "next action masks", env) : NULL;
    for (size_t i = 0; m && i < n; i++) {
        if (m[i] > 1) {
            READ_FAIL(r, "%s: replay env %d: action mask byte %u at offset %zu is not 0 or 1",
                      r->name, env, (unsigned)m[i], at + i);
            break;
        }
        if (own) rb->next_mask[ring * md + i] = m[i]; /* position pos is in slot pos */
    }
    return r->status;
}
