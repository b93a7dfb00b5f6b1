/* test_vec_env.c: a block of envs must step each env exactly as a lone calf_env
 * would (so any split of the global env range gives the same bytes), auto-reset while
 * keeping the pre-reset observation, report finished episodes, round-trip its state
 * through checkpoint records that reject corrupted input, name the env that returns
 * a non-finite observation or reward, or a byte env's value outside 0..obs_high, and step
 * a byte env's block in bytes (vec_env_use_u8) to the same values as in floats. */
#include "envs/vec_env.h"

#include <math.h>
#include <stdint.h>

#include "envs/envs.h"
#include "test_util.h"

enum { E = 64, T = 450 };
/* Buffer sizes for the classic-control envs driven here (the interface has no caps). */
#define CLASSIC_MAX_OBS 8
#define CLASSIC_MAX_ACT 2

/* The action env g takes at step t: a pure function of (g, t), as a policy with
 * per-env streams would give. */
static int discrete_action(int g, int t, int n) {
    calf_rng r;
    calf_rng_seed(&r, 99, (uint64_t)g * 1000003u + (uint64_t)t, CALF_RNG_ACTION);
    return (int)calf_rng_below(&r, (uint32_t)n);
}
static float continuous_action(int g, int t, int j) {
    calf_rng r;
    calf_rng_seed(&r, 98, ((uint64_t)g * 1000003u + (uint64_t)t) * 8u + (uint64_t)j, CALF_RNG_ACTION);
    return (float)calf_rng_uniform_range(&r, -3.0, 3.0); /* beyond bounds on purpose */
}

/* Everything a step reports, per global env and step. */
typedef struct trace {
    float obs[T][E][CLASSIC_MAX_OBS];
    float final_obs[T][E][CLASSIC_MAX_OBS];
    float reward[T][E];
    uint8_t term[T][E], trunc[T][E];
    double ep_return[T][E];
    int ep_length[T][E];
} trace;

/* Runs the global range [0, E) split into blocks at `cuts` (block k is
 * [cuts[k], cuts[k+1])), recording into tr. */
static void run_split(const char *name, const int *cuts, int nblocks, trace *tr) {
    memset(tr, 0, sizeof *tr);
    for (int b = 0; b < nblocks; b++) {
        vec_env ve;
        calf_error err;
        int begin = cuts[b], count = cuts[b + 1] - cuts[b];
        CHECK_INT_EQ(vec_env_init(&ve, name, 1234, begin, count, &err), CALF_OK);
        int od = ve.obs_dim, ad = ve.action_dim;
        int actions[E];
        float cont[E * CLASSIC_MAX_ACT], reward[E], final_obs[E * CLASSIC_MAX_OBS];
        uint8_t term[E], trunc[E];
        double ep_ret[E];
        int ep_len[E];
        for (int t = 0; t < T; t++) {
            for (int i = 0; i < count; i++) {
                int g = begin + i;
                if (ad == 0) actions[i] = discrete_action(g, t, ve.num_actions);
                for (int j = 0; j < ad; j++) cont[i * ad + j] = continuous_action(g, t, j);
            }
            vec_env_step(&ve, ad ? NULL : actions, ad ? cont : NULL, reward, term, trunc, final_obs,
                         ep_ret, ep_len);
            for (int i = 0; i < count; i++) {
                int g = begin + i;
                memcpy(tr->obs[t][g], ve.obs + i * od, (size_t)od * sizeof(float));
                memcpy(tr->final_obs[t][g], final_obs + i * od, (size_t)od * sizeof(float));
                tr->reward[t][g] = reward[i];
                tr->term[t][g] = term[i];
                tr->trunc[t][g] = trunc[i];
                tr->ep_return[t][g] = ep_ret[i];
                tr->ep_length[t][g] = ep_len[i];
            }
        }
        vec_env_free(&ve);
    }
}

static void test_split_invariance(const char *name) {
    static trace whole, other;
    const int one[] = {0, E};
    const int halves[] = {0, 32, E};
    const int uneven[] = {0, 21, 43, E};
    int singles[E + 1];
    for (int i = 0; i <= E; i++) singles[i] = i;
    run_split(name, one, 1, &whole);
    int ended = 0, truncs = 0;
    for (int t = 0; t < T; t++)
        for (int g = 0; g < E; g++) ended += whole.term[t][g] | whole.trunc[t][g], truncs += whole.trunc[t][g];
    /* Episodes really end and reset inside the window, except where random actions
     * cannot finish one before the time limit (Acrobot 500, MountainCarContinuous 999). */
    if (strcmp(name, "Acrobot-v1") != 0 && strcmp(name, "MountainCarContinuous-v0") != 0)
        CHECK(ended > E);
    if (strcmp(name, "Pendulum-v1") == 0) CHECK_INT_EQ(truncs, 2 * E);

    const int *splits[] = {halves, uneven, singles};
    const int nblocks[] = {2, 3, E};
    for (int s = 0; s < 3; s++) {
        run_split(name, splits[s], nblocks[s], &other);
        CHECK(memcmp(&whole, &other, sizeof whole) == 0);
    }
    /* And the envs are not all alike: env 0 and env 1 differ. */
    CHECK(memcmp(whole.obs[0][0], whole.obs[0][1], sizeof whole.obs[0][0]) != 0);
}

/* vec_env must match a lone calf_env driven by hand: reset after either flag, the
 * final observation is the one the step produced, episode stats are sums/counts. */
static void test_matches_lone_env(const char *name) {
    const int begin = 5, count = 3;
    vec_env ve;
    calf_error err;
    CHECK_INT_EQ(vec_env_init(&ve, name, 77, begin, count, &err), CALF_OK);
    calf_env lone[3];
    float lone_obs[3][CLASSIC_MAX_OBS];
    double lone_ret[3] = {0};
    int lone_len[3] = {0};
    for (int i = 0; i < count; i++) {
        CHECK_INT_EQ(calf_env_init(&lone[i], name, 77, (uint64_t)(begin + i), &err), CALF_OK);
        calf_env_reset(&lone[i], lone_obs[i]);
        CHECK(memcmp(lone_obs[i], ve.obs + i * ve.obs_dim, (size_t)ve.obs_dim * sizeof(float)) == 0);
    }
    int od = ve.obs_dim, ad = ve.action_dim, saw_term = 0, saw_trunc = 0;
    for (int t = 0; t < 1100; t++) {
        int actions[3];
        float cont[3 * CLASSIC_MAX_ACT], reward[3], final_obs[3 * CLASSIC_MAX_OBS];
        uint8_t term[3], trunc[3];
        double ep_ret[3];
        int ep_len[3];
        for (int i = 0; i < count; i++) {
            if (ad == 0) actions[i] = discrete_action(begin + i, t, ve.num_actions);
            for (int j = 0; j < ad; j++) cont[i * ad + j] = continuous_action(begin + i, t, j);
        }
        float cont_copy[3 * CLASSIC_MAX_ACT];
        memcpy(cont_copy, cont, sizeof cont);
        vec_env_step(&ve, actions, cont, reward, term, trunc, final_obs, ep_ret, ep_len);
        CHECK(memcmp(cont_copy, cont, (size_t)(3 * ad) * sizeof(float)) == 0);
        for (int i = 0; i < count; i++) {
            float r;
            int lt, ltr;
            calf_env_step(&lone[i], ad ? 0 : actions[i], ad ? cont + i * ad : NULL, lone_obs[i], &r,
                          &lt, &ltr);
            lone_ret[i] += r;
            lone_len[i]++;
            CHECK(memcmp(lone_obs[i], final_obs + i * od, (size_t)od * sizeof(float)) == 0);
            CHECK(r == reward[i]);
            CHECK_INT_EQ(term[i], lt);
            CHECK_INT_EQ(trunc[i], ltr);
            if (lt || ltr) {
                saw_term |= lt, saw_trunc |= ltr;
                CHECK(ep_ret[i] == lone_ret[i]);
                CHECK_INT_EQ(ep_len[i], lone_len[i]);
                lone_ret[i] = 0;
                lone_len[i] = 0;
                calf_env_reset(&lone[i], lone_obs[i]);
                /* The next observation is the reset one, not the final one. */
                CHECK(memcmp(final_obs + i * od, ve.obs + i * od, (size_t)od * sizeof(float)) != 0);
                CHECK_INT_EQ(ve.envs[i].elapsed_steps, 0);
            } else {
                CHECK(ep_ret[i] == 0.0);
                CHECK_INT_EQ(ep_len[i], 0);
            }
            CHECK(memcmp(lone_obs[i], ve.obs + i * od, (size_t)od * sizeof(float)) == 0);
            CHECK(ve.episode_return[i] == lone_ret[i]);
            CHECK_INT_EQ(ve.episode_length[i], lone_len[i]);
        }
    }
    if (strcmp(name, "CartPole-v1") == 0) CHECK(saw_term);
    if (strcmp(name, "Pendulum-v1") == 0) CHECK(saw_trunc);
    for (int i = 0; i < count; i++) calf_env_free(&lone[i]);
    vec_env_free(&ve);
}

/* Termination keeps the terminal observation in final_obs (CartPole beyond its
 * thresholds); truncation keeps the 200th Pendulum observation. */
static void test_final_obs(void) {
    vec_env ve;
    calf_error err;
    CHECK_INT_EQ(vec_env_init(&ve, "CartPole-v1", 5, 0, 1, &err), CALF_OK);
    int action = 1, steps = 0;
    float reward, final_obs[4];
    uint8_t term = 0, trunc = 0;
    double ep_ret;
    int ep_len;
    while (!term && steps < 500) {
        vec_env_step(&ve, &action, NULL, &reward, &term, &trunc, final_obs, &ep_ret, &ep_len);
        steps++;
    }
    CHECK_INT_EQ(term, 1);
    CHECK(fabsf(final_obs[0]) > 2.4f || fabsf(final_obs[2]) > 0.2094f);
    for (int j = 0; j < 4; j++) CHECK(fabsf(ve.obs[j]) <= 0.05f); /* freshly reset */
    CHECK_INT_EQ(ep_len, steps);
    CHECK(ep_ret == steps); /* reward 1 per step, the terminating one included */
    vec_env_free(&ve);

    CHECK_INT_EQ(vec_env_init(&ve, "Pendulum-v1", 5, 3, 1, &err), CALF_OK);
    pendulum_state *ps = ve.envs[0].state;
    float u = 0.5f, fo[3];
    double sum = 0;
    for (int t = 0; t < 200; t++) {
        pendulum_state before = *ps;
        vec_env_step(&ve, NULL, &u, &reward, &term, &trunc, fo, &ep_ret, &ep_len);
        sum += reward;
        if (t < 199) {
            CHECK(!term && !trunc);
        } else {
            CHECK_INT_EQ(term, 0);
            CHECK_INT_EQ(trunc, 1);
            /* final_obs is the observation of the state the 200th step reached */
            pendulum_state s = before;
            float obs[3], r;
            pendulum_class.step(&s, NULL, 0, &u, obs, &r);
            CHECK(memcmp(obs, fo, sizeof obs) == 0);
            CHECK(memcmp(obs, ve.obs, sizeof obs) != 0);
            CHECK_INT_EQ(ep_len, 200);
            CHECK(ep_ret == sum);
        }
    }
    /* NULL final_obs / episode outputs are allowed. */
    vec_env_step(&ve, NULL, &u, &reward, &term, &trunc, NULL, NULL, NULL);
    CHECK_INT_EQ(ve.episode_length[0], 1);
    vec_env_free(&ve);
}

static void step_n(vec_env *ve, int t0, int n, float *rewards_out) {
    int actions[E];
    float cont[E * CLASSIC_MAX_ACT], reward[E];
    uint8_t term[E], trunc[E];
    for (int t = t0; t < t0 + n; t++) {
        for (int i = 0; i < ve->count; i++) {
            if (ve->action_dim == 0) actions[i] = discrete_action(ve->begin + i, t, ve->num_actions);
            for (int j = 0; j < ve->action_dim; j++)
                cont[i * ve->action_dim + j] = continuous_action(ve->begin + i, t, j);
        }
        vec_env_step(ve, actions, cont, reward, term, trunc, NULL, NULL, NULL);
        if (rewards_out) memcpy(rewards_out + (size_t)(t - t0) * (size_t)ve->count, reward,
                                (size_t)ve->count * sizeof(float));
    }
}

static void test_records(const char *name) {
    enum { N = 8, K = 37, M = 300 };
    vec_env a, b1, b2;
    calf_error err;
    CHECK_INT_EQ(vec_env_init(&a, name, 4242, 0, N, &err), CALF_OK);
    step_n(&a, 0, K, NULL);
    size_t rs = vec_env_record_size(&a);
    CHECK(rs % 8 == 0);
    CHECK_INT_EQ(rs, (64 + 4 * a.obs_dim + calf_env_find(name)->spec.state_size + 7) / 8 * 8);
    unsigned char *recs = calloc(N, rs), *again = calloc(N, rs);
    for (int i = 0; i < N; i++) vec_env_save_record(&a, i, recs + i * rs);
    /* Saving is deterministic, padding included. */
    for (int i = 0; i < N; i++) vec_env_save_record(&a, i, again + i * rs);
    CHECK(memcmp(recs, again, N * rs) == 0);

    /* Resume on a different split, with a different seed even: everything comes from
     * the records. */
    CHECK_INT_EQ(vec_env_init(&b1, name, 1, 0, 3, &err), CALF_OK);
    CHECK_INT_EQ(vec_env_init(&b2, name, 1, 3, N - 3, &err), CALF_OK);
    for (int i = 0; i < N; i++) {
        vec_env *b = i < 3 ? &b1 : &b2;
        int rc = vec_env_load_record(b, i - b->begin, recs + i * rs, &err);
        CHECK_INT_EQ(rc, CALF_OK);
        if (rc) fprintf(stderr, "%s\n", err.msg);
    }
    CHECK(memcmp(a.obs, b1.obs, 3 * (size_t)a.obs_dim * sizeof(float)) == 0);
    static float ra[M * N], rb1[M * N], rb2[M * N];
    step_n(&a, K, M, ra);
    step_n(&b1, K, M, rb1);
    step_n(&b2, K, M, rb2);
    int same = 1;
    for (int t = 0; t < M; t++)
        for (int i = 0; i < N; i++) {
            float rb = i < 3 ? rb1[t * 3 + i] : rb2[t * (N - 3) + i - 3];
            same &= memcmp(&ra[t * N + i], &rb, sizeof rb) == 0;
        }
    CHECK(same);
    for (int i = 0; i < N; i++) {
        vec_env *b = i < 3 ? &b1 : &b2;
        vec_env_save_record(b, i - b->begin, again + i * rs);
        vec_env_save_record(&a, i, recs + i * rs);
    }
    CHECK(memcmp(recs, again, N * rs) == 0);

    /* Corrupted records are refused and leave the env untouched. */
    unsigned char *bad = malloc(rs), *before = malloc(rs), *after = malloc(rs);
    vec_env_save_record(&b1, 1, before);
    struct {
        size_t offset;
        uint8_t value;
        const char *what;
    } faults[] = {
        {0, 0xff, "magic"},
        {4, 0x7f, "size"},
        {8, 0x05, "holds env"},     /* index 1 -> 5 */
        {51, 0x80, "elapsed_steps"}, /* negative elapsed */
        {50, 0x10, "elapsed_steps"}, /* beyond the limit */
        {55, 0x01, "episode length"},
        {63, 0x7f, "return"},        /* exponent bits -> inf/nan */
        {67, 0x7f, "observation"},   /* obs[0] -> nan/inf */
        {64, 0x5a, "observation"},   /* obs no longer matches the state */
    };
    for (size_t f = 0; f < sizeof faults / sizeof faults[0]; f++) {
        memcpy(bad, recs + 1 * rs, rs);
        bad[faults[f].offset] ^= faults[f].value;
        if (faults[f].offset == 63) bad[62] |= 0xf0, bad[63] = 0x7f;
        if (faults[f].offset == 67) bad[66] |= 0x80, bad[67] = 0x7f;
        calf_error_clear(&err);
        int rc = vec_env_load_record(&b1, 1, bad, &err);
        CHECK_INT_EQ(rc, CALF_EINVAL);
        if (!strstr(err.msg, faults[f].what))
            fprintf(stderr, "fault %zu: message '%s' lacks '%s'\n", f, err.msg, faults[f].what);
        CHECK(strstr(err.msg, faults[f].what) != NULL);
        vec_env_save_record(&b1, 1, after);
        CHECK(memcmp(before, after, rs) == 0);
    }
    /* A zero rng state would make the stream constant. */
    memcpy(bad, recs + 1 * rs, rs);
    memset(bad + 16, 0, 32);
    CHECK_INT_EQ(vec_env_load_record(&b1, 1, bad, &err), CALF_EINVAL);
    free(bad);
    free(before);
    free(after);
    free(recs);
    free(again);
    vec_env_free(&a);
    vec_env_free(&b1);
    vec_env_free(&b2);
}

static void test_init_errors(void) {
    vec_env ve;
    calf_error err;
    CHECK_INT_EQ(vec_env_init(&ve, "Nope-v0", 1, 0, 4, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "Nope-v0") != NULL && strstr(err.msg, "CartPole-v1") != NULL);
    CHECK(ve.envs == NULL);
    vec_env_free(&ve); /* safe after a failed init */
    CHECK_INT_EQ(vec_env_init(&ve, "CartPole-v1", 1, 0, 0, &err), CALF_EINVAL);
    CHECK_INT_EQ(vec_env_init(&ve, "CartPole-v1", 1, -1, 4, &err), CALF_EINVAL);
    CHECK_INT_EQ(vec_env_init(&ve, "CartPole-v1", 1, 2147483600, 100, &err), CALF_EINVAL);
    vec_env_free(&ve);
    vec_env_free(&ve);

    /* Records of another env class do not load (state size differs). */
    vec_env cp, pd;
    CHECK_INT_EQ(vec_env_init(&cp, "CartPole-v1", 1, 0, 1, &err), CALF_OK);
    CHECK_INT_EQ(vec_env_init(&pd, "MountainCar-v0", 1, 0, 1, &err), CALF_OK);
    unsigned char rec[256];
    CHECK(vec_env_record_size(&pd) <= sizeof rec && vec_env_record_size(&cp) <= sizeof rec);
    vec_env_save_record(&pd, 0, rec);
    CHECK_INT_EQ(vec_env_load_record(&cp, 0, rec, &err), CALF_EINVAL);
    vec_env_free(&cp);
    vec_env_free(&pd);
}

/* ---- native state ---------------------------------------------------------------- */

/* A class whose state points to memory its create hook allocates, as MuJoCo's points to
 * an mjData: checkpoints must go through save/load, never memcpy of the state. */
typedef struct native_state {
    double *pos;    /* (2) owned: made by create */
    double drawn;   /* what the last reset drew */
} native_state;

static int native_creates_left = -1; /* >= 0: that many creates succeed, then one fails */
static int native_alive = 0;         /* creates minus destroys */

static int native_create(void *state, calf_error *err) {
    if (native_creates_left == 0)
        return calf_error_set(err, CALF_EIO, "native: no simulator left");
    if (native_creates_left > 0) native_creates_left--;
    native_state *s = state;
    s->pos = calloc(2, sizeof *s->pos);
    if (!s->pos) return calf_error_set(err, CALF_ENOMEM, "native: out of memory");
    native_alive++;
    return CALF_OK;
}
static void native_destroy(void *state) {
    native_state *s = state;
    free(s->pos);
    native_alive--;
}
static void native_observe(const void *state, float *obs) {
    const native_state *s = state;
    obs[0] = (float)s->pos[0];
    obs[1] = (float)s->pos[1];
}
static void native_reset(void *state, calf_rng *rng, float *obs) {
    native_state *s = state;
    s->drawn = calf_rng_uniform_range(rng, -1.0, 1.0);
    s->pos[0] = s->drawn;
    s->pos[1] = 0.0;
    native_observe(s, obs);
}
static int native_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                       float *reward) {
    (void)action;
    native_state *s = state;
    s->pos[1] = s->pos[1] * 0.9 + u[0] + 0.01 * calf_rng_normal(rng);
    s->pos[0] += 0.1 * s->pos[1];
    native_observe(s, obs);
    *reward = (float)-fabs(s->pos[0]);
    return 0;
}
static void native_save(const void *state, void *buf) {
    const native_state *s = state;
    memcpy(buf, s->pos, 2 * sizeof(double));
}
static int native_load(void *state, const void *buf, calf_error *err) {
    double v[2];
    memcpy(v, buf, sizeof v);
    if (!isfinite(v[0]) || !isfinite(v[1]))
        return calf_error_set(err, CALF_EINVAL, "native: position is not finite");
    native_state *s = state;
    memcpy(s->pos, v, sizeof v);
    return CALF_OK;
}
static void native_reset_state(const void *state, double *out) {
    out[0] = ((const native_state *)state)->drawn;
}

static const calf_env_class native_class = {
    .spec = {.name = "Native-v0",
             .obs_dim = 2,
             .action_dim = 1,
             .action_low = (const float[]){-1.0f},
             .action_high = (const float[]){1.0f},
             .max_episode_steps = 50,
             .state_size = sizeof(native_state),
             .save_size = 2 * sizeof(double),
             .reset_state_dim = 1},
    .reset = native_reset,
    .step = native_step,
    .observe = native_observe,
    .create = native_create,
    .destroy = native_destroy,
    .save = native_save,
    .load = native_load,
    .reset_state = native_reset_state,
};

static void test_native_state(void) {
    calf_error err;
    CHECK_INT_EQ(calf_env_register(&native_class, &err), CALF_OK);

    /* A create that fails: the env is left zeroed, the block frees what it made. */
    calf_env env;
    native_creates_left = 0;
    CHECK_INT_EQ(calf_env_init(&env, "Native-v0", 1, 0, &err), CALF_EIO);
    CHECK(strstr(err.msg, "no simulator") != NULL);
    CHECK(env.state == NULL && env.cls == NULL);
    calf_env_free(&env);
    vec_env ve;
    native_creates_left = 5;
    CHECK_INT_EQ(vec_env_init(&ve, "Native-v0", 1, 0, 8, &err), CALF_EIO);
    CHECK_INT_EQ(native_alive, 0);
    CHECK(ve.envs == NULL);
    native_creates_left = -1;

    /* reset_state: what the reset drew. */
    CHECK_INT_EQ(calf_env_init(&env, "Native-v0", 1, 0, &err), CALF_OK);
    float obs[2];
    double drawn[1];
    calf_env_reset(&env, obs);
    CHECK_INT_EQ(calf_env_reset_state(&env, drawn), 1);
    CHECK(drawn[0] == (double)((native_state *)env.state)->pos[0]);
    calf_env_free(&env);
    CHECK_INT_EQ(native_alive, 0);
    calf_env classic;
    CHECK_INT_EQ(calf_env_init(&classic, "Pendulum-v1", 1, 0, &err), CALF_OK);
    CHECK_INT_EQ(calf_env_reset_state(&classic, drawn), 0);
    calf_env_free(&classic);

    /* Records hold the saved state (not the pointer), resume exactly, and refuse bad
     * state without changing the env. */
    enum { N = 4, K = 23, M = 60 };
    vec_env a, b;
    CHECK_INT_EQ(vec_env_init(&a, "Native-v0", 9, 0, N, &err), CALF_OK);
    step_n(&a, 0, K, NULL);
    size_t rs = vec_env_record_size(&a);
    CHECK_INT_EQ(rs, (64 + 4 * 2 + 16 + 7) / 8 * 8);
    unsigned char *recs = calloc(N, rs), *again = calloc(N, rs);
    for (int i = 0; i < N; i++) vec_env_save_record(&a, i, recs + i * rs);
    CHECK_INT_EQ(vec_env_init(&b, "Native-v0", 1, 0, N, &err), CALF_OK);
    for (int i = 0; i < N; i++) CHECK_INT_EQ(vec_env_load_record(&b, i, recs + i * rs, &err), CALF_OK);
    static float ra[M * N], rb[M * N];
    step_n(&a, K, M, ra);
    step_n(&b, K, M, rb);
    CHECK(memcmp(ra, rb, sizeof ra) == 0);
    for (int i = 0; i < N; i++) {
        vec_env_save_record(&a, i, recs + i * rs);
        vec_env_save_record(&b, i, again + i * rs);
    }
    CHECK(memcmp(recs, again, N * rs) == 0);
    unsigned char *bad = malloc(rs), *before = malloc(rs), *after = malloc(rs);
    vec_env_save_record(&b, 2, before);
    memcpy(bad, recs + 1 * rs, rs); /* env 1's record in env 2's slot */
    CHECK_INT_EQ(vec_env_load_record(&b, 2, bad, &err), CALF_EINVAL);
    memcpy(bad, recs + 2 * rs, rs);
    bad[64 + 8 + 7] = 0x7f, bad[64 + 8 + 6] = 0xf0; /* pos[0] -> inf */
    CHECK_INT_EQ(vec_env_load_record(&b, 2, bad, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "not finite") != NULL);
    memcpy(bad, recs + 2 * rs, rs);
    bad[64 + 8 + 5] ^= 0x40; /* a state that does not give the stored observation */
    CHECK_INT_EQ(vec_env_load_record(&b, 2, bad, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "observation does not match") != NULL);
    vec_env_save_record(&b, 2, after);
    CHECK(memcmp(before, after, rs) == 0);
    free(bad);
    free(before);
    free(after);
    free(recs);
    free(again);
    vec_env_free(&a);
    vec_env_free(&b);
    CHECK_INT_EQ(native_alive, 0);
}

/* An env that goes bad: reward NaN at one step drawn at reset, the observation infinite
 * one step later; with faulty_bad_reset its reset observation is NaN. */
static int faulty_bad_reset = 0;
typedef struct faulty_state {
    int t, bad_at;
} faulty_state;
static void faulty_reset(void *state, calf_rng *rng, float *obs) {
    faulty_state *s = state;
    s->t = 0;
    s->bad_at = 2 + (int)calf_rng_below(rng, 6);
    obs[0] = faulty_bad_reset ? NAN : 0.0f;
}
static int faulty_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                       float *reward) {
    (void)rng, (void)action, (void)u;
    faulty_state *s = state;
    s->t++;
    obs[0] = s->t == s->bad_at + 1 ? -INFINITY : (float)s->t;
    *reward = s->t == s->bad_at ? NAN : 1.0f;
    return 0;
}
static const calf_env_class faulty_class = {
    .spec = {.name = "Faulty-v0", .obs_dim = 1, .num_actions = 2, .max_episode_steps = 4,
             .state_size = sizeof(faulty_state)},
    .reset = faulty_reset,
    .step = faulty_step,
};

/* A NaN or infinite reward or observation is recorded as the env's fault, naming the
 * first env (global index) that returned one, while the block steps on exactly as lone
 * envs do; well-behaved envs never raise it. */
static void test_faults(void) {
    calf_error err;
    calf_error_clear(&err);
    CHECK_INT_EQ(calf_env_register(&faulty_class, &err), CALF_OK);
    enum { N = 6, BEGIN = 5, STEPS = 12 };
    vec_env ve;
    calf_env lone[N];
    CHECK_INT_EQ(vec_env_init(&ve, "Faulty-v0", 3, BEGIN, N, &err), CALF_OK);
    CHECK_INT_EQ(vec_env_fault(&ve, &err), CALF_OK);
    float lone_obs[N];
    for (int i = 0; i < N; i++) {
        CHECK_INT_EQ(calf_env_init(&lone[i], "Faulty-v0", 3, BEGIN + i, &err), CALF_OK);
        calf_env_reset(&lone[i], &lone_obs[i]);
    }
    int first_t = -1, first_i = -1, first_len = 0;
    int actions[N] = {0};
    for (int t = 1; t <= STEPS; t++) {
        float reward[N], final_obs[N];
        uint8_t term[N], trunc[N];
        int rc = vec_env_step(&ve, actions, NULL, reward, term, trunc, final_obs, NULL, NULL);
        for (int i = 0; i < N; i++) {
            float r;
            int te, tr;
            calf_env_step(&lone[i], 0, NULL, &lone_obs[i], &r, &te, &tr);
            CHECK(memcmp(&final_obs[i], &lone_obs[i], sizeof r) == 0);
            CHECK(memcmp(&reward[i], &r, sizeof r) == 0);
            if (first_t < 0 && (!isfinite(r) || !isfinite(lone_obs[i]))) {
                first_t = t;
                first_i = i;
                first_len = lone[i].elapsed_steps;
            }
            if (te || tr) calf_env_reset(&lone[i], &lone_obs[i]);
        }
        CHECK(memcmp(ve.obs, lone_obs, sizeof lone_obs) == 0);
        CHECK_INT_EQ(rc, first_t < 0 ? CALF_OK : CALF_EINVAL);
    }
    CHECK(first_t > 0);
    char want[200];
    snprintf(want, sizeof want, "environment Faulty-v0, env index %d: step %d of its episode returned a non-finite reward (nan)",
             BEGIN + first_i, first_len);
    CHECK_INT_EQ(vec_env_fault(&ve, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, want) == err.msg);
    CHECK(strstr(err.msg, "the environment is at fault, not training") != NULL);
    for (int i = 0; i < N; i++) calf_env_free(&lone[i]);
    vec_env_free(&ve);

    /* an infinite observation names its element; a NaN at reset says so */
    faulty_bad_reset = 0;
    CHECK_INT_EQ(vec_env_init(&ve, "Faulty-v0", 3, 0, 1, &err), CALF_OK);
    ve.envs[0].elapsed_steps = 0;
    ((faulty_state *)ve.envs[0].state)->bad_at = 10; /* NaN reward at 10, inf obs at 3 */
    ((faulty_state *)ve.envs[0].state)->t = 1;
    float reward[1], final_obs[1];
    uint8_t term[1], trunc[1];
    CHECK_INT_EQ(vec_env_step(&ve, actions, NULL, reward, term, trunc, final_obs, NULL, NULL), CALF_OK);
    ((faulty_state *)ve.envs[0].state)->bad_at = 2;
    CHECK_INT_EQ(vec_env_step(&ve, actions, NULL, reward, term, trunc, final_obs, NULL, NULL), CALF_EINVAL);
    CHECK(strstr(ve.fault.msg, "env index 0: step 2 of its episode returned a non-finite observation (obs[0] = -inf)") != NULL);
    vec_env_free(&ve);
    faulty_bad_reset = 1;
    CHECK_INT_EQ(vec_env_init(&ve, "Faulty-v0", 3, 7, 2, &err), CALF_OK);
    CHECK_INT_EQ(vec_env_fault(&ve, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "env index 7: its reset returned a non-finite observation (obs[0] = nan)") != NULL);
    vec_env_free(&ve);
    faulty_bad_reset = 0;

    /* the classic envs, driven beyond their bounds for a long while, stay finite */
    const char *names[] = {"CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCar-v0",
                           "MountainCarContinuous-v0"};
    for (int k = 0; k < 5; k++) {
        CHECK_INT_EQ(vec_env_init(&ve, names[k], 11, 0, 8, &err), CALF_OK);
        step_n(&ve, 0, 600, NULL);
        CHECK_INT_EQ(vec_env_fault(&ve, &err), CALF_OK);
        vec_env_free(&ve);
    }
}

/* A byte env (CALF_DTYPE_U8, values 0..3) whose second observation value is bytes_value
 * from step 2 on. */
static float bytes_value = 2.0f;
static void bytes_reset(void *state, calf_rng *rng, float *obs) {
    (void)rng;
    *(int *)state = 0;
    obs[0] = 1.0f, obs[1] = 0.0f;
}
static int bytes_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                      float *reward) {
    (void)rng, (void)u;
    int t = ++*(int *)state;
    obs[0] = (float)action, obs[1] = t >= 2 ? bytes_value : 3.0f;
    *reward = 0;
    return 0;
}
static const calf_env_class bytes_class = {
    .spec = {.name = "Bytes-v0", .obs_dim = 2, .num_actions = 2, .max_episode_steps = 50,
             .state_size = sizeof(int), .obs_dtype = CALF_DTYPE_U8, .obs_high = 3},
    .reset = bytes_reset,
    .step = bytes_step,
};

/* The same with obs_high 1 (MinAtar's 0/1 images, checked by a path of their own): the
 * first step writes 1. */
static int bytes1_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                       float *reward) {
    (void)rng, (void)u;
    int t = ++*(int *)state;
    obs[0] = (float)action, obs[1] = t >= 2 ? bytes_value : 1.0f;
    *reward = 0;
    return 0;
}
static const calf_env_class bytes1_class = {
    .spec = {.name = "Bytes1-v0", .obs_dim = 2, .num_actions = 2, .max_episode_steps = 50,
             .state_size = sizeof(int), .obs_dtype = CALF_DTYPE_U8, .obs_high = 1},
    .reset = bytes_reset,
    .step = bytes1_step,
};

/* A CALF_DTYPE_U8 env's values must be integers 0..obs_high, since calf keeps them as
 * bytes: a fraction, a value above obs_high, a negative one or a NaN is the env's fault,
 * named as such; MinAtar's games keep to it. */
static void test_byte_faults(void) {
    calf_error err;
    calf_error_clear(&err);
    CHECK_INT_EQ(calf_env_register(&bytes_class, &err), CALF_OK);
    static const struct { float v; const char *said; } cases[] = {
        {2.0f, NULL},
        {0.0f, NULL},
        {2.5f, "step 2 of its episode returned observation value obs[1] = 2.5, not an integer "
               "0..3 as its uint8 observation space says"},
        {4.0f, "obs[1] = 4, not an integer 0..3"},
        {-1.0f, "obs[1] = -1, not an integer 0..3"},
        {NAN, "returned a non-finite observation (obs[1] = nan)"},
    };
    static const struct { float v; const char *said; } cases1[] = {
        {1.0f, NULL},
        {0.0f, NULL},
        {-0.0f, NULL},
        {0.5f, "obs[1] = 0.5, not an integer 0..1"},
        {2.0f, "obs[1] = 2, not an integer 0..1"},
        {-1.0f, "obs[1] = -1, not an integer 0..1"},
        {INFINITY, "returned a non-finite observation (obs[1] = inf)"},
        {NAN, "returned a non-finite observation (obs[1] = nan)"},
    };
    CHECK_INT_EQ(calf_env_register(&bytes1_class, &err), CALF_OK);
    int actions[3] = {1, 0, 1};
    for (size_t c = 0; c < sizeof cases1 / sizeof cases1[0]; c++) {
        bytes_value = cases1[c].v;
        vec_env ve;
        CHECK_INT_EQ(vec_env_init(&ve, "Bytes1-v0", 1, 0, 3, &err), CALF_OK);
        float reward[3], final_obs[6];
        uint8_t term[3], trunc[3];
        for (int t = 0; t < 3; t++)
            vec_env_step(&ve, actions, NULL, reward, term, trunc, final_obs, NULL, NULL);
        int rc = vec_env_fault(&ve, &err);
        CHECK_INT_EQ(rc, cases1[c].said ? CALF_EINVAL : CALF_OK);
        if (cases1[c].said && !strstr(err.msg, cases1[c].said)) {
            fprintf(stderr, "  Bytes1-v0 with %g: expected \"%s\" in: %s\n", (double)cases1[c].v,
                    cases1[c].said, err.msg);
            CHECK(0);
        }
        vec_env_free(&ve);
    }
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        bytes_value = cases[c].v;
        vec_env ve;
        CHECK_INT_EQ(vec_env_init(&ve, "Bytes-v0", 1, 0, 3, &err), CALF_OK);
        float reward[3], final_obs[6];
        uint8_t term[3], trunc[3];
        for (int t = 0; t < 3; t++)
            vec_env_step(&ve, actions, NULL, reward, term, trunc, final_obs, NULL, NULL);
        int rc = vec_env_fault(&ve, &err);
        CHECK_INT_EQ(rc, cases[c].said ? CALF_EINVAL : CALF_OK);
        if (cases[c].said && !strstr(err.msg, cases[c].said)) {
            fprintf(stderr, "  Bytes-v0 with %g: expected \"%s\" in: %s\n", (double)cases[c].v,
                    cases[c].said, err.msg);
            CHECK(0);
        }
        vec_env_free(&ve);
    }
    bytes_value = 2.0f;
    for (int i = 0; i < calf_env_count(); i++) {
        const calf_env_class *cls = calf_env_at(i);
        if (strncmp(cls->spec.name, "MinAtar/", 8) != 0) continue;
        vec_env ve;
        CHECK_INT_EQ(vec_env_init(&ve, cls->spec.name, 11, 0, 4, &err), CALF_OK);
        step_n(&ve, 0, 300, NULL);
        CHECK_INT_EQ(vec_env_fault(&ve, &err), CALF_OK);
        vec_env_free(&ve);
    }
}

/* ---- the byte observation (env ABI 4) ---- */

/* A byte block (vec_env_use_u8) and a float block of the same envs under the same
 * actions: every step's observations, final observations, rewards and flags, and the
 * checkpoint records, the same values; an episode must end on the way (the resets are
 * part of what is compared). One env stepped by env_step_u8 beside calf_env_step too. */
static void bytes_vs_floats(const char *name, int steps) {
    enum { N = 5, MAXO = 1024 };
    calf_error err;
    vec_env f, b;
    CHECK_INT_EQ(vec_env_init(&f, name, 21, 3, N, &err), CALF_OK);
    CHECK_INT_EQ(vec_env_init(&b, name, 21, 3, N, &err), CALF_OK);
    CHECK_INT_EQ(vec_env_use_u8(&b, &err), CALF_OK);
    const int od = f.obs_dim, na = f.num_actions;
    CHECK(od <= MAXO && b.obs8 != NULL);
    static float fo[N * MAXO];
    static uint8_t bo[N * MAXO];
    static unsigned char rf[N][MAXO * 4 + 4096], rb[N][MAXO * 4 + 4096];
    CHECK(vec_env_record_size(&f) <= sizeof rf[0]);
    int actions[N], ends = 0, same = 1;
    float rew_f[N], rew_b[N];
    uint8_t tf[N], tb[N], uf[N], ub[N];
    for (int t = 0; t < steps && same; t++) {
        for (int e = 0; e < N; e++) actions[e] = discrete_action(e, t, na);
        vec_env_step(&f, actions, NULL, rew_f, tf, uf, fo, NULL, NULL);
        vec_env_step_u8(&b, actions, NULL, rew_b, tb, ub, bo, NULL, NULL);
        for (int k = 0; k < N * od; k++)
            same &= (float)bo[k] == fo[k] && (float)b.obs8[k] == f.obs[k];
        same &= memcmp(rew_f, rew_b, sizeof rew_f) == 0 && memcmp(tf, tb, N) == 0 &&
                memcmp(uf, ub, N) == 0;
        for (int e = 0; e < N; e++) ends += tf[e] | uf[e];
        if (t % 97 == 0)
            for (int e = 0; e < N; e++) {
                vec_env_save_record(&f, e, rf[e]);
                vec_env_save_record(&b, e, rb[e]);
                same &= memcmp(rf[e], rb[e], vec_env_record_size(&f)) == 0;
            }
    }
    if (!same) fprintf(stderr, "  %s: the byte block parted from the float block\n", name);
    CHECK(same);
    CHECK(ends > 0);
    CHECK_INT_EQ(vec_env_fault(&b, &err), CALF_OK);
    /* a float block's record loads into the byte block, which then steps on alike */
    for (int e = 0; e < N; e++) vec_env_save_record(&f, e, rf[e]);
    CHECK_INT_EQ(vec_env_load_record(&b, 2, rf[2], &err), CALF_OK);
    for (int k = 0; k < od; k++) CHECK((float)b.obs8[2 * od + k] == f.obs[2 * od + k]);
    vec_env_free(&f);
    vec_env_free(&b);

    const calf_env_class *cls = calf_env_find(name);
    if (!cls->step_u8) return;
    calf_env lf, lb;
    CHECK_INT_EQ(calf_env_init(&lf, name, 5, 9, &err), CALF_OK);
    CHECK_INT_EQ(calf_env_init(&lb, name, 5, 9, &err), CALF_OK);
    calf_env_reset(&lf, fo);
    env_reset_u8(&lb, bo);
    same = 1;
    for (int t = 0; t < steps && same; t++) {
        int a = discrete_action(7, t, na), te, tr, te8, tr8;
        float r, r8;
        calf_env_step(&lf, a, NULL, fo, &r, &te, &tr);
        env_step_u8(&lb, a, NULL, bo, &r8, &te8, &tr8);
        same &= r == r8 && te == te8 && tr == tr8 && lf.elapsed_steps == lb.elapsed_steps;
        if (te | tr) {
            calf_env_reset(&lf, fo);
            env_reset_u8(&lb, bo);
        }
        for (int k = 0; k < od; k++) same &= (float)bo[k] == fo[k];
    }
    CHECK(same);
    calf_env_free(&lf);
    calf_env_free(&lb);
}

/* Bytes1U8-v0: Bytes1-v0 with the byte hooks, which write bytes_value as a byte. */
static void bytes_reset_u8(void *state, calf_rng *rng, uint8_t *obs) {
    (void)rng;
    *(int *)state = 0;
    obs[0] = 1, obs[1] = 0;
}
static int bytes1_step_u8(void *state, calf_rng *rng, int action, const float *u, uint8_t *obs,
                          float *reward) {
    (void)rng, (void)u;
    int t = ++*(int *)state;
    obs[0] = (uint8_t)action, obs[1] = t >= 2 ? (uint8_t)bytes_value : 1;
    *reward = 0;
    return 0;
}

static void test_bytes(void) {
    for (int i = 0; i < calf_env_count(); i++) {
        const calf_env_class *cls = calf_env_at(i);
        if (strncmp(cls->spec.name, "MinAtar/", 8) != 0) continue;
        CHECK(cls->reset_u8 && cls->step_u8 && cls->step_many_u8);
        /* Freeway ends at frame 2,500, the others' random episodes much sooner */
        bytes_vs_floats(cls->spec.name, strstr(cls->spec.name, "Freeway") ? 2600 : 500);
    }
    bytes_vs_floats("Bytes-v0", 60); /* no byte hooks: its floats made bytes */
    /* a byte written above obs_high is the env's fault, as a float is */
    static calf_env_class u8_class;
    u8_class = bytes1_class;
    u8_class.spec.name = "Bytes1U8-v0";
    u8_class.reset_u8 = bytes_reset_u8, u8_class.step_u8 = bytes1_step_u8;
    calf_error err;
    CHECK_INT_EQ(calf_env_register(&u8_class, &err), CALF_OK);
    static const struct { float v; const char *said; } cases[] = {
        {1.0f, NULL},
        {0.0f, NULL},
        {2.0f, "step 2 of its episode returned observation value obs[1] = 2, not an integer "
               "0..1 as its uint8 observation space says"},
    };
    int actions[3] = {1, 0, 1};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        bytes_value = cases[c].v;
        vec_env ve;
        CHECK_INT_EQ(vec_env_init(&ve, "Bytes1U8-v0", 1, 0, 3, &err), CALF_OK);
        CHECK_INT_EQ(vec_env_use_u8(&ve, &err), CALF_OK);
        CHECK(ve.obs == NULL); /* its floats are never written */
        float reward[3];
        uint8_t term[3], trunc[3], final_obs[6];
        for (int t = 0; t < 3; t++)
            vec_env_step_u8(&ve, actions, NULL, reward, term, trunc, final_obs, NULL, NULL);
        int rc = vec_env_fault(&ve, &err);
        CHECK_INT_EQ(rc, cases[c].said ? CALF_EINVAL : CALF_OK);
        if (cases[c].said && !strstr(err.msg, cases[c].said)) {
            fprintf(stderr, "  Bytes1U8-v0 with %g: expected \"%s\" in: %s\n",
                    (double)cases[c].v, cases[c].said, err.msg);
            CHECK(0);
        }
        vec_env_free(&ve);
    }
    bytes_value = 2.0f;
}

/* ---- masks and MultiDiscrete (env ABI 3) ---- */

/* Counter-3: a state t; action mask: action t % 3 only... but all blocked when t reaches
 * mask_empty_at (a broken env). MultiDiscrete (3, 2): step adds both sub-actions to t. */
static int mask_empty_at = -1;
typedef struct md_state {
    int t, ends;
} md_state;
static void md_reset(void *state, calf_rng *rng, float *obs) {
    md_state *s = state;
    s->t = (int)calf_rng_below(rng, 3);
    s->ends = 3 + (int)calf_rng_below(rng, 3);
    obs[0] = (float)s->t;
}
static int md_step(void *state, calf_rng *rng, const int *a, float *obs, float *reward) {
    (void)rng;
    md_state *s = state;
    s->t += a[0] + 10 * a[1];
    s->ends--;
    obs[0] = (float)s->t;
    *reward = (float)a[0];
    return s->ends <= 0;
}
static void md_mask(const void *state, uint8_t *mask) {
    const md_state *s = state;
    for (int j = 0; j < 3; j++) mask[j] = s->t != mask_empty_at && j == s->t % 3;
    mask[3] = 1, mask[4] = s->t % 2 == 0;
}
static const int md_nvec[2] = {3, 2};
static const calf_env_class md_class = {
    .spec = {.name = "MaskedMulti-v0", .obs_dim = 1, .num_actions = 5, .max_episode_steps = 50,
             .state_size = sizeof(md_state), .num_action_dims = 2, .action_nvec = md_nvec,
             .action_mask = 1},
    .reset = md_reset,
    .step_multi = md_step,
    .action_mask = md_mask,
};

/* vec_env keeps each env's mask as its state gives it after init, every step (the reset
 * one where an episode ended) and a loaded record, and after each step the final state's
 * (a truncated env's from before its reset; all 1 where terminated); MultiDiscrete actions are
 * action_ints ints per env, stepped through step_multi; a mask that allows nothing in a
 * sub-action is the env's fault, with every action of that slice valid meanwhile. Bad
 * ABI 3 hooks are refused at registration. */
static void test_masks(void) {
    calf_error err;
    calf_error_clear(&err);
    CHECK_INT_EQ(calf_env_register(&md_class, &err), CALF_OK);
    enum { N = 4 };
    vec_env ve;
    CHECK_INT_EQ(vec_env_init(&ve, "MaskedMulti-v0", 9, 2, N, &err), CALF_OK);
    CHECK_INT_EQ(ve.action_ints, 2);
    CHECK(ve.mask != NULL);
    CHECK(ve.final_mask != NULL);
    int ended = 0, cut = 0;
    for (int step = 0; step < 12; step++) {
        uint8_t want[5];
        int acts[2 * N], t_before[N];
        if (step == 5) { /* env 1 reaches its time limit in this step, at t 13 */
            ((md_state *)ve.envs[1].state)->ends = 10;
            ((md_state *)ve.envs[1].state)->t = 3;
            md_mask(ve.envs[1].state, ve.mask + 5); /* as the state now says */
            ve.envs[1].elapsed_steps = md_class.spec.max_episode_steps - 1;
        }
        for (int i = 0; i < N; i++) {
            t_before[i] = ((md_state *)ve.envs[i].state)->t;
            md_mask(ve.envs[i].state, want);
            CHECK(memcmp(ve.mask + 5 * i, want, 5) == 0);
            acts[2 * i] = ((md_state *)ve.envs[i].state)->t % 3; /* the valid one */
            acts[2 * i + 1] = step % 2;
        }
        float reward[N], final_obs[N];
        uint8_t term[N], trunc[N];
        CHECK_INT_EQ(vec_env_step(&ve, acts, NULL, reward, term, trunc, final_obs, NULL, NULL),
                     CALF_OK);
        for (int i = 0; i < N; i++) {
            ended += term[i];
            CHECK(reward[i] == (float)acts[2 * i]);
            /* the final mask: the final state's (a truncated env's from before its reset),
             * all 1 where terminated */
            uint8_t fin[5] = {1, 1, 1, 1, 1};
            md_state last = {.t = t_before[i] + acts[2 * i] + 10 * acts[2 * i + 1]};
            if (!term[i]) md_mask(&last, fin);
            cut += trunc[i];
            CHECK(memcmp(ve.final_mask + 5 * i, fin, 5) == 0);
            if (trunc[i]) /* which the reset state's (t 2) is not */
                CHECK(memcmp(ve.mask + 5 * i, fin, 5) != 0);
        }
    }
    CHECK(ended > 0);
    CHECK_INT_EQ(cut, 1);
    /* a loaded record's mask is its state's */
    size_t rs = vec_env_record_size(&ve);
    unsigned char *rec = malloc(rs);
    vec_env_save_record(&ve, 0, rec);
    memset(ve.mask, 7, 5);
    CHECK_INT_EQ(vec_env_load_record(&ve, 1, rec, &err), CALF_EINVAL); /* another index */
    CHECK_INT_EQ(vec_env_load_record(&ve, 0, rec, &err), CALF_OK);
    uint8_t want[5];
    md_mask(ve.envs[0].state, want);
    CHECK(memcmp(ve.mask, want, 5) == 0);
    free(rec);
    /* an empty slice: every choice valid there, and the env's fault */
    CHECK_INT_EQ(vec_env_fault(&ve, &err), CALF_OK);
    mask_empty_at = 1000; /* env 2 reaches it in this step; the others stay far below */
    int acts[2 * N] = {0};
    ((md_state *)ve.envs[2].state)->t = 998; /* + 998 % 3 */
    ((md_state *)ve.envs[2].state)->ends = 10; /* no reset in this step */
    for (int i = 0; i < N; i++) acts[2 * i] = ((md_state *)ve.envs[i].state)->t % 3;
    float reward[N];
    uint8_t term[N], trunc[N];
    ((md_state *)ve.envs[2].state)->ends = 10;
    CHECK_INT_EQ(vec_env_step(&ve, acts, NULL, reward, term, trunc, NULL, NULL, NULL), CALF_EINVAL);
    CHECK(ve.mask[10] == 1 && ve.mask[11] == 1 && ve.mask[12] == 1);
    CHECK(strstr(ve.fault.msg, "environment MaskedMulti-v0, env index 4: step") == ve.fault.msg);
    CHECK(strstr(ve.fault.msg, "its action mask allows no action of a sub-action") != NULL);
    mask_empty_at = -1;
    vec_env_free(&ve);

    /* the hooks go with their spec fields */
    calf_env_class bad = md_class;
    bad.spec.name = "BadMask-v0";
    bad.action_mask = NULL;
    CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "action_mask") != NULL);
    bad = md_class;
    bad.spec.name = "BadMulti-v0";
    bad.step_multi = NULL;
    CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "step") != NULL);
    CHECK(calf_env_find("BadMask-v0") == NULL && calf_env_find("BadMulti-v0") == NULL);
}

int main(void) {
    const char *names[] = {"CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCar-v0",
                           "MountainCarContinuous-v0"};
    for (int k = 0; k < 5; k++) {
        test_split_invariance(names[k]);
        test_matches_lone_env(names[k]);
        test_records(names[k]);
    }
    test_final_obs();
    test_init_errors();
    test_native_state();
    test_faults();
    test_byte_faults();
    test_bytes();
    test_masks();
    return test_report("test_vec_env");
}
