/* cmd_env.c: `calf envs` lists the registered environments and their specs;
 * `calf env NAME` steps one env with uniformly random actions from its own action
 * stream, so a user can see (and diff) exactly what an env does for a seed/index. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/env.h"
#include "calf/error.h"
#include "calf/rng.h"
#include "commands.h"

/* Action space as text: Discrete(n), MultiDiscrete(n1, n2, ...), either with " masked"
 * when the env masks its actions, Box(low..high, dim), or per-dimension bounds. */
static void format_action_space(const calf_env_spec *s, char *buf, size_t size) {
    const char *masked = s->action_mask ? " masked" : "";
    if (s->num_action_dims > 0) {
        size_t used = (size_t)snprintf(buf, size, "MultiDiscrete(");
        for (int d = 0; d < s->num_action_dims && used < size; d++)
            used += (size_t)snprintf(buf + used, size - used, "%s%d", d ? ", " : "",
                                     s->action_nvec[d]);
        if (used < size) snprintf(buf + used, size - used, ")%s", masked);
        return;
    }
    if (s->num_actions > 0) {
        snprintf(buf, size, "Discrete(%d)%s", s->num_actions, masked);
        return;
    }
    int uniform = 1;
    for (int j = 1; j < s->action_dim; j++)
        uniform &= s->action_low[j] == s->action_low[0] && s->action_high[j] == s->action_high[0];
    if (uniform) {
        snprintf(buf, size, "Box(%g..%g, %d)", (double)s->action_low[0], (double)s->action_high[0],
                 s->action_dim);
        return;
    }
    size_t used = (size_t)snprintf(buf, size, "Box([");
    for (int j = 0; j < s->action_dim && used < size; j++)
        used += (size_t)snprintf(buf + used, size - used, "%s%g..%g", j ? ", " : "",
                                 (double)s->action_low[j], (double)s->action_high[j]);
    if (used < size) snprintf(buf + used, size - used, "], %d)", s->action_dim);
}

/* Observation space as Gymnasium prints a Box: Box(-inf, inf, (4,), float32) for a flat
 * float vector (calf's spec gives no bounds), Box(0, 1, (10, 10, 4), uint8) for bytes. */
static void format_obs_space(const calf_env_spec *s, char *buf, size_t size) {
    char shape[64];
    if (s->obs_shape[0] > 0)
        snprintf(shape, sizeof shape, "(%d, %d, %d)", s->obs_shape[0], s->obs_shape[1],
                 s->obs_shape[2]);
    else
        snprintf(shape, sizeof shape, "(%d,)", s->obs_dim);
    if (s->obs_dtype == CALF_DTYPE_U8)
        snprintf(buf, size, "Box(0, %d, %s, uint8)", s->obs_high ? s->obs_high : 255, shape);
    else
        snprintf(buf, size, "Box(-inf, inf, %s, float32)", shape);
}

int calf_cmd_envs(const cli_command *self, int argc, char **argv) {
    int rc = cli_parse(self, &argc, argv, NULL, NULL); /* it takes no options: set is never called */
    if (rc != CLI_RUN) return rc;
    printf("%-28s %-32s %-24s %10s\n", "name", "observation space", "action space",
           "time limit");
    for (int i = 0; i < calf_env_count(); i++) {
        const calf_env_spec *s = &calf_env_at(i)->spec;
        char space[256], obs[128];
        format_action_space(s, space, sizeof space);
        format_obs_space(s, obs, sizeof obs);
        const char *lib = calf_env_class_library(calf_env_at(i));
        printf("%-28s %-32s %-24s %10d%s%s\n", s->name, obs, space, s->max_episode_steps,
               lib ? "  " : "", lib ? lib : "");
    }
    return 0;
}

static void print_floats(const float *v, int n) {
    for (int j = 0; j < n; j++) printf(" %.9g", (double)v[j]);
}

/* MinAtar's games say, instead of a drawn state, their generator's seed K: MinAtar's
 * Environment(game) with seed(K), reset() and act() plays the same episodes. */
static int is_minatar(const calf_env *env) {
    return strncmp(env->cls->spec.name, "MinAtar/", strlen("MinAtar/")) == 0;
}

/* "# reset obs...", then "# state ..." where the class can say what it drew. */
static void print_reset(const calf_env *env, const float *obs, double *drawn) {
    printf("# reset");
    print_floats(obs, env->cls->spec.obs_dim);
    putchar('\n');
    int n = calf_env_reset_state(env, drawn);
    if (n == 0 || is_minatar(env)) return;
    printf("# state");
    for (int j = 0; j < n; j++) printf(" %.17g", drawn[j]);
    putchar('\n');
}

typedef struct {
    const char *name;
    uint64_t seed, index, steps;
} env_state;

static int env_set(void *ctx, int id, const cli_value *v) {
    env_state *e = ctx;
    switch (id) {
    case CLI_OPERAND:
        if (e->name) {
            fprintf(stderr, "calf env: one environment name expected, got '%s' and '%s'\n", e->name,
                    v->text);
            return 2;
        }
        e->name = v->text;
        break;
    case ENV_SEED: e->seed = v->u64; break;
    case ENV_INDEX: e->index = v->u64; break;
    case ENV_STEPS: e->steps = v->u64; break;
    }
    return 0;
}

int calf_cmd_env(const cli_command *self, int argc, char **argv) {
    env_state e = {NULL, 0, 0, 20};
    int rc = cli_parse(self, &argc, argv, env_set, &e);
    if (rc != CLI_RUN) return rc;
    if (!e.name) {
        fprintf(stderr, "calf env: missing environment name (try --help or calf envs)\n");
        return 2;
    }
    const char *name = e.name;
    uint64_t seed = e.seed, index = e.index, steps = e.steps;

    calf_env env;
    calf_error err;
    calf_error_clear(&err);
    rc = calf_env_init(&env, name, seed, index, &err);
    if (rc != CALF_OK) {
        fprintf(stderr, "calf env: %s\n", err.msg);
        return calf_exit_code(rc);
    }
    const calf_env_spec *s = &env.cls->spec;
    calf_rng action_rng;
    calf_rng_seed(&action_rng, seed, index, CALF_RNG_ACTION);

    int ai = calf_env_action_ints(s);
    float *obs = calloc((size_t)s->obs_dim, sizeof *obs);
    float *u = calloc(s->action_dim > 0 ? (size_t)s->action_dim : 1, sizeof *u);
    double *drawn = calloc(s->reset_state_dim > 0 ? (size_t)s->reset_state_dim : 1, sizeof *drawn);
    int *acts = calloc((size_t)ai, sizeof *acts);
    uint8_t *mask = calloc(s->num_actions > 0 ? (size_t)s->num_actions : 1, 1);
    if (!obs || !u || !drawn || !acts || !mask) {
        fprintf(stderr, "calf env: out of memory for %s's observation\n", s->name);
        calf_env_free(&env);
        free(obs);
        free(u);
        free(drawn);
        free(acts);
        free(mask);
        return 1;
    }
    char obs_space[128], action_space[256];
    format_obs_space(s, obs_space, sizeof obs_space);
    format_action_space(s, action_space, sizeof action_space);
    printf("# %s seed=%llu index=%llu: observation space %s, action space %s\n", s->name,
           (unsigned long long)seed, (unsigned long long)index, obs_space, action_space);
    printf("# step action%s obs[%d] reward terminated truncated\n",
           s->action_dim > 1 ? "[...]" : "", s->obs_dim);
    float reward;
    if (is_minatar(&env) && calf_env_reset_state(&env, drawn) == 1)
        printf("# mt19937 %.0f\n", drawn[0]);
    calf_env_reset(&env, obs);
    print_reset(&env, obs, drawn);
    for (uint64_t t = 1; t <= steps; t++) {
        int term, trunc;
        if (s->num_actions > 0) {
            /* each sub-action uniform over its valid choices (all of them without a mask),
             * one draw each, in order */
            calf_env_action_mask(&env, mask);
            for (int d = 0, off = 0; d < ai; d++) {
                int w = s->num_action_dims > 0 ? s->action_nvec[d] : s->num_actions, valid = 0;
                for (int j = 0; j < w; j++) valid += mask[off + j];
                int k = (int)calf_rng_below(&action_rng, (uint32_t)valid);
                for (int j = 0; j < w; j++)
                    if (mask[off + j] && k-- == 0) acts[d] = j;
                off += w;
            }
        } else {
            for (int j = 0; j < s->action_dim; j++)
                u[j] = (float)calf_rng_uniform_range(&action_rng, s->action_low[j], s->action_high[j]);
        }
        calf_env_step_actions(&env, acts, u, obs, &reward, &term, &trunc);
        printf("%llu", (unsigned long long)t);
        if (s->num_actions > 0)
            for (int d = 0; d < ai; d++) printf(" %d", acts[d]);
        else
            print_floats(u, s->action_dim);
        print_floats(obs, s->obs_dim);
        printf(" %.9g %d %d\n", (double)reward, term, trunc);
        if ((term || trunc) && t < steps) {
            calf_env_reset(&env, obs);
            print_reset(&env, obs, drawn);
        }
    }
    free(acts);
    free(mask);
    calf_env_free(&env);
    free(obs);
    free(u);
    free(drawn);
    return 0; /* main checks that the output was written */
}
