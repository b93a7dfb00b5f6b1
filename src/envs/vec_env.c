/* vec_env.c: a process's contiguous block of envs, stepped with auto-reset, plus the
 * fixed-size per-env records checkpoints are made of. Each env only ever touches its
 * own rng stream and rows, which is what makes the block split invisible. */
#include "envs/vec_env.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/live.h"
#include "base/mem.h"
#include "calf/vec_env.h"
#include "envs/envs.h"

/* The record stores the env's state bytes verbatim, i.e. in host byte order. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "vec_env records assume a little-endian host"
#endif

#define RECORD_MAGIC 0x31455643u /* "CVE1" read as little-endian bytes */

/* Record layout (offsets in bytes, all little-endian):
 *   0 u32 magic        4 u32 state bytes   8 u64 global index
 *  16 u64 rng.s[4]    48 i32 elapsed      52 i32 episode_length
 *  56 f64 episode_return                  64 f32 obs[obs_dim]
 *  64 + 4 obs_dim: the state (calf_env_save_state: a plain-data class's state_size
 *  bytes, a native class's save_size), then zero padding to a multiple of 8. */
#define REC_OBS 64

int vec_env_init(vec_env *ve, const char *env_name, uint64_t seed, int begin, int count,
                 calf_error *err) {
    CALF_ASSERT(ve != NULL);
    memset(ve, 0, sizeof *ve);
    if (begin < 0 || count < 1 || count > INT32_MAX - begin)
        return calf_error_set(err, CALF_EINVAL, "vec_env: bad env block begin=%d count=%d", begin,
                              count);
    const calf_env_class *cls = calf_env_lookup(env_name, err);
    if (!cls) return CALF_EINVAL;
    ve->begin = begin;
    ve->count = count;
    ve->obs_dim = cls->spec.obs_dim;
    ve->num_actions = cls->spec.num_actions;
    ve->action_dim = cls->spec.action_dim;
    ve->obs_high = cls->spec.obs_dtype != CALF_DTYPE_U8 ? 0
                   : cls->spec.obs_high > 0         ? cls->spec.obs_high
                                                    : 255;
    ve->action_ints = calf_env_action_ints(&cls->spec);
    bool ok = (ve->envs = mem_calloc((size_t)count, sizeof *ve->envs, err)) &&
              (ve->obs = mem_calloc((size_t)count * (size_t)ve->obs_dim, sizeof *ve->obs, err)) &&
              (ve->episode_return = mem_calloc((size_t)count, sizeof *ve->episode_return, err)) &&
              (ve->episode_length = mem_calloc((size_t)count, sizeof *ve->episode_length, err)) &&
              (ve->scratch_obs = mem_calloc(2 * (size_t)ve->obs_dim, sizeof *ve->scratch_obs, err));
    if (ok && cls->spec.action_mask)
        ok = (ve->mask = mem_calloc((size_t)count, (size_t)ve->num_actions, err)) &&
             (ve->final_mask = mem_calloc((size_t)count, (size_t)ve->num_actions, err));
    if (ok && cls->step_many && ve->action_dim > 0)
        ok = (ve->clipped = mem_calloc((size_t)count * (size_t)ve->action_dim, sizeof *ve->clipped,
                                       err)) != NULL;
    if (!ok) {
        vec_env_free(ve);
        return CALF_ENOMEM;
    }
    for (int i = 0; i < count; i++) {
        /* A native env's create may fail (its model, memory); envs made so far go. */
        int rc = calf_env_init(&ve->envs[i], env_name, seed, (uint64_t)begin + (uint64_t)i, err);
        if (rc != CALF_OK) {
            vec_env_free(ve);
            return rc;
        }
    }
    vec_env_reset(ve);
    return CALF_OK;
}

void vec_env_free(vec_env *ve) {
    if (!ve) return;
    if (ve->envs)
        for (int i = 0; i < ve->count; i++) calf_env_free(&ve->envs[i]);
    free(ve->envs);
    free(ve->obs);
    free(ve->obs8);
    free(ve->episode_return);
    free(ve->episode_length);
    free(ve->clipped);
    free(ve->scratch_obs);
    free(ve->mask);
    free(ve->final_mask);
    memset(ve, 0, sizeof *ve);
}

/* ---- what an env returns must be finite ---------------------------------------
 * A NaN or an infinity from an env (a plug-in's bug, a simulator that blew up) would
 * otherwise surface an iteration later as a gradient that is not finite, blamed on the
 * learning rate. The checks only read the outputs, so no bit changes. */

/* Whether all n floats are finite: the exponent of an infinity or a NaN is all ones.
 * Integer operations on the bits, so the loop vectorizes and costs next to nothing. */
static bool floats_finite(const float *x, size_t n) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], sizeof b);
        bad |= (~b & 0x7f800000u) == 0;
    }
    return bad == 0;
}

/* Whether all n floats are integers 0..high, what a CALF_DTYPE_U8 env writes (and calf
 * keeps as bytes): a NaN, an infinity, a fraction or a value out of range is not. In
 * float arithmetic only, so the loop vectorizes (a conversion to int and back in each
 * lane did not, and took MinAtar's blocks from 2.5 to 0.8 M steps/s): r is v rounded to
 * an integer, exact for 0 <= v < 2^23 in any rounding mode, so r == v says v is one. */
static bool floats_bytes(const float *x, size_t n, int high) {
    const float h = (float)high, two23 = 8388608.0f;
    uint32_t bad = 0;
    if (high == 1) { /* 0/1 images (MinAtar): two compares a lane (a NaN equals neither) */
        uint32_t ok = 1;
        for (size_t i = 0; i < n; i++) ok &= (uint32_t)((x[i] == 0.0f) | (x[i] == 1.0f));
        return ok != 0;
    }
    for (size_t i = 0; i < n; i++) {
        float v = x[i], r = (v + two23) - two23;
        bad |= (uint32_t)(!(v >= 0.0f) | !(v <= h) | (r != v)); /* a NaN fails v >= 0 */
    }
    return bad == 0;
}

/* Whether all n bytes are at most high (a byte class's values, written as bytes). A max
 * over the bytes, which vectorizes. */
static bool bytes_within(const uint8_t *x, size_t n, int high) {
    uint8_t m = 0;
    for (size_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m <= high;
}

/* What an env's observation row must be: finite, and for byte envs integers 0..high. */
static bool obs_valid(const vec_env *ve, const float *obs, size_t n) {
    return ve->obs_high ? floats_bytes(obs, n, ve->obs_high) : floats_finite(obs, n);
}

/* Records, if it is the first, that env local_i returned a non-finite value: its
 * observation row obs (obs_dim floats), or obs8 (obs_dim bytes) when obs is NULL, or
 * *reward (NULL after a reset). */
static void note_fault(vec_env *ve, int local_i, const float *obs, const uint8_t *obs8,
                       const float *reward) {
    if (ve->fault.status != CALF_OK) return;
    const calf_env *env = &ve->envs[local_i];
    const char *lib = calf_env_class_library(env->cls);
    char what[512]; /* what the env did: "returned a non-finite reward (nan)" */
    int status = CALF_EINVAL;
    int said = env->cls->failure ? env->cls->failure(env->state, what, sizeof what) : CALF_OK;
    if (said != CALF_OK) {
        status = said; /* the env says how it failed (a Python env: "raised ValueError: ...") */
    } else if (reward && !floats_finite(reward, 1)) {
        snprintf(what, sizeof what, "returned a non-finite reward (%g)", (double)*reward);
    } else if (!obs) {
        int j = 0;
        while (j < ve->obs_dim - 1 && obs8[j] <= ve->obs_high) j++;
        snprintf(what, sizeof what,
                 "returned observation value obs[%d] = %d, not an integer 0..%d as its uint8 "
                 "observation space says",
                 j, obs8[j], ve->obs_high);
    } else {
        int j = 0;
        while (j < ve->obs_dim - 1 && obs_valid(ve, obs + j, 1)) j++;
        if (floats_finite(obs + j, 1))
            snprintf(what, sizeof what,
                     "returned observation value obs[%d] = %.9g, not an integer 0..%d as its "
                     "uint8 observation space says",
                     j, (double)obs[j], ve->obs_high);
        else
            snprintf(what, sizeof what, "returned a non-finite observation (obs[%d] = %g)", j,
                     (double)obs[j]);
    }
    char when[64]; /* an env that says how it failed names the call ("reset() raised") */
    if (reward) snprintf(when, sizeof when, "step %d of its episode", env->elapsed_steps);
    else snprintf(when, sizeof when, said != CALF_OK ? "its" : "its reset");
    calf_error_set(&ve->fault, status,
                   "environment %s%s%s, env index %lld: %s %s; the environment is at fault, "
                   "not training",
                   env->cls->spec.name, lib ? " of plug-in " : "", lib ? lib : "",
                   (long long)ve->begin + local_i, when, what);
}

/* Checks the rows of envs [0, n) after a step: obs (n, obs_dim), reward (n). */
static void check_step(vec_env *ve, const float *obs, const float *reward) {
    const size_t n = (size_t)ve->count, od = (size_t)ve->obs_dim;
    if (obs_valid(ve, obs, n * od) && floats_finite(reward, n)) return;
    for (size_t i = 0; i < n; i++)
        if (!obs_valid(ve, obs + i * od, od) || !floats_finite(&reward[i], 1))
            note_fault(ve, (int)i, obs + i * od, NULL, &reward[i]);
}

/* The same for a block stepped in bytes: obs8 (n, obs_dim), reward (n). */
static void check_step_u8(vec_env *ve, const uint8_t *obs8, const float *reward) {
    const size_t n = (size_t)ve->count, od = (size_t)ve->obs_dim;
    if (bytes_within(obs8, n * od, ve->obs_high) && floats_finite(reward, n)) return;
    for (size_t i = 0; i < n; i++)
        if (!bytes_within(obs8 + i * od, od, ve->obs_high) || !floats_finite(&reward[i], 1))
            note_fault(ve, (int)i, NULL, obs8 + i * od, &reward[i]);
}

/* Env local_i's observation after a reset, at obs (obs_dim). */
static void check_reset(vec_env *ve, int local_i, const float *obs) {
    if (!obs_valid(ve, obs, (size_t)ve->obs_dim)) note_fault(ve, local_i, obs, NULL, NULL);
}

/* Whether the block keeps its observations as bytes (vec_env_use_u8), and whether its
 * class writes them so (else they are the floats it writes, made bytes). */
static bool u8_mode(const vec_env *ve) { return ve->obs8 != NULL; }
static bool u8_hooks(const vec_env *ve) { return ve->envs[0].cls->step_u8 != NULL; }

/* rows floats (integers 0..255, checked) as bytes */
static void floats_to_bytes(const float *x, size_t n, uint8_t *b) {
    for (size_t k = 0; k < n; k++) b[k] = (uint8_t)x[k];
}

/* Start env local_i's new episode in the block's form: its observation row written and
 * checked (the caller refreshes its action mask). */
static void reset_row(vec_env *ve, int local_i) {
    const size_t od = (size_t)ve->obs_dim, at = (size_t)local_i * od;
    calf_env *env = &ve->envs[local_i];
    if (u8_mode(ve) && u8_hooks(ve)) {
        env_reset_u8(env, ve->obs8 + at);
        if (!bytes_within(ve->obs8 + at, od, ve->obs_high))
            note_fault(ve, local_i, NULL, ve->obs8 + at, NULL);
    } else {
        calf_env_reset(env, ve->obs + at);
        check_reset(ve, local_i, ve->obs + at);
        if (u8_mode(ve)) floats_to_bytes(ve->obs + at, od, ve->obs8 + at);
    }
}

int vec_env_fault(const vec_env *ve, calf_error *err) {
    if (ve->fault.status == CALF_OK) return CALF_OK;
    return calf_error_set(err, ve->fault.status, "%s", ve->fault.msg);
}

/* Env local_i's row of ve->mask from its current state (when the class has a mask); a
 * mask that allows no action is the env's fault (calf_env_action_mask allowed all). */
static void refresh_mask(vec_env *ve, int local_i) {
    if (!ve->mask ||
        !calf_env_action_mask(&ve->envs[local_i], ve->mask + (size_t)local_i * ve->num_actions) ||
        ve->fault.status != CALF_OK)
        return;
    const calf_env *env = &ve->envs[local_i];
    const char *lib = calf_env_class_library(env->cls);
    calf_error_set(&ve->fault, CALF_EINVAL,
                   "environment %s%s%s, env index %lld: step %d of its episode: its action mask "
                   "allows no action%s; the environment is at fault, not training",
                   env->cls->spec.name, lib ? " of plug-in " : "", lib ? lib : "",
                   (long long)ve->begin + local_i, env->elapsed_steps,
                   env->cls->spec.num_action_dims > 0 ? " of a sub-action" : "");
}

int vec_env_reset(vec_env *ve) {
    for (int i = 0; i < ve->count; i++) {
        reset_row(ve, i);
        refresh_mask(ve, i);
        ve->episode_return[i] = 0.0;
        ve->episode_length[i] = 0;
    }
    return ve->fault.status;
}

/* Same clip as calf_env_step: per-dimension bounds, a NaN stays NaN. */
static void clip_actions(const calf_env_spec *spec, const float *u, float *out, int n) {
    const int ad = spec->action_dim;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < ad; j++) {
            float x = u[i * ad + j];
            out[i * ad + j] = x < spec->action_low[j]    ? spec->action_low[j]
                              : x > spec->action_high[j] ? spec->action_high[j]
                                                         : x;
        }
}

int vec_env_use_u8(vec_env *ve, calf_error *err) {
    CALF_ASSERT(ve->obs_high > 0);
    if (u8_mode(ve)) return CALF_OK;
    const size_t n = (size_t)ve->count * (size_t)ve->obs_dim;
    if (!(ve->obs8 = mem_calloc(n, 1, err))) return CALF_ENOMEM;
    floats_to_bytes(ve->obs, n, ve->obs8); /* checked as the env wrote them */
    if (u8_hooks(ve)) { /* its floats are never written again */
        free(ve->obs);
        ve->obs = NULL;
    }
    return CALF_OK;
}

/* One step of the block in its form, for vec_env_step and vec_env_step_u8: final_obs
 * (count, obs_dim) floats or bytes, or NULL. */
static int step_block(vec_env *ve, const int *actions, const float *cont_actions,
                      float *restrict reward, uint8_t *restrict terminated,
                      uint8_t *restrict truncated, void *restrict final_obs,
                      double *restrict ep_return, int *restrict ep_length) {
    /* Done in passes over the block (step, flags, copy, statistics, resets) so each
     * pass is a tight loop; restrict locals because the uint8_t outputs could alias
     * anything as far as the compiler knows. */
    const int n = ve->count, od = ve->obs_dim, ad = ve->action_dim;
    calf_env *restrict envs = ve->envs;
    double *restrict run_return = ve->episode_return;
    int *restrict run_length = ve->episode_length;
    const calf_env_class *cls = envs[0].cls;
    CALF_ASSERT(ad > 0 ? cont_actions != NULL : actions != NULL);
    const int ai = ve->action_ints;
    const bool bytes = u8_mode(ve) && u8_hooks(ve); /* the class writes bytes */
    void (*many_f)(calf_env *, int, const int *, const float *, float *, float *, uint8_t *) =
        bytes ? NULL : cls->step_many;
    void (*many_b)(calf_env *, int, const int *, const float *, uint8_t *, float *, uint8_t *) =
        bytes ? cls->step_many_u8 : NULL;
    if ((many_f || many_b) && ai == 1) {
        const float *u = NULL;
        if (ad > 0) {
            clip_actions(&cls->spec, cont_actions, ve->clipped, n);
            u = ve->clipped;
            for (int i = 0; i < n; i++) /* what calf_env_step leaves there */
                memcpy(envs[i].clipped, u + (size_t)i * ad, (size_t)ad * sizeof *u);
        } else {
            for (int i = 0; i < n; i++) CALF_ASSERT(actions[i] >= 0 && actions[i] < ve->num_actions);
        }
        if (many_b) many_b(envs, n, actions, u, ve->obs8, reward, terminated);
        else many_f(envs, n, actions, u, ve->obs, reward, terminated);
        /* The time limit, exactly as calf_env_step applies it. */
        const int limit = cls->spec.max_episode_steps;
        for (int i = 0; i < n; i++) {
            int elapsed = ++envs[i].elapsed_steps;
            terminated[i] = terminated[i] != 0;
            truncated[i] = !terminated[i] && elapsed >= limit;
        }
    } else {
        for (int i = 0; i < n; i++) {
            int term, trunc;
            if (bytes)
                env_step_u8(&envs[i], ad > 0 ? 0 : actions[i],
                            ad > 0 ? cont_actions + (size_t)i * (size_t)ad : NULL,
                            ve->obs8 + (size_t)i * (size_t)od, &reward[i], &term, &trunc);
            else
                calf_env_step_actions(&envs[i], ad > 0 ? NULL : actions + (size_t)i * ai,
                                      ad > 0 ? cont_actions + (size_t)i * (size_t)ad : NULL,
                                      ve->obs + (size_t)i * (size_t)od, &reward[i], &term,
                                      &trunc);
            terminated[i] = (uint8_t)term;
            truncated[i] = (uint8_t)trunc;
        }
    }
    const size_t all = (size_t)n * (size_t)od;
    if (bytes) {
        check_step_u8(ve, ve->obs8, reward);
    } else {
        check_step(ve, ve->obs, reward);
        if (u8_mode(ve)) floats_to_bytes(ve->obs, all, ve->obs8);
    }
    /* Before any reset, the block's observations are exactly the final ones. */
    if (final_obs && u8_mode(ve)) memcpy(final_obs, ve->obs8, all);
    else if (final_obs) memcpy(final_obs, ve->obs, all * sizeof(float));
    for (int i = 0; i < n; i++) {
        int done = terminated[i] | truncated[i];
        double ret = run_return[i] + reward[i];
        int len = run_length[i] + 1;
        if (ep_return) ep_return[i] = done ? ret : 0.0;
        if (ep_length) ep_length[i] = done ? len : 0;
        run_return[i] = done ? 0.0 : ret;
        run_length[i] = done ? 0 : len;
    }
    /* A truncated episode's last state still has actions to bootstrap over (a TD target's
     * max); its reset would lose them. An empty one reads as all valid. */
    const size_t na = (size_t)ve->num_actions;
    for (int i = 0; ve->final_mask && i < n; i++)
        if (truncated[i]) calf_env_action_mask(&envs[i], ve->final_mask + (size_t)i * na);
    for (int i = 0; i < n; i++)
        if (terminated[i] | truncated[i]) reset_row(ve, i);
    for (int i = 0; ve->mask && i < n; i++) {
        refresh_mask(ve, i);
        uint8_t *fm = ve->final_mask + (size_t)i * na;
        if (terminated[i]) memset(fm, 1, na);
        else if (!truncated[i]) memcpy(fm, ve->mask + (size_t)i * na, na);
    }
    return ve->fault.status;
}

int vec_env_step(vec_env *ve, const int *actions, const float *cont_actions, float *reward,
                 uint8_t *terminated, uint8_t *truncated, float *final_obs, double *ep_return,
                 int *ep_length) {
    CALF_ASSERT(!u8_mode(ve));
    return step_block(ve, actions, cont_actions, reward, terminated, truncated, final_obs,
                      ep_return, ep_length);
}

int vec_env_step_u8(vec_env *ve, const int *actions, const float *cont_actions, float *reward,
                    uint8_t *terminated, uint8_t *truncated, uint8_t *final_obs,
                    double *ep_return, int *ep_length) {
    CALF_ASSERT(u8_mode(ve));
    return step_block(ve, actions, cont_actions, reward, terminated, truncated, final_obs,
                      ep_return, ep_length);
}

/* ---- records ---------------------------------------------------------------- */

static void put_u32(unsigned char *p, uint32_t v) { bytes_put_le(p, v, 4); }
static void put_u64(unsigned char *p, uint64_t v) { bytes_put_le(p, v, 8); }
static uint32_t get_u32(const unsigned char *p) { return (uint32_t)bytes_get_le(p, 4); }
static uint64_t get_u64(const unsigned char *p) { return bytes_get_le(p, 8); }

static size_t state_offset(const vec_env *ve) { return REC_OBS + 4 * (size_t)ve->obs_dim; }

size_t vec_env_record_size(const vec_env *ve) {
    CALF_ASSERT(ve->envs != NULL);
    size_t n = state_offset(ve) + calf_env_saved_size(ve->envs[0].cls);
    return (n + 7) & ~(size_t)7;
}

void vec_env_save_record(const vec_env *ve, int local_i, void *rec) {
    CALF_ASSERT(local_i >= 0 && local_i < ve->count);
    const calf_env *env = &ve->envs[local_i];
    size_t size = vec_env_record_size(ve), ss = calf_env_saved_size(env->cls);
    unsigned char *p = rec;
    memset(p, 0, size); /* padding is part of the bytes a checkpoint CRCs */
    put_u32(p + 0, RECORD_MAGIC);
    put_u32(p + 4, (uint32_t)ss);
    put_u64(p + 8, (uint64_t)ve->begin + (uint64_t)local_i);
    bytes_put_rng(p + 16, &env->rng);
    put_u32(p + 48, (uint32_t)env->elapsed_steps);
    put_u32(p + 52, (uint32_t)ve->episode_length[local_i]);
    bytes_put_f64(p + 56, ve->episode_return[local_i]);
    const size_t at = (size_t)local_i * (size_t)ve->obs_dim;
    for (int j = 0; j < ve->obs_dim; j++) /* a byte block's as the floats they are */
        bytes_put_f32(p + REC_OBS + 4 * (size_t)j,
                      u8_mode(ve) ? (float)ve->obs8[at + (size_t)j] : ve->obs[at + (size_t)j]);
    calf_env_save_state(env, p + state_offset(ve));
}

int vec_env_load_record(vec_env *ve, int local_i, const void *rec, calf_error *err) {
    CALF_ASSERT(local_i >= 0 && local_i < ve->count);
    calf_env *env = &ve->envs[local_i];
    const calf_env_spec *spec = &env->cls->spec;
    const unsigned char *p = rec;
    uint64_t index = (uint64_t)ve->begin + (uint64_t)local_i;
    if (get_u32(p) != RECORD_MAGIC)
        return calf_error_set(err, CALF_EINVAL, "env %llu record: bad magic 0x%08x",
                              (unsigned long long)index, (unsigned)get_u32(p));
    size_t ss = calf_env_saved_size(env->cls);
    if (get_u32(p + 4) != ss)
        return calf_error_set(err, CALF_EINVAL,
                              "env %llu record: state size %u does not match %s (%zu bytes)",
                              (unsigned long long)index, (unsigned)get_u32(p + 4), spec->name, ss);
    if (get_u64(p + 8) != index)
        return calf_error_set(err, CALF_EINVAL, "env %llu record: holds env %llu",
                              (unsigned long long)index, (unsigned long long)get_u64(p + 8));
    calf_rng rng;
    if (!bytes_get_rng(p + 16, &rng))
        return calf_error_set(err, CALF_EINVAL, "env %llu record: all-zero rng state",
                              (unsigned long long)index);
    int32_t elapsed = (int32_t)get_u32(p + 48), length = (int32_t)get_u32(p + 52);
    /* A finished episode is reset at once, so a stored one is always mid-episode. */
    if (elapsed < 0 || elapsed >= spec->max_episode_steps)
        return calf_error_set(err, CALF_EINVAL,
                              "env %llu record: elapsed_steps %d not in [0, %d)",
                              (unsigned long long)index, (int)elapsed, spec->max_episode_steps);
    if (length != elapsed)
        return calf_error_set(err, CALF_EINVAL,
                              "env %llu record: episode length %d differs from elapsed steps %d",
                              (unsigned long long)index, (int)length, (int)elapsed);
    double ret = bytes_get_f64(p + 56);
    if (!isfinite(ret))
        return calf_error_set(err, CALF_EINVAL, "env %llu record: episode return is not finite",
                              (unsigned long long)index);
    float *obs = ve->scratch_obs, *want = ve->scratch_obs + ve->obs_dim;
    for (int j = 0; j < ve->obs_dim; j++) {
        obs[j] = bytes_get_f32(p + REC_OBS + 4 * (size_t)j);
        if (!isfinite(obs[j]))
            return calf_error_set(err, CALF_EINVAL, "env %llu record: observation %d is not finite",
                                  (unsigned long long)index, j);
        if (u8_mode(ve) && !floats_bytes(&obs[j], 1, ve->obs_high))
            return calf_error_set(err, CALF_EINVAL,
                                  "env %llu record: observation %d = %.9g is not an integer 0..%d",
                                  (unsigned long long)index, j, (double)obs[j], ve->obs_high);
    }
    /* Aligned copies: the record may not be aligned. */
    const unsigned char *state = p + state_offset(ve);
    void *tmp = mem_alloc(ss, err);
    if (!tmp) return CALF_ENOMEM;
    memcpy(tmp, state, ss);
    int rc = CALF_OK;
    if (!env->cls->load) {
        /* Plain data is opaque here; the class can at least tell whether it produces
         * the stored observation, before anything is overwritten. */
        if (env->cls->observe) {
            env->cls->observe(tmp, want);
            if (memcmp(want, obs, (size_t)ve->obs_dim * sizeof *obs) != 0)
                rc = calf_error_set(err, CALF_EINVAL,
                                    "env %llu record: observation does not match the %s state",
                                    (unsigned long long)index, spec->name);
        }
        if (rc == CALF_OK) memcpy(env->state, tmp, ss);
    } else {
        /* A native state is checked by loading it; the old one, kept aside, comes back
         * if the loaded one does not give the stored observation. */
        void *old = mem_alloc(ss, err);
        if (!old) {
            free(tmp);
            return CALF_ENOMEM;
        }
        calf_env_save_state(env, old);
        calf_error sub;
        calf_error_clear(&sub);
        rc = calf_env_load_state(env, tmp, &sub);
        if (rc != CALF_OK) {
            calf_error_set(err, rc, "env %llu record: %s", (unsigned long long)index, sub.msg);
        } else if (env->cls->observe) {
            env->cls->observe(env->state, want);
            if (memcmp(want, obs, (size_t)ve->obs_dim * sizeof *obs) != 0) {
                rc = calf_error_set(err, CALF_EINVAL,
                                    "env %llu record: observation does not match the %s state",
                                    (unsigned long long)index, spec->name);
                int back = calf_env_load_state(env, old, &sub);
                CALF_ASSERT(back == CALF_OK); /* it was saved from a valid state */
            }
        }
        free(old);
    }
    free(tmp);
    if (rc != CALF_OK) return rc;
    env->rng = rng;
    if (env->cls->load_restarts && env->cls->load_restarts(env->state)) {
        /* nothing to continue: a new episode, drawn from the stored stream */
        reset_row(ve, local_i);
        refresh_mask(ve, local_i);
        ve->episode_length[local_i] = 0;
        ve->episode_return[local_i] = 0.0;
        return CALF_OK;
    }
    env->elapsed_steps = elapsed;
    ve->episode_length[local_i] = length;
    ve->episode_return[local_i] = ret;
    if (u8_mode(ve))
        floats_to_bytes(obs, (size_t)ve->obs_dim, ve->obs8 + (size_t)local_i * (size_t)ve->obs_dim);
    else
        memcpy(ve->obs + (size_t)local_i * (size_t)ve->obs_dim, obs,
               (size_t)ve->obs_dim * sizeof *obs);
    refresh_mask(ve, local_i);
    return CALF_OK;
}

/* ---- the public handle (calf/vec_env.h) -------------------------------------------
 * A vec_env behind an opaque pointer, stepped by the same vec_env_step the trainer
 * calls; only the argument checks a library owes its caller are added. */

struct calf_vec_env {
    live_link live; /* first: the open handles' list (base/live.h) */
    vec_env ve;
    bool fresh; /* neither reset nor stepped since open: reset returns open's episodes */
    /* Once a byte call (calf_vec_env_reset_u8, _step_u8) made the block a byte block
     * (vec_env_use_u8): (count, obs_dim) bytes, the final observations a float call's
     * step writes before they are widened for it; NULL until then. */
    uint8_t *final8;
};

/* The open handles: a NULL, closed or never-opened one given to a call is refused
 * (calf/vec_env.h says how) by comparing pointers, never by reading through it. */
static live_set vec_envs = LIVE_SET_INIT;

static bool open_handle(const calf_vec_env *v) { return live_has(&vec_envs, v); }

/* CALF_OK when v is open, else CALF_EINVAL naming the call. */
static int check_handle(const calf_vec_env *v, const char *call, calf_error *err) {
    if (!v) return calf_error_set(err, CALF_EINVAL, "%s: the vec_env is NULL", call);
    if (!open_handle(v))
        return calf_error_set(err, CALF_EINVAL, "%s: %p is not an open vec_env (closed "
                              "already?)", call, (const void *)v);
    return CALF_OK;
}

int calf_vec_env_open(const char *env_name, const char *env_lib, uint64_t seed, int first_index,
                      int count, calf_vec_env **out, calf_error *err) {
    if (!out) return calf_error_set(err, CALF_EINVAL, "calf_vec_env_open: out is NULL");
    *out = NULL;
    if (!env_name) return calf_error_set(err, CALF_EINVAL, "calf_vec_env_open: no environment name");
    if (env_lib) {
        int rc = calf_env_load_library(env_lib, err);
        if (rc != CALF_OK) return rc;
    }
    calf_vec_env *v = mem_calloc(1, sizeof *v, err);
    if (!v) return CALF_ENOMEM;
    int rc = vec_env_init(&v->ve, env_name, seed, first_index, count, err);
    if (rc != CALF_OK) {
        free(v);
        return rc;
    }
    v->fresh = true;
    live_add(&vec_envs, v);
    *out = v;
    return CALF_OK;
}

void calf_vec_env_close(calf_vec_env *v) {
    if (!live_take(&vec_envs, v)) return; /* NULL, or closed already: nothing to do */
    vec_env_free(&v->ve);
    free(v->final8);
    free(v);
}

static const calf_env_spec *handle_spec(const calf_vec_env *v) { return &v->ve.envs[0].cls->spec; }

/* The queries answer -1 (NULL for pointers) for a handle that is not open. */
int calf_vec_env_count(const calf_vec_env *v) { return open_handle(v) ? v->ve.count : -1; }
int calf_vec_env_first_index(const calf_vec_env *v) { return open_handle(v) ? v->ve.begin : -1; }
const char *calf_vec_env_name(const calf_vec_env *v) {
    return open_handle(v) ? handle_spec(v)->name : NULL;
}
int calf_vec_env_obs_dim(const calf_vec_env *v) { return open_handle(v) ? v->ve.obs_dim : -1; }
int calf_vec_env_discrete(const calf_vec_env *v) {
    return open_handle(v) ? v->ve.action_dim == 0 : -1;
}
int calf_vec_env_num_actions(const calf_vec_env *v) {
    return open_handle(v) ? v->ve.num_actions : -1;
}
int calf_vec_env_action_dim(const calf_vec_env *v) { return open_handle(v) ? v->ve.action_dim : -1; }
int calf_vec_env_action_dims(const calf_vec_env *v) {
    return open_handle(v) ? handle_spec(v)->num_action_dims : -1;
}
const int *calf_vec_env_action_nvec(const calf_vec_env *v) {
    return open_handle(v) && handle_spec(v)->num_action_dims > 0 ? handle_spec(v)->action_nvec
                                                                 : NULL;
}
const uint8_t *calf_vec_env_action_mask(const calf_vec_env *v) {
    return open_handle(v) ? v->ve.mask : NULL;
}
const float *calf_vec_env_action_low(const calf_vec_env *v) {
    return open_handle(v) && v->ve.action_dim ? handle_spec(v)->action_low : NULL;
}
const float *calf_vec_env_action_high(const calf_vec_env *v) {
    return open_handle(v) && v->ve.action_dim ? handle_spec(v)->action_high : NULL;
}
int calf_vec_env_max_episode_steps(const calf_vec_env *v) {
    return open_handle(v) ? handle_spec(v)->max_episode_steps : -1;
}

int calf_vec_env_obs_high(const calf_vec_env *v) { return open_handle(v) ? v->ve.obs_high : -1; }

static size_t obs_count(const calf_vec_env *v) { return (size_t)v->ve.count * (size_t)v->ve.obs_dim; }

/* bytes as the floats they are */
static void widen(const uint8_t *b, size_t n, float *x) {
    for (size_t k = 0; k < n; k++) x[k] = (float)b[k];
}

static void copy_obs(const calf_vec_env *v, float *obs) {
    if (v->ve.obs8) widen(v->ve.obs8, obs_count(v), obs);
    else memcpy(obs, v->ve.obs, obs_count(v) * sizeof *obs);
}

/* The first byte call makes the block a byte block, for good: CALF_OK, CALF_EINVAL for
 * an env whose observations are floats, CALF_ENOMEM. */
static int use_bytes(calf_vec_env *v, const char *call, calf_error *err) {
    if (v->ve.obs8) return CALF_OK;
    if (!v->ve.obs_high)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: %s's observations are floats, not bytes (its observation "
                              "space is not uint8)",
                              call, handle_spec(v)->name);
    if (!(v->final8 = mem_calloc(obs_count(v), 1, err))) return CALF_ENOMEM;
    int rc = vec_env_use_u8(&v->ve, err);
    if (rc != CALF_OK) {
        free(v->final8);
        v->final8 = NULL;
    }
    return rc;
}

/* A reset of the block for calf_vec_env_reset and _reset_u8 (after their checks). */
static void reset_handle(calf_vec_env *v) {
    /* open's reset already recorded its own fault, which this call returns */
    if (!v->fresh) {
        calf_error_clear(&v->ve.fault);
        vec_env_reset(&v->ve);
    }
    v->fresh = false;
}

int calf_vec_env_reset(calf_vec_env *v, float *obs, calf_error *err) {
    int crc = check_handle(v, "calf_vec_env_reset", err);
    if (crc) return crc;
    if (!obs) return calf_error_set(err, CALF_EINVAL, "calf_vec_env_reset: obs is NULL");
    reset_handle(v);
    copy_obs(v, obs);
    return vec_env_fault(&v->ve, err);
}

int calf_vec_env_reset_u8(calf_vec_env *v, uint8_t *obs, calf_error *err) {
    int crc = check_handle(v, "calf_vec_env_reset_u8", err);
    if (crc) return crc;
    if (!obs) return calf_error_set(err, CALF_EINVAL, "calf_vec_env_reset_u8: obs is NULL");
    if ((crc = use_bytes(v, "calf_vec_env_reset_u8", err)) != CALF_OK) return crc;
    reset_handle(v);
    memcpy(obs, v->ve.obs8, obs_count(v));
    return vec_env_fault(&v->ve, err);
}

/* The checks of calf_vec_env_step and _step_u8 before anything is stepped. */
static int check_step_args(calf_vec_env *v, const char *call, const int *actions,
                           const float *cont_actions, const void *obs, const float *reward,
                           const uint8_t *terminated, const uint8_t *truncated,
                           calf_error *err) {
    int crc = check_handle(v, call, err);
    if (crc) return crc;
    vec_env *ve = &v->ve;
    if (!obs || !reward || !terminated || !truncated)
        return calf_error_set(err, CALF_EINVAL, "%s: an output array is NULL", call);
    if (ve->action_dim > 0 && !cont_actions)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: %s has continuous actions: cont_actions is NULL", call,
                              handle_spec(v)->name);
    if (ve->action_dim == 0) {
        if (!actions)
            return calf_error_set(err, CALF_EINVAL,
                                  "%s: %s has discrete actions: actions is NULL", call,
                                  handle_spec(v)->name);
        const calf_env_spec *sp = handle_spec(v);
        int ai = ve->action_ints;
        for (int i = 0; i < ve->count; i++)
            for (int d = 0; d < ai; d++) {
                int a = actions[(size_t)i * ai + d];
                int n = sp->num_action_dims > 0 ? sp->action_nvec[d] : ve->num_actions;
                if ((a < 0 || a >= n) && sp->num_action_dims > 0)
                    return calf_error_set(err, CALF_EINVAL,
                                          "%s: sub-action %d of row %d (env index "
                                          "%lld) is %d, not in 0..%d",
                                          call, d, i, (long long)ve->begin + i, a, n - 1);
                if (a < 0 || a >= n)
                    return calf_error_set(err, CALF_EINVAL,
                                          "%s: action %d of row %d (env index "
                                          "%lld) is not in 0..%d",
                                          call, a, i, (long long)ve->begin + i, n - 1);
            }
    }
    return CALF_OK;
}

int calf_vec_env_step(calf_vec_env *v, const int *actions, const float *cont_actions, float *obs,
                      float *reward, uint8_t *terminated, uint8_t *truncated, float *final_obs,
                      calf_error *err) {
    int crc = check_step_args(v, "calf_vec_env_step", actions, cont_actions, obs, reward,
                              terminated, truncated, err);
    if (crc) return crc;
    vec_env *ve = &v->ve;
    const float *u = ve->action_dim ? cont_actions : NULL;
    calf_error_clear(&ve->fault);
    if (ve->obs8) { /* a byte block: its bytes widened */
        vec_env_step_u8(ve, actions, u, reward, terminated, truncated, v->final8, NULL, NULL);
        if (final_obs) widen(v->final8, obs_count(v), final_obs);
    } else {
        vec_env_step(ve, actions, u, reward, terminated, truncated, final_obs, NULL, NULL);
    }
    v->fresh = false;
    copy_obs(v, obs);
    return vec_env_fault(ve, err);
}

int calf_vec_env_step_u8(calf_vec_env *v, const int *actions, const float *cont_actions,
                         uint8_t *obs, float *reward, uint8_t *terminated, uint8_t *truncated,
                         uint8_t *final_obs, calf_error *err) {
    int crc = check_step_args(v, "calf_vec_env_step_u8", actions, cont_actions, obs, reward,
                              terminated, truncated, err);
    if (crc) return crc;
    if ((crc = use_bytes(v, "calf_vec_env_step_u8", err)) != CALF_OK) return crc;
    vec_env *ve = &v->ve;
    calf_error_clear(&ve->fault);
    vec_env_step_u8(ve, actions, ve->action_dim ? cont_actions : NULL, reward, terminated,
                    truncated, final_obs, NULL, NULL);
    v->fresh = false;
    memcpy(obs, ve->obs8, obs_count(v));
    return vec_env_fault(ve, err);
}

const calf_env *calf_vec_env_env(const calf_vec_env *v, int e) {
    return open_handle(v) && e >= 0 && e < v->ve.count ? &v->ve.envs[e] : NULL;
}
