/* minatar.h: the five MinAtar games (Young & Tian 2019; rules of MinAtar v1.0.15) as
 * calf envs, and the core they share: one MT19937 stream per env drawn as NumPy's legacy
 * RandomState draws it, sticky actions, the full and minimal action sets. */
#ifndef CALF_MINATAR_H
#define CALF_MINATAR_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "calf/env.h"
#include "envs/mt19937.h"

#define MINATAR_SIZE 10          /* the grid is 10x10 */
#define MINATAR_MAX_CHANNELS 10  /* Seaquest's */
#define MINATAR_STICKY 0.1       /* probability that a step repeats the last action */

/* The full action set, in MinAtar's order. */
enum { MA_NOOP, MA_LEFT, MA_UP, MA_RIGHT, MA_DOWN, MA_FIRE, MA_NUM_ACTIONS };

/* What a game's check found wrong with a state read from bytes, as one phrase
 * ("ball row 12 outside 0..8"). */
typedef struct minatar_why {
    char msg[160];
} minatar_why;

/* One game's rules over its own plain-data state (no pointers). Every random draw comes
 * from mt, in MinAtar's order. */
typedef struct minatar_game {
    const char *name;   /* "Breakout": the env is MinAtar/<name>-v0 (full) and -v1 (minimal) */
    int channels;       /* C of the (10, 10, C) observation */
    int num_minimal;    /* the minimal action set: -v1's action i is full action minimal[i] */
    int8_t minimal[MA_NUM_ACTIONS];
    size_t state_size;  /* bytes of the game's state */
    void (*reset)(void *game, mt19937 *mt);
    /* One frame under full action a (MA_*); returns the reward, sets *terminal. */
    int (*act)(void *game, mt19937 *mt, int a, int *terminal);
    /* The observation (10, 10, channels) in (row, column, channel) order as bytes 0/1,
     * every element written: MinAtar's state(). Bytes, since writing it is most of a
     * step's work (the float form is these widened). */
    void (*observe)(const void *game, uint8_t *obs);
    /* Whether a game state read from bytes (a checkpoint's, calf_env_load_state's) breaks
     * the game's invariants: 0 when the game can be in it, else 1 with what is wrong in
     * *why. The invariants come from reset and act: every state they leave passes, and
     * act run on a passing state leaves one that passes, so act and observe stay inside
     * the state's arrays without checks of their own. (The all-zero state of an env made
     * and not yet reset is let through before this is asked.) */
    int (*invalid)(const void *game, minatar_why *why);
} minatar_game;

extern const minatar_game minatar_asterix, minatar_breakout, minatar_freeway, minatar_seaquest,
    minatar_space_invaders;

/* An env's state: this header, then the game's state at offset MINATAR_GAME_OFFSET. */
typedef struct minatar_core {
    mt19937 mt;          /* the env's one random stream */
    uint32_t seed;       /* K: MinAtar's Environment seeded with seed(K) plays the same */
    int32_t last_action; /* the full action the last step applied; a sticky step repeats it
                            (0 in a new env; a reset keeps it, as MinAtar's does) */
} minatar_core;
#define MINATAR_GAME_OFFSET ((sizeof(minatar_core) + 15) / 16 * 16)

/* Restart an env's stream from K, as MinAtar's Environment.seed(K) does (the game state
 * and the last action are left as they are). */
void minatar_seed(void *state, uint32_t k);

/* For the games' invalid hooks. minatar_outside: 1 with "<what> v outside lo..hi" in
 * *why (what formatted from fmt) when v is not in [lo, hi], else 0. minatar_fault: 1
 * with the formatted phrase in *why. Both chain with || as the first fault ends it. */
int minatar_outside(minatar_why *why, long v, long lo, long hi, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
int minatar_fault(minatar_why *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The load hook of a game's classes: bytes (state_size, any alignment) become the env's
 * state only when they hold a state the env can be in: the generator's position within
 * its key and its key not all zero (a stream that only yields zeros), the last action one
 * of cls's actions (as full actions), the bytes between the core and the game zero, and
 * the game's own invariants (its invalid hook). Else CALF_EINVAL, "MinAtar/<Game>-vN:
 * saved state: <what is wrong>", and the state untouched. */
int minatar_load(const minatar_game *g, const calf_env_class *cls, void *state, const void *buf,
                 calf_error *err);
#define MINATAR_MAX_STATE 4096 /* bytes: the largest state (Seaquest's) fits */

/* Grid helpers for the games: the index of (row, col, channel) in an observation. */
#define MINATAR_AT(channels, row, col, ch) (((row) * MINATAR_SIZE + (col)) * (channels) + (ch))

/* obs[0, n) = 0 by glibc's memset. Out of line, so the size is unknown where memset is
 * called: with a constant size gcc writes `rep stos` in place, which took 59% of
 * Breakout's float observation (perf) and twice the time of glibc's vector loop. */
void minatar_zero(uint8_t *obs, int n);

/* Whether any byte of a grid row (MINATAR_SIZE bytes) is nonzero: the row read as 8 + 2
 * bytes, not one branch per cell, so observations skip empty rows cheaply. */
static inline int minatar_row_any(const uint8_t *row) {
    _Static_assert(MINATAR_SIZE == 8 + 2, "a row is read as 8 + 2 bytes");
    uint64_t head;
    uint16_t tail;
    memcpy(&head, row, sizeof head);
    memcpy(&tail, row + sizeof head, sizeof tail);
    return (head | tail) != 0;
}

/* Whether any byte of a whole grid (MINATAR_SIZE rows of MINATAR_SIZE bytes) is nonzero:
 * twelve 8-byte words and a 4-byte tail OR-ed, no branch per cell. */
static inline int minatar_grid_any(const uint8_t *g) {
    enum { N = MINATAR_SIZE * MINATAR_SIZE };
    _Static_assert(N == 12 * 8 + 4, "a grid is read as 12 words and 4 bytes");
    uint64_t acc = 0, w;
    for (int i = 0; i < 12; i++) {
        memcpy(&w, g + 8 * i, sizeof w);
        acc |= w;
    }
    uint32_t tail;
    memcpy(&tail, g + 96, sizeof tail);
    return (acc | tail) != 0;
}

/* ---- the calf classes: what every game's -v0 and -v1 share ---------------------------- */

/* create_at: K from the env's dynamics stream (seed, index, CALF_RNG_DYNAMICS), the first
 * 32 bits it draws; the env then draws only from its MT19937. */
int minatar_create_at(void *state, const calf_env_class *cls, uint64_t seed, uint64_t index,
                      calf_error *err);
/* reset_state: K, so `calf env` can say which MinAtar seed replays the env. */
void minatar_reset_state(const void *state, double *out);

/* The render hook, as MinAtar's display draws a state: each cell in the colour of the
 * highest channel present in it (seaborn's "cubehelix" palette of `channels` colours,
 * rounded to bytes), black where none is; the 10x10 grid scaled to width x height by
 * nearest cell. MinAtar's display shows a frame every 50 ms: MINATAR_RENDER_FPS. */
int minatar_render(const minatar_game *g, const void *state, int width, int height,
                   uint8_t *rgb, calf_error *err);
#define MINATAR_RENDER_FPS 20

static inline void *minatar_game_state(void *state) {
    return (unsigned char *)state + MINATAR_GAME_OFFSET;
}

/* The observation as bytes (the class's byte hooks), and as the floats 0/1 the float
 * hooks write: the same bytes widened. */
static inline void minatar_observe_u8(const minatar_game *g, const void *state, uint8_t *obs) {
    g->observe((const unsigned char *)state + MINATAR_GAME_OFFSET, obs);
}

static inline void minatar_observe_env(const minatar_game *g, const void *state, float *obs) {
    uint8_t b[MINATAR_SIZE * MINATAR_SIZE * MINATAR_MAX_CHANNELS];
    minatar_observe_u8(g, state, b);
    const int n = MINATAR_SIZE * MINATAR_SIZE * g->channels;
    for (int i = 0; i < n; i++) obs[i] = (float)b[i];
}

static inline void minatar_reset_game(const minatar_game *g, void *state) {
    minatar_core *c = state;
    g->reset(minatar_game_state(state), &c->mt);
}

/* MinAtar's Environment.act: with probability MINATAR_STICKY (one rand() per step,
 * drawn before the game's own draws) the last action replaces full action a. Returns
 * the terminal flag; the caller writes the observation in its form. */
static inline int minatar_act_env(const minatar_game *g, void *state, int a, float *reward) {
    minatar_core *c = state;
    if (mt19937_rand_below(&c->mt, MINATAR_STICKY)) a = c->last_action;
    c->last_action = a;
    int terminal = 0;
    *reward = (float)g->act(minatar_game_state(state), &c->mt, a, &terminal);
    return terminal;
}

/* step_many_u8 for the full (minimal NULL) or a minimal action set: each env's step as
 * step_u8 takes it, obs (n, 100 * channels) bytes. */
static inline void minatar_step_many_u8(const minatar_game *g, const int8_t *minimal,
                                        calf_env *envs, int n, const int *actions, uint8_t *obs,
                                        float *reward, uint8_t *terminated) {
    const size_t od = (size_t)MINATAR_SIZE * MINATAR_SIZE * (size_t)g->channels;
    for (int i = 0; i < n; i++) {
        int a = minimal ? minimal[actions[i]] : actions[i];
        terminated[i] = (uint8_t)minatar_act_env(g, envs[i].state, a, &reward[i]);
        minatar_observe_u8(g, envs[i].state, obs + (size_t)i * od);
    }
}

/* Defines <prefix>_v0_class (full action set) and <prefix>_v1_class (minimal set) for
 * game (a minatar_game with the given channels and minimal-set size, whose state is a
 * state_type); title is MinAtar's name for it. MinAtar's Gymnasium ids set no time limit
 * (Freeway ends itself after 2,500 frames), hence INT32_MAX. */
#define MINATAR_CLASSES(prefix, game, state_type, title, nch, nmin)                          \
    static void prefix##_env_reset(void *s, calf_rng *rng, float *obs) {                      \
        (void)rng;                                                                             \
        minatar_reset_game(&game, s);                                                          \
        minatar_observe_env(&game, s, obs);                                                    \
    }                                                                                          \
    static int prefix##_env_step_full(void *s, calf_rng *rng, int a, const float *u,          \
                                      float *obs, float *reward) {                             \
        (void)rng, (void)u;                                                                    \
        int terminal = minatar_act_env(&game, s, a, reward);                                   \
        minatar_observe_env(&game, s, obs);                                                    \
        return terminal;                                                                       \
    }                                                                                          \
    static int prefix##_env_step_minimal(void *s, calf_rng *rng, int a, const float *u,       \
                                         float *obs, float *reward) {                          \
        return prefix##_env_step_full(s, rng, game.minimal[a], u, obs, reward);                \
    }                                                                                          \
    static void prefix##_env_reset_u8(void *s, calf_rng *rng, uint8_t *obs) {                 \
        (void)rng;                                                                             \
        minatar_reset_game(&game, s);                                                          \
        minatar_observe_u8(&game, s, obs);                                                     \
    }                                                                                          \
    static int prefix##_env_step_full_u8(void *s, calf_rng *rng, int a, const float *u,       \
                                         uint8_t *obs, float *reward) {                        \
        (void)rng, (void)u;                                                                    \
        int terminal = minatar_act_env(&game, s, a, reward);                                   \
        minatar_observe_u8(&game, s, obs);                                                     \
        return terminal;                                                                       \
    }                                                                                          \
    static int prefix##_env_step_minimal_u8(void *s, calf_rng *rng, int a, const float *u,    \
                                            uint8_t *obs, float *reward) {                     \
        return prefix##_env_step_full_u8(s, rng, game.minimal[a], u, obs, reward);             \
    }                                                                                          \
    static void prefix##_env_step_many_full_u8(calf_env *envs, int n, const int *actions,     \
                                               const float *u, uint8_t *obs, float *reward,    \
                                               uint8_t *terminated) {                          \
        (void)u;                                                                               \
        minatar_step_many_u8(&game, NULL, envs, n, actions, obs, reward, terminated);          \
    }                                                                                          \
    static void prefix##_env_step_many_minimal_u8(calf_env *envs, int n, const int *actions,  \
                                                  const float *u, uint8_t *obs, float *reward, \
                                                  uint8_t *terminated) {                       \
        (void)u;                                                                               \
        minatar_step_many_u8(&game, game.minimal, envs, n, actions, obs, reward, terminated);  \
    }                                                                                          \
    static void prefix##_env_observe(const void *s, float *obs) {                             \
        minatar_observe_env(&game, s, obs);                                                    \
    }                                                                                          \
    static int prefix##_env_render(const void *s, int w, int h, uint8_t *rgb, calf_error *e) { \
        return minatar_render(&game, s, w, h, rgb, e);                                         \
    }                                                                                          \
    _Static_assert(MINATAR_GAME_OFFSET + sizeof(state_type) <= MINATAR_MAX_STATE,             \
                   "minatar_load copies the state into MINATAR_MAX_STATE bytes");              \
    /* save copies the plain-data state; load checks it first (minatar_load) */               \
    static void prefix##_env_save(const void *s, void *buf) {                                 \
        memcpy(buf, s, MINATAR_GAME_OFFSET + sizeof(state_type));                              \
    }                                                                                          \
    static int prefix##_env_load_full(void *s, const void *buf, calf_error *e) {              \
        return minatar_load(&game, &prefix##_v0_class, s, buf, e);                             \
    }                                                                                          \
    static int prefix##_env_load_minimal(void *s, const void *buf, calf_error *e) {           \
        return minatar_load(&game, &prefix##_v1_class, s, buf, e);                             \
    }                                                                                          \
    const calf_env_class prefix##_v0_class = {                                                 \
        .spec = {.name = "MinAtar/" title "-v0",                                               \
                 .obs_dim = MINATAR_SIZE * MINATAR_SIZE * (nch),                               \
                 .obs_shape = {MINATAR_SIZE, MINATAR_SIZE, (nch)},                             \
                 .obs_dtype = CALF_DTYPE_U8,                                                   \
                 .obs_high = 1,                                                                \
                 .num_actions = MA_NUM_ACTIONS,                                                \
                 .max_episode_steps = INT32_MAX,                                               \
                 .state_size = MINATAR_GAME_OFFSET + sizeof(state_type),                       \
                 .save_size = MINATAR_GAME_OFFSET + sizeof(state_type),                        \
                 .reset_state_dim = 1},                                                        \
        .reset = prefix##_env_reset,                                                           \
        .step = prefix##_env_step_full,                                                        \
        .observe = prefix##_env_observe,                                                       \
        .save = prefix##_env_save,                                                             \
        .load = prefix##_env_load_full,                                                        \
        .create_at = minatar_create_at,                                                        \
        .reset_state = minatar_reset_state,                                                    \
        .render = prefix##_env_render,                                                         \
        .render_fps = MINATAR_RENDER_FPS,                                                      \
        .reset_u8 = prefix##_env_reset_u8,                                                     \
        .step_u8 = prefix##_env_step_full_u8,                                                  \
        .step_many_u8 = prefix##_env_step_many_full_u8,                                        \
    };                                                                                         \
    const calf_env_class prefix##_v1_class = {                                                 \
        .spec = {.name = "MinAtar/" title "-v1",                                               \
                 .obs_dim = MINATAR_SIZE * MINATAR_SIZE * (nch),                               \
                 .obs_shape = {MINATAR_SIZE, MINATAR_SIZE, (nch)},                             \
                 .obs_dtype = CALF_DTYPE_U8,                                                   \
                 .obs_high = 1,                                                                \
                 .num_actions = (nmin),                                                        \
                 .max_episode_steps = INT32_MAX,                                               \
                 .state_size = MINATAR_GAME_OFFSET + sizeof(state_type),                       \
                 .save_size = MINATAR_GAME_OFFSET + sizeof(state_type),                        \
                 .reset_state_dim = 1},                                                        \
        .reset = prefix##_env_reset,                                                           \
        .step = prefix##_env_step_minimal,                                                     \
        .observe = prefix##_env_observe,                                                       \
        .save = prefix##_env_save,                                                             \
        .load = prefix##_env_load_minimal,                                                     \
        .create_at = minatar_create_at,                                                        \
        .reset_state = minatar_reset_state,                                                    \
        .render = prefix##_env_render,                                                         \
        .render_fps = MINATAR_RENDER_FPS,                                                      \
        .reset_u8 = prefix##_env_reset_u8,                                                     \
        .step_u8 = prefix##_env_step_minimal_u8,                                               \
        .step_many_u8 = prefix##_env_step_many_minimal_u8,                                     \
    }

#endif
