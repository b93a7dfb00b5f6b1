/* minatar_breakout.c: MinAtar's Breakout. A paddle on the bottom row bounces a ball that
 * moves one cell along a diagonal each frame into three rows of bricks (+1 each, refilled
 * once all are gone); the episode ends when the ball reaches the bottom row past the paddle. */
#include <stdlib.h>

#include "envs/envs.h"
#include "envs/minatar.h"

enum { CH_PADDLE, CH_BALL, CH_TRAIL, CH_BRICK, BREAKOUT_CHANNELS };

/* Directions: 0 up-left, 1 up-right, 2 down-right, 3 down-left (x grows rightwards,
 * y downwards). */
static const int8_t dir_dx[4] = {-1, 1, 1, -1};
static const int8_t dir_dy[4] = {-1, -1, 1, 1};
static const int8_t flip_x[4] = {1, 0, 3, 2};    /* off a side wall */
static const int8_t flip_y[4] = {3, 2, 1, 0};    /* off the ceiling, a brick, the paddle's edge */
static const int8_t turn_back[4] = {2, 3, 0, 1}; /* off the paddle's corner */

typedef struct breakout_state {
    uint8_t brick[MINATAR_SIZE][MINATAR_SIZE];
    int8_t ball_x, ball_y, dir;
    int8_t last_x, last_y; /* the ball's previous cell: the trail */
    int8_t paddle;         /* column of the paddle on row 9 */
    int8_t strike;         /* the ball broke a brick last frame: it passes the next one */
    int8_t terminal;
} breakout_state;

static void fill_bricks(breakout_state *s) {
    for (int y = 1; y <= 3; y++)
        for (int x = 0; x < MINATAR_SIZE; x++) s->brick[y][x] = 1;
}

static void breakout_reset(void *game, mt19937 *mt) {
    breakout_state *s = game;
    int right = (int)mt19937_randint(mt, 0, 2); /* the ball starts in a top corner of the gap */
    *s = (breakout_state){0};
    s->ball_x = right ? 9 : 0;
    s->ball_y = 3;
    s->dir = right ? 3 : 2;
    s->paddle = 4;
    fill_bricks(s);
    s->last_x = s->ball_x;
    s->last_y = s->ball_y;
}

static int bricks_left(const breakout_state *s) {
    for (int y = 0; y < MINATAR_SIZE; y++)
        for (int x = 0; x < MINATAR_SIZE; x++)
            if (s->brick[y][x]) return 1;
    return 0;
}

static int breakout_act(void *game, mt19937 *mt, int a, int *terminal) {
    (void)mt;
    breakout_state *s = game;
    int reward = 0;
    if (s->terminal) {
        *terminal = 1;
        return 0;
    }
    /* at most one of the two moves applies: added without branches (a random policy's
     * action is unpredictable) */
    const int p = s->paddle;
    s->paddle = (int8_t)(p + ((a == MA_RIGHT) & (p < 9)) - ((a == MA_LEFT) & (p > 0)));

    s->last_x = s->ball_x;
    s->last_y = s->ball_y;
    /* dir is 0..3 and the ball above row 9 here (breakout_invalid), so y <= 9 */
    int x = s->ball_x + dir_dx[(int)s->dir], y = s->ball_y + dir_dy[(int)s->dir];
    int hit_brick = 0;
    if (x < 0 || x > 9) {
        x = x < 0 ? 0 : 9;
        s->dir = flip_x[(int)s->dir];
    }
    if (y < 0) {
        y = 0;
        s->dir = flip_y[(int)s->dir];
    } else if (s->brick[y][x]) {
        hit_brick = 1;
        if (!s->strike) {
            reward++;
            s->strike = 1;
            s->brick[y][x] = 0;
            y = s->last_y;
            s->dir = flip_y[(int)s->dir];
        }
    } else if (y == 9) {
        if (!bricks_left(s)) fill_bricks(s);
        if (s->ball_x == s->paddle) { /* the ball comes down onto the paddle */
            s->dir = flip_y[(int)s->dir];
            y = s->last_y;
        } else if (x == s->paddle) { /* it meets the paddle's corner */
            s->dir = turn_back[(int)s->dir];
            y = s->last_y;
        } else {
            s->terminal = 1;
        }
    }
    if (!hit_brick) s->strike = 0;
    s->ball_x = (int8_t)x;
    s->ball_y = (int8_t)y;
    *terminal = s->terminal;
    return reward;
}

/* The ball, its trail and the paddle are on the grid (breakout_invalid). */
static void set_cell(uint8_t *obs, int y, int x, int ch) {
    obs[MINATAR_AT(BREAKOUT_CHANNELS, y, x, ch)] = 1;
}

static void breakout_observe(const void *game, uint8_t *obs) {
    const breakout_state *s = game;
    /* Every cell written whole from the brick grid (its four channels as one 4-byte word:
     * gcc makes the loop 16-byte loads, compares and stores, no zeroing pass), then the
     * three cells that hold something else. */
    _Static_assert(BREAKOUT_CHANNELS == 4, "a cell is one 4-byte word");
    static const uint8_t brick_cell[BREAKOUT_CHANNELS] = {[CH_BRICK] = 1};
    uint32_t brick_word;
    memcpy(&brick_word, brick_cell, sizeof brick_word);
    const uint8_t *b = &s->brick[0][0];
    for (int i = 0; i < MINATAR_SIZE * MINATAR_SIZE; i++) {
        const uint32_t cell = b[i] ? brick_word : 0;
        memcpy(obs + (size_t)i * BREAKOUT_CHANNELS, &cell, sizeof cell);
    }
    set_cell(obs, s->ball_y, s->ball_x, CH_BALL);
    set_cell(obs, 9, s->paddle, CH_PADDLE);
    set_cell(obs, s->last_y, s->last_x, CH_TRAIL);
}

/* The rules' invariants: bricks 0/1 and only in rows 1..3 (a refill fills those); the
 * paddle, the ball and its trail on the grid, the ball above the paddle's row until the
 * frame it ends the game there; the trail the ball's previous cell, so at most one cell
 * from it along each axis; the direction one of four; the flags 0/1. */
static int breakout_invalid(const void *game, minatar_why *w) {
    const breakout_state *s = game;
    for (int y = 0; y < MINATAR_SIZE; y++)
        for (int x = 0; x < MINATAR_SIZE; x++)
            if (s->brick[y][x] > (y >= 1 && y <= 3))
                return minatar_fault(w, "brick value %d at row %d column %d (0/1 in rows 1..3)",
                                     s->brick[y][x], y, x);
    const int over = s->terminal == 1; /* the ball in row 9 */
    if (minatar_outside(w, s->terminal, 0, 1, "terminal flag") ||
        minatar_outside(w, s->strike, 0, 1, "strike flag") ||
        minatar_outside(w, s->dir, 0, 3, "ball direction") ||
        minatar_outside(w, s->paddle, 0, 9, "paddle column") ||
        minatar_outside(w, s->ball_x, 0, 9, "ball column") ||
        minatar_outside(w, s->ball_y, over ? 9 : 0, over ? 9 : 8,
                        over ? "ball row after the game ended" : "ball row") ||
        minatar_outside(w, s->last_x, 0, 9, "trail column") ||
        minatar_outside(w, s->last_y, 0, 8, "trail row"))
        return 1;
    if (abs(s->ball_x - s->last_x) > 1 || abs(s->ball_y - s->last_y) > 1)
        return minatar_fault(w, "ball at row %d column %d is not next to its trail at row %d "
                                "column %d", s->ball_y, s->ball_x, s->last_y, s->last_x);
    return 0;
}

const minatar_game minatar_breakout = {
    .name = "Breakout",
    .channels = BREAKOUT_CHANNELS,
    .num_minimal = 3,
    .minimal = {MA_NOOP, MA_LEFT, MA_RIGHT},
    .state_size = sizeof(breakout_state),
    .reset = breakout_reset,
    .act = breakout_act,
    .observe = breakout_observe,
    .invalid = breakout_invalid,
};

MINATAR_CLASSES(minatar_breakout, minatar_breakout, breakout_state, "Breakout",
                BREAKOUT_CHANNELS, 3);
