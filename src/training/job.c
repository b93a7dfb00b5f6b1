/* job.c: how a training job starts (calf_train): one process, `--nproc N` local workers
 * forked by the launcher, or the ranks of an MPI launcher, each after the setup that
 * job_setup.c shares (the config settled, the root dir's lock, the checkpoint to resume
 * from), then trainer_worker on every process. */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calf/train.h"
#include "calf/trainer.h"
#include "parallel/comm.h"
#include "base/mem.h"
#include "numerics/kernels.h"
#include "parallel/workers.h"
#include "records/rundir.h"
#include "training/job_setup.h"
#include "training/stepwise.h"
#include "training/trainer.h"
#include "training/trainer_config.h"
#include "training/trainer_signals.h"

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
            nproc, cpus, (double)nproc / (double)cpus, cpus, WORKERS_NICE_OVERSUBSCRIBED);
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
            if (rc == CALF_OK) rc = job_check_memory(o, cfg, here, err);
        }
        if (rc == CALF_OK) rc = rundir_check(o->root_dir, err);
        if (rc == CALF_OK) {
            /* rank 0 holds the lock for the whole job */
            char job[64];
            snprintf(job, sizeof job, "calf train, rank 0 of %d MPI ranks", comm_size(c));
            rc = job_settle_root(o, cfg, job, lock, rs, complete, err);
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
    /* a rank without memory for it fails here, and its failure aborts the job (below) */
    if (rc == CALF_OK && !comm_is_main(c) && !(text = mem_calloc((size_t)head[1] + 1, 1, err)))
        rc = CALF_ENOMEM;
    if (rc == CALF_OK) rc = comm_broadcast(c, text, (size_t)head[1], 0, err);
    if (rc == CALF_OK && !comm_is_main(c)) {
        config_init(cfg);
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
static int train_mpi(const calf_train_options *o, calf_config *cfg, calf_error *err) {
    comm *c = NULL;
    int rc = comm_mpi_init(&c, NULL, NULL, err);
    if (rc) return rc;
    resume_state rs;
    memset(&rs, 0, sizeof rs);
    rundir_lock lock = {.fd = -1};
    bool complete = false;
    if (o->nproc <= 1)
        rc = mpi_share_setup(c, o, cfg, &rs, &lock, &complete, err);
    else if (!comm_is_main(c))
        rc = CALF_EINVAL; /* every rank refuses; rank 0 says why */
    else
        rc = calf_error_set(err, CALF_EINVAL,
                            "--nproc %d under an MPI launcher: the launcher decides the number of "
                            "processes (use mpirun -np N without --nproc)",
                            o->nproc);
    if (rc) {
        /* rank 0's failure went to every rank in the head and all finalize together; a
         * rank's own (others cleared theirs) may leave its peers inside a broadcast, so
         * it is reported as a failure, which makes the finalize abort the job */
        if (err->msg[0] && comm_is_main(c)) {
            fprintf(stderr, "calf: %s\n", err->msg);
            fflush(stderr);
        } else if (err->msg[0]) {
            comm_report_failure(c, err->msg);
        }
        calf_error_clear(err);
        rundir_lock_release(&lock);
        comm_finalize(c);
        return rc;
    }
    int code = 0;
    if (!complete) {
        trainer_args wa = {o, cfg, &rs, true, {0, ""}, true, true};
        code = trainer_worker(c, &wa);
    }
    rundir_lock_release(&lock);
    comm_finalize(c);
    calf_error_clear(err);
    return status_of_exit(code);
}

/* ---- calf_train ------------------------------------------------------------------ */

/* One process: the stepwise trainer run to the end, with the CLI's signal handling. */
static int train_one(const calf_train_options *o, calf_error *err) {
    calf_trainer_options to = CALF_TRAINER_OPTIONS_INIT;
    to.root_dir = o->root_dir;
    to.conf_path = o->conf_path;
    to.conf_text = o->conf_text;
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
static int train_workers(const calf_train_options *o, calf_config *cfg, calf_error *err) {
    int nproc = o->nproc;
    int rc = calf_train_load_config(o, cfg, err);
    if (rc) return rc;
    int b, n;
    if ((rc = calf_split((int)calf_config_int(cfg, CALF_CFG_NUM_ENVS), nproc, 0, &b, &n, err)))
        return rc;
    /* every process on this machine: all the envs */
    if ((rc = job_check_memory(o, cfg, (int)calf_config_int(cfg, CALF_CFG_NUM_ENVS), err)))
        return rc;
    if ((rc = rundir_check(o->root_dir, err))) return rc;
    char job[64];
    snprintf(job, sizeof job, "calf train --nproc %d", nproc);
    rundir_lock lock;
    resume_state rs;
    bool complete = false;
    rc = job_settle_root(o, cfg, job, &lock, &rs, &complete, err);
    if (rc || complete) {
        rundir_lock_release(&lock);
        return rc;
    }
    /* the launcher's SIGINT/SIGTERM handlers are the process's, as a trainer's are */
    if (!trainer_signals_claim()) {
        rundir_lock_release(&lock);
        return calf_error_set(err, CALF_EINVAL, "calf_train: %s", TRAINER_SIGNALS_TAKEN);
    }
    trainer_args wa = {o, cfg, &rs, true, {0, ""}, true, false}; /* the launcher sees an early exit */
    warn_oversubscribed(nproc);
    int code = workers_run(nproc, trainer_worker, &wa, err);
    trainer_signals_unclaim();
    rundir_lock_release(&lock);
    if (code == 1 && err->msg[0]) return err->status ? err->status : CALF_EIO; /* launcher itself */
    calf_error_clear(err); /* the workers' messages are on stderr already */
    return status_of_exit(code);
}

/* A job under an MPI launcher or of --nproc workers. Its config is some 140 KiB, more than a
 * host thread's stack may hold (calf_train runs on any thread of an embedding host), so it
 * is on the heap. */
static int train_processes(const calf_train_options *o, calf_error *err) {
    calf_config *cfg = calf_config_new(err);
    if (!cfg) return CALF_ENOMEM;
    int rc = comm_mpi_launched() ? train_mpi(o, cfg, err) : train_workers(o, cfg, err);
    calf_config_free(cfg);
    return rc;
}

int calf_train(const calf_train_options *o, calf_error *err) {
    calf_error_clear(err);
    if (!o) return calf_error_set(err, CALF_EINVAL, "calf_train: the options are NULL");
    if (!o->root_dir || !o->root_dir[0])
        return calf_error_set(err, CALF_EINVAL, "--root_dir is empty");
    /* a CALF_KERNELS this build or this CPU lacks */
    if (kernels_select(err) != CALF_OK) return CALF_EINVAL;
    /* A file that reaches `ulimit -f` must fail its write (EFBIG), which is reported
     * and cleaned up like any other write error, rather than kill the process. */
    struct sigaction ign, old_xfsz;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    CALF_ASSERT(sigaction(SIGXFSZ, &ign, &old_xfsz) == 0); /* cannot fail for SIG_IGN */
    /* one process unless launched by MPI or given --nproc */
    int rc = !comm_mpi_launched() && o->nproc <= 1 ? train_one(o, err) : train_processes(o, err);
    CALF_ASSERT(sigaction(SIGXFSZ, &old_xfsz, NULL) == 0);
    return rc;
}
