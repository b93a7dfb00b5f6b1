/* test_mj_reference.c: the MJCF models calf embeds against Gymnasium's own v4 model
 * files. Every physics field of the compiled models must be equal (only names and
 * rendering data may differ), and calf's env code driven on Gymnasium's model must give
 * the same bits as on calf's for whole episodes. Gymnasium's files are never part of
 * this repository: point CALF_GYMNASIUM_ASSETS at a copy of gymnasium/envs/mujoco/assets
 * (default /tmp/gymnasium-assets); without it the test is skipped, saying why. It also
 * prints the digests tests/mj_test_util.h records. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/env.h"
#include "test_util.h"

#if !CALF_HAVE_MUJOCO
int main(void) {
    printf("skipped: calf was built without MuJoCo (apt-get install libmujoco-dev)\n");
    return 77;
}
#else

#include <mujoco/mjxmacro.h>

#include "envs/mj_env.h"
#include "mj_test_util.h"

/* Fields that only name things or draw them; everything else must be equal. */
static int rendering_only(const char *field) {
    static const char *const prefixes[] = {"name_", "names", "cam_", "light_", "mat_", "tex_",
                                           "skin_", "numeric_", "text_", "tuple_", "key_"};
    static const char *const fields[] = {"geom_rgba", "geom_matid", "geom_user", "site_rgba",
                                         "site_matid", "tendon_rgba", "tendon_matid",
                                         "ncam", "nlight", "nmat", "ntex", "ntexdata", "nnames",
                                         "nnumeric", "nnumericdata", "ntext", "ntextdata",
                                         "ntuple", "ntupledata", "nuser_geom", "nbuffer",
                                         "nkey", "nskin"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(field, prefixes[i], strlen(prefixes[i])) == 0) return 1;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (strcmp(field, fields[i]) == 0) return 1;
    return 0;
}

/* Compares every field MuJoCo's X-macros list; returns the number of physics fields
 * that differ (each printed), and lists the rendering-only differences on one line. */
static int compare_models(const mjModel *a, const mjModel *b) {
    int bad = 0;
    char skipped[2048] = "";
    size_t used = 0;
#define NOTE(name)                                                                         \
    do {                                                                                   \
        if (rendering_only(name)) {                                                        \
            int n_ = snprintf(skipped + used, sizeof skipped - used, " %s", name);         \
            if (n_ > 0 && (size_t)n_ < sizeof skipped - used) used += (size_t)n_;          \
        } else {                                                                           \
            fprintf(stderr, "  physics field %s differs\n", name);                         \
            bad++;                                                                         \
        }                                                                                  \
    } while (0)
#define X(name)                                                                            \
    if (a->name != b->name) NOTE(#name);
    MJMODEL_INTS
#undef X
#define X(type, name)                                                                      \
    if (memcmp(&a->opt.name, &b->opt.name, sizeof(type)) != 0) NOTE("opt." #name);
    MJOPTION_SCALARS
#undef X
#define X(name, n)                                                                         \
    if (memcmp(a->opt.name, b->opt.name, sizeof(mjtNum) * (n)) != 0) NOTE("opt." #name);
    MJOPTION_VECTORS
#undef X
    if (memcmp(&a->stat, &b->stat, sizeof a->stat) != 0) NOTE("stat");
    /* Array sizes: n1 is a count field of mjModel; n2 a constant or MJ_M(count), which
     * here gives -1 where the two models' counts differ. */
#undef MJ_M
#define MJ_M(n) (a->n == b->n ? a->n : -1)
#define X(type, name, n1, n2)                                                              \
    if (a->n1 != b->n1 || (n2) < 0)                                                        \
        NOTE(#name);                                                                       \
    else if (memcmp(a->name, b->name, sizeof(type) * (size_t)(a->n1) * (size_t)(n2)) != 0) \
        NOTE(#name);
    MJMODEL_POINTERS
#undef X
#undef NOTE
    printf("  rendering-only differences:%s\n", used ? skipped : " none");
    return bad;
}

/* An mj_state on Gymnasium's model, run by calf's class code. */
static mj_state ref_state(const calf_env *mine, const mjModel *ref) {
    const mj_state *ms = mine->state;
    mj_state s = {.task = ms->task, .m = ref, .d = mj_makeData(ref), .track_id = -1};
    if (ms->task->track_body) s.track_id = mj_name2id(ref, mjOBJ_BODY, ms->task->track_body);
    s.drawn = calloc((size_t)(ref->nq + ref->nv), sizeof(double));
    return s;
}

static int same_data(const mjModel *m, const mjData *a, const mjData *b) {
    return memcmp(a->qpos, b->qpos, sizeof(double) * (size_t)m->nq) == 0 &&
           memcmp(a->qvel, b->qvel, sizeof(double) * (size_t)m->nv) == 0 &&
           memcmp(a->qacc_warmstart, b->qacc_warmstart, sizeof(double) * (size_t)m->nv) == 0 &&
           memcmp(a->xpos, b->xpos, sizeof(double) * 3 * (size_t)m->nbody) == 0 &&
           a->time == b->time;
}

/* Whole episodes (to termination or the time limit) side by side; the last one runs to
 * the limit whatever the termination flag says (Hopper and Walker2d
 * fall within a few dozen random steps, and the physics goes on after). */
static void compare_episodes(const calf_env_class *cls, calf_env *mine, mj_state *ref,
                             int episodes) {
    const calf_env_spec *sp = &cls->spec;
    calf_rng act;
    calf_rng_seed(&act, 11, 0, CALF_RNG_ACTION);
    float oa[MJ_TEST_MAX_OBS], ob[MJ_TEST_MAX_OBS], u[MJ_TEST_MAX_ACT], ra, rb;
    long steps = 0, first_diff = -1;
    int terminated = 0;
    for (int e = 0; e < episodes; e++) {
        calf_rng dyn_ref = mine->rng;
        calf_env_reset(mine, oa);
        cls->reset(ref, &dyn_ref, ob);
        if (!same_data(ref->m, ((mj_state *)mine->state)->d, ref->d) ||
            memcmp(oa, ob, sizeof(float) * (size_t)sp->obs_dim) != 0)
            first_diff = first_diff < 0 ? steps : first_diff;
        for (int t = 0; t < sp->max_episode_steps; t++) {
            for (int j = 0; j < sp->action_dim; j++)
                u[j] = (float)calf_rng_uniform_range(&act, sp->action_low[j], sp->action_high[j]);
            int ta, tr;
            calf_env_step(mine, 0, u, oa, &ra, &ta, &tr);
            int tb = cls->step(ref, &dyn_ref, 0, u, ob, &rb);
            steps++;
            if (first_diff < 0 &&
                (!same_data(ref->m, ((mj_state *)mine->state)->d, ref->d) || ta != tb ||
                 memcmp(oa, ob, sizeof(float) * (size_t)sp->obs_dim) != 0 ||
                 memcmp(&ra, &rb, sizeof ra) != 0))
                first_diff = steps;
            if ((ta || tr) && e < episodes - 1) {
                terminated += ta;
                break;
            }
        }
    }
    printf("  %d episodes (%d terminated, then %d steps), %ld steps: %s", episodes - 1,
           terminated, sp->max_episode_steps, steps,
           first_diff < 0 ? "bit-identical\n" : "");
    if (first_diff >= 0) printf("first difference at step %ld\n", first_diff);
    CHECK(first_diff < 0);
}

int main(void) {
    const char *dir = getenv("CALF_GYMNASIUM_ASSETS");
    if (!dir || !dir[0]) dir = "/tmp/gymnasium-assets";
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, mj_expected[0].gym_file);
    FILE *probe = fopen(path, "r");
    if (!probe) {
        printf("skipped: Gymnasium's model files are not in %s (set CALF_GYMNASIUM_ASSETS to a "
               "copy of gymnasium/envs/mujoco/assets)\n", dir);
        return 77;
    }
    fclose(probe);
    for (int k = 0; k < MJ_NUM_EXPECTED; k++) {
        const mj_expect *x = &mj_expected[k];
        printf("%s against %s\n", x->name, x->gym_file);
        snprintf(path, sizeof path, "%s/%s", dir, x->gym_file);
        char msg[1000] = "";
        mjModel *ref = mj_loadXML(path, NULL, msg, (int)sizeof msg);
        CHECK(ref != NULL);
        if (!ref) {
            fprintf(stderr, "  cannot load %s: %s\n", path, msg);
            continue;
        }
        calf_env mine;
        calf_error err;
        CHECK_INT_EQ(calf_env_init(&mine, x->name, 1, 0, &err), CALF_OK);
        const mj_state *ms = mine.state;
        int bad = compare_models(ms->m, ref);
        printf("  physics fields that differ: %d\n", bad);
        CHECK_INT_EQ(bad, 0);

        mj_state rs = ref_state(&mine, ref);
        compare_episodes(mine.cls, &mine, &rs, 6);

        /* The digest test_mujoco.c checks, on both models. */
        mj_state a = ref_state(&mine, ms->m), b = ref_state(&mine, ref);
        uint64_t da = mj_trajectory_digest(mine.cls, &a), db = mj_trajectory_digest(mine.cls, &b);
        printf("  digest calf 0x%016llx, Gymnasium 0x%016llx (recorded 0x%016llx)\n",
               (unsigned long long)da, (unsigned long long)db, (unsigned long long)x->digest);
        CHECK(da == db);
        mj_deleteData(a.d), mj_deleteData(b.d), mj_deleteData(rs.d);
        free(a.drawn), free(b.drawn), free(rs.drawn);
        calf_env_free(&mine);
        mj_deleteModel(ref);
    }
    return test_report("test_mj_reference");
}
#endif
