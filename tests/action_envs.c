/* action_envs.c: the tests' environments for env ABI 3's action side and its Dict
 * observations, a plug-in (libaction_envs.so, `--env_lib`) so that calf's own env list
 * stays Gymnasium's:
 *  - Test/MaskedChoice-v0: each step draws a target among actions 0..2 and shows it;
 *    taking it pays 1. Action 3 would pay 10 but is never valid, and one of the two
 *    other actions is blocked each step: a policy that learns to pay 16 over an
 *    episode respected the mask, one that ignores it learns action 3 (up to 160).
 *  - Test/MultiChoice-v0: MultiDiscrete (3, 2): a target for each sub-action (the first
 *    one's in 0..1), one point for each hit (32 over an episode).
 *  - Test/MaskedMultiChoice-v0: the same with a mask: in the first sub-action one wrong
 *    choice is blocked and choice 2 is never valid (it would pay 10).
 *  - Test/DictChoice-v0: a Dict observation of three parts, 'step' (1) the episode's
 *    progress, 'image' (4, 4, 1) a 0/1 image with one cell lit in one of its four 2x2
 *    quadrants, 'flip' (1) 0 or 1; of 4 actions, the lit quadrant pays 1 when flip is 0
 *    and the opposite one (q + 2) % 4 when it is 1 (16 an episode: a policy that reads
 *    only the image gets about 8, one that reads neither about 4).
 * Episodes end (terminate) after 16 steps. Everything is drawn from the env's stream. */
#include "calf/env.h"

enum { EPISODE = 16 };

typedef struct choice_state {
    int target[2]; /* this step's targets (MaskedChoice: target[0] only) */
    int blocked;   /* the wrong choice blocked this step (of sub-action 0) */
    int steps;
} choice_state;

/* MaskedChoice: target in 0..2, blocked one of the other two. */
static void masked_draw(choice_state *s, calf_rng *rng) {
    s->target[0] = (int)calf_rng_below(rng, 3);
    s->blocked = (s->target[0] + 1 + (int)calf_rng_below(rng, 2)) % 3;
}

static void masked_observe(const void *state, float *obs) {
    const choice_state *s = state;
    for (int j = 0; j < 3; j++) obs[j] = s->target[0] == j ? 1.0f : 0.0f;
    obs[3] = (float)s->steps / EPISODE;
}

static void masked_reset(void *state, calf_rng *rng, float *obs) {
    choice_state *s = state;
    s->steps = 0;
    masked_draw(s, rng);
    masked_observe(s, obs);
}

static int masked_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                       float *reward) {
    (void)u;
    choice_state *s = state;
    *reward = action == 3 ? 10.0f : action == s->target[0] ? 1.0f : 0.0f;
    s->steps++;
    masked_draw(s, rng);
    masked_observe(s, obs);
    return s->steps >= EPISODE;
}

static void masked_mask(const void *state, uint8_t *mask) {
    const choice_state *s = state;
    for (int j = 0; j < 3; j++) mask[j] = j != s->blocked;
    mask[3] = 0;
}

/* MultiChoice: targets in 0..2 and 0..1; the masked one blocks a wrong first choice (of
 * 0 and 1: choice 2 is never valid there). */
static const int multi_nvec[2] = {3, 2};

static void multi_draw(choice_state *s, calf_rng *rng) {
    s->target[0] = (int)calf_rng_below(rng, 2);
    s->target[1] = (int)calf_rng_below(rng, 2);
    s->blocked = 1 - s->target[0];
}

static void multi_observe(const void *state, float *obs) {
    const choice_state *s = state;
    for (int j = 0; j < 2; j++) obs[j] = s->target[0] == j ? 1.0f : 0.0f;
    for (int j = 0; j < 2; j++) obs[2 + j] = s->target[1] == j ? 1.0f : 0.0f;
    obs[4] = (float)s->steps / EPISODE;
}

static void multi_reset(void *state, calf_rng *rng, float *obs) {
    choice_state *s = state;
    s->steps = 0;
    multi_draw(s, rng);
    multi_observe(s, obs);
}

/* tempting: first choice 2 pays 10 (the masked env, where it is never valid) */
static int multi_step_of(void *state, calf_rng *rng, const int *actions, float *obs,
                         float *reward, int tempting) {
    choice_state *s = state;
    float r = tempting && actions[0] == 2 ? 10.0f : actions[0] == s->target[0] ? 1.0f : 0.0f;
    *reward = r + (actions[1] == s->target[1] ? 1.0f : 0.0f);
    s->steps++;
    multi_draw(s, rng);
    multi_observe(s, obs);
    return s->steps >= EPISODE;
}

static int multi_step(void *state, calf_rng *rng, const int *actions, float *obs, float *reward) {
    return multi_step_of(state, rng, actions, obs, reward, 0);
}

static int masked_multi_step(void *state, calf_rng *rng, const int *actions, float *obs,
                             float *reward) {
    return multi_step_of(state, rng, actions, obs, reward, 1);
}

static void multi_mask(const void *state, uint8_t *mask) {
    const choice_state *s = state;
    for (int j = 0; j < 3; j++) mask[j] = j != s->blocked && j != 2;
    mask[3] = mask[4] = 1;
}

/* DictChoice: the lit cell (its quadrant q = cell's (row / 2) * 2 + col / 2) and flip. */
typedef struct dict_state {
    int cell, flip, steps;
} dict_state;

static void dict_draw(dict_state *s, calf_rng *rng) {
    s->cell = (int)calf_rng_below(rng, 16);
    s->flip = (int)calf_rng_below(rng, 2);
}

static void dict_observe(const void *state, float *obs) {
    const dict_state *s = state;
    obs[0] = (float)s->steps / EPISODE;
    for (int j = 0; j < 16; j++) obs[1 + j] = j == s->cell ? 1.0f : 0.0f;
    obs[17] = (float)s->flip;
}

static void dict_reset(void *state, calf_rng *rng, float *obs) {
    dict_state *s = state;
    s->steps = 0;
    dict_draw(s, rng);
    dict_observe(s, obs);
}

static int dict_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                     float *reward) {
    (void)u;
    dict_state *s = state;
    int q = (s->cell / 4 / 2) * 2 + (s->cell % 4) / 2;
    *reward = action == (s->flip ? (q + 2) % 4 : q) ? 1.0f : 0.0f;
    s->steps++;
    dict_draw(s, rng);
    dict_observe(s, obs);
    return s->steps >= EPISODE;
}

static const calf_obs_part dict_parts[] = {
    {"step", {1, 0, 0}, CALF_DTYPE_F32, 0},
    {"image", {4, 4, 1}, CALF_DTYPE_F32, 1},
    {"flip", {1, 0, 0}, CALF_DTYPE_F32, 17},
};

static const calf_env_class dict_choice_class = {
    .spec = {.name = "Test/DictChoice-v0",
             .obs_dim = 18,
             .num_actions = 4,
             .max_episode_steps = 100,
             .state_size = sizeof(dict_state),
             .num_obs_parts = 3,
             .obs_parts = dict_parts},
    .reset = dict_reset,
    .step = dict_step,
    .observe = dict_observe,
};

static const calf_env_class masked_choice_class = {
    .spec = {.name = "Test/MaskedChoice-v0",
             .obs_dim = 4,
             .num_actions = 4,
             .max_episode_steps = 100,
             .state_size = sizeof(choice_state),
             .action_mask = 1},
    .reset = masked_reset,
    .step = masked_step,
    .observe = masked_observe,
    .action_mask = masked_mask,
};

static const calf_env_class multi_choice_class = {
    .spec = {.name = "Test/MultiChoice-v0",
             .obs_dim = 5,
             .num_actions = 5,
             .max_episode_steps = 100,
             .state_size = sizeof(choice_state),
             .num_action_dims = 2,
             .action_nvec = multi_nvec},
    .reset = multi_reset,
    .observe = multi_observe,
    .step_multi = multi_step,
};

static const calf_env_class masked_multi_choice_class = {
    .spec = {.name = "Test/MaskedMultiChoice-v0",
             .obs_dim = 5,
             .num_actions = 5,
             .max_episode_steps = 100,
             .state_size = sizeof(choice_state),
             .num_action_dims = 2,
             .action_nvec = multi_nvec,
             .action_mask = 1},
    .reset = multi_reset,
    .observe = multi_observe,
    .step_multi = masked_multi_step,
    .action_mask = multi_mask,
};

int calf_plugin_register(int abi_version, calf_error *err) {
    int rc = CALF_PLUGIN_CHECK_ABI(abi_version, err);
    if (rc == CALF_OK) rc = calf_env_register(&masked_choice_class, err);
    if (rc == CALF_OK) rc = calf_env_register(&multi_choice_class, err);
    if (rc == CALF_OK) rc = calf_env_register(&masked_multi_choice_class, err);
    if (rc == CALF_OK) rc = calf_env_register(&dict_choice_class, err);
    return rc;
}
