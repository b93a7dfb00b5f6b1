/* test_minatar.c: MinAtar's games against MinAtar v1.0.15 itself. Replays the episodes
 * tests/data/minatar/record.py recorded from MinAtar (whole episodes, both action sets,
 * sticky actions on) and checks every observation, reward and termination; checks the
 * MT19937 draws against NumPy's RandomState; draws states in MinAtar's display colours. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/env.h"
#include "calf/render.h"
#include "envs/minatar.h"
#include "envs/mt19937.h"
#include "test_util.h"

#define DATA CALF_SOURCE_DIR "/tests/data/minatar/"

/* CRC-32 (zlib's: reflected 0xEDB88320, initial and final ~0), what record.py hashes. */
static uint32_t crc32_bytes(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & -(c & 1u));
    }
    return ~c;
}

static uint32_t obs_crc(const float *obs, int n) {
    uint8_t bytes[MINATAR_SIZE * MINATAR_SIZE * MINATAR_MAX_CHANNELS];
    for (int i = 0; i < n; i++) bytes[i] = (uint8_t)obs[i];
    return crc32_bytes(bytes, (size_t)n);
}

static FILE *open_data(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, DATA "%s", name);
    FILE *f = fopen(path, "r");
    if (!f) fprintf(stderr, "cannot open %s\n", path);
    CHECK(f != NULL);
    return f;
}

/* NumPy's draws, op by op, in the order record.py made them. */
static void test_mt19937(void) {
    FILE *f = open_data("mt19937.txt");
    if (!f) return;
    char line[4096];
    mt19937 mt;
    int ops = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = line, *end;
        if (line[0] == '#') continue;
        if (strncmp(p, "K ", 2) == 0) {
            mt19937_seed(&mt, (uint32_t)strtoul(p + 2, NULL, 10));
        } else if (strncmp(p, "u32 ", 4) == 0) {
            bad += mt19937_next(&mt) != (uint32_t)strtoul(p + 4, NULL, 10), ops++;
        } else if (strncmp(p, "rand ", 5) == 0) {
            bad += mt19937_rand(&mt) != strtod(p + 5, NULL), ops++;
        } else if (strncmp(p, "randint ", 8) == 0) {
            long lo = strtol(p + 8, &end, 10), hi = strtol(end, &end, 10), v = strtol(end, NULL, 10);
            bad += mt19937_randint(&mt, lo, hi) != v, ops++;
        } else if (strncmp(p, "randint8 ", 9) == 0) {
            long lo = strtol(p + 9, &end, 10), hi = strtol(end, &end, 10);
            for (int i = 0; i < 8; i++) bad += mt19937_randint(&mt, lo, hi) != strtol(end, &end, 10), ops++;
        } else if (strncmp(p, "rand8 ", 6) == 0) {
            end = p + 6;
            for (int i = 0; i < 8; i++) bad += mt19937_rand(&mt) != strtod(end, &end), ops++;
        }
        if (bad) {
            fprintf(stderr, "mt19937: draw %d differs from NumPy's at: %s", ops, line);
            break;
        }
    }
    fclose(f);
    CHECK(ops > 3000);
    CHECK_INT_EQ(bad, 0);
}

/* Replays one recorded file through the calf env of the same id, its stream restarted
 * from each run's K. Stops at the first difference, naming it. */
static void replay(const char *id) {
    char file[128];
    snprintf(file, sizeof file, "%s.txt", id + strlen("MinAtar/"));
    FILE *f = open_data(file);
    if (!f) return;
    calf_env env;
    calf_error err;
    calf_error_clear(&err);
    int rc = calf_env_init(&env, id, 0, 0, &err);
    CHECK_INT_EQ(rc, CALF_OK);
    if (rc != CALF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        fclose(f);
        return;
    }
    const int n = env.cls->spec.obs_dim;
    float obs[MINATAR_SIZE * MINATAR_SIZE * MINATAR_MAX_CHANNELS];
    char line[256];
    int lineno = 0, steps = 0, episodes = 0, runs = 0, rewards = 0, ok = 1;
    while (ok && fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#') continue;
        char *end;
        if (line[0] == 'K') {
            calf_env_free(&env);
            CHECK_INT_EQ(calf_env_init(&env, id, 0, 0, &err), CALF_OK); /* last action 0 */
            minatar_seed(env.state, (uint32_t)strtoul(line + 2, NULL, 10));
            runs++;
        } else if (line[0] == 'R') {
            calf_env_reset(&env, obs);
            episodes++;
            ok = obs_crc(obs, n) == (uint32_t)strtoul(line + 2, NULL, 10);
        } else if (line[0] == 'S') {
            int a = (int)strtol(line + 2, &end, 10);
            long r = strtol(end, &end, 10), t = strtol(end, &end, 10);
            uint32_t c = (uint32_t)strtoul(end, NULL, 10);
            float reward;
            int term, trunc;
            calf_env_step(&env, a, NULL, obs, &reward, &term, &trunc);
            steps++;
            rewards += (int)r;
            ok = reward == (float)r && term == t && !trunc && obs_crc(obs, n) == c;
        }
        if (!ok) fprintf(stderr, "%s: differs from MinAtar at %s line %d: %s", id, file, lineno, line);
    }
    CHECK(ok);
    CHECK(runs >= 3 && episodes >= runs && steps > 100);
    printf("%-24s %d runs, %d episodes, %d steps, %d reward: %s\n", id, runs, episodes, steps,
           rewards, ok ? "exact" : "DIFFERENT");
    calf_env_free(&env);
    fclose(f);
}

/* The same (seed, index) gives the same K and the same episode; K is what reset_state says. */
/* rand() < p decided in integers (mt19937_rand_below) is rand() < p: the threshold sits
 * exactly at p for the games' p (the last integer below it is below p, it is not), and
 * two copies of a stream agree draw for draw. */
static void test_rand_below(void) {
    static const double ps[] = {MINATAR_STICKY, 0.5, 1.0 / 3.0, 0.0, 1.0};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        double p = ps[k];
        uint64_t t = mt19937_threshold(p);
        CHECK(t == 0 || (double)(t - 1) / 9007199254740992.0 < p);
        CHECK((double)t / 9007199254740992.0 >= p);
        mt19937 a, b;
        mt19937_seed(&a, 37);
        mt19937_seed(&b, 37);
        int bad = 0;
        for (int i = 0; i < 20000; i++) bad += mt19937_rand_below(&a, p) != (mt19937_rand(&b) < p);
        CHECK_INT_EQ(bad, 0);
    }
}

/* The inverse of genrand_int32's tempering: a key word that tempers to y. */
static uint32_t untemper(uint32_t y) {
    y ^= y >> 18;
    y ^= (y << 15) & 0xefc60000u;
    uint32_t t = y;
    for (int i = 0; i < 5; i++) t = y ^ ((t << 7) & 0x9d2c5680u);
    return t ^ (t >> 11) ^ (t >> 22);
}

/* mt19937_rand_below decides most draws from the first output alone: the ties of its
 * top 27 bits with the threshold's (once in 2^27 draws, so a stream never shows them)
 * are planted here, with the second output just below, at and above the threshold's low
 * 26 bits, at key positions inside a twist and across one. */
static void test_rand_below_ties(void) {
    static const double ps[] = {MINATAR_STICKY, 0.5, 1.0 / 3.0, 0.0};
    CHECK(mt19937_temper(untemper(0x12345678u)) == 0x12345678u);
    CHECK(mt19937_temper(untemper(0xfedcba98u)) == 0xfedcba98u);
    int cases = 0, below = 0, bad = 0;
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        const uint64_t t = mt19937_threshold(ps[k]);
        const int64_t ta = (int64_t)(t >> 26), tb = (int64_t)(t & ((1u << 26) - 1));
        static const int at[] = {0, 311, MT19937_N - 2, MT19937_N - 1};
        for (size_t q = 0; q < sizeof at / sizeof at[0]; q++)
            for (int da = -1; da <= 1; da++)
                for (int db = -1; db <= 1; db++) {
                    const int64_t av = ta + da, bv = tb + db;
                    if (av < 0 || av >= (1 << 27) || bv < 0 || bv >= (1 << 26)) continue;
                    mt19937 a, b;
                    mt19937_seed(&a, 11);
                    mt19937_twist(&a);
                    a.pos = at[q];
                    a.key[at[q]] = untemper((uint32_t)av << 5 | 17u);
                    if (at[q] + 1 < MT19937_N) a.key[at[q] + 1] = untemper((uint32_t)bv << 6 | 33u);
                    b = a;
                    const int got = mt19937_rand_below(&a, ps[k]);
                    bad += got != (mt19937_rand(&b) < ps[k]);
                    bad += a.pos != b.pos || mt19937_next(&a) != mt19937_next(&b);
                    below += got;
                    cases++;
                }
    }
    CHECK_INT_EQ(bad, 0);
    CHECK(cases > 100 && below > 10 && below < cases - 10); /* both outcomes were met */
}

static void test_seeding(void) {
    calf_env a, b, c;
    calf_error err;
    CHECK_INT_EQ(calf_env_init(&a, "MinAtar/Breakout-v0", 3, 5, &err), CALF_OK);
    CHECK_INT_EQ(calf_env_init(&b, "MinAtar/Breakout-v0", 3, 5, &err), CALF_OK);
    CHECK_INT_EQ(calf_env_init(&c, "MinAtar/Breakout-v0", 3, 6, &err), CALF_OK);
    double ka, kb, kc;
    CHECK_INT_EQ(calf_env_reset_state(&a, &ka), 1);
    calf_env_reset_state(&b, &kb);
    calf_env_reset_state(&c, &kc);
    CHECK(ka == kb && ka != kc);
    CHECK(memcmp(a.state, b.state, a.cls->spec.state_size) == 0);
    calf_env_free(&a);
    calf_env_free(&b);
    calf_env_free(&c);
}

/* A state saved mid-episode (a checkpoint's bytes) continues exactly: the generator, the
 * sticky action and the game are all in it. */
static void test_resume(const char *id) {
    calf_env a, b;
    calf_error err;
    CHECK_INT_EQ(calf_env_init(&a, id, 11, 2, &err), CALF_OK);
    CHECK_INT_EQ(calf_env_init(&b, id, 12, 9, &err), CALF_OK);
    const calf_env_spec *sp = &a.cls->spec;
    float oa[MINATAR_SIZE * MINATAR_SIZE * MINATAR_MAX_CHANNELS], ob[sizeof oa / sizeof oa[0]];
    float ra, rb;
    int ta, tb, xa, xb, same = 1;
    calf_rng pick;
    calf_rng_seed(&pick, 1, 0, CALF_RNG_ACTION);
    calf_env_reset(&a, oa);
    unsigned char *saved = malloc(calf_env_saved_size(a.cls));
    CHECK(saved != NULL);
    if (!saved) return;
    for (int t = 0; t < 3000; t++) {
        if (t == 1000) {
            calf_env_save_state(&a, saved);
            CHECK_INT_EQ(calf_env_load_state(&b, saved, &err), CALF_OK);
        }
        int act = (int)calf_rng_below(&pick, (uint32_t)sp->num_actions);
        calf_env_step(&a, act, NULL, oa, &ra, &ta, &xa);
        if (t >= 1000) {
            calf_env_step(&b, act, NULL, ob, &rb, &tb, &xb);
            same &= memcmp(oa, ob, (size_t)sp->obs_dim * sizeof oa[0]) == 0 && ra == rb && ta == tb;
        }
        if (ta) {
            calf_env_reset(&a, oa);
            if (t >= 1000)
                calf_env_reset(&b, ob), same &= memcmp(oa, ob, (size_t)sp->obs_dim * sizeof oa[0]) == 0;
        }
    }
    CHECK(same);
    free(saved);
    calf_env_free(&a);
    calf_env_free(&b);
}

/* What `/usr/bin/python3 -c 'import seaborn; print(seaborn.color_palette("cubehelix", C))'`
 * printed (seaborn 0.12.2, matplotlib 3.6.3, Debian 12), times 255 rounded: the colours
 * of MinAtar's display and of its Gymnasium env's rgb_array for channels 0..C-1. */
static const uint8_t want4[][3] = {{22, 61, 78}, {84, 121, 47}, {208, 126, 147}, {193, 202, 243}};
static const uint8_t want6[][3] = {{26, 36, 65}, {27, 97, 69}, {105, 123, 48},
                                   {200, 123, 124}, {205, 162, 224}, {198, 225, 241}};
static const uint8_t want7[][3] = {{27, 30, 59}, {22, 83, 76}, {68, 119, 49}, {161, 121, 74},
                                   {212, 132, 169}, {198, 180, 238}, {203, 232, 240}};
static const uint8_t want10[][3] = {{25, 18, 43}, {23, 52, 76}, {24, 91, 72}, {60, 118, 50},
                                    {126, 122, 54}, {188, 121, 103}, {212, 134, 175},
                                    {202, 169, 231}, {194, 210, 243}, {214, 240, 239}};

/* Every cell of a played state drawn at 10x10 has the colour of its highest channel
 * (black for none), as MinAtar's numerical_state picks it; a larger picture is the grid
 * scaled by nearest cell. Counts the channels seen, so a game whose colours were never
 * exercised fails. */
static void test_render(const char *id) {
    calf_env env;
    calf_error err;
    CHECK_INT_EQ(calf_env_init(&env, id, 4, 1, &err), CALF_OK);
    const calf_env_spec *sp = &env.cls->spec;
    int nch = sp->obs_dim / (MINATAR_SIZE * MINATAR_SIZE);
    const uint8_t(*want)[3] = nch == 4 ? want4 : nch == 6 ? want6 : nch == 7 ? want7 : want10;
    calf_renderer *small = NULL, *big = NULL;
    CHECK_INT_EQ(calf_renderer_open(id, MINATAR_SIZE, MINATAR_SIZE, &small, &err), CALF_OK);
    CHECK_INT_EQ(calf_renderer_open(id, 45, 31, &big, &err), CALF_OK);
    if (!small || !big) return;
    CHECK(calf_renderer_fps(small) == 20);
    float obs[MINATAR_SIZE * MINATAR_SIZE * MINATAR_MAX_CHANNELS], reward;
    uint8_t a[MINATAR_SIZE * MINATAR_SIZE * 3], b[45 * 31 * 3];
    int seen[MINATAR_MAX_CHANNELS + 1] = {0}, bad = 0, term, trunc;
    calf_rng pick;
    calf_rng_seed(&pick, 2, 0, CALF_RNG_ACTION);
    calf_env_reset(&env, obs);
    for (int t = 0; t < 400; t++) {
        CHECK_INT_EQ(calf_renderer_draw(small, &env, a, &err), CALF_OK);
        CHECK_INT_EQ(calf_renderer_draw(big, &env, b, &err), CALF_OK);
        for (int i = 0; i < MINATAR_SIZE * MINATAR_SIZE; i++) {
            int top = -1;
            for (int ch = 0; ch < nch; ch++)
                if (obs[i * nch + ch] != 0) top = ch;
            static const uint8_t black[3] = {0, 0, 0};
            seen[top + 1]++;
            bad += memcmp(a + 3 * i, top < 0 ? black : want[top], 3) != 0;
        }
        for (int y = 0; y < 31; y++)
            for (int x = 0; x < 45; x++)
                bad += memcmp(b + 3 * (y * 45 + x), a + 3 * ((y * 10 / 31) * 10 + x * 10 / 45), 3) != 0;
        calf_env_step(&env, (int)calf_rng_below(&pick, (uint32_t)sp->num_actions), NULL, obs, &reward,
                      &term, &trunc);
        if (term) calf_env_reset(&env, obs);
    }
    int kinds = 0;
    for (int k = 0; k <= nch; k++) kinds += seen[k] > 0;
    if (bad || kinds < 3) fprintf(stderr, "%s: %d pixels off, %d colours seen\n", id, bad, kinds);
    CHECK_INT_EQ(bad, 0);
    CHECK(kinds >= 3);
    calf_renderer_close(small);
    calf_renderer_close(big);
    calf_env_free(&env);
}

int main(void) {
    test_mt19937();
    test_rand_below();
    test_rand_below_ties();
    test_seeding();
    static const char *const ids[] = {
        "MinAtar/Asterix-v0", "MinAtar/Asterix-v1", "MinAtar/Breakout-v0", "MinAtar/Breakout-v1",
        "MinAtar/Freeway-v0", "MinAtar/Freeway-v1", "MinAtar/Seaquest-v0", "MinAtar/Seaquest-v1", "MinAtar/SpaceInvaders-v0", "MinAtar/SpaceInvaders-v1",
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) replay(ids[i]);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) test_resume(ids[i]);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i += 2) test_render(ids[i]);
    return test_report("test_minatar");
}
