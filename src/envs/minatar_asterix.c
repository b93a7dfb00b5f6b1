/* minatar_asterix.c: MinAtar's Asterix. The player moves over rows 1-8 where enemies and
 * gold (+1 when touched) enter from a side and cross; touching an enemy ends the episode.
 * They spawn and move faster as the game goes on (difficulty ramping every 100 frames). */
#include "envs/envs.h"
#include "envs/minatar.h"

enum { CH_PLAYER, CH_ENEMY, CH_TRAIL, CH_GOLD, ASTERIX_CHANNELS };

enum {
    RAMP_INTERVAL = 100,
    INIT_SPAWN_SPEED = 10,
    INIT_MOVE_INTERVAL = 5,
    SLOTS = 8 /* one entity per row 1..8 */
};

typedef struct asterix_entity {
    int8_t live, x, right, gold; /* in row slot + 1; right: moving towards x = 9 */
} asterix_entity;

typedef struct asterix_state {
    asterix_entity e[SLOTS];
    int32_t player_x, player_y;
    int32_t spawn_speed, spawn_timer, move_speed, move_timer, ramp_timer, ramp_index;
    int32_t terminal;
} asterix_state;

static void asterix_reset(void *game, mt19937 *mt) {
    (void)mt;
    asterix_state *s = game;
    *s = (asterix_state){0};
    s->player_x = s->player_y = 5;
    s->spawn_speed = s->spawn_timer = INIT_SPAWN_SPEED;
    s->move_speed = s->move_timer = INIT_MOVE_INTERVAL;
    s->ramp_timer = RAMP_INTERVAL;
}

/* A new entity in a random free row, from a random side; the side and the kind are drawn
 * even when no row is free. */
static void spawn(asterix_state *s, mt19937 *mt) {
    int right = mt19937_rand_below(mt, 0.5);
    int gold = mt19937_rand_below(mt, 1.0 / 3.0);
    int free_slots[SLOTS], n = 0;
    for (int i = 0; i < SLOTS; i++)
        if (!s->e[i].live) free_slots[n++] = i;
    if (n == 0) return;
    int slot = free_slots[mt19937_randint(mt, 0, n)];
    s->e[slot] = (asterix_entity){.live = 1, .x = right ? 0 : 9, .right = (int8_t)right,
                                  .gold = (int8_t)gold};
}

/* The player meets entity i: gold is collected, an enemy ends the episode. */
static void meet(asterix_state *s, int i, int *reward) {
    if (s->e[i].x != s->player_x || i + 1 != s->player_y) return;
    if (s->e[i].gold) {
        s->e[i].live = 0;
        (*reward)++;
    } else {
        s->terminal = 1;
    }
}

static int asterix_act(void *game, mt19937 *mt, int a, int *terminal) {
    asterix_state *s = game;
    int reward = 0;
    if (s->terminal) {
        *terminal = 1;
        return 0;
    }
    if (s->spawn_timer == 0) {
        spawn(s, mt);
        s->spawn_timer = s->spawn_speed;
    }
    /* MinAtar's if/elif chain over the action: at most one of the four moves applies,
     * so they add up without branches (a random policy's action is unpredictable). */
    int px = s->player_x, py = s->player_y;
    px += (a == MA_RIGHT && px < 9) - (a == MA_LEFT && px > 0);
    py += (a == MA_DOWN && py < 8) - (a == MA_UP && py > 1);
    s->player_x = px;
    s->player_y = py;

    /* Only the entity of the player's row can meet the player (meet tests the row), so
     * MinAtar's checks of every entity, before and after the move, come down to that
     * one's; the others' outcome does not depend on it. */
    const int k = py - 1;
    const int in_row = (unsigned)k < SLOTS;
    if (in_row && s->e[k].live) meet(s, k, &reward);
    if (s->move_timer == 0) {
        s->move_timer = s->move_speed;
        /* every live entity one cell along, gone once off the grid: without branches */
        for (int i = 0; i < SLOTS; i++) {
            asterix_entity *e = &s->e[i];
            const int8_t x = (int8_t)(e->x + (e->right ? 1 : -1));
            const int live = e->live != 0;
            e->x = live ? x : e->x;
            e->live = live && (x < 0 || x > 9) ? 0 : e->live;
        }
        if (in_row && s->e[k].live) meet(s, k, &reward);
    }
    s->spawn_timer--;
    s->move_timer--;

    if (s->spawn_speed > 1 || s->move_speed > 1) {
        if (s->ramp_timer >= 0) {
            s->ramp_timer--;
        } else {
            if (s->move_speed > 1 && s->ramp_index % 2) s->move_speed--;
            if (s->spawn_speed > 1) s->spawn_speed--;
            s->ramp_index++;
            s->ramp_timer = RAMP_INTERVAL;
        }
    }
    *terminal = s->terminal;
    return reward;
}

static int clamp9(int v) { return v < 0 ? 0 : v > 9 ? 9 : v; }

/* Zeros, the player, then each slot's two cells written whether it is live or not, with
 * the value it has (0 for a dead one or a cell off the grid, at a clamped index), which
 * spares a branch per slot: only slot i writes the enemy, gold and trail channels of row
 * i + 1, so a 0 written there never covers a 1. */
static void asterix_observe(const void *game, uint8_t *obs) {
    const asterix_state *s = game;
    minatar_zero(obs, MINATAR_SIZE * MINATAR_SIZE * ASTERIX_CHANNELS);
    if ((unsigned)s->player_y < MINATAR_SIZE && (unsigned)s->player_x < MINATAR_SIZE)
        obs[MINATAR_AT(ASTERIX_CHANNELS, s->player_y, s->player_x, CH_PLAYER)] = 1;
    for (int i = 0; i < SLOTS; i++) {
        const asterix_entity *e = &s->e[i];
        const int live = e->live != 0, x = e->x, tx = x + 1 - 2 * (e->right != 0);
        uint8_t *row = obs + MINATAR_AT(ASTERIX_CHANNELS, i + 1, 0, 0);
        row[clamp9(x) * ASTERIX_CHANNELS + CH_ENEMY + (CH_GOLD - CH_ENEMY) * (e->gold != 0)] =
            (uint8_t)(live & ((unsigned)x < MINATAR_SIZE));
        row[clamp9(tx) * ASTERIX_CHANNELS + CH_TRAIL] = (uint8_t)(live & ((unsigned)tx < MINATAR_SIZE));
    }
}

/* The rules' invariants: the player on rows 1..8; an entity on the grid while live (one
 * that leaves it dies in that move), one cell off at most once dead; the flags 0/1; the
 * timers within what they are set to; and the speeds what ramp_index ramps have made
 * them (one ramp lowers the spawn speed, every second one the move speed, to 1 each). */
static int asterix_invalid(const void *game, minatar_why *w) {
    const asterix_state *s = game;
    for (int i = 0; i < SLOTS; i++) {
        const asterix_entity *e = &s->e[i];
        if (minatar_outside(w, e->live, 0, 1, "entity %d live flag", i) ||
            minatar_outside(w, e->right, 0, 1, "entity %d direction flag", i) ||
            minatar_outside(w, e->gold, 0, 1, "entity %d gold flag", i) ||
            minatar_outside(w, e->x, e->live ? 0 : -1, e->live ? 9 : 10,
                            e->live ? "entity %d column" : "dead entity %d column", i))
            return 1;
    }
    const int r = s->ramp_index, spawn = r < INIT_SPAWN_SPEED ? INIT_SPAWN_SPEED - r : 1,
              move = r / 2 < INIT_MOVE_INTERVAL ? INIT_MOVE_INTERVAL - r / 2 : 1;
    if (minatar_outside(w, s->player_x, 0, 9, "player column") ||
        minatar_outside(w, s->player_y, 1, 8, "player row") ||
        minatar_outside(w, s->terminal, 0, 1, "terminal flag") ||
        minatar_outside(w, s->ramp_index, 0, INIT_SPAWN_SPEED - 1, "ramp index") ||
        (s->spawn_speed != spawn &&
         minatar_fault(w, "spawn speed %d, not %d after %d ramps", (int)s->spawn_speed, spawn, r)) ||
        (s->move_speed != move &&
         minatar_fault(w, "move speed %d, not %d after %d ramps", (int)s->move_speed, move, r)) ||
        minatar_outside(w, s->spawn_timer, 0, INIT_SPAWN_SPEED, "spawn timer") ||
        minatar_outside(w, s->move_timer, 0, INIT_MOVE_INTERVAL, "move timer") ||
        minatar_outside(w, s->ramp_timer, -1, RAMP_INTERVAL, "ramp timer"))
        return 1;
    return 0;
}

const minatar_game minatar_asterix = {
    .name = "Asterix",
    .channels = ASTERIX_CHANNELS,
    .num_minimal = 5,
    .minimal = {MA_NOOP, MA_LEFT, MA_UP, MA_RIGHT, MA_DOWN},
    .state_size = sizeof(asterix_state),
    .reset = asterix_reset,
    .act = asterix_act,
    .observe = asterix_observe,
    .invalid = asterix_invalid,
};

MINATAR_CLASSES(minatar_asterix, minatar_asterix, asterix_state, "Asterix", ASTERIX_CHANNELS, 5);
