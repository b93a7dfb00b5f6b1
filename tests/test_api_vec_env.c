/* test_api_vec_env.c: the public calf_vec_env (calf/vec_env.h) gives the trainer's
 * trajectories, bit for bit: the same floats as the internal vec_env the trainer steps
 * and as `calf env`'s loop over a lone env, for any first index; its spaces, reset
 * rule, argument errors and the fault of an env that returns NaN, each checked; a uint8
 * env's byte calls give the same values. */
#include "calf/vec_env.h"

#include <math.h>
#include <stdint.h>

#include "calf/env.h"
#include "envs/vec_env.h"
#include "test_util.h"

enum { MAX_N = 16, MAX_OD = 8, MAX_AD = 2 };

static const char *const classic[] = {"CartPole-v1", "Pendulum-v1", "Acrobot-v1",
                                      "MountainCar-v0", "MountainCarContinuous-v0"};

/* The action job env g takes at step t, beyond the bounds at times on purpose. */
static void pick_actions(const calf_vec_env *v, int t, int *act, float *u) {
    int n = calf_vec_env_count(v), ad = calf_vec_env_action_dim(v);
    for (int i = 0; i < n; i++) {
        calf_rng r;
        calf_rng_seed(&r, 17, (uint64_t)(calf_vec_env_first_index(v) + i) * 100003u + (uint64_t)t,
                      CALF_RNG_ACTION);
        if (ad == 0) act[i] = (int)calf_rng_below(&r, (uint32_t)calf_vec_env_num_actions(v));
        for (int j = 0; j < ad; j++) u[i * ad + j] = (float)calf_rng_uniform_range(&r, -3.0, 3.0);
    }
}

/* Spaces as the registry's spec gives them. */
static void test_spaces(void) {
    calf_error err;
    calf_error_clear(&err);
    calf_vec_env *v = NULL;
    CHECK_INT_EQ(calf_vec_env_open("CartPole-v1", NULL, 1, 10, 3, &v, &err), CALF_OK);
    CHECK(v != NULL);
    CHECK_INT_EQ(calf_vec_env_count(v), 3);
    CHECK_INT_EQ(calf_vec_env_first_index(v), 10);
    CHECK_STR_EQ(calf_vec_env_name(v), "CartPole-v1");
    CHECK_INT_EQ(calf_vec_env_obs_dim(v), 4);
    CHECK_INT_EQ(calf_vec_env_discrete(v), 1);
    CHECK_INT_EQ(calf_vec_env_num_actions(v), 2);
    CHECK_INT_EQ(calf_vec_env_action_dim(v), 0);
    CHECK(calf_vec_env_action_low(v) == NULL && calf_vec_env_action_high(v) == NULL);
    CHECK_INT_EQ(calf_vec_env_max_episode_steps(v), 500);
    calf_vec_env_close(v);

    CHECK_INT_EQ(calf_vec_env_open("Pendulum-v1", NULL, 1, 0, 1, &v, &err), CALF_OK);
    CHECK_INT_EQ(calf_vec_env_obs_dim(v), 3);
    CHECK_INT_EQ(calf_vec_env_discrete(v), 0);
    CHECK_INT_EQ(calf_vec_env_num_actions(v), 0);
    CHECK_INT_EQ(calf_vec_env_action_dim(v), 1);
    CHECK(calf_vec_env_action_low(v)[0] == -2.0f && calf_vec_env_action_high(v)[0] == 2.0f);
    CHECK_INT_EQ(calf_vec_env_max_episode_steps(v), 200);
    calf_vec_env_close(v);
    calf_vec_env_close(NULL);
}

/* The public block and the trainer's internal one, fed the same actions, give the same
 * bytes in every output, over episodes that terminate and that are truncated; the
 * first reset is open's episodes, a second one the internal block's vec_env_reset. */
static void test_same_as_trainer(const char *name) {
    enum { FIRST = 5, N = 7, T = 700 };
    calf_error err;
    calf_error_clear(&err);
    calf_vec_env *v = NULL;
    vec_env ve;
    CHECK_INT_EQ(calf_vec_env_open(name, NULL, 1234, FIRST, N, &v, &err), CALF_OK);
    CHECK_INT_EQ(vec_env_init(&ve, name, 1234, FIRST, N, &err), CALF_OK);
    int od = calf_vec_env_obs_dim(v), ad = calf_vec_env_action_dim(v);
    static float obs[MAX_N * MAX_OD], final_obs[MAX_N * MAX_OD], ref_final[MAX_N * MAX_OD];
    float reward[MAX_N], ref_reward[MAX_N], u[MAX_N * MAX_AD];
    uint8_t term[MAX_N], trunc[MAX_N], ref_term[MAX_N], ref_trunc[MAX_N];
    int act[MAX_N];
    size_t obs_bytes = (size_t)N * (size_t)od * sizeof(float);
    CHECK_INT_EQ(calf_vec_env_reset(v, obs, &err), CALF_OK);
    CHECK(memcmp(obs, ve.obs, obs_bytes) == 0);
    int ends = 0, truncations = 0, same = 1;
    for (int t = 0; t < T; t++) {
        if (t == T * 4 / 5) { /* a reset late: new episodes, the same on both sides */
            CHECK_INT_EQ(calf_vec_env_reset(v, obs, &err), CALF_OK);
            vec_env_reset(&ve);
            CHECK(memcmp(obs, ve.obs, obs_bytes) == 0);
        }
        pick_actions(v, t, act, u);
        CHECK_INT_EQ(calf_vec_env_step(v, ad ? NULL : act, ad ? u : NULL, obs, reward, term, trunc,
                                       final_obs, &err),
                     CALF_OK);
        vec_env_step(&ve, act, ad ? u : NULL, ref_reward, ref_term, ref_trunc, ref_final, NULL, NULL);
        same &= memcmp(obs, ve.obs, obs_bytes) == 0 && memcmp(final_obs, ref_final, obs_bytes) == 0 &&
                memcmp(reward, ref_reward, N * sizeof(float)) == 0 &&
                memcmp(term, ref_term, N) == 0 && memcmp(trunc, ref_trunc, N) == 0;
        for (int i = 0; i < N; i++) {
            ends += term[i] | trunc[i];
            truncations += trunc[i];
            /* SAME_STEP: obs differs from final_obs only where an episode ended */
            if (!(term[i] | trunc[i]))
                CHECK(memcmp(obs + i * od, final_obs + i * od, (size_t)od * sizeof(float)) == 0);
        }
    }
    CHECK(same);
    if (calf_vec_env_max_episode_steps(v) < T * 4 / 5) CHECK(ends > 0);
    if (strcmp(name, "Pendulum-v1") == 0) CHECK(truncations > 0);
    vec_env_free(&ve);
    calf_vec_env_close(v);
}

/* `calf env NAME --seed S --index I --steps K`'s loop: one env, actions from the
 * (S, I, CALF_RNG_ACTION) stream, a reset after an episode ends. A block of one env at
 * first_index I, driven by the same actions, prints the same rows. */
static void test_same_as_calf_env(const char *name) {
    enum { INDEX = 41, STEPS = 600 };
    const uint64_t seed = 3;
    calf_error err;
    calf_error_clear(&err);
    calf_env env;
    CHECK_INT_EQ(calf_env_init(&env, name, seed, INDEX, &err), CALF_OK);
    calf_vec_env *v = NULL;
    CHECK_INT_EQ(calf_vec_env_open(name, NULL, seed, INDEX, 1, &v, &err), CALF_OK);
    const calf_env_spec *s = &env.cls->spec;
    calf_rng action_rng;
    calf_rng_seed(&action_rng, seed, INDEX, CALF_RNG_ACTION);
    float obs[MAX_OD], vobs[MAX_OD], vfinal[MAX_OD], u[MAX_AD], reward, vreward;
    uint8_t vterm, vtrunc;
    calf_env_reset(&env, obs);
    CHECK_INT_EQ(calf_vec_env_reset(v, vobs, &err), CALF_OK);
    size_t ob = (size_t)s->obs_dim * sizeof(float);
    int same = memcmp(obs, vobs, ob) == 0;
    for (int t = 1; t <= STEPS; t++) {
        int action = 0, term, trunc;
        if (s->num_actions > 0) {
            action = (int)calf_rng_below(&action_rng, (uint32_t)s->num_actions);
        } else {
            for (int j = 0; j < s->action_dim; j++)
                u[j] = (float)calf_rng_uniform_range(&action_rng, s->action_low[j], s->action_high[j]);
        }
        calf_env_step(&env, action, u, obs, &reward, &term, &trunc);
        CHECK_INT_EQ(calf_vec_env_step(v, &action, u, vobs, &vreward, &vterm, &vtrunc, vfinal, &err),
                     CALF_OK);
        same &= memcmp(obs, vfinal, ob) == 0 && memcmp(&reward, &vreward, sizeof reward) == 0 &&
                term == vterm && trunc == vtrunc;
        if (term || trunc) calf_env_reset(&env, obs);
        same &= memcmp(obs, vobs, ob) == 0;
    }
    CHECK(same);
    calf_env_free(&env);
    calf_vec_env_close(v);
}

/* Every failure is a status and a message, *out NULL, nothing held; a refused step
 * steps nothing. */
static void test_errors(void) {
    calf_error err;
    calf_error_clear(&err);
    calf_vec_env *v = (calf_vec_env *)&err; /* open must set it to NULL on failure */
    CHECK_INT_EQ(calf_vec_env_open("Nope-v0", NULL, 1, 0, 4, &v, &err), CALF_EINVAL);
    CHECK(v == NULL);
    CHECK(strstr(err.msg, "Nope-v0") != NULL && strstr(err.msg, "CartPole-v1") != NULL);
    CHECK_INT_EQ(calf_vec_env_open(NULL, NULL, 1, 0, 4, &v, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_vec_env_open("CartPole-v1", NULL, 1, 0, 0, &v, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "count=0") != NULL);
    CHECK_INT_EQ(calf_vec_env_open("CartPole-v1", NULL, 1, -1, 4, &v, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_vec_env_open("CartPole-v1", NULL, 1, 2147483600, 100, &v, &err), CALF_EINVAL);
    CHECK(v == NULL);
    CHECK_INT_EQ(calf_vec_env_open("CartPole-v1", "/nonexistent/lib.so", 1, 0, 4, &v, &err),
                 CALF_EINVAL);
    CHECK(strstr(err.msg, "/nonexistent/lib.so") != NULL);
    CHECK(v == NULL);

    /* a refused step changes nothing: afterwards the block is still the reference's */
    calf_vec_env *a = NULL, *b = NULL;
    CHECK_INT_EQ(calf_vec_env_open("CartPole-v1", NULL, 9, 0, 3, &a, &err), CALF_OK);
    CHECK_INT_EQ(calf_vec_env_open("CartPole-v1", NULL, 9, 0, 3, &b, &err), CALF_OK);
    float obs[3 * 4], obs_b[3 * 4], rew[3], rew_b[3];
    uint8_t te[3], tr[3];
    int bad[3] = {1, 2, 0}, good[3] = {1, 0, 0};
    CHECK_INT_EQ(calf_vec_env_step(a, bad, NULL, obs, rew, te, tr, NULL, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "action 2 of row 1 (env index 1) is not in 0..1") != NULL);
    bad[1] = -1;
    CHECK_INT_EQ(calf_vec_env_step(a, bad, NULL, obs, rew, te, tr, NULL, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_vec_env_step(a, NULL, NULL, obs, rew, te, tr, NULL, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "discrete actions: actions is NULL") != NULL);
    CHECK_INT_EQ(calf_vec_env_step(a, good, NULL, NULL, rew, te, tr, NULL, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_vec_env_reset(a, NULL, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_vec_env_step(a, good, NULL, obs, rew, te, tr, NULL, &err), CALF_OK);
    CHECK_INT_EQ(calf_vec_env_step(b, good, NULL, obs_b, rew_b, te, tr, NULL, &err), CALF_OK);
    CHECK(memcmp(obs, obs_b, sizeof obs) == 0 && memcmp(rew, rew_b, sizeof rew) == 0);
    calf_vec_env_close(a);
    calf_vec_env_close(b);
    CHECK_INT_EQ(calf_vec_env_open("Pendulum-v1", NULL, 9, 0, 1, &a, &err), CALF_OK);
    CHECK_INT_EQ(calf_vec_env_step(a, good, NULL, obs, rew, te, tr, NULL, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "Pendulum-v1 has continuous actions: cont_actions is NULL") != NULL);
    calf_vec_env_close(a);

    /* misuse (calf/vec_env.h): a closed handle is refused, never read through; a second
     * close does nothing; NULL is refused the same way */
    calf_vec_env_close(a);
    calf_vec_env_close(NULL);
    CHECK_INT_EQ(calf_vec_env_step(a, good, NULL, obs, rew, te, tr, NULL, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "calf_vec_env_step") && strstr(err.msg, "not an open vec_env"));
    CHECK_INT_EQ(calf_vec_env_reset(a, obs, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "calf_vec_env_reset") && strstr(err.msg, "not an open vec_env"));
    CHECK_INT_EQ(calf_vec_env_step(NULL, good, NULL, obs, rew, te, tr, NULL, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "the vec_env is NULL") != NULL);
    CHECK_INT_EQ(calf_vec_env_reset(NULL, obs, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_vec_env_count(a), -1);
    CHECK_INT_EQ(calf_vec_env_first_index(NULL), -1);
    CHECK_INT_EQ(calf_vec_env_obs_dim(a), -1);
    CHECK_INT_EQ(calf_vec_env_discrete(a), -1);
    CHECK_INT_EQ(calf_vec_env_num_actions(a), -1);
    CHECK_INT_EQ(calf_vec_env_action_dim(a), -1);
    CHECK_INT_EQ(calf_vec_env_max_episode_steps(a), -1);
    CHECK(calf_vec_env_name(a) == NULL && calf_vec_env_env(a, 0) == NULL);
    CHECK(calf_vec_env_action_low(a) == NULL && calf_vec_env_action_high(NULL) == NULL);
    CHECK_INT_EQ(calf_vec_env_open("CartPole-v1", NULL, 1, 0, 4, NULL, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "out is NULL") != NULL);
}

/* A class registered by the program (as a plug-in registers its own) that returns a
 * NaN reward at one step of each episode, drawn at reset. */
typedef struct nan_state {
    int t, bad_at;
} nan_state;
static void nan_reset(void *state, calf_rng *rng, float *obs) {
    nan_state *s = state;
    s->t = 0;
    s->bad_at = 2 + (int)calf_rng_below(rng, 5);
    obs[0] = 0.0f;
}
static int nan_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                    float *reward) {
    (void)rng, (void)action, (void)u;
    nan_state *s = state;
    s->t++;
    obs[0] = (float)s->t;
    *reward = s->t == s->bad_at ? NAN : 1.0f;
    return 0;
}
static const calf_env_class nan_class = {
    .spec = {.name = "ApiNanReward-v0", .obs_dim = 1, .num_actions = 3, .max_episode_steps = 9,
             .state_size = sizeof(nan_state)},
    .reset = nan_reset,
    .step = nan_step,
};

/* The step that returns the NaN fails naming the env (its job index and episode step)
 * and still writes its outputs; a later clean step succeeds again. */
static void test_env_fault(void) {
    calf_error err;
    calf_error_clear(&err);
    CHECK_INT_EQ(calf_env_register(&nan_class, &err), CALF_OK);
    calf_vec_env *v = NULL;
    CHECK_INT_EQ(calf_vec_env_open("ApiNanReward-v0", NULL, 2, 30, 1, &v, &err), CALF_OK);
    CHECK_INT_EQ(calf_vec_env_discrete(v), 1);
    CHECK_INT_EQ(calf_vec_env_num_actions(v), 3);
    float obs[1], rew[1];
    uint8_t te[1], tr[1];
    int act[1] = {2}, failed_at = 0, clean_after = 0;
    CHECK_INT_EQ(calf_vec_env_reset(v, obs, &err), CALF_OK);
    for (int t = 1; t <= 9; t++) {
        int rc = calf_vec_env_step(v, act, NULL, obs, rew, te, tr, NULL, &err);
        CHECK_INT_EQ(rc, isnan(rew[0]) ? CALF_EINVAL : CALF_OK);
        CHECK(obs[0] == (float)(tr[0] ? 0 : t)); /* the step happened */
        if (rc != CALF_OK && !failed_at) {
            failed_at = t;
            char want[160];
            snprintf(want, sizeof want,
                     "environment ApiNanReward-v0, env index 30: step %d of its episode returned "
                     "a non-finite reward (nan)", t);
            CHECK_STR_EQ(strstr(err.msg, want) == err.msg ? want : err.msg, want);
        }
        if (rc == CALF_OK && failed_at) clean_after++;
    }
    CHECK(failed_at >= 2 && failed_at <= 6);
    CHECK(clean_after > 0);
    calf_vec_env_close(v);
}

/* A uint8 env read as bytes: the byte calls give the float calls' values, reset rule
 * and episodes included; after them the float calls return the block's bytes as floats;
 * a float env refuses them. */
static void test_bytes(const char *name) {
    enum { N = 6, T = 400, OD = 1000 };
    calf_error err;
    calf_vec_env *f = NULL, *b = NULL;
    CHECK_INT_EQ(calf_vec_env_open(name, NULL, 4, 2, N, &f, &err), CALF_OK);
    CHECK_INT_EQ(calf_vec_env_open(name, NULL, 4, 2, N, &b, &err), CALF_OK);
    CHECK_INT_EQ(calf_vec_env_obs_high(b), 1);
    int od = calf_vec_env_obs_dim(b), na = calf_vec_env_num_actions(b), same = 1;
    CHECK(od <= OD);
    static float fo[N * OD], ff[N * OD];
    static uint8_t bo[N * OD], bf[N * OD];
    float rf[N], rb[N];
    uint8_t tf[N], tb[N], uf[N], ub[N];
    int act[N];
    CHECK_INT_EQ(calf_vec_env_reset(f, fo, &err), CALF_OK);
    CHECK_INT_EQ(calf_vec_env_reset_u8(b, bo, &err), CALF_OK);
    for (int k = 0; k < N * od; k++) same &= (float)bo[k] == fo[k];
    for (int t = 0; t < T; t++) {
        for (int e = 0; e < N; e++) act[e] = (t * 7 + e * 3) % na;
        CHECK_INT_EQ(calf_vec_env_step(f, act, NULL, fo, rf, tf, uf, ff, &err), CALF_OK);
        if (t % 2) { /* the float call on a byte block: its bytes as floats */
            CHECK_INT_EQ(calf_vec_env_step(b, act, NULL, fo, rb, tb, ub, ff, &err), CALF_OK);
            continue;
        }
        CHECK_INT_EQ(calf_vec_env_step_u8(b, act, NULL, bo, rb, tb, ub, bf, &err), CALF_OK);
        for (int k = 0; k < N * od; k++) same &= (float)bo[k] == fo[k] && (float)bf[k] == ff[k];
        same &= memcmp(rf, rb, sizeof rf) == 0 && memcmp(tf, tb, N) == 0 && memcmp(uf, ub, N) == 0;
    }
    CHECK(same);
    calf_vec_env_close(f);
    calf_vec_env_close(b);
    CHECK_INT_EQ(calf_vec_env_open("CartPole-v1", NULL, 4, 0, 2, &f, &err), CALF_OK);
    CHECK_INT_EQ(calf_vec_env_obs_high(f), 0);
    CHECK_INT_EQ(calf_vec_env_reset_u8(f, bo, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "calf_vec_env_reset_u8: CartPole-v1's observations are floats") != NULL);
    act[0] = act[1] = 0;
    CHECK_INT_EQ(calf_vec_env_step_u8(f, act, NULL, bo, rb, tb, ub, NULL, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_vec_env_step_u8(f, act, NULL, NULL, rb, tb, ub, NULL, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "calf_vec_env_step_u8: an output array is NULL") != NULL);
    calf_vec_env_close(f);
    CHECK_INT_EQ(calf_vec_env_obs_high(f), -1);
}

int main(void) {
    test_spaces();
    test_bytes("MinAtar/Breakout-v0");
    test_bytes("MinAtar/SpaceInvaders-v1");
    for (int k = 0; k < 5; k++) {
        test_same_as_trainer(classic[k]);
        test_same_as_calf_env(classic[k]);
    }
    test_errors();
    test_env_fault();
    return test_report("test_api_vec_env");
}
