/* minatar_space_invaders.c: MinAtar's Space Invaders. A cannon on the bottom row shoots
 * a block of aliens (+1 each) that marches sideways and steps down at the walls, firing
 * from the alien nearest the cannon; a new wave comes faster once a wave is cleared. The
 * episode ends when an alien bullet or an alien reaches the cannon, or aliens the bottom. */
#include "envs/envs.h"
#include "envs/minatar.h"

enum { CH_CANNON, CH_ALIEN, CH_ALIEN_LEFT, CH_ALIEN_RIGHT, CH_F_BULLET, CH_E_BULLET,
       SI_CHANNELS };

enum { SHOT_COOL_DOWN = 5, ENEMY_MOVE_INTERVAL = 12, ENEMY_SHOT_INTERVAL = 10 };

typedef struct space_invaders_state {
    uint8_t alien[MINATAR_SIZE][MINATAR_SIZE];
    uint8_t f_bullet[MINATAR_SIZE][MINATAR_SIZE]; /* the cannon's, moving up */
    uint8_t e_bullet[MINATAR_SIZE][MINATAR_SIZE]; /* the aliens', moving down */
    int32_t pos, alien_dir; /* alien_dir: -1 left, +1 right */
    int32_t enemy_move_interval, alien_move_timer, alien_shot_timer, ramp_index, shot_timer;
    int32_t terminal;
} space_invaders_state;

typedef uint8_t grid[MINATAR_SIZE][MINATAR_SIZE];

static void new_wave(space_invaders_state *s) {
    for (int y = 0; y < 4; y++)
        for (int x = 2; x < 8; x++) s->alien[y][x] = 1;
}

static void si_reset(void *game, mt19937 *mt) {
    (void)mt;
    space_invaders_state *s = game;
    *s = (space_invaders_state){0};
    s->pos = 5;
    new_wave(s);
    s->alien_dir = -1;
    s->enemy_move_interval = s->alien_move_timer = ENEMY_MOVE_INTERVAL;
    s->alien_shot_timer = ENEMY_SHOT_INTERVAL;
}

/* np.roll(grid, 1, axis=0): every row down one, the bottom row wrapping to the top. */
static void roll_down(grid g) {
    uint8_t bottom[MINATAR_SIZE];
    memcpy(bottom, g[MINATAR_SIZE - 1], MINATAR_SIZE);
    memmove(g[1], g[0], (MINATAR_SIZE - 1) * MINATAR_SIZE);
    memcpy(g[0], bottom, MINATAR_SIZE);
}

/* np.roll(grid, by, axis=1): every row rotated right by `by` columns (left if negative). */
static void roll_cols(grid g, int by) {
    int k = (by % MINATAR_SIZE + MINATAR_SIZE) % MINATAR_SIZE;
    for (int y = 0; y < MINATAR_SIZE; y++) {
        uint8_t row[MINATAR_SIZE];
        memcpy(row, g[y], MINATAR_SIZE);
        memcpy(g[y] + k, row, (size_t)(MINATAR_SIZE - k));
        memcpy(g[y], row + MINATAR_SIZE - k, (size_t)k);
    }
}

/* Every row of g one row up (by -1) or down (by 1), the row that comes in cleared: what
 * leaves the grid is gone. An empty grid (most often a bullet grid) stays as it is. Fixed
 * sizes through a copy, so gcc moves them inline rather than calling memmove. */
static void shift_rows(grid g, int by) {
    enum { MOVED = (MINATAR_SIZE - 1) * MINATAR_SIZE };
    if (!minatar_grid_any(&g[0][0])) return;
    uint8_t tmp[MOVED];
    memcpy(tmp, by < 0 ? g[1] : g[0], MOVED);
    memcpy(by < 0 ? g[0] : g[1], tmp, MOVED);
    memset(by < 0 ? g[MINATAR_SIZE - 1] : g[0], 0, MINATAR_SIZE);
}

static int column_has(const grid g, int x) {
    for (int y = 0; y < MINATAR_SIZE; y++)
        if (g[y][x]) return 1;
    return 0;
}

static int row_has(const grid g, int y) { return minatar_row_any(g[y]); }

static int count(const grid g) {
    int n = 0;
    for (int y = 0; y < MINATAR_SIZE; y++)
        for (int x = 0; x < MINATAR_SIZE; x++) n += g[y][x] != 0;
    return n;
}

/* The lowest alien of the column nearest the cannon (the left one of two as near)
 * fires. */
static void alien_fires(space_invaders_state *s) {
    for (int d = 0; d < MINATAR_SIZE; d++)
        for (int side = -1; side <= 1; side += 2) {
            int x = s->pos + side * d;
            if (x < 0 || x >= MINATAR_SIZE || (d == 0 && side > 0) || !column_has(s->alien, x))
                continue;
            int y = MINATAR_SIZE - 1;
            while (!s->alien[y][x]) y--;
            s->e_bullet[y][x] = 1;
            return;
        }
}

static int si_act(void *game, mt19937 *mt, int a, int *terminal) {
    (void)mt;
    space_invaders_state *s = game;
    int reward = 0;
    if (s->terminal) {
        *terminal = 1;
        return 0;
    }
    if (a == MA_FIRE && s->shot_timer == 0) {
        s->f_bullet[9][s->pos] = 1;
        s->shot_timer = SHOT_COOL_DOWN;
    } else if (a == MA_LEFT && s->pos > 0) {
        s->pos--;
    } else if (a == MA_RIGHT && s->pos < 9) {
        s->pos++;
    }
    /* Bullets move one row (MinAtar's np.roll, the wrapped row cleared): what leaves the
     * grid is gone. */
    shift_rows(s->f_bullet, -1);
    shift_rows(s->e_bullet, 1);
    if (s->e_bullet[9][s->pos]) s->terminal = 1;

    if (s->alien[9][s->pos]) s->terminal = 1;
    if (s->alien_move_timer == 0) {
        int n = count(s->alien);
        s->alien_move_timer = n < s->enemy_move_interval ? n : s->enemy_move_interval;
        if ((column_has(s->alien, 0) && s->alien_dir < 0) ||
            (column_has(s->alien, 9) && s->alien_dir > 0)) {
            s->alien_dir = -s->alien_dir;
            if (row_has(s->alien, 9)) s->terminal = 1;
            roll_down(s->alien); /* wraps the bottom row to the top, as np.roll does */
        } else {
            roll_cols(s->alien, s->alien_dir);
        }
        if (s->alien[9][s->pos]) s->terminal = 1;
    }
    if (s->alien_shot_timer == 0) {
        s->alien_shot_timer = ENEMY_SHOT_INTERVAL;
        alien_fires(s);
    }
    /* A bullet in an alien's cell destroys both. Whether any does is one pass without
     * branches (it vectorizes); a hit is rare. */
    uint8_t *alien = &s->alien[0][0], *f = &s->f_bullet[0][0], any_hit = 0;
    for (int i = 0; i < MINATAR_SIZE * MINATAR_SIZE; i++) any_hit |= (alien[i] != 0) & (f[i] != 0);
    if (any_hit)
        for (int i = 0; i < MINATAR_SIZE * MINATAR_SIZE; i++)
            if (alien[i] && f[i]) {
                reward++;
                alien[i] = f[i] = 0;
            }

    if (s->shot_timer > 0) s->shot_timer--;
    s->alien_move_timer--;
    s->alien_shot_timer--;
    if (!minatar_grid_any(&s->alien[0][0])) {
        if (s->enemy_move_interval > 6) {
            s->enemy_move_interval--;
            s->ramp_index++;
        }
        new_wave(s);
    }
    *terminal = s->terminal;
    return reward;
}

/* All zeros, then the rows that hold something: each such row of a grid written cell by
 * cell as 0/1 bytes (no branch per cell; each grid has channels of its own, so a 0
 * covers nothing), and the cannon. */
static void si_observe(const void *game, uint8_t *obs) {
    const space_invaders_state *s = game;
    minatar_zero(obs, MINATAR_SIZE * MINATAR_SIZE * SI_CHANNELS);
    const int alien_ch = s->alien_dir < 0 ? CH_ALIEN_LEFT : CH_ALIEN_RIGHT;
    for (int y = 0; y < MINATAR_SIZE; y++) {
        uint8_t *row = obs + MINATAR_AT(SI_CHANNELS, y, 0, 0);
        if (row_has(s->alien, y))
            for (int x = 0; x < MINATAR_SIZE; x++) {
                int v = s->alien[y][x] != 0;
                row[x * SI_CHANNELS + CH_ALIEN] = (uint8_t)v;
                row[x * SI_CHANNELS + alien_ch] = (uint8_t)v;
            }
        if (row_has(s->f_bullet, y))
            for (int x = 0; x < MINATAR_SIZE; x++)
                row[x * SI_CHANNELS + CH_F_BULLET] = s->f_bullet[y][x] != 0;
        if (row_has(s->e_bullet, y))
            for (int x = 0; x < MINATAR_SIZE; x++)
                row[x * SI_CHANNELS + CH_E_BULLET] = s->e_bullet[y][x] != 0;
    }
    if ((unsigned)s->pos < MINATAR_SIZE) obs[MINATAR_AT(SI_CHANNELS, 9, s->pos, CH_CANNON)] = 1;
}

/* A grid's cells are 0/1; what is set where comes from moves, rolls and hits. */
static int grid_invalid(const grid g, const char *what, minatar_why *w) {
    for (int y = 0; y < MINATAR_SIZE; y++)
        for (int x = 0; x < MINATAR_SIZE; x++)
            if (minatar_outside(w, g[y][x], 0, 1, "%s cell at row %d column %d", what, y, x))
                return 1;
    return 0;
}

/* The rules' invariants: the grids 0/1; the cannon's bullets above row 9 (fired there,
 * they move up in the same frame); aliens on the grid (a cleared wave is replaced in the
 * same frame, and the aliens' timer is set from their count); the cannon on the grid;
 * the aliens' direction -1 or +1; their move interval what ramp_index waves lowered it
 * to (12 down to 6); the timers within what they are set to; the flag 0/1. */
static int si_invalid(const void *game, minatar_why *w) {
    const space_invaders_state *s = game;
    if (grid_invalid(s->alien, "alien", w) || grid_invalid(s->f_bullet, "bullet", w) ||
        grid_invalid(s->e_bullet, "alien bullet", w))
        return 1;
    if (row_has(s->f_bullet, 9)) return minatar_fault(w, "a bullet in the cannon's row 9");
    if (!minatar_grid_any(&s->alien[0][0])) return minatar_fault(w, "no aliens");
    const int interval = ENEMY_MOVE_INTERVAL - s->ramp_index;
    if (minatar_outside(w, s->pos, 0, 9, "cannon column") ||
        minatar_outside(w, s->alien_dir, -1, 1, "alien direction") ||
        (s->alien_dir == 0 && minatar_fault(w, "alien direction 0, not -1 or 1")) ||
        minatar_outside(w, s->ramp_index, 0, ENEMY_MOVE_INTERVAL - 6, "ramp index") ||
        (s->enemy_move_interval != interval &&
         minatar_fault(w, "alien move interval %d, not %d after %d ramps",
                       (int)s->enemy_move_interval, interval, (int)s->ramp_index)) ||
        minatar_outside(w, s->alien_move_timer, 0, ENEMY_MOVE_INTERVAL, "alien move timer") ||
        minatar_outside(w, s->alien_shot_timer, 0, ENEMY_SHOT_INTERVAL, "alien shot timer") ||
        minatar_outside(w, s->shot_timer, 0, SHOT_COOL_DOWN - 1, "shot timer") ||
        minatar_outside(w, s->terminal, 0, 1, "terminal flag"))
        return 1;
    return 0;
}

const minatar_game minatar_space_invaders = {
    .name = "SpaceInvaders",
    .channels = SI_CHANNELS,
    .num_minimal = 4,
    .minimal = {MA_NOOP, MA_LEFT, MA_RIGHT, MA_FIRE},
    .state_size = sizeof(space_invaders_state),
    .reset = si_reset,
    .act = si_act,
    .observe = si_observe,
    .invalid = si_invalid,
};

MINATAR_CLASSES(minatar_space_invaders, minatar_space_invaders, space_invaders_state,
                "SpaceInvaders", SI_CHANNELS, 4);
