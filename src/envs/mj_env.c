/* mj_env.c: the MuJoCo side of the MuJoCo envs. Models are compiled from the MJCF
 * text embedded in the binary through MuJoCo's virtual file system, once per process
 * and task; every env owns one mjData and follows Gymnasium's MujocoEnv (reset, set
 * state, one mj_forward; ctrl then frame_skip mj_steps) so trajectories match it. */
#include "envs/mj_env.h"

#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mujoco/mjxmacro.h>

#include "base/mem.h"

/* The compiled models, one per task, kept for the life of the process (tasks are few,
 * models are read-only, and workers forked later share the pages). Envs are opened from
 * any thread: models_lock guards the table, and a first open compiles under it, so two
 * threads never compile one task and the table never holds more than MJ_MAX_MODELS (the
 * next first open is refused with an error). */
static struct {
    const mj_task *task;
    mjModel *m;
} models[MJ_MAX_MODELS];
static int num_models = 0;
static pthread_mutex_t models_lock = PTHREAD_MUTEX_INITIALIZER;

/* MuJoCo's default handlers print to stdout (where `calf env` writes its rows), write
 * MUJOCO_LOG.TXT into the working directory and, on error, wait for Enter and exit. An
 * error handler must not return into MuJoCo, so the calls that can fail (compiling a
 * model, making an env's data: allocations) run inside GUARDED, and the handler jumps
 * back there with the message, which comes back as a status: the host process goes on.
 * MuJoCo's handler is one for the process, so the jump point and the message are the
 * calling thread's own: an error jumps back into the thread that raised it. What
 * remains unguarded (reset and step of data made here) fails only on a broken
 * invariant, and panics. */
static _Thread_local jmp_buf *guard = NULL;
static _Thread_local char guard_msg[512];

/* MuJoCo 2.2's compiler (mjCModel::Compile) puts its own error handler in place of ours,
 * process-wide, while it compiles, and puts ours back after: an error raised meanwhile in
 * another thread would reach the compiler's handler, a C++ throw through C frames. So a
 * compile holds mujoco_calls for writing and every other guarded call for reading. */
static pthread_rwlock_t mujoco_calls = PTHREAD_RWLOCK_INITIALIZER;
static pthread_once_t handlers_once = PTHREAD_ONCE_INIT;

static void on_mujoco_warning(const char *msg) { fprintf(stderr, "calf: MuJoCo warning: %s\n", msg); }
static void on_mujoco_error(const char *msg) {
    if (!guard) calf_panic(__FILE__, __LINE__, "MuJoCo error: %s", msg);
    snprintf(guard_msg, sizeof guard_msg, "%s", msg);
    longjmp(*guard, 1);
}
static void install_handlers(void) {
    mju_user_warning = on_mujoco_warning;
    mju_user_error = on_mujoco_error;
}

/* Run `call` (a statement) with MuJoCo's errors caught: *failed is 1 and guard_msg holds
 * MuJoCo's message when it raised one. Variables the statement assigns must be volatile
 * if read after a failure. `writer`: the call compiles (see mujoco_calls). */
#define GUARDED(failed, writer, call)                                                    \
    do {                                                                                 \
        CALF_ASSERT(pthread_once(&handlers_once, install_handlers) == 0);                \
        CALF_ASSERT(((writer) ? pthread_rwlock_wrlock(&mujoco_calls)                     \
                              : pthread_rwlock_rdlock(&mujoco_calls)) == 0);             \
        jmp_buf here_;                                                                   \
        jmp_buf *outer_ = guard;                                                         \
        guard = &here_;                                                                  \
        if (setjmp(here_) == 0) {                                                        \
            call;                                                                        \
            *(failed) = 0;                                                               \
        } else {                                                                         \
            *(failed) = 1;                                                               \
        }                                                                                \
        guard = outer_;                                                                  \
        CALF_ASSERT(pthread_rwlock_unlock(&mujoco_calls) == 0);                          \
    } while (0)

static mjModel *compile(const mj_task *t, calf_error *err) {
    /* mjVFS holds 2000 fixed-size names (about 2 MB): on the heap, not the stack. */
    mjVFS *vfs = mem_alloc(sizeof *vfs, err);
    if (!vfs) return NULL;
    mj_defaultVFS(vfs);
    int size = *t->xml_size;
    if (mj_makeEmptyFileVFS(vfs, t->file, size) != 0) {
        free(vfs);
        calf_error_set(err, CALF_EIO, "%s: cannot place %s in MuJoCo's file system", t->name,
                       t->file);
        return NULL;
    }
    int i = mj_findFileVFS(vfs, t->file);
    CALF_ASSERT(i >= 0);
    memcpy(vfs->filedata[i], t->xml, (size_t)size);
    char msg[1000] = "";
    mjModel *volatile m = NULL;
    int failed;
    GUARDED(&failed, 1, m = mj_loadXML(t->file, vfs, msg, (int)sizeof msg));
    mj_deleteVFS(vfs);
    free(vfs);
    if (failed) {
        calf_error_set(err, CALF_ENOMEM, "%s: MuJoCo failed compiling %s: %s", t->name, t->file,
                       guard_msg);
        return NULL;
    }
    if (!m) { /* MuJoCo catches its own errors while compiling, out of memory too */
        calf_error_set(err, strstr(msg, "allocate") ? CALF_ENOMEM : CALF_EIO,
                       "%s: MuJoCo cannot compile %s: %s", t->name, t->file, msg);
        return NULL;
    }
    /* The code below indexes qpos, qvel and ctrl by Gymnasium's layout, and the class
     * promises its action bounds: the model must agree. */
    const calf_env_spec *spec = t->spec;
    int ok = m->nq == t->nq && m->nv == t->nv && m->nu == t->nu && m->na == 0 &&
             m->nu == spec->action_dim && m->nmocap == 0 && m->nuserdata == 0;
    for (int j = 0; ok && j < m->nu; j++)
        ok = m->actuator_ctrllimited[j] && (float)m->actuator_ctrlrange[2 * j] == spec->action_low[j] &&
             (float)m->actuator_ctrlrange[2 * j + 1] == spec->action_high[j];
    if (ok && t->track_body) ok = mj_name2id(m, mjOBJ_BODY, t->track_body) >= 0;
    /* the class's saved size counts the kept arrays, which depend on nbody */
    size_t kept = 8 * (size_t)mj_env_kept_doubles(m, t->keep);
    if (ok) ok = MJ_SAVE_SIZE(m->nq, m->nv, m->na, m->nu) + kept == spec->save_size;
    if (!ok) {
        calf_error_set(err, CALF_EIO,
                       "%s: the compiled %s does not have the expected layout (nq %d nv %d nu %d "
                       "na %d nbody %d; want %d %d %d 0, ctrl ranges as the action bounds, the "
                       "class's saved size)",
                       t->name, t->file, m->nq, m->nv, m->nu, m->na, m->nbody, t->nq, t->nv, t->nu);
        mj_deleteModel(m);
        return NULL;
    }
    return m;
}

const mjModel *mj_env_model(const mj_task *task, calf_error *err) {
    CALF_ASSERT(pthread_mutex_lock(&models_lock) == 0);
    mjModel *m = NULL;
    for (int i = 0; i < num_models && !m; i++)
        if (models[i].task == task) m = models[i].m;
    if (!m && num_models == MJ_MAX_MODELS)
        calf_error_set(err, CALF_ENOMEM, "%s: cannot compile its model: this process holds "
                       "%d MuJoCo models already, the most it keeps", task->name, MJ_MAX_MODELS);
    else if (!m && (m = compile(task, err))) {
        models[num_models].task = task;
        models[num_models].m = m;
        num_models++;
    }
    CALF_ASSERT(pthread_mutex_unlock(&models_lock) == 0);
    return m;
}

int mj_env_create(mj_state *s, const mj_task *task, calf_error *err) {
    const mjModel *m = mj_env_model(task, err);
    if (!m) return err ? err->status : CALF_EIO;
    mjData *volatile d = NULL;
    int failed;
    GUARDED(&failed, 0, d = mj_makeData(m));
    if (failed)
        return calf_error_set(err, CALF_ENOMEM, "%s: MuJoCo could not make an env's data: %s",
                              task->name, guard_msg);
    if (!d) return calf_error_set(err, CALF_ENOMEM, "%s: MuJoCo could not make its data", task->name);
    s->task = task;
    s->m = m;
    s->d = d;
    s->track_id = task->track_body ? mj_name2id(m, mjOBJ_BODY, task->track_body) : -1;
    if (!(s->drawn = mem_calloc((size_t)(m->nq + m->nv), sizeof *s->drawn, err))) {
        mj_deleteData(d);
        memset(s, 0, sizeof *s);
        return CALF_ENOMEM;
    }
    return CALF_OK;
}

int mj_env_create_with_bodies(mj_state *s, const mj_task *task, const char *const *names,
                              const int *ids, int n, calf_error *err) {
    int rc = mj_env_create(s, task, err);
    if (rc != CALF_OK) return rc;
    for (int i = 0; i < n; i++)
        if (mj_name2id(s->m, mjOBJ_BODY, names[i]) != ids[i]) {
            mj_env_destroy(s);
            return calf_error_set(err, CALF_EIO, "%s: the model's body '%s' is not body %d",
                                  task->name, names[i], ids[i]);
        }
    return CALF_OK;
}

bool mj_env_measure(const calf_env_class *cls, size_t *mapped, size_t *touched) {
    if (cls->destroy != mj_env_destroy_hook) return false; /* every task's class has it */
    calf_env env;
    calf_error ignored;
    float *obs = calloc((size_t)cls->spec.obs_dim, sizeof *obs);
    float *u = calloc((size_t)cls->spec.action_dim, sizeof *u);
    if (!obs || !u || calf_env_init(&env, cls->spec.name, 0, 0, &ignored) != CALF_OK) {
        free(obs);
        free(u);
        return false;
    }
    calf_env_reset(&env, obs);
    for (int k = 0; k < 8; k++) {
        float r;
        int term, trunc;
        calf_env_step(&env, 0, u, obs, &r, &term, &trunc);
        if (term || trunc) calf_env_reset(&env, obs);
    }
    const mjData *d = ((const mj_state *)env.state)->d;
    size_t fixed = sizeof *d + (size_t)d->nbuffer + cls->spec.state_size;
    *mapped = fixed + (size_t)d->nstack * sizeof(mjtNum);
    *touched = fixed + (size_t)d->maxuse_stack * sizeof(mjtNum);
    calf_env_free(&env);
    free(obs);
    free(u);
    return true;
}

void mj_env_destroy(mj_state *s) {
    if (s->d) mj_deleteData(s->d);
    free(s->drawn);
    memset(s, 0, sizeof *s);
}

/* Gymnasium's mass_center: np.einsum("b,bj->j", body_mass, xipos), each coordinate's
 * products added body by body from 0, over np.sum(body_mass) (pairwise). */
static void read_mass_center(mj_state *s) {
    const mjModel *m = s->m;
    double total = mj_env_sum_f64(m->body_mass, m->nbody);
    for (int j = 0; j < 2; j++) {
        double num = 0.0;
        for (int b = 0; b < m->nbody; b++) num += m->body_mass[b] * s->d->xipos[3 * b + j];
        s->track_xy[j] = num / total;
    }
}

static void read_track(mj_state *s) {
    if (s->task->track_mass_center) {
        read_mass_center(s);
        return;
    }
    if (s->track_id < 0) return;
    s->track_xy[0] = s->d->xpos[3 * s->track_id];
    s->track_xy[1] = s->d->xpos[3 * s->track_id + 1];
}

void mj_env_reset(mj_state *s, calf_rng *rng) {
    const mjModel *m = s->m;
    const mj_task *t = s->task;
    double *qpos = s->drawn, *qvel = s->drawn + m->nq;
    /* init_qpos + np_random.uniform(low, high, nq): low + (high - low) * U[0, 1). */
    for (int i = 0; i < m->nq; i++)
        qpos[i] = m->qpos0[i] + calf_rng_uniform_range(rng, -t->qpos_noise, t->qpos_noise);
    /* init_qvel (zeros) + scale * standard_normal(nv), or + uniform(low, high, nv). */
    for (int i = 0; i < m->nv; i++)
        qvel[i] = 0.0 + (t->qvel_normal ? t->qvel_noise * calf_rng_normal(rng)
                                        : calf_rng_uniform_range(rng, -t->qvel_noise, t->qvel_noise));
    mj_env_reset_drawn(s);
}

/* mj_resetData without most of its memset. MuJoCo 2.2's clears the whole mjData buffer,
 * about 3 MB for these models (its contact and constraint arrays are sized for nconmax
 * contacts and njmax rows, efc_AR for njmax^2), some 30 us: five mj_steps of
 * InvertedPendulum, whose random episodes last a few steps. MuJoCo writes those arrays
 * only up to the most contacts and rows used since the last reset (maxuse_con,
 * maxuse_efc; efc_AR and efc_J are packed nefc x nefc and nefc x nv), so clearing each
 * array up to there leaves the bytes of the whole memset; the rest is _resetData of
 * MuJoCo 2.2.2's engine_io.c, step for step. tests/test_mujoco.c compares the two byte
 * for byte after random episodes of every task. Any other MuJoCo gets mj_resetData. */
#if defined(mjVERSION_HEADER) && mjVERSION_HEADER == 222
#define ROWS_ARE(nr, lit) (sizeof(#nr) == sizeof(lit) && __builtin_memcmp(#nr, lit, sizeof lit) == 0)

void mj_env_reset_data(const mjModel *m, mjData *d) {
    size_t con = (size_t)d->maxuse_con, efc = (size_t)d->maxuse_efc;
    d->pstack = 0;
    d->maxuse_stack = 0;
    d->maxuse_con = 0;
    d->maxuse_efc = 0;
    memset(d->warning, 0, mjNWARNING * sizeof(mjWarningStat));
    memset(d->timer, 0, mjNTIMER * sizeof(mjTimerStat));
    memset(d->solver, 0, mjNSOLVER * sizeof(mjSolverStat));
    d->solver_iter = 0;
    d->solver_nnz = 0;
    mju_zero(d->solver_fwdinv, 2);
    d->ne = 0;
    d->nf = 0;
    d->nefc = 0;
    d->ncon = 0;
    d->time = 0;
    mju_zero(d->energy, 2);
    {
        MJDATA_POINTERS_PREAMBLE(m)
#define X(type, name, nr, nc)                                                                  \
    memset(d->name, 0,                                                                         \
           sizeof(type) * (ROWS_ARE(nr, "njmax") ? efc : ROWS_ARE(nr, "nconmax") ? con        \
                                                                     : (size_t)m->nr) *          \
               (size_t)(nc));
        MJDATA_POINTERS
#undef X
        (void)nv, (void)njmax;
    }
    /* _resetData's defaults: what mj_forward does not compute (the zeroing above already
     * did the rest of its list) */
    if (m->qpos0) memcpy(d->qpos, m->qpos0, (size_t)m->nq * sizeof *d->qpos);
    if (m->body_mocapid) {
        for (int i = 0; i < m->nbody; i++) {
            int id = m->body_mocapid[i];
            if (id >= 0) {
                mju_copy3(d->mocap_pos + 3 * id, m->body_pos + 3 * i);
                mju_copy4(d->mocap_quat + 4 * id, m->body_quat + 4 * i);
            }
        }
    } else {
        for (int i = 0; i < m->nmocap; i++) d->mocap_quat[4 * i] = 1.0;
    }
}
#undef ROWS_ARE
#else
void mj_env_reset_data(const mjModel *m, mjData *d) { mj_resetData(m, d); }
#endif

void mj_env_reset_drawn(mj_state *s) {
    const mjModel *m = s->m;
    mjData *d = s->d;
    mj_env_reset_data(m, d);
    memcpy(d->qpos, s->drawn, (size_t)m->nq * sizeof *d->qpos);
    memcpy(d->qvel, s->drawn + m->nq, (size_t)m->nv * sizeof *d->qvel);
    mj_forward(m, d);
    read_track(s);
}

void mj_env_simulate(mj_state *s, const float *u) {
    const mjModel *m = s->m;
    mjData *d = s->d;
    for (int j = 0; j < m->nu; j++) d->ctrl[j] = (double)u[j];
    for (int k = 0; k < s->task->frame_skip; k++) mj_step(m, d);
    if (s->task->post_constraint) mj_rnePostConstraint(m, d);
    read_track(s);
}

double mj_env_dt(const mj_state *s) { return s->m->opt.timestep * s->task->frame_skip; }

float mj_env_sum_squares(const float *u, int n) {
    /* NumPy's FLOAT_pairwise_sum, starting from the identity 0 (add.reduce's initial),
     * which changes nothing for these non-negative terms. */
    CALF_ASSERT(n >= 0 && n <= 128);
    float res;
    if (n < 8) {
        res = -0.0f;
        for (int i = 0; i < n; i++) res += u[i] * u[i];
    } else {
        float r[8];
        for (int j = 0; j < 8; j++) r[j] = u[j] * u[j];
        int i = 8;
        for (; i < n - n % 8; i += 8)
            for (int j = 0; j < 8; j++) r[j] += u[i + j] * u[i + j];
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += u[i] * u[i];
    }
    return 0.0f + res;
}

/* NumPy's DOUBLE_pairwise_sum for n up to 128 (one block), of x or of its squares. */
static double pairwise_f64(const double *x, int n, int square) {
    CALF_ASSERT(n >= 0 && n <= 128);
#define TERM(i) (square ? x[i] * x[i] : x[i])
    double res;
    if (n < 8) {
        res = -0.0;
        for (int i = 0; i < n; i++) res += TERM(i);
    } else {
        double r[8];
        for (int j = 0; j < 8; j++) r[j] = TERM(j);
        int i = 8;
        for (; i < n - n % 8; i += 8)
            for (int j = 0; j < 8; j++) r[j] += TERM(i + j);
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += TERM(i);
    }
#undef TERM
    return 0.0 + res;
}

double mj_env_sum_squares_f64(const double *x, int n) { return pairwise_f64(x, n, 1); }
double mj_env_sum_f64(const double *x, int n) { return pairwise_f64(x, n, 0); }

double mj_env_norm3(const double *v) { return sqrt((v[0] * v[0] + v[1] * v[1]) + v[2] * v[2]); }

/* ---- the saved form ------------------------------------------------------------- */

/* The kept array of bit 1 << k: its length for model m, and where it is in d. */
static int kept_size(const mjModel *m, int k) {
    static const int per_body[] = {3, 0, 10, 6, 0, 6}; /* else per dof */
    return per_body[k] ? per_body[k] * m->nbody : m->nv;
}
static mjtNum *kept_at(mjData *d, int k) {
    mjtNum *const at[] = {d->xpos, d->qfrc_constraint, d->cinert, d->cvel, d->qfrc_actuator,
                          d->cfrc_ext};
    return at[k];
}
enum { NUM_KEEP = 6 };

int mj_env_kept_doubles(const mjModel *m, unsigned keep) {
    int total = 0;
    for (int k = 0; k < NUM_KEEP; k++) {
        if (keep & (1u << k)) total += kept_size(m, k);
    }
    return total;
}

/* Byte copies: a checkpoint record places the saved form at any offset. */
static unsigned char *put(unsigned char *p, const double *v, int n) {
    memcpy(p, v, (size_t)n * sizeof *v);
    return p + (size_t)n * sizeof *v;
}

void mj_env_save(const mj_state *s, void *buf) {
    const mjModel *m = s->m;
    const mjData *d = s->d;
    unsigned char *p = buf;
    p = put(p, &d->time, 1);
    p = put(p, d->qpos, m->nq);
    p = put(p, d->qvel, m->nv);
    p = put(p, d->act, m->na);
    p = put(p, d->qacc_warmstart, m->nv);
    p = put(p, d->ctrl, m->nu);
    p = put(p, s->track_xy, 2);
    for (int k = 0; k < NUM_KEEP; k++)
        if (s->task->keep & (1u << k)) p = put(p, kept_at(s->d, k), kept_size(m, k));
}

int mj_env_load(mj_state *s, const void *buf, calf_error *err) {
    const mjModel *m = s->m;
    mjData *d = s->d;
    int n = MJ_SAVE_DOUBLES(m->nq, m->nv, m->na, m->nu) + mj_env_kept_doubles(m, s->task->keep);
    double *v = mem_alloc((size_t)n * sizeof *v, err);
    if (!v) return CALF_ENOMEM;
    memcpy(v, buf, (size_t)n * sizeof *v);
    for (int i = 0; i < n; i++)
        if (!isfinite(v[i])) {
            free(v);
            return calf_error_set(err, CALF_EINVAL, "%s state: value %d of %d is not finite",
                                  s->task->name, i, n);
        }
    if (v[0] < 0) {
        double t = v[0];
        free(v);
        return calf_error_set(err, CALF_EINVAL, "%s state: negative time %g", s->task->name, t);
    }
    const double *p = v;
    d->time = *p++;
    memcpy(d->qpos, p, (size_t)m->nq * sizeof *p), p += m->nq;
    memcpy(d->qvel, p, (size_t)m->nv * sizeof *p), p += m->nv;
    memcpy(d->act, p, (size_t)m->na * sizeof *p), p += m->na;
    memcpy(d->qacc_warmstart, p, (size_t)m->nv * sizeof *p), p += m->nv;
    memcpy(d->ctrl, p, (size_t)m->nu * sizeof *p), p += m->nu;
    s->track_xy[0] = *p++;
    s->track_xy[1] = *p++;
    for (int k = 0; k < NUM_KEEP; k++)
        if (s->task->keep & (1u << k)) {
            int len = kept_size(m, k);
            memcpy(kept_at(d, k), p, (size_t)len * sizeof *p), p += len;
        }
    free(v);
    return CALF_OK;
}

void mj_env_reset_state(const mj_state *s, double *out) {
    memcpy(out, s->drawn, (size_t)(s->m->nq + s->m->nv) * sizeof *out);
}

void mj_env_destroy_hook(void *state) { mj_env_destroy(state); }
void mj_env_save_hook(const void *state, void *buf) { mj_env_save(state, buf); }
int mj_env_load_hook(void *state, const void *buf, calf_error *err) { return mj_env_load(state, buf, err); }
void mj_env_reset_state_hook(const void *state, double *out) { mj_env_reset_state(state, out); }

void mj_env_observe_hook(const void *state, float *obs) {
    const mj_state *s = state;
    const mj_task *t = s->task;
    const mjData *d = s->d;
    double c = t->obs_qvel_clip;
    for (int i = t->obs_qpos_from; i < t->nq; i++) *obs++ = (float)d->qpos[i];
    for (int i = 0; i < t->nv; i++) {
        double v = d->qvel[i];
        if (c > 0) v = v < -c ? -c : v > c ? c : v;
        *obs++ = (float)v;
    }
}

void mj_env_reset_hook(void *state, calf_rng *rng, float *obs) {
    const mj_state *s = state;
    mj_env_reset(state, rng);
    if (s->task->observe)
        s->task->observe(state, obs);
    else
        mj_env_observe_hook(state, obs);
}

int mj_env_step_hook(void *state, calf_rng *rng, int action, const float *u, float *obs,
                     float *reward) {
    (void)rng;
    (void)action;
    mj_state *s = state;
    const mj_task *t = s->task;
    double x_before = t->track_body ? s->track_xy[0] : s->d->qpos[0];
    mj_env_simulate(s, u);
    double x_after = t->track_body ? s->track_xy[0] : s->d->qpos[0];
    double rewards = (x_after - x_before) / mj_env_dt(s);
    /* only where Gymnasium adds it: v + 0.0 would turn a -0.0 velocity into +0.0 */
    if (t->healthy_reward != 0) rewards = rewards + t->healthy_reward;
    float ctrl_cost = t->ctrl_cost_weight * mj_env_sum_squares(u, t->nu);
    *reward = (float)(rewards - (double)ctrl_cost);
    mj_env_observe_hook(s, obs);
    return t->healthy ? !t->healthy(s->d) : 0;
}

int mj_env_guarded(void (*fn)(void *arg), void *arg, const char *what, calf_error *err) {
    int failed;
    GUARDED(&failed, 0, fn(arg));
    if (failed) return calf_error_set(err, CALF_EIO, "%s: MuJoCo: %s", what, guard_msg);
    return CALF_OK;
}
