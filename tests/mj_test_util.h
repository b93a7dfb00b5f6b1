/* mj_test_util.h: what the MuJoCo env tests share: each env's expected model
 * dimensions, and a trajectory digest recorded from the comparison with Gymnasium's own
 * model files (tests/test_mj_reference.c prints it for both models; test_mujoco.c
 * checks calf's against the recorded value, so CI needs nothing fetched). */
#ifndef CALF_MJ_TEST_UTIL_H
#define CALF_MJ_TEST_UTIL_H

#include <stdint.h>
#include <string.h>

#include "calf/env.h"
#include "envs/mj_env.h"

typedef struct mj_expect {
    const char *name;   /* the calf env */
    const char *gym_file; /* Gymnasium's model file (assets/<gym_file>) */
    int nq, nv, nu;
    double timestep;
    int integrator;     /* mjINT_EULER or mjINT_RK4 */
    int frame_skip;
    uint64_t digest;    /* mj_trajectory_digest, recorded from the comparison */
} mj_expect;

/* Recorded with test_mj_reference on MuJoCo 2.2.2 (Debian's libmujoco-dev), where
 * Gymnasium's model files gave the same digest step for step (the last six rows, too). Ant-v4's reset draws
 * normal qvel noise: its digest was recorded again when calf_rng_normal moved to calf's
 * own log and cos (base/cmath.h), by test_mujoco on calf's model. */
static const mj_expect mj_expected[] = {
    {"InvertedPendulum-v4", "inverted_pendulum.xml", 2, 2, 1, 0.02, mjINT_RK4, 2,
     0x2a6d86d5bbb5e97aULL},
    {"HalfCheetah-v4", "half_cheetah.xml", 9, 9, 6, 0.01, mjINT_EULER, 5,
     0xe6fc8d8392e557e2ULL},
    {"Hopper-v4", "hopper.xml", 6, 6, 3, 0.002, mjINT_RK4, 4,
     0x983b889cb283492bULL},
    {"Walker2d-v4", "walker2d.xml", 9, 9, 6, 0.002, mjINT_RK4, 4,
     0x9c5f77e719b607d9ULL},
    {"Ant-v4", "ant.xml", 15, 14, 8, 0.01, mjINT_RK4, 5,
     0xbf20e94524f2a312ULL},
    {"InvertedDoublePendulum-v4", "inverted_double_pendulum.xml", 3, 3, 1, 0.01, mjINT_RK4, 5,
     0x1bfb62439e665142ULL},
    {"Swimmer-v4", "swimmer.xml", 5, 5, 2, 0.01, mjINT_RK4, 4,
     0x6833613585d71e18ULL},
    {"Reacher-v4", "reacher.xml", 4, 4, 2, 0.01, mjINT_RK4, 2,
     0x67ba866ed052c53eULL},
    {"Pusher-v4", "pusher.xml", 11, 11, 7, 0.01, mjINT_EULER, 5,
     0x059c8b4ce1dce171ULL},
    {"Humanoid-v4", "humanoid.xml", 24, 23, 17, 0.003, mjINT_RK4, 5,
     0x3bd637c1ec35dfbdULL},
    {"HumanoidStandup-v4", "humanoidstandup.xml", 24, 23, 17, 0.003, mjINT_RK4, 5,
     0x9ea87b808f7badf3ULL},
};
enum { MJ_NUM_EXPECTED = (int)(sizeof mj_expected / sizeof mj_expected[0]) };
enum { MJ_DIGEST_STEPS = 300 };
/* Room for the largest observation and action (Humanoid's 376 and 17). */
enum { MJ_TEST_MAX_OBS = 512, MJ_TEST_MAX_ACT = 32 };

static inline uint64_t mj_fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* FNV-1a over MJ_DIGEST_STEPS steps of the class `cls` on `state` (an mj_state whose
 * model is calf's or Gymnasium's): the reset's qpos, qvel and observation, then after
 * every step qpos, qvel, qacc_warmstart, the observation, reward and terminated flag,
 * with a reset (from the same dynamics stream) after a termination. Actions are
 * uniform in the bounds from the (7, 0, ACTION) stream; the dynamics stream is
 * (1, 0, DYNAMICS), as env 0 of a job seeded 1 has. */
static inline uint64_t mj_trajectory_digest(const calf_env_class *cls, mj_state *s) {
    const calf_env_spec *sp = &cls->spec;
    calf_rng dyn, act;
    calf_rng_seed(&dyn, 1, 0, CALF_RNG_DYNAMICS);
    calf_rng_seed(&act, 7, 0, CALF_RNG_ACTION);
    float obs[MJ_TEST_MAX_OBS], u[MJ_TEST_MAX_ACT], r;
    uint64_t h = 0xcbf29ce484222325ULL;
    const mjModel *m = s->m;
    cls->reset(s, &dyn, obs);
    h = mj_fnv(h, s->d->qpos, (size_t)m->nq * sizeof(double));
    h = mj_fnv(h, s->d->qvel, (size_t)m->nv * sizeof(double));
    h = mj_fnv(h, obs, (size_t)sp->obs_dim * sizeof(float));
    for (int t = 0; t < MJ_DIGEST_STEPS; t++) {
        for (int j = 0; j < sp->action_dim; j++)
            u[j] = (float)calf_rng_uniform_range(&act, sp->action_low[j], sp->action_high[j]);
        int term = cls->step(s, &dyn, 0, u, obs, &r);
        h = mj_fnv(h, s->d->qpos, (size_t)m->nq * sizeof(double));
        h = mj_fnv(h, s->d->qvel, (size_t)m->nv * sizeof(double));
        h = mj_fnv(h, s->d->qacc_warmstart, (size_t)m->nv * sizeof(double));
        h = mj_fnv(h, obs, (size_t)sp->obs_dim * sizeof(float));
        h = mj_fnv(h, &r, sizeof r);
        h = mj_fnv(h, &term, sizeof term);
        if (term) cls->reset(s, &dyn, obs);
    }
    return h;
}

#endif
