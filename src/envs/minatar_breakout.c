/* minatar_breakout.c: MinAtar's Breakout. A paddle on the bottom row bounces a ball that
 * moves one cell along a diagonal each frame into three rows of bricks (+1 each, refilled
 * once all are gone); the episode ends when the ball reaches the bottom row past the paddle. */
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
    /* The rules keep dir in 0..3 and the ball above row 9 here; the mask and the clamp
     * below keep a corrupted state's reads in bounds. */
    const int d = s->dir & 3;
    int x = s->ball_x + dir_dx[d], y = s->ball_y + dir_dy[d];
    int hit_brick = 0;
    s->dir = (int8_t)d;
    if (x < 0 || x > 9) {
        x = x < 0 ? 0 : 9;
        s->dir = flip_x[(int)s->dir];
    }
    if (y > 9) y = 9;
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

/* Cells are written only when on the grid, so even a corrupted state stays in bounds. */
static void set_cell(uint8_t *obs, int y, int x, int ch) {
    if ((unsigned)y < MINATAR_SIZE && (unsigned)x < MINATAR_SIZE)
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

const minatar_game minatar_breakout = {
    .name = "Breakout",
    .channels = BREAKOUT_CHANNELS,
    .num_minimal = 3,
    .minimal = {MA_NOOP, MA_LEFT, MA_RIGHT},
    .state_size = sizeof(breakout_state),
    .reset = breakout_reset,
    .act = breakout_act,
    .observe = breakout_observe,
};

MINATAR_CLASSES(minatar_breakout, minatar_breakout, breakout_state, "Breakout",
                BREAKOUT_CHANNELS, 3);
