/* minatar_freeway.c: MinAtar's Freeway. A chicken crosses eight lanes of cars from the
 * bottom row to the top (+1, then back to the bottom with new car speeds); a car that
 * reaches it sends it back down. The episode ends after 2,500 frames. */
#include <stdlib.h>

#include "envs/envs.h"
#include "envs/minatar.h"

enum { CH_CHICKEN, CH_CAR, CH_SPEED1, FREEWAY_CHANNELS = CH_SPEED1 + 5 };

enum {
    PLAYER_SPEED = 3, /* frames between the chicken's moves */
    TIME_LIMIT = 2500,
    CARS = 8,         /* one per lane, rows 1..8 */
    CHICKEN_X = 4
};

typedef struct freeway_car {
    int8_t x, timer, speed; /* speed: +-1..5 frames per cell, its sign the direction */
} freeway_car;

typedef struct freeway_state {
    freeway_car car[CARS];
    int32_t pos; /* the chicken's row */
    int32_t move_timer, terminate_timer, terminal;
} freeway_state;

/* New speeds for all lanes: eight randint(1, 6), then eight rand() for the directions
 * (the sign of rand() - 0.5). A new episode also puts every car at x = 0. */
static void randomize_cars(freeway_state *s, mt19937 *mt, int initialize) {
    int speed[CARS];
    for (int i = 0; i < CARS; i++) speed[i] = (int)mt19937_randint(mt, 1, 6);
    for (int i = 0; i < CARS; i++) {
        double u = mt19937_rand(mt);
        speed[i] *= u > 0.5 ? 1 : u < 0.5 ? -1 : 0;
    }
    for (int i = 0; i < CARS; i++) {
        if (initialize) s->car[i].x = 0;
        s->car[i].speed = (int8_t)speed[i];
        s->car[i].timer = (int8_t)(speed[i] < 0 ? -speed[i] : speed[i]);
    }
}

static void freeway_reset(void *game, mt19937 *mt) {
    freeway_state *s = game;
    *s = (freeway_state){0};
    randomize_cars(s, mt, 1);
    s->pos = 9;
    s->move_timer = PLAYER_SPEED;
    s->terminate_timer = TIME_LIMIT;
}

static int freeway_act(void *game, mt19937 *mt, int a, int *terminal) {
    freeway_state *s = game;
    int reward = 0;
    if (s->terminal) {
        *terminal = 1;
        return 0;
    }
    if (a == MA_UP && s->move_timer == 0) {
        s->move_timer = PLAYER_SPEED;
        if (s->pos > 0) s->pos--;
    } else if (a == MA_DOWN && s->move_timer == 0) {
        s->move_timer = PLAYER_SPEED;
        if (s->pos < 9) s->pos++;
    }
    if (s->pos == 0) { /* across */
        reward++;
        randomize_cars(s, mt, 0);
        s->pos = 9;
    }
    for (int i = 0; i < CARS; i++) {
        freeway_car *c = &s->car[i];
        if (c->x == CHICKEN_X && i + 1 == s->pos) s->pos = 9;
        if (c->timer == 0) {
            c->timer = (int8_t)(c->speed < 0 ? -c->speed : c->speed);
            c->x += c->speed > 0 ? 1 : -1;
            if (c->x < 0) c->x = 9;
            else if (c->x > 9) c->x = 0;
            if (c->x == CHICKEN_X && i + 1 == s->pos) s->pos = 9;
        } else {
            c->timer--;
        }
    }
    if (s->move_timer > 0) s->move_timer--;
    if (--s->terminate_timer < 0) s->terminal = 1;
    *terminal = s->terminal;
    return reward;
}

static void set_cell(uint8_t *obs, int y, int x, int ch) {
    if ((unsigned)y < MINATAR_SIZE && (unsigned)x < MINATAR_SIZE)
        obs[MINATAR_AT(FREEWAY_CHANNELS, y, x, ch)] = 1;
}

static void freeway_observe(const void *game, uint8_t *obs) {
    const freeway_state *s = game;
    minatar_zero(obs, MINATAR_SIZE * MINATAR_SIZE * FREEWAY_CHANNELS);
    set_cell(obs, s->pos, CHICKEN_X, CH_CHICKEN);
    for (int i = 0; i < CARS; i++) {
        const freeway_car *c = &s->car[i];
        set_cell(obs, i + 1, c->x, CH_CAR);
        int back = c->speed > 0 ? c->x - 1 : c->x + 1; /* the trail wraps like the cars */
        back = back < 0 ? 9 : back > 9 ? 0 : back;
        int speed = c->speed < 0 ? -c->speed : c->speed;
        if (speed >= 1 && speed <= 5) set_cell(obs, i + 1, back, CH_SPEED1 + speed - 1);
    }
}

/* The rules' invariants: the chicken on rows 1..9 (reaching row 0 puts it back on 9 in
 * the same frame); cars on the grid (they wrap), speeds -5..5 (0 only when rand() drew
 * exactly 0.5), each car's timer within its speed; the player's timer within
 * PLAYER_SPEED; the episode over exactly when the time left went below 0. */
static int freeway_invalid(const void *game, minatar_why *w) {
    const freeway_state *s = game;
    for (int i = 0; i < CARS; i++) {
        const freeway_car *c = &s->car[i];
        if (minatar_outside(w, c->x, 0, 9, "car %d column", i) ||
            minatar_outside(w, c->speed, -5, 5, "car %d speed", i) ||
            minatar_outside(w, c->timer, 0, abs(c->speed), "car %d timer", i))
            return 1;
    }
    if (minatar_outside(w, s->pos, 1, 9, "chicken row") ||
        minatar_outside(w, s->move_timer, 0, PLAYER_SPEED, "move timer") ||
        minatar_outside(w, s->terminate_timer, -1, TIME_LIMIT, "frames left") ||
        (s->terminal != (s->terminate_timer < 0) &&
         minatar_fault(w, "terminal flag %d with %d frames left", (int)s->terminal,
                       (int)s->terminate_timer)))
        return 1;
    return 0;
}

const minatar_game minatar_freeway = {
    .name = "Freeway",
    .channels = FREEWAY_CHANNELS,
    .num_minimal = 3,
    .minimal = {MA_NOOP, MA_UP, MA_DOWN},
    .state_size = sizeof(freeway_state),
    .reset = freeway_reset,
    .act = freeway_act,
    .observe = freeway_observe,
    .invalid = freeway_invalid,
};

MINATAR_CLASSES(minatar_freeway, minatar_freeway, freeway_state, "Freeway", FREEWAY_CHANNELS, 3);
