/* minatar.c: what MinAtar's five games share beyond the inline step (envs/minatar.h):
 * seeding an env's MT19937 from calf's (seed, index) stream, naming that seed, checking
 * a state read from bytes, and drawing a state as MinAtar's display does. */
#include "envs/minatar.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "calf/rng.h"

/* memset read through a volatile pointer: gcc cannot see which function it calls, so it
 * cannot put its own `rep stos` in place of glibc's (it did, knowing a piece <= 2 KiB). */
static void *(*volatile glibc_memset)(void *, int, size_t) = memset;

void minatar_zero(uint8_t *obs, int n) { glibc_memset(obs, 0, (size_t)n); }

void minatar_seed(void *state, uint32_t k) {
    minatar_core *c = state;
    mt19937_seed(&c->mt, k);
    c->seed = k;
}

int minatar_create_at(void *state, const calf_env_class *cls, uint64_t seed, uint64_t index,
                      calf_error *err) {
    (void)cls, (void)err;
    calf_rng r;
    calf_rng_seed(&r, seed, index, CALF_RNG_DYNAMICS);
    minatar_seed(state, (uint32_t)(calf_rng_next(&r) >> 32));
    ((minatar_core *)state)->last_action = MA_NOOP;
    return CALF_OK;
}

void minatar_reset_state(const void *state, double *out) {
    out[0] = (double)((const minatar_core *)state)->seed;
}

int minatar_fault(minatar_why *why, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->msg, sizeof why->msg, fmt, ap);
    va_end(ap);
    return 1;
}

int minatar_outside(minatar_why *why, long v, long lo, long hi, const char *fmt, ...) {
    if (v >= lo && v <= hi) return 0;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(why->msg, sizeof why->msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof why->msg)
        snprintf(why->msg + n, sizeof why->msg - (size_t)n, " %ld outside %ld..%ld", v, lo, hi);
    return 1;
}

/* What is wrong with the core (the generator, the last action, the padding after it), or
 * 0 when nothing is. Every state calf makes passes: seeding (init_genrand) leaves words
 * 1.. nonzero, and a twist maps the 19937 bits that carry the stream (key[0]'s top bit,
 * key[1..623]) one to one, so they never all become zero. */
static int core_invalid(const minatar_game *g, const calf_env_class *cls, const unsigned char *b,
                        minatar_why *why) {
    const minatar_core *c = (const minatar_core *)b;
    if (minatar_outside(why, c->mt.pos, 0, MT19937_N, "generator position")) return 1;
    uint32_t any = c->mt.key[0] & 0x80000000u;
    for (int i = 1; i < MT19937_N; i++) any |= c->mt.key[i];
    if (!any) return minatar_fault(why, "generator key all zero (a stream of zeros)");
    /* a -v1 step applies its action as the full action minimal[a] */
    const int minimal = cls->spec.num_actions == g->num_minimal;
    int known = 0;
    for (int i = 0; i < cls->spec.num_actions; i++) known |= (minimal ? g->minimal[i] : i) == c->last_action;
    if (!known)
        return minatar_fault(why, "last action %d is not one of %s's actions", (int)c->last_action,
                             cls->spec.name);
    for (size_t i = sizeof(minatar_core); i < MINATAR_GAME_OFFSET; i++)
        if (b[i]) return minatar_fault(why, "padding byte %zu is %d, not 0", i, b[i]);
    return 0;
}

int minatar_load(const minatar_game *g, const calf_env_class *cls, void *state, const void *buf,
                 calf_error *err) {
    const size_t size = MINATAR_GAME_OFFSET + g->state_size;
    CALF_ASSERT(size == cls->spec.state_size && size <= MINATAR_MAX_STATE);
    _Alignas(16) unsigned char b[MINATAR_MAX_STATE]; /* the bytes aligned, as the structs want */
    memcpy(b, buf, size);
    minatar_why why;
    if (core_invalid(g, cls, b, &why))
        return calf_error_set(err, CALF_EINVAL, "%s: saved state: %s", cls->spec.name, why.msg);
    int made = 1; /* all zero: an env made (calf_env_init) and not yet reset */
    for (size_t i = MINATAR_GAME_OFFSET; i < size && made; i++) made = b[i] == 0;
    if (!made && g->invalid(b + MINATAR_GAME_OFFSET, &why))
        return calf_error_set(err, CALF_EINVAL, "%s: saved state: %s", cls->spec.name, why.msg);
    memcpy(state, b, size);
    return CALF_OK;
}

/* seaborn.color_palette("cubehelix", C) for the games' channel counts (C = 4, 6, 7, 10):
 * matplotlib's cubehelix map (gamma 1, s 0.5, r -1.5, h 1; a 256-entry table) sampled at
 * linspace(0, 1, C + 2)[1:-1], each component times 255 rounded. */
static const uint8_t palette4[4][3] = {{22, 61, 78}, {84, 121, 47}, {208, 126, 147}, {193, 202, 243}};
static const uint8_t palette6[6][3] = {{26, 36, 65},    {27, 97, 69},    {105, 123, 48},
                                       {200, 123, 124}, {205, 162, 224}, {198, 225, 241}};
static const uint8_t palette7[7][3] = {{27, 30, 59},    {22, 83, 76},    {68, 119, 49},
                                       {161, 121, 74},  {212, 132, 169}, {198, 180, 238},
                                       {203, 232, 240}};
static const uint8_t palette10[10][3] = {{25, 18, 43},    {23, 52, 76},    {24, 91, 72},
                                         {60, 118, 50},   {126, 122, 54},  {188, 121, 103},
                                         {212, 134, 175}, {202, 169, 231}, {194, 210, 243},
                                         {214, 240, 239}};

int minatar_render(const minatar_game *g, const void *state, int width, int height,
                   uint8_t *rgb, calf_error *err) {
    const uint8_t(*palette)[3] = g->channels == 4   ? palette4
                                 : g->channels == 6 ? palette6
                                 : g->channels == 7 ? palette7
                                 : g->channels == 10 ? palette10
                                                     : NULL;
    if (!palette)
        return calf_error_set(err, CALF_EINVAL, "MinAtar/%s: no palette for %d channels", g->name,
                              g->channels);
    uint8_t grid[MINATAR_SIZE * MINATAR_SIZE * MINATAR_MAX_CHANNELS];
    minatar_observe_u8(g, state, grid);
    static const uint8_t black[3] = {0, 0, 0};
    const uint8_t *cell[MINATAR_SIZE * MINATAR_SIZE];
    for (int i = 0; i < MINATAR_SIZE * MINATAR_SIZE; i++) {
        cell[i] = black;
        for (int ch = g->channels - 1; ch >= 0; ch--)
            if (grid[i * g->channels + ch] != 0) {
                cell[i] = palette[ch];
                break;
            }
    }
    for (int y = 0; y < height; y++) {
        int row = (int)((long)y * MINATAR_SIZE / height);
        for (int x = 0; x < width; x++) {
            int col = (int)((long)x * MINATAR_SIZE / width);
            memcpy(rgb + 3 * ((size_t)y * width + x), cell[row * MINATAR_SIZE + col], 3);
        }
    }
    return CALF_OK;
}
