/* stepwise.c: the stepwise trainer, calf_trainer (include/calf/trainer.h): one process's
 * run that the host program drives an iteration at a time. */
#include "training/stepwise.h"

#include <stddef.h>
#include <stdlib.h>

#include "calf/trainer.h"
#include "base/live.h"
#include "base/mem.h"
#include "numerics/kernels.h"
#include "parallel/comm.h"
#include "records/rundir.h"
#include "training/job_setup.h"
#include "training/trainer.h"
#include "training/trainer_config.h"

struct calf_trainer {
    live_link live;             /* first: the open handles' list (base/live.h) */
    calf_config cfg;
    char *root_dir;             /* the caller's, copied */
    calf_train_options o;       /* what the trainer reads after open: root_dir, quiet */
    rundir_lock lock;           /* held until close */
    resume_state rs;
    comm *c;                    /* this process alone */
    trainer *t;                 /* NULL when the run was complete at open */
    int64_t complete_at;        /* then: its iteration */
    int last_rc;                /* the last step's status: a failure ends the run */
    void (*progress)(const calf_trainer_metrics *m, void *arg);
    void *progress_arg;
    bool in_progress;           /* progress is running: step and close are refused */
};

/* The open handles. A call given a handle that is not among them (closed already, or
 * never opened) is refused by comparing pointers, without reading what it points to. */
static live_set trainers = LIVE_SET_INIT;

/* CALF_OK when h may be used by `call`: not NULL, open, and (for step and close) not
 * from inside its own progress callback. */
static int check_handle(const calf_trainer *h, const char *call, bool not_in_progress,
                        calf_error *err) {
    if (!h) return calf_error_set(err, CALF_EINVAL, "%s: the trainer is NULL", call);
    if (!live_has(&trainers, h))
        return calf_error_set(err, CALF_EINVAL, "%s: %p is not an open trainer (closed "
                              "already?)", call, (const void *)h);
    if (not_in_progress && h->in_progress)
        return calf_error_set(err, CALF_EINVAL, "%s: called from the trainer's own progress "
                              "callback, inside an iteration: return from the callback first",
                              call);
    return CALF_OK;
}

/* Whether the caller's options struct (struct_size bytes) holds `field`. */
#define HAS_OPTION(o, field) \
    ((o)->struct_size >= offsetof(calf_trainer_options, field) + sizeof((o)->field))

static void stepwise_free(calf_trainer *h) {
    if (!h) return;
    if (h->c) comm_finalize(h->c);
    rundir_lock_release(&h->lock);
    free(h->root_dir);
    free(h);
}

int stepwise_open(const calf_trainer_options *o, const char *job, bool guard_exit,
                         calf_trainer **out, calf_error *err) {
    calf_error_clear(err);
    if (!out) return calf_error_set(err, CALF_EINVAL, "calf_trainer_open: out is NULL");
    *out = NULL;
    if (!o || !HAS_OPTION(o, progress_arg))
        return calf_error_set(err, CALF_EINVAL, "calf_trainer_open: the options were not "
                              "initialised with CALF_TRAINER_OPTIONS_INIT");
    if (!o->root_dir || !o->root_dir[0]) return calf_error_set(err, CALF_EINVAL, "root_dir is empty");
    /* a CALF_KERNELS this build or this CPU lacks */
    if (kernels_select(err) != CALF_OK) return CALF_EINVAL;
    if (comm_mpi_launched())
        return calf_error_set(err, CALF_EINVAL, "calf_trainer_open runs one process; under an "
                              "MPI launcher, calf_train runs the job across the ranks");
    calf_trainer *h = mem_calloc(1, sizeof *h, err);
    if (!h) return CALF_ENOMEM;
    h->lock.fd = -1;
    if (!(h->root_dir = mem_strdup(o->root_dir, err))) {
        free(h);
        return CALF_ENOMEM;
    }
    h->o = (calf_train_options){.root_dir = h->root_dir, .conf_path = o->conf_path,
                                .conf_params = o->conf_params,
                                .num_conf_params = o->num_conf_params, .nproc = 1,
                                .quiet = o->quiet};
    h->progress = o->progress;
    h->progress_arg = o->progress_arg;
    int E = 0;
    int rc = trainer_load_config(&h->o, o->conf_text, &h->cfg, err);
    if (rc == CALF_OK) {
        E = (int)calf_config_int(&h->cfg, CALF_CFG_NUM_ENVS);
        rc = job_check_memory(&h->o, &h->cfg, E, err); /* every env is this process's */
    }
    if (rc == CALF_OK) rc = rundir_check(h->root_dir, err);
    bool complete = false;
    if (rc == CALF_OK) rc = job_settle_root(&h->o, &h->cfg, job, &h->lock, &h->rs, &complete, err);
    /* the caller's strings are read during open only */
    h->o.conf_path = NULL;
    h->o.conf_params = NULL;
    h->o.num_conf_params = 0;
    if (rc == CALF_OK && complete) {
        h->complete_at = h->rs.hdr.iteration;
        live_add(&trainers, h);
        *out = h;
        return CALF_OK;
    }
    if (rc == CALF_OK) rc = comm_single(&h->c, err);
    if (rc == CALF_OK) {
        trainer_args wa = {&h->o, &h->cfg, &h->rs, false, {0, ""}, o->handle_signals, guard_exit};
        rc = trainer_open(&h->t, h->c, &wa);
        if (rc) {
            trainer_close(h->t, rc, err);
            h->t = NULL;
        }
    }
    if (rc) {
        stepwise_free(h);
        return rc;
    }
    live_add(&trainers, h);
    *out = h;
    return CALF_OK;
}

int calf_trainer_open(const calf_trainer_options *o, calf_trainer **out, calf_error *err) {
    return stepwise_open(o, "calf_trainer_open", false, out, err);
}

bool calf_trainer_done(const calf_trainer *h) {
    if (check_handle(h, "calf_trainer_done", false, NULL)) return true;
    return !h->t || trainer_done(h->t);
}

int64_t calf_trainer_iteration(const calf_trainer *h) {
    if (check_handle(h, "calf_trainer_iteration", false, NULL)) return -1;
    return h->t ? trainer_iteration(h->t) : h->complete_at;
}

const calf_trainer_metrics *calf_trainer_metrics_last(const calf_trainer *h) {
    if (check_handle(h, "calf_trainer_metrics_last", false, NULL)) return NULL;
    return h->t ? trainer_metrics(h->t) : NULL;
}

int calf_trainer_step(calf_trainer *h, calf_error *err) {
    calf_error_clear(err);
    int crc = check_handle(h, "calf_trainer_step", true, err);
    if (crc) return crc;
    if (h->last_rc != CALF_OK && h->last_rc != CALF_EINTR)
        return calf_error_set(err, CALF_EINVAL, "the run in %s failed at iteration %lld: close "
                              "it (a new calf_trainer_open resumes from its last checkpoint)",
                              h->root_dir, (long long)calf_trainer_iteration(h));
    if (calf_trainer_done(h))
        return calf_error_set(err, CALF_EINVAL, "the run in %s is complete at iteration %lld: "
                              "nothing to step", h->root_dir, (long long)calf_trainer_iteration(h));
    int rc = trainer_step(h->t);
    h->last_rc = rc;
    if (rc == CALF_EINTR)
        return calf_error_set(err, CALF_EINTR, "interrupted: stopped after iteration %lld, "
                              "checkpoint written", (long long)trainer_iteration(h->t));
    if (rc) {
        *err = *trainer_error(h->t);
        return rc;
    }
    if (h->progress) {
        h->in_progress = true;
        h->progress(trainer_metrics(h->t), h->progress_arg);
        h->in_progress = false;
    }
    return CALF_OK;
}

int calf_trainer_checkpoint(calf_trainer *h, calf_error *err) {
    calf_error_clear(err);
    int crc = check_handle(h, "calf_trainer_checkpoint", false, err);
    if (crc) return crc;
    if (!h->t) return CALF_OK; /* complete at open: its last checkpoint is the run's end */
    if (h->last_rc != CALF_OK && h->last_rc != CALF_EINTR)
        return calf_error_set(err, CALF_EINVAL, "the run in %s failed; nothing to checkpoint",
                              h->root_dir);
    int rc = trainer_checkpoint_now(h->t);
    if (rc) {
        *err = *trainer_error(h->t);
        h->last_rc = rc;
    }
    return rc;
}

int calf_trainer_close(calf_trainer *h, calf_error *err) {
    calf_error_clear(err);
    if (!h) return CALF_OK;
    int rc = check_handle(h, "calf_trainer_close", true, err);
    if (rc) return rc;
    if (!live_take(&trainers, h)) /* another thread's close came first */
        return calf_error_set(err, CALF_EINVAL, "calf_trainer_close: %p is not an open trainer "
                              "(closed already?)", (const void *)h);
    if (h->t) {
        bool failed = h->last_rc != CALF_OK && h->last_rc != CALF_EINTR;
        calf_error cerr;
        int crc = trainer_close(h->t, failed ? h->last_rc : CALF_OK, &cerr);
        /* a step's failure was that step's to return; here only the final writes' */
        if (!failed && crc != CALF_OK) {
            rc = crc;
            *err = cerr;
        }
    }
    stepwise_free(h);
    return rc;
}
