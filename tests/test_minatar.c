/* test_minatar.c: MinAtar's games against MinAtar v1.0.15 itself. Replays the episodes
 * tests/data/minatar/record.py recorded from MinAtar (whole episodes, both action sets,
 * sticky actions on) and checks every observation, reward and termination, loading every
 * state on the way; checks the MT19937 draws against NumPy's RandomState; refuses states
 * outside the games' invariants, fuzzing them; draws states in MinAtar's display colours. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/env.h"
#include "calf/render.h"
#include "calf/train.h"
#include "envs/minatar.h"
#include "envs/mt19937.h"
#include "envs/vec_env.h"
#include "records/checkpoint.h"
#include "test_files.h"
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
/* Every state of the episodes also goes through a save and a load (into a second env,
 * which plays on from it), so a load check that refused a state the game reaches, or a
 * load that lost part of one, fails here. */
static void replay(const char *id) {
    char file[128];
    snprintf(file, sizeof file, "%s.txt", id + strlen("MinAtar/"));
    FILE *f = open_data(file);
    if (!f) return;
    calf_env envs[2];
    calf_error err;
    calf_error_clear(&err);
    int rc = calf_env_init(&envs[0], id, 0, 0, &err);
    if (rc == CALF_OK) rc = calf_env_init(&envs[1], id, 0, 0, &err);
    CHECK_INT_EQ(rc, CALF_OK);
    if (rc != CALF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        fclose(f);
        return;
    }
    calf_env *env = &envs[0];
    const int n = env->cls->spec.obs_dim;
    unsigned char saved[MINATAR_MAX_STATE];
    float obs[MINATAR_SIZE * MINATAR_SIZE * MINATAR_MAX_CHANNELS];
    char line[256];
    int lineno = 0, steps = 0, episodes = 0, runs = 0, rewards = 0, loads = 0, ok = 1;
    while (ok && fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#') continue;
        char *end;
        if (line[0] == 'K') {
            calf_env_free(env);
            CHECK_INT_EQ(calf_env_init(env, id, 0, 0, &err), CALF_OK); /* last action 0 */
            minatar_seed(env->state, (uint32_t)strtoul(line + 2, NULL, 10));
            runs++;
        } else if (line[0] == 'R') {
            calf_env_reset(env, obs);
            episodes++;
            ok = obs_crc(obs, n) == (uint32_t)strtoul(line + 2, NULL, 10);
        } else if (line[0] == 'S') {
            int a = (int)strtol(line + 2, &end, 10);
            long r = strtol(end, &end, 10), t = strtol(end, &end, 10);
            uint32_t c = (uint32_t)strtoul(end, NULL, 10);
            float reward;
            int term, trunc;
            calf_env_step(env, a, NULL, obs, &reward, &term, &trunc);
            steps++;
            rewards += (int)r;
            ok = reward == (float)r && term == t && !trunc && obs_crc(obs, n) == c;
        }
        if (!ok) fprintf(stderr, "%s: differs from MinAtar at %s line %d: %s", id, file, lineno, line);
        if (ok && line[0] != 'K') {
            calf_env *other = env == &envs[0] ? &envs[1] : &envs[0];
            calf_env_save_state(env, saved);
            rc = calf_env_load_state(other, saved, &err);
            if (rc != CALF_OK)
                fprintf(stderr, "%s: the state after %s line %d is refused: %s\n", id, file,
                        lineno, err.msg);
            ok = rc == CALF_OK;
            loads++;
            env = other;
        }
    }
    CHECK(ok);
    CHECK(runs >= 3 && episodes >= runs && steps > 100 && loads == steps + episodes);
    printf("%-24s %d runs, %d episodes, %d steps, %d reward, %d states loaded: %s\n", id, runs,
           episodes, steps, rewards, loads, ok ? "exact" : "DIFFERENT");
    calf_env_free(&envs[0]);
    calf_env_free(&envs[1]);
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

/* ---- loading saved bytes: refusals, fuzzing ---------------------------------------- */

/* A state of env id after `steps` random steps from (seed, index 0). */
static void played_state(calf_env *env, const char *id, uint64_t seed, int steps) {
    calf_error err;
    CHECK_INT_EQ(calf_env_init(env, id, seed, 0, &err), CALF_OK);
    float obs[MINATAR_SIZE * MINATAR_SIZE * MINATAR_MAX_CHANNELS], reward;
    int term, trunc;
    calf_rng pick;
    calf_rng_seed(&pick, seed, 0, CALF_RNG_ACTION);
    calf_env_reset(env, obs);
    for (int t = 0; t < steps; t++) {
        calf_env_step(env, (int)calf_rng_below(&pick, (uint32_t)env->cls->spec.num_actions), NULL,
                      obs, &reward, &term, &trunc);
        if (term) calf_env_reset(env, obs);
    }
}

/* One planted fault: `width` bytes (1 or 4, little-endian) at `at` (from the game's
 * state when game is set, else from the env's) set to value; the message it gets (all
 * of it, or a part of it). */
typedef struct planted {
    const char *id;
    int game, at, width;
    int32_t value;
    const char *message;
} planted;

/* The games' state layouts (the structs in src/envs/minatar_<game>.c), as far as the
 * faults below need them; test_layouts checks the sizes they add up to. */
enum {
    BREAKOUT_BALL_X = 100, BREAKOUT_DIR = 102, BREAKOUT_LAST_Y = 104, BREAKOUT_TERMINAL = 107,
    ASTERIX_PLAYER_Y = 36, ASTERIX_SPAWN_SPEED = 40,
    FREEWAY_CAR2_X = 6, FREEWAY_TERMINAL = 36,
    SEAQUEST_FISH = 364, SEAQUEST_OXYGEN = 1180, SEAQUEST_SURFACE = 1224,
    SI_FBULLET_ROW9 = 100 + 90, SI_POS = 300, SI_ALIEN_DIR = 304
};

static void test_layouts(void) {
    static const struct {
        const char *id;
        size_t game_size;
    } sizes[] = {{"MinAtar/Breakout-v0", 108}, {"MinAtar/Asterix-v0", 68},
                 {"MinAtar/Freeway-v0", 40},   {"MinAtar/Seaquest-v0", 1232},
                 {"MinAtar/SpaceInvaders-v0", 332}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const calf_env_class *cls = calf_env_find(sizes[i].id);
        CHECK(cls != NULL);
        if (!cls) continue;
        CHECK_INT_EQ(cls->spec.state_size, MINATAR_GAME_OFFSET + sizes[i].game_size);
        CHECK_INT_EQ(calf_env_saved_size(cls), cls->spec.state_size); /* the bytes themselves */
    }
}

/* Each fault is refused with its one-line message, the env left as it was; the state
 * of an env made and not yet reset (all zero after the core) loads. */
static void test_refusals(void) {
    const size_t core_pos = offsetof(minatar_core, mt) + offsetof(mt19937, pos);
    static const planted faults[] = {
        {"MinAtar/Breakout-v0", 1, BREAKOUT_BALL_X, 1, 12,
         "MinAtar/Breakout-v0: saved state: ball column 12 outside 0..9"},
        {"MinAtar/Breakout-v0", 1, BREAKOUT_DIR, 1, 4,
         "MinAtar/Breakout-v0: saved state: ball direction 4 outside 0..3"},
        {"MinAtar/Breakout-v0", 1, 90, 1, 1,
         "MinAtar/Breakout-v0: saved state: brick value 1 at row 9 column 0 (0/1 in rows 1..3)"},
        {"MinAtar/Breakout-v0", 1, BREAKOUT_LAST_Y, 1, -3,
         "MinAtar/Breakout-v0: saved state: trail row -3 outside 0..8"},
        {"MinAtar/Asterix-v1", 1, ASTERIX_PLAYER_Y, 4, 0,
         "MinAtar/Asterix-v1: saved state: player row 0 outside 1..8"},
        {"MinAtar/Asterix-v0", 1, ASTERIX_SPAWN_SPEED, 4, 3,
         "MinAtar/Asterix-v0: saved state: spawn speed 3, not 10 after 0 ramps"},
        {"MinAtar/Asterix-v0", 1, 3 * 4 + 1, 1, 11, "entity 3 column 11 outside"}, /* live or not */
        {"MinAtar/Freeway-v0", 1, FREEWAY_CAR2_X, 1, 10,
         "MinAtar/Freeway-v0: saved state: car 2 column 10 outside 0..9"},
        {"MinAtar/Freeway-v0", 1, FREEWAY_TERMINAL, 4, 1,
         "MinAtar/Freeway-v0: saved state: terminal flag 1 with 2440 frames left"},
        {"MinAtar/Seaquest-v0", 1, SEAQUEST_FISH, 4, 73,
         "MinAtar/Seaquest-v0: saved state: fish count 73 outside 0..72"},
        {"MinAtar/Seaquest-v0", 1, SEAQUEST_OXYGEN, 4, 201,
         "MinAtar/Seaquest-v0: saved state: oxygen while the game goes on 201 outside 0..200"},
        {"MinAtar/Seaquest-v0", 1, SEAQUEST_SURFACE, 4, 7,
         "MinAtar/Seaquest-v0: saved state: surfaced flag 7 outside 0..1"},
        {"MinAtar/SpaceInvaders-v0", 1, SI_POS, 4, 200,
         "MinAtar/SpaceInvaders-v0: saved state: cannon column 200 outside 0..9"},
        {"MinAtar/SpaceInvaders-v0", 1, SI_ALIEN_DIR, 4, 0,
         "MinAtar/SpaceInvaders-v0: saved state: alien direction 0, not -1 or 1"},
        {"MinAtar/SpaceInvaders-v1", 1, SI_FBULLET_ROW9 + 4, 1, 1,
         "MinAtar/SpaceInvaders-v1: saved state: a bullet in the cannon's row 9"},
        {"MinAtar/Breakout-v0", 0, (int)core_pos, 4, MT19937_N + 1,
         "MinAtar/Breakout-v0: saved state: generator position 625 outside 0..624"},
        {"MinAtar/Breakout-v1", 0, (int)offsetof(minatar_core, last_action), 4, MA_FIRE,
         "MinAtar/Breakout-v1: saved state: last action 5 is not one of MinAtar/Breakout-v1's "
         "actions"},
        {"MinAtar/Seaquest-v0", 0, (int)sizeof(minatar_core) + 1, 1, 2,
         "MinAtar/Seaquest-v0: saved state: padding byte 2509 is 2, not 0"},
    };
    unsigned char good[MINATAR_MAX_STATE], bad[MINATAR_MAX_STATE], after[MINATAR_MAX_STATE];
    for (size_t f = 0; f < sizeof faults / sizeof faults[0]; f++) {
        calf_env env;
        played_state(&env, faults[f].id, 3, 60);
        const size_t size = calf_env_saved_size(env.cls);
        calf_env_save_state(&env, good);
        memcpy(bad, good, size);
        unsigned char *p = bad + (faults[f].game ? MINATAR_GAME_OFFSET : 0) + faults[f].at;
        for (int k = 0; k < faults[f].width; k++) p[k] = (unsigned char)((uint32_t)faults[f].value >> 8 * k);
        calf_error err;
        calf_error_clear(&err);
        CHECK_INT_EQ(calf_env_load_state(&env, bad, &err), CALF_EINVAL);
        char prefix[96];
        snprintf(prefix, sizeof prefix, "%s: saved state: ", faults[f].id);
        if (!strstr(err.msg, faults[f].message))
            fprintf(stderr, "fault %zu: '%s' lacks '%s'\n", f, err.msg, faults[f].message);
        CHECK(strncmp(err.msg, prefix, strlen(prefix)) == 0 && strstr(err.msg, faults[f].message));
        CHECK(strchr(err.msg, '\n') == NULL);
        calf_env_save_state(&env, after);
        CHECK(memcmp(good, after, size) == 0);
        calf_env_free(&env);
    }
    /* the generator's 19937 bits all zero; then only key[0]'s low bits set (never used) */
    calf_env env, made;
    played_state(&env, "MinAtar/Freeway-v1", 5, 10);
    calf_env_save_state(&env, bad);
    memset(bad + offsetof(minatar_core, mt), 0, sizeof(uint32_t) * MT19937_N);
    calf_error err;
    CHECK_INT_EQ(calf_env_load_state(&env, bad, &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "MinAtar/Freeway-v1: saved state: generator key all zero (a stream of zeros)");
    bad[0] = 0xff, bad[3] = 0x7f;
    CHECK_INT_EQ(calf_env_load_state(&env, bad, &err), CALF_EINVAL);
    bad[3] = 0x80;
    CHECK_INT_EQ(calf_env_load_state(&env, bad, &err), CALF_OK);
    calf_env_free(&env);
    /* made, not reset: loads, in every game */
    static const char *const ids[] = {"MinAtar/Asterix-v0", "MinAtar/Breakout-v1", "MinAtar/Freeway-v0",
                                      "MinAtar/Seaquest-v1", "MinAtar/SpaceInvaders-v0"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        CHECK_INT_EQ(calf_env_init(&made, ids[i], 8, 1, &err), CALF_OK);
        played_state(&env, ids[i], 8, 30);
        calf_env_save_state(&made, good);
        CHECK_INT_EQ(calf_env_load_state(&env, good, &err), CALF_OK);
        calf_env_save_state(&env, after);
        CHECK(memcmp(good, after, calf_env_saved_size(env.cls)) == 0);
        calf_env_free(&made);
        calf_env_free(&env);
    }
}

/* A checkpoint's env record holding such a state is refused the same way, naming the
 * env; the trainer prefixes the checkpoint's path (trainer_checkpoint.c). */
static void test_record_refusal(void) {
    vec_env ve;
    calf_error err;
    CHECK_INT_EQ(vec_env_init(&ve, "MinAtar/Breakout-v0", 7, 2, 2, &err), CALF_OK);
    size_t rs = vec_env_record_size(&ve);
    unsigned char *rec = malloc(rs), *before = malloc(rs), *after = malloc(rs);
    CHECK(rec && before && after);
    if (rec && before && after) {
        vec_env_save_record(&ve, 1, rec);
        memcpy(before, rec, rs);
        const size_t state = rs - ((MINATAR_GAME_OFFSET + 108 + 7) & ~(size_t)7);
        rec[state + MINATAR_GAME_OFFSET + BREAKOUT_BALL_X] = 12;
        CHECK_INT_EQ(vec_env_load_record(&ve, 1, rec, &err), CALF_EINVAL);
        CHECK_STR_EQ(err.msg, "env 3 record: MinAtar/Breakout-v0: saved state: ball column 12 outside 0..9");
        vec_env_save_record(&ve, 1, after);
        CHECK(memcmp(before, after, rs) == 0);
        CHECK_INT_EQ(vec_env_load_record(&ve, 1, before, &err), CALF_OK);
    }
    free(rec);
    free(before);
    free(after);
    vec_env_free(&ve);
}

/* A checkpoint whose env record holds such a state (its CRC made right again, as anyone
 * can) stops the resume, calf_train returning CALF_EINVAL with one line naming the file,
 * the env and the fault (the CLI prints it and exits 2); the process goes on. */
static void test_resume_refusal(void) {
    char root[] = "/tmp/calf_test_minatar_XXXXXX";
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        CHECK(0);
        return;
    }
    const char *params[] = {"create_environment.env_name='MinAtar/Breakout-v1'",
                            "create_environment.num_parallel_environments=2",
                            "TrainerConfig.unroll_length=8",
                            "TrainerConfig.mini_batch_size=16",
                            "TrainerConfig.num_updates_per_train_iter=1",
                            "TrainerConfig.evaluate=False",
                            "TrainerConfig.num_checkpoints=1",
                            "TrainerConfig.num_iterations=1"};
    const int np = (int)(sizeof params / sizeof params[0]);
    calf_train_options o = {.root_dir = root,
                            .conf_path = CALF_SOURCE_DIR "/examples/ppo_minatar_breakout.gin",
                            .quiet = true, .conf_params = params, .num_conf_params = np};
    calf_error err;
    calf_error_clear(&err);
    int rc = calf_train(&o, &err);
    CHECK_INT_EQ(rc, CALF_OK);
    if (rc != CALF_OK) fprintf(stderr, "%s\n", err.msg);
    char ckpt[600];
    snprintf(ckpt, sizeof ckpt, "%s/train/algorithm/ckpt-1", root);
    ckpt_header hdr;
    unsigned char *p = NULL;
    size_t n = 0;
    CHECK_INT_EQ(ckpt_read(ckpt, &hdr, &p, &n, &err), CALF_OK);
    size_t rec = 0; /* env 0's record: "CVE1" */
    while (p && rec + 4 <= n && memcmp(p + rec, "CVE1", 4) != 0) rec++;
    const size_t ball_x = rec + 64 + 4 * MINATAR_SIZE * MINATAR_SIZE * 4 + MINATAR_GAME_OFFSET +
                          BREAKOUT_BALL_X;
    CHECK(p && ball_x < n);
    if (p && ball_x < n) {
        p[ball_x] = 12;
        CHECK_INT_EQ(ckpt_write_atomic(ckpt, hdr.digest, hdr.iteration, p, n, &err), CALF_OK);
        params[np - 1] = "TrainerConfig.num_iterations=2";
        calf_error_clear(&err);
        CHECK_INT_EQ(calf_train(&o, &err), CALF_EINVAL);
        char want[800];
        snprintf(want, sizeof want, "%s: env 0 record: MinAtar/Breakout-v1: saved state: ball "
                                    "column 12 outside 0..9", ckpt);
        if (!strstr(err.msg, want)) fprintf(stderr, "resume: '%s' lacks '%s'\n", err.msg, want);
        CHECK(strstr(err.msg, want) != NULL && strchr(err.msg, '\n') == NULL);
    }
    free(p);
    rm_rf(root);
}

/* One mutation of a state's bytes: a bit flipped, a byte or an aligned 32-bit word set
 * to a random or a boundary value, mostly in the game's state, else in the core's fields
 * and padding, else anywhere (the generator's key, mostly). */
static void mutate(unsigned char *b, size_t size, calf_rng *r) {
    static const int32_t edges[] = {-1, 0, 1, 2, 3, 5, 6, 8, 9, 10, 11, 12, 20, 72, 73, 100, 127,
                                    128, -128, 255, 624, 625, INT32_MAX, INT32_MIN};
    const size_t core_tail = offsetof(minatar_core, mt) + offsetof(mt19937, pos);
    size_t lo, hi;
    uint32_t region = calf_rng_below(r, 10);
    if (region < 7) lo = MINATAR_GAME_OFFSET, hi = size;
    else if (region < 9) lo = core_tail, hi = MINATAR_GAME_OFFSET;
    else lo = 0, hi = size;
    size_t at = lo + calf_rng_below(r, (uint32_t)(hi - lo));
    switch (calf_rng_below(r, 4)) {
    case 0: b[at] ^= (unsigned char)(1u << calf_rng_below(r, 8)); break;
    case 1: b[at] = (unsigned char)calf_rng_below(r, 256); break;
    default: {
        at &= ~(size_t)3;
        if (at + 4 > size) at = size - 4;
        uint32_t v = calf_rng_below(r, 3) ? (uint32_t)edges[calf_rng_below(r, sizeof edges / sizeof edges[0])]
                                          : (uint32_t)calf_rng_next(r);
        if (calf_rng_below(r, 2)) { /* as a byte, for the games' int8 fields */
            b[at + calf_rng_below(r, 4)] = (unsigned char)v;
        } else {
            for (int k = 0; k < 4; k++) b[at + (size_t)k] = (unsigned char)(v >> 8 * k);
        }
    }
    }
}

/* States reached in play (several seeds, many steps), mutated: each either is refused,
 * leaving the env as it was, or loads, and then every state that many steps of play
 * (resetting after each end) lead to passes the load check too, so the game's act and
 * observe only ever see states inside the invariants their array accesses rely on. Run
 * under ASan + UBSan (.ci/run), a check the invariants need and the load lacks shows as
 * an out-of-bounds access; in any build, as a state that leaves the invariants. */
static void test_fuzz(const char *id) {
    enum { SEEDS = 3, SNAPSHOTS = 25, EVERY = 47, MUTANTS = 24, STEPS = 60 };
    calf_env env, play;
    calf_error err;
    CHECK_INT_EQ(calf_env_init(&env, id, 0, 0, &err), CALF_OK);
    const calf_env_spec *sp = &env.cls->spec;
    const size_t size = calf_env_saved_size(env.cls);
    unsigned char snap[MINATAR_MAX_STATE], bad[MINATAR_MAX_STATE], before[MINATAR_MAX_STATE],
        now[MINATAR_MAX_STATE];
    float obs[MINATAR_SIZE * MINATAR_SIZE * MINATAR_MAX_CHANNELS], reward;
    int term, trunc, refused = 0, loaded = 0, left = 0, untouched = 1;
    long steps = 0;
    calf_rng r, pick;
    calf_rng_seed(&r, 37, 0, CALF_RNG_ACTION);
    calf_rng_seed(&pick, 38, 0, CALF_RNG_ACTION);
    for (int seed = 0; seed < SEEDS; seed++) {
        played_state(&play, id, (uint64_t)seed + 100, 0);
        for (int k = 0; k < SNAPSHOTS; k++) {
            for (int t = 0; t < EVERY * (1 + seed); t++) {
                calf_env_step(&play, (int)calf_rng_below(&pick, (uint32_t)sp->num_actions), NULL, obs,
                              &reward, &term, &trunc);
                if (term) calf_env_reset(&play, obs);
            }
            calf_env_save_state(&play, snap);
            for (int m = 0; m < MUTANTS; m++) {
                memcpy(bad, snap, size);
                for (uint32_t e = 0, edits = 1 + calf_rng_below(&r, 3); e < edits; e++) mutate(bad, size, &r);
                calf_env_save_state(&env, before);
                if (calf_env_load_state(&env, bad, &err) != CALF_OK) {
                    refused++;
                    calf_env_save_state(&env, now);
                    untouched &= memcmp(before, now, size) == 0;
                    continue;
                }
                loaded++;
                for (int t = 0; t < STEPS; t++) {
                    calf_env_step(&env, (int)calf_rng_below(&pick, (uint32_t)sp->num_actions), NULL,
                                  obs, &reward, &term, &trunc);
                    steps++;
                    if (term) calf_env_reset(&env, obs);
                    calf_env_save_state(&env, now);
                    if (calf_env_load_state(&env, now, &err) != CALF_OK) {
                        if (left++ < 3)
                            fprintf(stderr, "%s: a mutated state that loaded left the invariants "
                                            "after %d steps: %s\n", id, t + 1, err.msg);
                        break;
                    }
                }
            }
        }
        calf_env_free(&play);
    }
    printf("%-24s fuzz: %d mutated states, %d refused, %d loaded and played %ld steps, %d left "
           "the invariants\n", id, refused + loaded, refused, loaded, steps, left);
    CHECK(untouched);
    CHECK_INT_EQ(left, 0);
    CHECK(refused >= 100 && loaded >= 100); /* both ways taken, often */
    calf_env_free(&env);
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
    test_layouts();
    test_refusals();
    test_record_refusal();
    test_resume_refusal();
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) test_fuzz(ids[i]);
    return test_report("test_minatar");
}
