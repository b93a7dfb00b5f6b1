/* cmd_env.c: `calf envs` lists the registered environments and their specs;
 * `calf env NAME` steps one env with uniformly random actions from its own action
 * stream, so a user can see (and diff) exactly what an env does for a seed/index. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/env.h"
#include "calf/error.h"
#include "calf/rng.h"
#include "commands.h"

#define MAX_CLI_STEPS 100000000L

static const char envs_usage[] =
    "usage: calf envs [--env_lib LIB]...\n"
    "List the registered environments: name, observation size, action space, time limit,\n"
    "and for a plug-in's environment the library it came from (--env_lib LIB loads one).\n";

static const char env_usage[] =
    "usage: calf env NAME [--seed S] [--index I] [--steps N] [--env_lib LIB]...\n"
    "Step environment NAME with uniformly random actions drawn from the action stream of\n"
    "(seed, index), printing one line per step:\n"
    "  step action... obs... reward terminated truncated\n"
    "Lines starting with '#' show the observation after each reset; for envs with a\n"
    "physical state (MuJoCo's), a '# state' line after it gives the state that reset\n"
    "drew (qpos then qvel, %.17g), so an episode can be replayed elsewhere.\n"
    "  --seed S    random seed, 0..2^64-1 (default 0)\n"
    "  --index I   global env index, 0..2^64-1 (default 0)\n"
    "  --steps N   number of steps, 0..100000000 (default 20)\n";

/* Action space as text: Discrete(n), Box(low..high, dim), or per-dimension bounds. */
static void format_action_space(const calf_env_spec *s, char *buf, size_t size) {
    if (s->num_actions > 0) {
        snprintf(buf, size, "Discrete(%d)", s->num_actions);
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

int calf_cmd_envs(int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(envs_usage, stdout);
            return 0;
        }
        fprintf(stderr, "calf envs: unexpected argument '%s' (try --help)\n", argv[i]);
        return 2;
    }
    printf("%-28s %4s  %-24s %10s\n", "name", "obs", "action space", "time limit");
    for (int i = 0; i < calf_env_count(); i++) {
        const calf_env_spec *s = &calf_env_at(i)->spec;
        char space[256];
        format_action_space(s, space, sizeof space);
        const char *lib = calf_env_class_library(calf_env_at(i));
        printf("%-28s %4d  %-24s %10d%s%s\n", s->name, s->obs_dim, space, s->max_episode_steps,
               lib ? "  " : "", lib ? lib : "");
    }
    return 0;
}

/* Whole-string unsigned 64-bit decimal; rejects signs, blanks and overflow. */
static int parse_u64(const char *s, uint64_t *out) {
    if (!s || *s < '0' || *s > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE || *end != '\0') return -1;
    *out = (uint64_t)v;
    return 0;
}

/* Accepts "--opt VALUE" and "--opt=VALUE"; returns the value or NULL if absent. */
static const char *option_value(int argc, char **argv, int *i, const char *opt) {
    size_t n = strlen(opt);
    if (strncmp(argv[*i], opt, n) != 0) return NULL;
    if (argv[*i][n] == '=') return argv[*i] + n + 1;
    if (argv[*i][n] != '\0') return NULL;
    if (*i + 1 >= argc) return "";
    return argv[++*i];
}

static void print_floats(const float *v, int n) {
    for (int j = 0; j < n; j++) printf(" %.9g", (double)v[j]);
}

/* "# reset obs...", then "# state ..." where the class can say what it drew. */
static void print_reset(const calf_env *env, const float *obs, double *drawn) {
    printf("# reset");
    print_floats(obs, env->cls->spec.obs_dim);
    putchar('\n');
    int n = calf_env_reset_state(env, drawn);
    if (n == 0) return;
    printf("# state");
    for (int j = 0; j < n; j++) printf(" %.17g", drawn[j]);
    putchar('\n');
}

int calf_cmd_env(int argc, char **argv) {
    const char *name = NULL;
    uint64_t seed = 0, index = 0, steps = 20;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(env_usage, stdout);
            return 0;
        } else if ((v = option_value(argc, argv, &i, "--seed"))) {
            if (parse_u64(v, &seed)) {
                fprintf(stderr, "calf env: --seed wants an integer in 0..2^64-1, got '%s'\n", v);
                return 2;
            }
        } else if ((v = option_value(argc, argv, &i, "--index"))) {
            if (parse_u64(v, &index)) {
                fprintf(stderr, "calf env: --index wants an integer in 0..2^64-1, got '%s'\n", v);
                return 2;
            }
        } else if ((v = option_value(argc, argv, &i, "--steps"))) {
            if (parse_u64(v, &steps) || steps > (uint64_t)MAX_CLI_STEPS) {
                fprintf(stderr, "calf env: --steps wants an integer in 0..%ld, got '%s'\n",
                        MAX_CLI_STEPS, v);
                return 2;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "calf env: unknown option '%s' (try --help)\n", a);
            return 2;
        } else if (name) {
            fprintf(stderr, "calf env: one environment name expected, got '%s' and '%s'\n", name, a);
            return 2;
        } else {
            name = a;
        }
    }
    if (!name) {
        fprintf(stderr, "calf env: missing environment name (try --help or calf envs)\n");
        return 2;
    }

    calf_env env;
    calf_error err;
    calf_error_clear(&err);
    int rc = calf_env_init(&env, name, seed, index, &err);
    if (rc != CALF_OK) {
        fprintf(stderr, "calf env: %s\n", err.msg);
        return calf_exit_code(rc);
    }
    const calf_env_spec *s = &env.cls->spec;
    calf_rng action_rng;
    calf_rng_seed(&action_rng, seed, index, CALF_RNG_ACTION);

    float *obs = calloc((size_t)s->obs_dim, sizeof *obs);
    float *u = calloc(s->action_dim > 0 ? (size_t)s->action_dim : 1, sizeof *u);
    double *drawn = calloc(s->reset_state_dim > 0 ? (size_t)s->reset_state_dim : 1, sizeof *drawn);
    if (!obs || !u || !drawn) {
        fprintf(stderr, "calf env: out of memory for %s's observation\n", s->name);
        calf_env_free(&env);
        free(obs);
        free(u);
        free(drawn);
        return 1;
    }
    printf("# %s seed=%llu index=%llu\n", s->name, (unsigned long long)seed,
           (unsigned long long)index);
    printf("# step action%s obs[%d] reward terminated truncated\n",
           s->action_dim > 1 ? "[...]" : "", s->obs_dim);
    float reward;
    calf_env_reset(&env, obs);
    print_reset(&env, obs, drawn);
    for (uint64_t t = 1; t <= steps; t++) {
        int action = 0, term, trunc;
        if (s->num_actions > 0) {
            action = (int)calf_rng_below(&action_rng, (uint32_t)s->num_actions);
        } else {
            for (int j = 0; j < s->action_dim; j++)
                u[j] = (float)calf_rng_uniform_range(&action_rng, s->action_low[j], s->action_high[j]);
        }
        calf_env_step(&env, action, u, obs, &reward, &term, &trunc);
        printf("%llu", (unsigned long long)t);
        if (s->num_actions > 0)
            printf(" %d", action);
        else
            print_floats(u, s->action_dim);
        print_floats(obs, s->obs_dim);
        printf(" %.9g %d %d\n", (double)reward, term, trunc);
        if ((term || trunc) && t < steps) {
            calf_env_reset(&env, obs);
            print_reset(&env, obs, drawn);
        }
    }
    calf_env_free(&env);
    free(obs);
    free(u);
    free(drawn);
    return 0; /* main checks that the output was written */
}
