/* custom_env.c: how to add an environment to calf. Defines a tiny corridor task and
 * the one function that registers it by name. Built two ways:
 *  - a program (example_custom_env) that registers it and runs it through the public
 *    API (the same calls the trainer makes) with a greedy and a stubborn policy,
 *    checking the returns;
 *  - with CALF_EXAMPLE_PLUGIN, a plug-in the stock calf loads (libcustom_env_plugin.so):
 *      cc -shared -fPIC -DCALF_EXAMPLE_PLUGIN -I include examples/custom_env.c -o libcorridor.so
 *      calf train --env_lib ./libcorridor.so --root_dir runs/corridor \
 *          --conf examples/ppo_cartpole.gin \
 *          --conf_param create_environment.env_name="'Corridor-v0'"   */
#include <math.h>
#include <stdio.h>

#include "calf/env.h"

/* The whole state is plain data, so checkpoints can copy it byte for byte. */
typedef struct corridor_state {
    int pos;  /* 0 .. goal */
    int goal; /* drawn at reset from the env's own stream */
} corridor_state;

static void corridor_observe(const void *state, float *obs) {
    const corridor_state *s = state;
    obs[0] = (float)s->pos / (float)s->goal; /* progress, 1 at the goal */
    obs[1] = (float)s->goal / 10.0f;
}

static void corridor_reset(void *state, calf_rng *rng, float *obs) {
    corridor_state *s = state;
    s->pos = 0;
    s->goal = 3 + (int)calf_rng_below(rng, 6); /* 3..8 cells away */
    corridor_observe(s, obs);
}

/* Action 1 moves right, 0 moves left (the wall at 0 stops it). Each step costs 0.01;
 * reaching the goal pays 1 and ends the episode. */
static int corridor_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                         float *reward) {
    (void)rng;
    (void)u;
    corridor_state *s = state;
    s->pos += action == 1 ? 1 : -1;
    if (s->pos < 0) s->pos = 0;
    int done = s->pos >= s->goal;
    *reward = done ? 1.0f : -0.01f;
    corridor_observe(s, obs);
    return done;
}

/* Optional: a picture of the state, for `calf play --video` (rgb: height rows of width
 * RGB pixels, top row first). The corridor's cells side by side: the agent's red, the
 * goal's green, the others grey, with a dark line between cells. */
static int corridor_render(const void *state, int width, int height, uint8_t *rgb, calf_error *err) {
    (void)err;
    const corridor_state *s = state;
    int cells = s->goal + 1;
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++) {
            int cell = x * cells / width;
            int edge = (x * cells) % width < cells; /* the first column of a cell */
            uint8_t *p = rgb + 3 * ((size_t)y * width + x);
            uint8_t r = 200, g = 200, b = 200;
            if (cell == s->pos) r = 220, g = 40, b = 40;
            else if (cell == s->goal) r = 40, g = 180, b = 60;
            if (edge) r = g = b = 60;
            p[0] = r, p[1] = g, p[2] = b;
        }
    return CALF_OK;
}

static const calf_env_class corridor_class = {
    .spec = {.name = "Corridor-v0",
             .obs_dim = 2,
             .num_actions = 2,
             .max_episode_steps = 20,
             .state_size = sizeof(corridor_state)},
    .reset = corridor_reset,
    .step = corridor_step,
    .observe = corridor_observe,
    .render = corridor_render,
    .render_fps = 10,
};

/* What calf calls when it loads this file as a plug-in (include/calf/env.h): check
 * that calf reads calf_env_class as this file was compiled to, then register. */
int calf_plugin_register(int abi_version, calf_error *err) {
    int rc = CALF_PLUGIN_CHECK_ABI(abi_version, err);
    if (rc != CALF_OK) return rc;
    return calf_env_register(&corridor_class, err);
}

#ifndef CALF_EXAMPLE_PLUGIN
/* One episode with a fixed action; returns the number of steps, fills return/flags. */
static int run_episode(calf_env *env, int action, double *ret, int *terminated, int *truncated) {
    float obs[2], r; /* the class's obs_dim */
    calf_env_reset(env, obs);
    *ret = 0;
    *terminated = *truncated = 0;
    int steps = 0;
    while (!*terminated && !*truncated) {
        calf_env_step(env, action, NULL, obs, &r, terminated, truncated);
        *ret += r;
        steps++;
    }
    return steps;
}

int main(void) {
    calf_error err;
    if (calf_plugin_register(CALF_PLUGIN_ABI_VERSION, &err) != CALF_OK) {
        fprintf(stderr, "register: %s\n", err.msg);
        return 1;
    }
    int failures = 0;
    printf("%-6s %-5s %-8s %-6s %-10s %s\n", "index", "goal", "policy", "steps", "return", "end");
    for (uint64_t index = 0; index < 4; index++) {
        calf_env env;
        /* Looked up by name, exactly as a config's env_name would be. */
        if (calf_env_init(&env, "Corridor-v0", 2024, index, &err) != CALF_OK) {
            fprintf(stderr, "init: %s\n", err.msg);
            return 1;
        }
        for (int action = 1; action >= 0; action--) {
            double ret;
            int term, trunc;
            int steps = run_episode(&env, action, &ret, &term, &trunc);
            int goal = ((const corridor_state *)env.state)->goal;
            /* Greedy reaches the goal in `goal` steps; stubborn hits the time limit. */
            double want_ret = action == 1 ? 1.0 - 0.01 * (goal - 1) : -0.01 * 20;
            int want_steps = action == 1 ? goal : 20;
            int ok = steps == want_steps && fabs(ret - want_ret) < 1e-5 &&
                     term == (action == 1) && trunc == (action == 0);
            printf("%-6llu %-5d %-8s %-6d %-10.4f %s%s\n", (unsigned long long)index, goal,
                   action ? "greedy" : "stubborn", steps, ret, term ? "terminated" : "truncated",
                   ok ? "" : "   <-- UNEXPECTED");
            failures += !ok;
        }
        calf_env_free(&env);
    }
    printf("%s\n", failures ? "custom env example FAILED" : "custom env example OK");
    return failures ? 1 : 0;
}
#endif
