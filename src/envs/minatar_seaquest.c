/* minatar_seaquest.c: MinAtar's Seaquest. A submarine shoots enemy fish and subs (+1
 * each; subs shoot back), picks up divers, and must surface before its oxygen runs out;
 * surfacing with six divers pays for the oxygen left. Enemies come faster and move faster
 * each time it surfaces (difficulty ramping). Touching an enemy or its bullet, running out
 * of oxygen, or surfacing without a diver ends the episode. */
#include "envs/envs.h"
#include "envs/minatar.h"

enum {
    CH_SUB_FRONT, CH_SUB_BACK, CH_F_BULLET, CH_TRAIL, CH_E_BULLET, CH_FISH, CH_E_SUB,
    CH_OXYGEN, CH_DIVER_GAUGE, CH_DIVER, SEAQUEST_CHANNELS
};

enum {
    MAX_OXYGEN = 200,
    INIT_SPAWN_SPEED = 20,
    DIVER_SPAWN_SPEED = 30,
    INIT_MOVE_INTERVAL = 5,
    SHOT_COOL_DOWN = 5,
    ENEMY_SHOT_INTERVAL = 10,
    DIVER_MOVE_INTERVAL = 5,
    /* List capacities. Enemies spawn at most once a frame and leave the grid within
     * 10 moves of at most 6 frames; each sub has at most one bullet on the grid; the
     * cannon fires every 5 frames, a diver comes every 30. Appends beyond never happen. */
    CAP = 72,
    SMALL_CAP = 8
};

/* MinAtar keeps each kind of object in a Python list of lists: [x, y, right] for bullets,
 * [x, y, right, move timer] for fish and divers, [..., shot timer] for subs. Fields a kind
 * lacks stay 0, so whole-object equality is MinAtar's list equality. */
typedef struct sq_obj {
    int8_t x, y, right, move, shot;
} sq_obj;

typedef struct sq_list {
    int32_t n;
    sq_obj a[CAP];
} sq_list;

typedef struct sq_small_list {
    int32_t n;
    sq_obj a[SMALL_CAP];
} sq_small_list;

typedef struct seaquest_state {
    sq_list e_bullets, e_fish, e_subs;
    sq_small_list f_bullets, divers;
    int32_t oxygen, diver_count; /* diver_count goes below 0 after a six-diver surfacing,
                                    as in MinAtar */
    int32_t sub_x, sub_y, sub_right;
    int32_t e_spawn_speed, e_spawn_timer, d_spawn_timer, move_speed, ramp_index, shot_timer;
    int32_t surface, terminal;
} seaquest_state;

/* The lists are handled through a view, so both capacities share the code. */
typedef struct view {
    int32_t *n;
    sq_obj *a;
    int cap;
} view;
#define VIEW(list) ((view){&(list).n, (list).a, (int)(sizeof(list).a / sizeof(list).a[0])})

static int same(const sq_obj *p, const sq_obj *q) {
    return p->x == q->x && p->y == q->y && p->right == q->right && p->move == q->move &&
           p->shot == q->shot;
}

static void append(view l, sq_obj o) {
    if (*l.n < l.cap) l.a[(*l.n)++] = o;
}

/* list.remove(o): deletes the first element equal to o; returns its index, or -1. */
static int remove_equal(view l, const sq_obj *o) {
    for (int i = 0; i < *l.n; i++)
        if (same(&l.a[i], o)) {
            for (int j = i + 1; j < *l.n; j++) l.a[j - 1] = l.a[j];
            (*l.n)--;
            return i;
        }
    return -1;
}

/* The object a Python loop variable holds while the loop mutates its list: its value,
 * and where it sits in the list (-1 once removed; the variable then keeps the value). */
typedef struct cursor {
    sq_obj o;
    int at;
} cursor;

static void store(view l, cursor *c) {
    if (c->at >= 0) l.a[c->at] = c->o;
}

/* list.remove(value) while c iterates l: keeps c pointing at its own object. */
static void remove_at_cursor(view l, const sq_obj *value, cursor *c) {
    int k = remove_equal(l, value);
    if (k < 0) return;
    if (k == c->at) c->at = -1;
    else if (k < c->at) c->at--;
}

/* Python's reversed(list) over a list the body may shrink: the iterator holds an index,
 * counts it down, and stops once the index falls outside the list. */
#define FOR_REVERSED(l, it) for (int it = *(l).n - 1; it >= 0 && it < *(l).n; it--)

static int at_sub(const seaquest_state *s, const sq_obj *o) {
    return o->x == s->sub_x && o->y == s->sub_y;
}

static int off_grid(const sq_obj *o) { return o->x < 0 || o->x > 9; }

static void step_x(sq_obj *o) { o->x += o->right ? 1 : -1; }

static void seaquest_reset(void *game, mt19937 *mt) {
    (void)mt;
    seaquest_state *s = game;
    *s = (seaquest_state){0};
    s->oxygen = MAX_OXYGEN;
    s->sub_x = 5;
    s->e_spawn_speed = s->e_spawn_timer = INIT_SPAWN_SPEED;
    s->d_spawn_timer = DIVER_SPAWN_SPEED;
    s->move_speed = INIT_MOVE_INTERVAL;
    s->surface = 1;
}

/* An enemy in a random row (1..8) from a random side, unless an enemy in that row moves
 * the other way; the side, the kind and the row are drawn in any case. */
static void spawn_enemy(seaquest_state *s, mt19937 *mt) {
    int right = mt19937_rand_below(mt, 0.5);
    int is_sub = mt19937_rand_below(mt, 1.0 / 3.0);
    int y = (int)mt19937_randint(mt, 1, 9);
    for (int i = 0; i < s->e_subs.n; i++)
        if (s->e_subs.a[i].y == y && s->e_subs.a[i].right != right) return;
    for (int i = 0; i < s->e_fish.n; i++)
        if (s->e_fish.a[i].y == y && s->e_fish.a[i].right != right) return;
    sq_obj o = {.x = right ? 0 : 9, .y = (int8_t)y, .right = (int8_t)right,
                .move = (int8_t)s->move_speed};
    if (is_sub) {
        o.shot = ENEMY_SHOT_INTERVAL;
        append(VIEW(s->e_subs), o);
    } else {
        append(VIEW(s->e_fish), o);
    }
}

static void spawn_diver(seaquest_state *s, mt19937 *mt) {
    int right = mt19937_rand_below(mt, 0.5);
    int y = (int)mt19937_randint(mt, 1, 9);
    append(VIEW(s->divers), (sq_obj){.x = right ? 0 : 9, .y = (int8_t)y, .right = (int8_t)right,
                                     .move = DIVER_MOVE_INTERVAL});
}

/* Python's floor division, for a reward from a negative oxygen level. */
static int floor_div(int a, int b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

/* Reaching the top row: with six divers a reward for the oxygen left; full oxygen, one
 * diver fewer, and a harder game. */
static int surface(seaquest_state *s) {
    int reward = 0;
    s->surface = 1;
    if (s->diver_count == 6) {
        s->diver_count = 0;
        reward = floor_div(s->oxygen * 10, MAX_OXYGEN);
    }
    s->oxygen = MAX_OXYGEN;
    s->diver_count--;
    if (s->e_spawn_speed > 1 || s->move_speed > 2) {
        if (s->move_speed > 2 && s->ramp_index % 2) s->move_speed--;
        if (s->e_spawn_speed > 1) s->e_spawn_speed--;
        s->ramp_index++;
    }
    return reward;
}

/* The first object of l at o's cell (forward order), or -1. */
static int find_cell(view l, const sq_obj *o) {
    for (int i = 0; i < *l.n; i++)
        if (l.a[i].x == o->x && l.a[i].y == o->y) return i;
    return -1;
}

static void update_friendly_bullets(seaquest_state *s, int *reward) {
    view fb = VIEW(s->f_bullets);
    FOR_REVERSED(fb, it) {
        cursor c = {fb.a[it], it};
        step_x(&c.o);
        store(fb, &c);
        if (off_grid(&c.o)) {
            remove_at_cursor(fb, &c.o, &c);
            continue;
        }
        view targets[2] = {VIEW(s->e_fish), VIEW(s->e_subs)};
        for (int t = 0; t < 2; t++) {
            int k = find_cell(targets[t], &c.o);
            if (k < 0) continue;
            sq_obj hit = targets[t].a[k];
            remove_equal(targets[t], &hit);
            remove_at_cursor(fb, &c.o, &c);
            (*reward)++;
            break;
        }
    }
}

static void update_divers(seaquest_state *s) {
    view d = VIEW(s->divers);
    FOR_REVERSED(d, it) {
        cursor c = {d.a[it], it};
        if (at_sub(s, &c.o) && s->diver_count < 6) {
            remove_at_cursor(d, &c.o, &c);
            s->diver_count++;
        } else if (c.o.move == 0) {
            c.o.move = DIVER_MOVE_INTERVAL;
            step_x(&c.o);
            store(d, &c);
            if (off_grid(&c.o)) {
                remove_at_cursor(d, &c.o, &c);
            } else if (at_sub(s, &c.o) && s->diver_count < 6) {
                remove_at_cursor(d, &c.o, &c);
                s->diver_count++;
            }
        } else {
            c.o.move--;
            store(d, &c);
        }
    }
}

/* Fish and subs: touching the submarine ends the episode; a move into a friendly bullet
 * destroys both. Subs also shoot every ENEMY_SHOT_INTERVAL + 1 frames, even in the frame
 * they leave the grid or are hit (MinAtar's loop goes on with the removed object). */
static void update_enemies(seaquest_state *s, view l, int shoots, int *reward) {
    view fb = VIEW(s->f_bullets);
    FOR_REVERSED(l, it) {
        cursor c = {l.a[it], it};
        if (at_sub(s, &c.o)) s->terminal = 1;
        if (c.o.move == 0) {
            c.o.move = (int8_t)s->move_speed;
            step_x(&c.o);
            store(l, &c);
            if (off_grid(&c.o)) {
                remove_at_cursor(l, &c.o, &c);
            } else if (at_sub(s, &c.o)) {
                s->terminal = 1;
            } else {
                int k = find_cell(fb, &c.o);
                if (k >= 0) {
                    sq_obj bullet = fb.a[k];
                    remove_at_cursor(l, &c.o, &c);
                    remove_equal(fb, &bullet);
                    (*reward)++;
                }
            }
        } else {
            c.o.move--;
            store(l, &c);
        }
        if (!shoots) continue;
        if (c.o.shot == 0) {
            c.o.shot = ENEMY_SHOT_INTERVAL;
            store(l, &c);
            append(VIEW(s->e_bullets), (sq_obj){.x = c.o.x, .y = c.o.y, .right = c.o.right});
        } else {
            c.o.shot--;
            store(l, &c);
        }
    }
}

static void update_enemy_bullets(seaquest_state *s) {
    view l = VIEW(s->e_bullets);
    FOR_REVERSED(l, it) {
        cursor c = {l.a[it], it};
        if (at_sub(s, &c.o)) s->terminal = 1;
        step_x(&c.o);
        store(l, &c);
        if (off_grid(&c.o)) remove_at_cursor(l, &c.o, &c);
        else if (at_sub(s, &c.o)) s->terminal = 1;
    }
}

static int seaquest_act(void *game, mt19937 *mt, int a, int *terminal) {
    seaquest_state *s = game;
    int reward = 0;
    if (s->terminal) {
        *terminal = 1;
        return 0;
    }
    if (s->e_spawn_timer == 0) {
        spawn_enemy(s, mt);
        s->e_spawn_timer = s->e_spawn_speed;
    }
    if (s->d_spawn_timer == 0) {
        spawn_diver(s, mt);
        s->d_spawn_timer = DIVER_SPAWN_SPEED;
    }
    if (a == MA_FIRE && s->shot_timer == 0) {
        append(VIEW(s->f_bullets), (sq_obj){.x = (int8_t)s->sub_x, .y = (int8_t)s->sub_y,
                                            .right = (int8_t)s->sub_right});
        s->shot_timer = SHOT_COOL_DOWN;
    } else if (a == MA_LEFT) {
        if (s->sub_x > 0) s->sub_x--;
        s->sub_right = 0;
    } else if (a == MA_RIGHT) {
        if (s->sub_x < 9) s->sub_x++;
        s->sub_right = 1;
    } else if (a == MA_UP) {
        if (s->sub_y > 0) s->sub_y--;
    } else if (a == MA_DOWN) {
        if (s->sub_y < 8) s->sub_y++;
    }
    update_friendly_bullets(s, &reward);
    update_divers(s);
    update_enemies(s, VIEW(s->e_subs), 1, &reward);
    update_enemy_bullets(s);
    update_enemies(s, VIEW(s->e_fish), 0, &reward);

    if (s->e_spawn_timer > 0) s->e_spawn_timer--;
    if (s->d_spawn_timer > 0) s->d_spawn_timer--;
    if (s->shot_timer > 0) s->shot_timer--;
    if (s->oxygen <= 0) s->terminal = 1;
    if (s->sub_y > 0) {
        s->oxygen--;
        s->surface = 0;
    } else if (!s->surface) {
        if (s->diver_count == 0) s->terminal = 1;
        else reward += surface(s);
    }
    *terminal = s->terminal;
    return reward;
}

static void set_cell(uint8_t *obs, int y, int x, int ch) {
    if ((unsigned)y < MINATAR_SIZE && (unsigned)x < MINATAR_SIZE)
        obs[MINATAR_AT(SEAQUEST_CHANNELS, y, x, ch)] = 1;
}

/* An object and, where it is on the grid, its trail (the cell it came from). */
static void draw_movers(uint8_t *obs, const sq_obj *a, int n, int ch, int trail) {
    for (int i = 0; i < n; i++) {
        set_cell(obs, a[i].y, a[i].x, ch);
        if (trail) set_cell(obs, a[i].y, a[i].right ? a[i].x - 1 : a[i].x + 1, CH_TRAIL);
    }
}

static void seaquest_observe(const void *game, uint8_t *obs) {
    const seaquest_state *s = game;
    minatar_zero(obs, MINATAR_SIZE * MINATAR_SIZE * SEAQUEST_CHANNELS);
    set_cell(obs, s->sub_y, s->sub_x, CH_SUB_FRONT);
    int back = s->sub_right ? s->sub_x - 1 : s->sub_x + 1;
    set_cell(obs, s->sub_y, back < 0 ? back + MINATAR_SIZE : back, CH_SUB_BACK); /* numpy's -1 */
    int oxygen_cells = (s->oxygen > 0 ? s->oxygen : 0) * 10 / MAX_OXYGEN;
    for (int x = 0; x < oxygen_cells && x < MINATAR_SIZE; x++) set_cell(obs, 9, x, CH_OXYGEN);
    for (int x = 9 - s->diver_count; x < 9; x++) set_cell(obs, 9, x, CH_DIVER_GAUGE);
    draw_movers(obs, s->f_bullets.a, s->f_bullets.n, CH_F_BULLET, 0);
    draw_movers(obs, s->e_bullets.a, s->e_bullets.n, CH_E_BULLET, 0);
    draw_movers(obs, s->e_fish.a, s->e_fish.n, CH_FISH, 1);
    draw_movers(obs, s->e_subs.a, s->e_subs.n, CH_E_SUB, 1);
    draw_movers(obs, s->divers.a, s->divers.n, CH_DIVER, 1);
}

/* One list's objects: at most its capacity of them, each on the grid (one that leaves
 * it is removed in the same frame) in rows ylo..8 (enemies, divers and their bullets
 * keep the row they came in on; the cannon fires from the submarine's row, 0..8), its
 * direction 0/1, its move timer within move_max and its shot timer within shot_max (0
 * where the kind has none: MinAtar's list equality compares them). */
static int list_invalid(const char *kind, int32_t n, const sq_obj *a, int cap, int ylo,
                        int move_max, int shot_max, minatar_why *w) {
    if (minatar_outside(w, n, 0, cap, "%s count", kind)) return 1;
    for (int i = 0; i < n; i++)
        if (minatar_outside(w, a[i].x, 0, 9, "%s %d column", kind, i) ||
            minatar_outside(w, a[i].y, ylo, 8, "%s %d row", kind, i) ||
            minatar_outside(w, a[i].right, 0, 1, "%s %d direction flag", kind, i) ||
            minatar_outside(w, a[i].move, 0, move_max, "%s %d move timer", kind, i) ||
            minatar_outside(w, a[i].shot, 0, shot_max, "%s %d shot timer", kind, i))
            return 1;
    return 0;
}

/* The rules' invariants: the lists (list_invalid); the submarine on rows 0..8, marked
 * surfaced only on row 0; oxygen down to -1 only once the episode ended (it ends at 0 and
 * the frame still uses one); the divers at most 6 (below 0 after six-diver surfacings,
 * one fewer per surfacing: -2^30 would take 2^31 frames of one episode); the speeds what
 * ramp_index ramps have made them (one ramp lowers the spawn speed to 1, every second one
 * the move speed to 2); the timers within what they are set to; the flags 0/1. */
static int seaquest_invalid(const void *game, minatar_why *w) {
    const seaquest_state *s = game;
    if (list_invalid("enemy bullet", s->e_bullets.n, s->e_bullets.a, CAP, 1, 0, 0, w) ||
        list_invalid("fish", s->e_fish.n, s->e_fish.a, CAP, 1, INIT_MOVE_INTERVAL, 0, w) ||
        list_invalid("enemy sub", s->e_subs.n, s->e_subs.a, CAP, 1, INIT_MOVE_INTERVAL,
                     ENEMY_SHOT_INTERVAL, w) ||
        list_invalid("bullet", s->f_bullets.n, s->f_bullets.a, SMALL_CAP, 0, 0, 0, w) ||
        list_invalid("diver", s->divers.n, s->divers.a, SMALL_CAP, 1, DIVER_MOVE_INTERVAL, 0, w))
        return 1;
    const int r = s->ramp_index, spawn = r < INIT_SPAWN_SPEED ? INIT_SPAWN_SPEED - r : 1,
              move = r / 2 < INIT_MOVE_INTERVAL - 2 ? INIT_MOVE_INTERVAL - r / 2 : 2;
    if (minatar_outside(w, s->sub_x, 0, 9, "submarine column") ||
        minatar_outside(w, s->sub_y, 0, 8, "submarine row") ||
        minatar_outside(w, s->sub_right, 0, 1, "submarine direction flag") ||
        minatar_outside(w, s->terminal, 0, 1, "terminal flag") ||
        minatar_outside(w, s->surface, 0, 1, "surfaced flag") ||
        (s->surface && s->sub_y != 0 &&
         minatar_fault(w, "surfaced flag set with the submarine on row %d", (int)s->sub_y)) ||
        minatar_outside(w, s->oxygen, s->terminal ? -1 : 0, MAX_OXYGEN,
                        s->terminal ? "oxygen" : "oxygen while the game goes on") ||
        minatar_outside(w, s->diver_count, -(1L << 30), 6, "diver count") ||
        minatar_outside(w, s->ramp_index, 0, INIT_SPAWN_SPEED - 1, "ramp index") ||
        (s->e_spawn_speed != spawn && minatar_fault(w, "enemy spawn speed %d, not %d after %d ramps",
                                                    (int)s->e_spawn_speed, spawn, r)) ||
        (s->move_speed != move && minatar_fault(w, "enemy move speed %d, not %d after %d ramps",
                                                (int)s->move_speed, move, r)) ||
        minatar_outside(w, s->e_spawn_timer, 0, INIT_SPAWN_SPEED, "enemy spawn timer") ||
        minatar_outside(w, s->d_spawn_timer, 0, DIVER_SPAWN_SPEED, "diver spawn timer") ||
        minatar_outside(w, s->shot_timer, 0, SHOT_COOL_DOWN - 1, "shot timer"))
        return 1;
    return 0;
}

const minatar_game minatar_seaquest = {
    .name = "Seaquest",
    .channels = SEAQUEST_CHANNELS,
    .num_minimal = 6,
    .minimal = {MA_NOOP, MA_LEFT, MA_UP, MA_RIGHT, MA_DOWN, MA_FIRE},
    .state_size = sizeof(seaquest_state),
    .reset = seaquest_reset,
    .act = seaquest_act,
    .observe = seaquest_observe,
    .invalid = seaquest_invalid,
};

MINATAR_CLASSES(minatar_seaquest, minatar_seaquest, seaquest_state, "Seaquest",
                SEAQUEST_CHANNELS, 6);
