/* job.c: how a training job starts: one process, `--nproc N` local workers forked
 * by the launcher, or the ranks of an MPI launcher. Each settles the config, takes the
 * root dir's lock and finds the checkpoint to resume from before any process trains,
 * then runs trainer_worker. */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calf/train.h"
#include "calf/trainer.h"
#include "records/checkpoint.h"
#include "parallel/comm.h"
#include "base/fsutil.h"
#include "base/mem.h"
#include "parallel/workers.h"
#include "records/rundir.h"
#include "training/trainer.h"
#include "training/trainer_memory.h"

/* What changed between the config that wrote a checkpoint (digest) and cfg, as ": B = NEW
 * (was OLD), ..." from ROOT/config.gin, the operative config of the launch before; ""
 * when that file is gone or describes another config. */
static void config_changes(const char *root, const calf_config *cfg, uint64_t digest, char *buf,
                           size_t cap) {
    buf[0] = '\0';
    char path[4096];
    calf_error ignored;
    calf_config *was = malloc(sizeof *was);
    if (!was || fs_join(path, sizeof path, root, "config.gin", &ignored) != CALF_OK) {
        free(was);
        return;
    }
    calf_config_init(was);
    if (calf_config_parse_file(was, path, &ignored) != CALF_OK || calf_config_digest(was) != digest) {
        free(was);
        return;
    }
    size_t used = 0;
    int shown = 0, more = 0;
    for (int id = 0; id < calf_binding_count(); id++) {
        if (calf_binding_flags(id) & CALF_BINDING_NODIGEST) continue;
        char now[300], then[300];
        calf_config_format_value(cfg, id, now, sizeof now);
        calf_config_format_value(was, id, then, sizeof then);
        if (!strcmp(now, then)) continue;
        if (calf_binding_type(id) == CALF_CFG_FLOAT) { /* as a person writes them: 0.9, not
                                                        * the round-trip 0.90000000000000002 */
            snprintf(now, sizeof now, "%.9g", calf_config_float(cfg, id));
            snprintf(then, sizeof then, "%.9g", calf_config_float(was, id));
        }
        if (shown == 3) {
            more++;
            continue;
        }
        int n = snprintf(buf + used, cap - used, "%s%s = %s (was %s)", shown ? ", " : ": ",
                         calf_binding_name(id), now, then);
        if (n < 0 || (size_t)n >= cap - used) break;
        used += (size_t)n;
        shown++;
    }
    if (more && used < cap) snprintf(buf + used, cap - used, ", and %d more", more);
    free(was);
}

/* A checkpoint's head loads into the config's algorithm (a ckpt_check): its counters,
 * parameters and optimizer state are ones a run could have written. One of another
 * config passes, to be refused for that below rather than skipped. */
static int check_head(const char *path, const ckpt_header *hdr, void *arg, calf_error *err) {
    const calf_config *cfg = arg;
    if (hdr->digest != calf_config_digest(cfg)) return CALF_OK;
    const algorithm_ops *ops = NULL;
    algorithm *algo = NULL;
    int rc = trainer_load_policy(cfg, path, hdr, &ops, &algo, err);
    if (rc == CALF_OK) ops->destroy(algo);
    return rc;
}

/* The newest valid checkpoint under root, refused when its config differs in anything
 * but run length and cadence. Warnings about skipped (corrupt) files go to stderr. */
static int find_resume(const char *root, const calf_config *cfg, resume_state *rs,
                       calf_error *err) {
    memset(rs, 0, sizeof *rs);
    char dir[4096];
    int rc = fs_join(dir, sizeof dir, root, "train/algorithm", err);
    if (rc) return rc;
    rc = ckpt_find_latest_usable(dir, rs->path, sizeof rs->path, &rs->hdr, NULL, NULL,
                                 &rs->found, check_head, (void *)cfg, stderr, err);
    if (rc) return rc;
    if (rs->found && rs->hdr.digest != calf_config_digest(cfg)) {
        rs->found = false;
        char changed[700];
        config_changes(root, cfg, rs->hdr.digest, changed, sizeof changed);
        return calf_error_set(err, CALF_EINVAL,
                              "%s was written by a different config%s (only the run length, "
                              "evaluation, summary and checkpoint settings may change when "
                              "resuming); use a fresh --root_dir",
                              rs->path, changed);
    }
    return CALF_OK;
}

/* trainer_check_memory for `envs` envs on this machine, unless the root's newest
 * checkpoint by name already ends the run: settle_root then finds nothing to do, which
 * needs no memory, so a finished run stays exit 0 on any machine. (If that file turns out
 * damaged and an older one is resumed, the check was skipped; the allocation still
 * tells.) */
static int check_memory(const calf_train_options *o, const calf_config *cfg, int envs,
                        calf_error *err) {
    char dir[4096];
    int64_t *iters = NULL;
    int count = 0;
    calf_error ignored;
    calf_error_clear(&ignored);
    bool done = fs_join(dir, sizeof dir, o->root_dir, "train/algorithm", &ignored) == CALF_OK &&
                ckpt_list(dir, &iters, &count, &ignored) == CALF_OK && count > 0 &&
                trainer_run_complete(cfg, iters[count - 1]);
    free(iters);
    return done ? CALF_OK : trainer_check_memory(cfg, envs, err);
}

/* With the input settled and nothing written yet (rundir_check passed): take the root
 * dir's lock (l), remove what a dead run left half-written, find the checkpoint to resume
 * from, and decide whether there is anything to do (*complete: the checkpoint already
 * reaches the run's end, which needs no write access). A root this process cannot write
 * in (read-only mount, no permission) is fine only then. The caller releases l, also on
 * failure. */
static int settle_root(const calf_train_options *o, const calf_config *cfg, const char *job,
                       rundir_lock *l, resume_state *rs, bool *complete, calf_error *err) {
    *complete = false;
    int rc = rundir_lock_take(l, o->root_dir, job, err);
    if (rc == CALF_OK && l->no_lock)
        /* Unlocked, a temp file here may be a live run's: leave them all. */
        fprintf(stderr,
                "calf: warning: cannot lock %s/.lock (%s): its file system has no locks, so a "
                "second run on this --root_dir would not be refused; make sure there is none\n",
                o->root_dir, strerror(l->no_lock));
    else if (rc == CALF_OK && !l->no_write)
        rc = rundir_remove_temps(o->root_dir, stderr, err);
    if (rc == CALF_OK) rc = find_resume(o->root_dir, cfg, rs, err);
    if (rc) return rc;
    *complete = rs->found && trainer_run_complete(cfg, rs->hdr.iteration);
    if (*complete) {
        if (!o->quiet)
            fprintf(stderr, "calf: nothing to do: the run in %s is complete at iteration %lld\n",
                    o->root_dir, (long long)rs->hdr.iteration);
        return CALF_OK;
    }
    if (l->no_write)
        return calf_error_set(err, CALF_EIO, "--root_dir %s cannot be written (%s): the run "
                              "cannot continue there", o->root_dir, strerror(l->no_write));
    return CALF_OK;
}

/* More workers than cores works (and gives the same bits), but they take turns on the
 * cores and every collective waits for each of them to get one: say so, once the input
 * is settled, before any worker starts. */
static void warn_oversubscribed(int nproc) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1 || nproc <= cpus) return;
    fprintf(stderr,
            "calf: warning: --nproc %d exceeds the %ld cores online: %.1f workers per core take "
            "turns, which is slower than --nproc %ld (the result is the same); the workers run "
            "at lower priority (nice +%d) so that Ctrl-C still stops the job within seconds\n",
            nproc, cpus, (double)nproc / (double)cpus, cpus, LAUNCHER_NICE_OVERSUBSCRIBED);
    fflush(stderr);
}

/* The launcher's exit status back as a status (its messages are already on stderr). */
static int status_of_exit(int code) {
    switch (code) {
    case 0: return CALF_OK;
    case 2: return CALF_EINVAL;
    case 130: return CALF_EINTR;
    default: return CALF_ECOMM;
    }
}

/* Rank 0 holds the config text and the checkpoint; ranks on other machines may see
 * neither, so both are sent to them. Every rank leaves with the same status; errors
 * are rank 0's to report. */
static int mpi_share_setup(comm *c, const calf_train_options *o, calf_config *cfg,
                           resume_state *rs, rundir_lock *lock, bool *complete,
                           calf_error *err) {
    /* status, config text bytes, checkpoint found, nothing to do */
    int64_t head[4] = {CALF_OK, 0, 0, 0};
    char *text = NULL;
    size_t text_len = 0;
    if (comm_is_main(c)) {
        int rc = calf_train_load_config(o, cfg, err);
        if (rc == CALF_OK) {
            /* whether the ranks fit the envs (rank 0's split, first: rank 0 is on its own
             * machine), and the envs of the ranks on rank 0's machine, the one machine
             * rank 0 can see (the others are not checked) */
            int E = (int)calf_config_int(cfg, CALF_CFG_NUM_ENVS), here = 0, b, n;
            for (int r = 0; rc == CALF_OK && r < comm_size(c); r++)
                if (comm_same_machine(c, r) &&
                    (rc = calf_split(E, comm_size(c), r, &b, &n, err)) == CALF_OK)
                    here += n;
            if (rc == CALF_OK) rc = check_memory(o, cfg, here, err);
        }
        if (rc == CALF_OK) rc = rundir_check(o->root_dir, err);
        if (rc == CALF_OK) {
            /* rank 0 holds the lock for the whole job */
            char job[64];
            snprintf(job, sizeof job, "calf train, rank 0 of %d MPI ranks", comm_size(c));
            rc = settle_root(o, cfg, job, lock, rs, complete, err);
        }
        if (rc == CALF_OK) {
            FILE *f = open_memstream(&text, &text_len);
            if (!f || calf_config_write(cfg, f, NULL) != CALF_OK || fclose(f) != 0)
                rc = calf_error_set(err, CALF_ENOMEM, "cannot serialise the config");
        }
        head[0] = rc;
        head[1] = (int64_t)text_len;
        head[2] = rs->found;
        head[3] = *complete;
    }
    int rc = comm_broadcast(c, head, sizeof head, 0, err);
    if (rc == CALF_OK && head[0] != CALF_OK) {
        if (!comm_is_main(c)) calf_error_clear(err); /* rank 0 reports it */
        rc = (int)head[0];
    }
    if (rc == CALF_OK && head[3]) {
        *complete = true;
        free(text);
        return CALF_OK;
    }
    /* a rank without memory for it fails here; rank 0's broadcast then sees it leave */
    if (rc == CALF_OK && !comm_is_main(c) && !(text = mem_calloc((size_t)head[1] + 1, 1, err)))
        rc = CALF_ENOMEM;
    if (rc == CALF_OK) rc = comm_broadcast(c, text, (size_t)head[1], 0, err);
    if (rc == CALF_OK && !comm_is_main(c)) {
        calf_config_init(cfg);
        rc = calf_config_parse_string(cfg, text, "config from rank 0", err);
    }
    if (rc == CALF_OK && head[2]) {
        /* rank 0 reads the checkpoint and sends each rank what it needs (load_checkpoint) */
        if (!comm_is_main(c)) {
            rs->found = true;
            snprintf(rs->path, sizeof rs->path, "%s/train/algorithm (via rank 0)", o->root_dir);
        }
        rs->via_rank0 = true;
        rc = comm_broadcast(c, &rs->hdr, sizeof rs->hdr, 0, err);
    }
    free(text);
    return rc;
}

/* Under mpirun a process that exits non-zero gets the whole job killed, and output
 * written after MPI_Finalize can be lost with it: rank 1 may leave before rank 0 has
 * printed a word. So a setup error is printed here, before the finalize that every rank
 * passes together; rank 0's is printed by rank 0 alone. */
static int train_mpi(const calf_train_options *o, calf_error *err) {
    comm *c = NULL;
    int rc = comm_mpi_init(&c, NULL, NULL, err);
    if (rc) return rc;
    calf_config cfg;
    resume_state rs;
    memset(&rs, 0, sizeof rs);
    rundir_lock lock = {.fd = -1};
    bool complete = false;
    if (o->nproc <= 1)
        rc = mpi_share_setup(c, o, &cfg, &rs, &lock, &complete, err);
    else if (!comm_is_main(c))
        rc = CALF_EINVAL; /* every rank refuses; rank 0 says why */
    else
        rc = calf_error_set(err, CALF_EINVAL,
                            "--nproc %d under an MPI launcher: the launcher decides the number of "
                            "processes (use mpirun -np N without --nproc)",
                            o->nproc);
    if (rc) {
        if (err->msg[0]) { /* rank 0's, or a rank's own failure (others cleared theirs) */
            if (comm_is_main(c)) fprintf(stderr, "calf: %s\n", err->msg);
            else fprintf(stderr, "calf: rank %d: %s\n", c->index, err->msg);
            fflush(stderr);
        }
        calf_error_clear(err);
        rundir_lock_release(&lock);
        comm_finalize(c);
        return rc;
    }
    int code = 0;
    if (!complete) {
        trainer_args wa = {o, &cfg, &rs, true, {0, ""}, true, true};
        code = trainer_worker(c, &wa);
    }
    rundir_lock_release(&lock);
    comm_finalize(c);
    calf_error_clear(err);
    return status_of_exit(code);
}

/* ---- the stepwise trainer (calf/trainer.h) ------------------------------------ */

struct calf_trainer {
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
};

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

/* calf_trainer_open, with the name the root dir's lock gives the job. */
static int stepwise_open(const calf_trainer_options *o, const char *job, bool guard_exit,
                         calf_trainer **out, calf_error *err) {
    calf_error_clear(err);
    *out = NULL;
    if (!o || !HAS_OPTION(o, progress_arg))
        return calf_error_set(err, CALF_EINVAL, "calf_trainer_open: the options were not "
                              "initialised with CALF_TRAINER_OPTIONS_INIT");
    if (!o->root_dir || !o->root_dir[0]) return calf_error_set(err, CALF_EINVAL, "root_dir is empty");
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
        rc = check_memory(&h->o, &h->cfg, E, err); /* every env is this process's */
    }
    if (rc == CALF_OK) rc = rundir_check(h->root_dir, err);
    bool complete = false;
    if (rc == CALF_OK) rc = settle_root(&h->o, &h->cfg, job, &h->lock, &h->rs, &complete, err);
    /* the caller's strings are read during open only */
    h->o.conf_path = NULL;
    h->o.conf_params = NULL;
    h->o.num_conf_params = 0;
    if (rc == CALF_OK && complete) {
        h->complete_at = h->rs.hdr.iteration;
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
    *out = h;
    return CALF_OK;
}

int calf_trainer_open(const calf_trainer_options *o, calf_trainer **out, calf_error *err) {
    return stepwise_open(o, "calf_trainer_open", false, out, err);
}

bool calf_trainer_done(const calf_trainer *h) { return !h->t || trainer_done(h->t); }

int64_t calf_trainer_iteration(const calf_trainer *h) {
    return h->t ? trainer_iteration(h->t) : h->complete_at;
}

const calf_trainer_metrics *calf_trainer_metrics_last(const calf_trainer *h) {
    return h->t ? trainer_metrics(h->t) : NULL;
}

int calf_trainer_step(calf_trainer *h, calf_error *err) {
    calf_error_clear(err);
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
    if (h->progress) h->progress(trainer_metrics(h->t), h->progress_arg);
    return CALF_OK;
}

int calf_trainer_checkpoint(calf_trainer *h, calf_error *err) {
    calf_error_clear(err);
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
    int rc = CALF_OK;
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

/* ---- calf_train ------------------------------------------------------------------ */

/* One process: the stepwise trainer run to the end, with the CLI's signal handling. */
static int train_one(const calf_train_options *o, calf_error *err) {
    calf_trainer_options to = CALF_TRAINER_OPTIONS_INIT;
    to.root_dir = o->root_dir;
    to.conf_path = o->conf_path;
    to.conf_params = o->conf_params;
    to.num_conf_params = o->num_conf_params;
    to.quiet = o->quiet;
    to.handle_signals = true;
    calf_trainer *h;
    int rc = stepwise_open(&to, "calf train", true, &h, err);
    if (rc) return rc;
    while (rc == CALF_OK && !calf_trainer_done(h)) rc = calf_trainer_step(h, err);
    /* the CLI prints no message for an interrupt: the log line said it */
    if (rc == CALF_EINTR) calf_error_clear(err);
    calf_error cerr;
    int crc = calf_trainer_close(h, &cerr);
    if (rc == CALF_OK && crc != CALF_OK) {
        rc = crc;
        *err = cerr;
    }
    return rc;
}

/* --nproc workers, the root dir's lock held by this process (and, being the lock of an
 * open file, by the workers it forks) until the job has ended. */
static int train_local(const calf_train_options *o, calf_error *err) {
    int nproc = o->nproc > 1 ? o->nproc : 1;
    if (nproc == 1) return train_one(o, err);
    calf_config cfg;
    int rc = calf_train_load_config(o, &cfg, err);
    if (rc) return rc;
    int b, n;
    if ((rc = calf_split((int)calf_config_int(&cfg, CALF_CFG_NUM_ENVS), nproc, 0, &b, &n, err)))
        return rc;
    /* every process on this machine: all the envs */
    if ((rc = check_memory(o, &cfg, (int)calf_config_int(&cfg, CALF_CFG_NUM_ENVS), err)))
        return rc;
    if ((rc = rundir_check(o->root_dir, err))) return rc;
    char job[64];
    snprintf(job, sizeof job, "calf train --nproc %d", nproc);
    rundir_lock lock;
    resume_state rs;
    bool complete = false;
    rc = settle_root(o, &cfg, job, &lock, &rs, &complete, err);
    if (rc || complete) {
        rundir_lock_release(&lock);
        return rc;
    }
    trainer_args wa = {o, &cfg, &rs, true, {0, ""}, true, false}; /* the launcher sees an early exit */
    warn_oversubscribed(nproc);
    int code = launcher_run(nproc, trainer_worker, &wa, err);
    rundir_lock_release(&lock);
    if (code == 1 && err->msg[0]) return err->status ? err->status : CALF_EIO; /* launcher itself */
    calf_error_clear(err); /* the workers' messages are on stderr already */
    return status_of_exit(code);
}

int calf_train(const calf_train_options *o, calf_error *err) {
    calf_error_clear(err);
    if (!o->root_dir || !o->root_dir[0])
        return calf_error_set(err, CALF_EINVAL, "--root_dir is empty");
    /* A file that reaches `ulimit -f` must fail its write (EFBIG), which is reported
     * and cleaned up like any other write error, rather than kill the process. */
    struct sigaction ign, old_xfsz;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    CALF_ASSERT(sigaction(SIGXFSZ, &ign, &old_xfsz) == 0); /* cannot fail for SIG_IGN */
    int rc = comm_mpi_launched() ? train_mpi(o, err) : train_local(o, err);
    CALF_ASSERT(sigaction(SIGXFSZ, &old_xfsz, NULL) == 0);
    return rc;
}
