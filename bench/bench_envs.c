/* bench_envs.c: env-only throughput (env steps per second on one core) for every
 * registered environment, through calf_env_step on one env and through vec_env_step
 * on a block of 64, median of several repetitions; a uint8 env's observations as bytes
 * (its byte hooks, and vec_env_step_u8), as the trainer keeps them. Actions come from a precomputed
 * table so the policy costs nothing; the targets: CartPole-v1 >= 20 M/s, and a block of
 * each MuJoCo env >= 95% of a bare mj_step loop over the block's own mjData (measured
 * last, the ratio printed per env). The bare loop makes the MuJoCo calls of the same
 * kind of trajectory and nothing else: ctrl and frame_skip mj_steps per env step, and
 * as often as the block's episodes end (random actions fell InvertedPendulum in a few
 * steps), the reset's own physics: mj_env_reset_data, qpos0 and one mj_forward. Without
 * those resets its states drift where the block's never go (a fallen Humanoid in
 * contact everywhere costs 1.6x a standing one), and the ratio would measure that.
 * Usage: bench_envs [ENV] (one env only) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "calf/env.h"
#include "envs/envs.h"
#include "envs/vec_env.h"

enum { REPS = 5, TABLE = 4096, BLOCK = 64 };
/* Buffers sized for every built-in env (Seaquest's 1,000 observations, Humanoid-v4's 17 actions);
 * main checks each env fits. */
enum { MAX_OBS = 1024, MAX_ACT = 32 };
static const double target_rep_seconds = 0.15;

/* CPU time of this thread: the machine is shared, and a core's throughput is what
 * the issue asks for, not how long other processes kept us waiting. */
static double cpu_now(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int actions[TABLE];
static float cont[TABLE * MAX_ACT];
static double sink; /* keeps the results observable so nothing is optimised away */

static void fill_actions(const calf_env_spec *s) {
    calf_rng r;
    calf_rng_seed(&r, 7, 0, CALF_RNG_ACTION);
    for (int i = 0; i < TABLE; i++) {
        actions[i] = s->num_actions ? (int)calf_rng_below(&r, (uint32_t)s->num_actions) : 0;
        for (int j = 0; j < s->action_dim; j++)
            cont[i * MAX_ACT + j] =
                (float)calf_rng_uniform_range(&r, s->action_low[j], s->action_high[j]);
    }
}

/* A timed run of n rounds of something (ctx); returns CPU-seconds. */
typedef double (*run_fn)(void *ctx, long n);

/* The rounds a run of `run` takes about target_rep_seconds for: n grown by 4 from
 * `start` until a run takes a measurable time, then scaled. */
static long calibrate(run_fn run, void *ctx, long start) {
    long n = start;
    double dt;
    while ((dt = run(ctx, n)) <= 0.02) n *= 4;
    return (long)((double)n * target_rep_seconds / dt) + 1;
}

/* n steps of one env (a calf_env) with auto-reset; returns seconds. */
static double run_single(void *ctx, long n) {
    calf_env *env = ctx;
    float obs[MAX_OBS], r;
    uint8_t obs8[MAX_OBS];
    int term, trunc;
    double acc = 0;
    double t0 = cpu_now();
    if (env->cls->step_u8) { /* a byte class: bytes, as the trainer's block takes them */
        for (long i = 0; i < n; i++) {
            int k = (int)(i & (TABLE - 1));
            env_step_u8(env, actions[k], cont + k * MAX_ACT, obs8, &r, &term, &trunc);
            acc += r;
            if (term | trunc) env_reset_u8(env, obs8);
        }
        obs[0] = obs8[0];
    } else {
        for (long i = 0; i < n; i++) {
            int k = (int)(i & (TABLE - 1));
            calf_env_step(env, actions[k], cont + k * MAX_ACT, obs, &r, &term, &trunc);
            acc += r;
            if (term | trunc) calf_env_reset(env, obs);
        }
    }
    double dt = cpu_now() - t0;
    sink += acc + obs[0];
    return dt;
}

/* Episodes ended and env steps taken by run_block since measure_pair zeroed them. */
static long block_episodes, block_steps;

/* n steps of the whole block of a vec_env (n * BLOCK env steps); returns seconds. */
static double run_block(void *ctx, long n) {
    vec_env *ve = ctx;
    static int act[BLOCK];
    static float cact[BLOCK * MAX_ACT], reward[BLOCK], final_obs[BLOCK * MAX_OBS];
    static uint8_t term[BLOCK], trunc[BLOCK], final_obs8[BLOCK * MAX_OBS];
    double acc = 0;
    double t0 = cpu_now();
    for (long i = 0; i < n; i++) {
        /* Cheap per-step action rotation through the table (not timed separately:
         * it is part of what a trainer pays to hand actions over). */
        int base = (int)((i * BLOCK) & (TABLE - 1));
        for (int e = 0; e < BLOCK; e++) {
            act[e] = actions[(base + e) & (TABLE - 1)];
            for (int j = 0; j < ve->action_dim; j++)
                cact[e * ve->action_dim + j] = cont[((base + e) & (TABLE - 1)) * MAX_ACT + j];
        }
        if (ve->obs8)
            vec_env_step_u8(ve, act, cact, reward, term, trunc, final_obs8, NULL, NULL);
        else
            vec_env_step(ve, act, cact, reward, term, trunc, final_obs, NULL, NULL);
        acc += reward[0];
        for (int e = 0; e < BLOCK; e++) block_episodes += term[e] | trunc[e];
    }
    block_steps += n * BLOCK;
    double dt = cpu_now() - t0;
    sink += acc + final_obs[0] + final_obs8[0];
    return dt;
}

/* Median steps/s of a block of an existing vec_env (BLOCK envs). */
static double measure_block(vec_env *ve) {
    long n = calibrate(run_block, ve, 1);
    double rates[REPS];
    for (int r = 0; r < REPS; r++) rates[r] = (double)n * BLOCK / run_block(ve, n);
    qsort(rates, REPS, sizeof rates[0], bench_cmp_double);
    return rates[REPS / 2];
}

/* Median steps/s over REPS repetitions, each sized to about target_rep_seconds: one
 * env, or a block of BLOCK. */
static double measure(int block, const char *name) {
    calf_error err;
    if (block) {
        vec_env ve;
        if (vec_env_init(&ve, name, 1, 0, BLOCK, &err) != CALF_OK) goto fail;
        if (ve.obs_high && vec_env_use_u8(&ve, &err) != CALF_OK) goto fail;
        double rate = measure_block(&ve);
        vec_env_free(&ve);
        return rate;
    }
    calf_env env;
    if (calf_env_init(&env, name, 1, 0, &err) != CALF_OK) goto fail;
    float obs[MAX_OBS];
    uint8_t obs8[MAX_OBS];
    if (env.cls->reset_u8) env_reset_u8(&env, obs8);
    else calf_env_reset(&env, obs);
    long n = calibrate(run_single, &env, 64); /* MuJoCo's take a thousand times CartPole's */
    double rates[REPS];
    for (int r = 0; r < REPS; r++) rates[r] = (double)n / run_single(&env, n);
    calf_env_free(&env);
    qsort(rates, REPS, sizeof rates[0], bench_cmp_double);
    return rates[REPS / 2];
fail:
    fprintf(stderr, "bench_envs: %s\n", err.msg);
    exit(1);
}

#if CALF_HAVE_MUJOCO
#include "envs/mj_env.h"

/* The bare physics of a block: nd mjData of model m, frame_skip mj_steps per env step,
 * the physics of a reset every `every` steps of an env (the block's episode length). */
typedef struct bare_loop {
    const mjModel *m;
    mjData **d;
    int nd, frame_skip;
    long every;
} bare_loop;

/* n rounds over the bare loop's mjData of ctrl from the same action table and
 * frame_skip mj_steps each, and its resets (staggered across envs). No observation,
 * reward, noise draw or termination test; seconds. */
static double run_bare(void *ctx, long n) {
    const bare_loop *b = ctx;
    const mjModel *m = b->m;
    mjData **d = b->d;
    int nd = b->nd, frame_skip = b->frame_skip;
    long every = b->every;
    double t0 = cpu_now();
    for (long i = 0; i < n; i++) {
        int base = (int)((i * nd) & (TABLE - 1));
        for (int e = 0; e < nd; e++) {
            const float *u = cont + ((base + e) & (TABLE - 1)) * MAX_ACT;
            for (int j = 0; j < m->nu; j++) d[e]->ctrl[j] = u[j];
            for (int k = 0; k < frame_skip; k++) mj_step(m, d[e]);
            if ((i + e) % every == every - 1) {
                mj_env_reset_data(m, d[e]);
                mj_forward(m, d[e]);
            }
        }
    }
    double dt = cpu_now() - t0;
    sink += d[0]->qpos[0];
    return dt;
}

/* The block of ve and the bare loop over its mjData (the same data, model and frame
 * skip), alternately, REPS times each, each run sized to about target_rep_seconds: the
 * median ratio of the pairs, and the median rates in *block and *bare. */
static double measure_pair(vec_env *ve, double *block, double *bare, double *episode) {
    int nd = ve->count;
    const mj_state *ps = ve->envs[0].state;
    const mjModel *m = ps->m;
    int frame_skip = ps->task->frame_skip;
    mjData **d = calloc((size_t)nd, sizeof *d);
    if (!d) {
        fprintf(stderr, "bench_envs: out of memory\n");
        exit(1);
    }
    for (int e = 0; e < nd; e++) d[e] = ((const mj_state *)ve->envs[e].state)->d;
    /* the episode length: the block until each env has ended two episodes on average,
     * at most 5 CPU-seconds; where fewer than one each ended by then (HumanoidStandup's
     * last their 1,000 steps), the time limit, which also bounds it */
    block_episodes = block_steps = 0;
    for (double spent = 0; block_episodes < 2 * nd && spent < 5.0;) spent += run_block(ve, 16);
    long limit = ve->envs[0].cls->spec.max_episode_steps;
    long every = block_episodes >= nd ? block_steps / block_episodes : limit;
    if (limit > 0 && every > limit) every = limit; /* few episodes over a long warm-up */
    if (every < 1) every = 1;
    bare_loop bare_ctx = {m, d, nd, frame_skip, every};
    long nb = calibrate(run_block, ve, 1), np = calibrate(run_bare, &bare_ctx, 1);
    double rb[REPS], rp[REPS], ratio[REPS];
    for (int r = 0; r < REPS; r++) {
        /* the bare loop left the data where it was; the block resets them as it goes */
        rb[r] = (double)nb * nd / run_block(ve, nb);
        rp[r] = (double)np * nd / run_bare(&bare_ctx, np);
        ratio[r] = rb[r] / rp[r];
    }
    free(d);
    *episode = (double)every;
    *block = bench_quantile(rb, REPS, 0.5);
    *bare = bench_quantile(rp, REPS, 0.5);
    return bench_quantile(ratio, REPS, 0.5);
}

/* The stepping target: a calf block against the bare physics it wraps, on the
 * same mjData. */
static void compare_bare(const char *name) {
    fill_actions(&calf_env_find(name)->spec);
    calf_error err;
    vec_env ve;
    if (vec_env_init(&ve, name, 1, 0, BLOCK, &err) != CALF_OK) {
        fprintf(stderr, "bench_envs: %s\n", err.msg);
        exit(1);
    }
    double block, bare, episode, ratio = measure_pair(&ve, &block, &bare, &episode);
    vec_env_free(&ve);
    printf("%-28s %14.1f %14.1f %9.1f%% %8.0f\n", name, block / 1e3, bare / 1e3, 100.0 * ratio,
           episode);
    fflush(stdout);
}
#endif

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL; /* one env by name */
    printf("env-only throughput, M env steps per CPU-second on one core, median of %d runs\n", REPS);
    printf("%-28s %14s %18s\n", "env", "calf_env_step", "vec_env_step(64)");
    for (int i = 0; i < calf_env_count(); i++) {
        const calf_env_spec *s = &calf_env_at(i)->spec;
        if (only && strcmp(s->name, only)) continue;
        if (s->obs_dim > MAX_OBS || s->action_dim > MAX_ACT) {
            fprintf(stderr, "bench_envs: %s does not fit the bench's buffers\n", s->name);
            return 1;
        }
        fill_actions(s);
        double single = measure(0, s->name);
        double block = measure(1, s->name);
        printf("%-28s %14.3g %18.3g\n", s->name, single / 1e6, block / 1e6);
        fflush(stdout);
    }
#if CALF_HAVE_MUJOCO
    printf("\nMuJoCo envs, a block of %d, k env steps per CPU-second on one core (median of %d, "
           "alternating; ratio: the median pair's; episode: the block's mean length, steps, "
           "where the bare loop resets):\n",
           BLOCK, REPS);
    printf("%-28s %14s %14s %10s %8s\n", "env", "vec_env_step", "bare mj_step", "ratio",
           "episode");
    for (int i = 0; i < calf_env_count(); i++) {
        const calf_env_class *c = calf_env_at(i);
        size_t mapped, touched;
        if ((!only || !strcmp(c->spec.name, only)) && mj_env_measure(c, &mapped, &touched))
            compare_bare(c->spec.name);
    }
#endif
    printf("(checksum %g)\n", sink);
    return 0;
}
