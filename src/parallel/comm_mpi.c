/* comm_mpi.c: the MPI backend (`mpirun -np N calf train ...`, multi-machine). Each comm
 * primitive maps to one MPI call on MPI_COMM_WORLD, every result checked (llm.c's mpiCheck
 * pattern). Launcher detection works without MPI, so the CLI can say what is missing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"

static bool env_int_at_least(const char *name, long min) {
    const char *s = getenv(name);
    if (!s || !*s) return false;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    return end && *end == '\0' && v >= min;
}

/* An MPI process manager's own variables: Open MPI's mpirun, MPICH/Hydra (PMI), PMIx
 * (Open MPI 4 and 5, srun --mpi=pmix). */
static bool mpi_process_manager(void) {
    return env_int_at_least("OMPI_COMM_WORLD_SIZE", 1) || env_int_at_least("PMI_SIZE", 1) ||
           env_int_at_least("PMIX_RANK", 0);
}

/* The tasks of the srun step this process is one of, or 0 outside a step. A batch script
 * (sbatch --ntasks=N) runs outside any step: it has SLURM_NTASKS but no SLURM_STEP_*. */
static long slurm_step_tasks(void) {
    const char *s = getenv("SLURM_STEP_NUM_TASKS");
    char *end = NULL;
    long v = s && *s ? strtol(s, &end, 10) : 0;
    return end && *end == '\0' && v > 0 ? v : 0;
}

bool comm_mpi_launched(void) {
    /* srun only when its step has several tasks (a one-task step is one process) */
    return mpi_process_manager() || slurm_step_tasks() >= 2;
}

#if CALF_HAVE_MPI

#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/mem.h"
#include "calf/context.h"

#define HOST_LEN 64 /* a rank's host name as its messages print it (cut to fit) */

/* The backend's state (comm.impl). */
typedef struct mpi_state {
    bool spin;                /* the user chose spinning waits (mpi_yield_when_idle 0) */
    char (*host)[HOST_LEN];   /* (size) every rank's host name, for naming a stuck rank */
    unsigned long long asked; /* the send buffer of this rank's last roll call: it must
                                 outlive the sends, which may still be pending after it */
    double progress_polled;   /* the clock when comm_progress last looked for roll calls */
} mpi_state;

static void mpi_state_free(mpi_state *m) {
    if (m) free(m->host);
    free(m);
}

/* Turn a failed MPI call into a one-line CALF_ECOMM naming the call. */
static int mpi_check(int mpi_rc, const char *call, const comm *c, calf_error *err) {
    if (mpi_rc == MPI_SUCCESS) return CALF_OK;
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(mpi_rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "?");
    return calf_error_set(err, CALF_ECOMM, "comm: %s failed on rank %d: %s (MPI error %d)", call,
                          c ? c->rank : -1, text, mpi_rc);
}

/* ---- bounded waits --------------------------------------------------------------------
 * MPI's blocking collectives cannot time out, so a rank that stops (SIGSTOP, a stuck env, a
 * node MPI does not notice) would hang the job. Each collective is started nonblocking and
 * waited for here: MPI_Test (which drives MPI's progress), yielding the core as Open MPI's
 * mpi_yield_when_idle does unless the user chose spinning, napping 1 ms once a wait is
 * long. After TrainerConfig.collective_timeout_secs (comm.timeout_s) the rank holds a roll
 * call: it asks every other rank, point to point, whether it is alive, and the ranks that
 * do not answer within ROLLCALL_GRACE_S are named with their hosts. Every rank answers roll
 * calls while it waits, and while it works between collectives from comm_progress (at most
 * every PROGRESS_POLL_S), saying it is busy: when every rank answered and some were busy,
 * the wait goes on for another timeout (a slow iteration), while a rank stopped or stuck
 * inside an env step answers nothing. No result depends on any of this: it only decides
 * when a rank gives up. */
#define ROLLCALL_TAG 30001       /* "are you there?": the asker's collective number */
#define PRESENT_TAG 30002        /* "here": the answerer's collective number */
#define ROLLCALL_GRACE_S 2.0     /* how long the asker waits for answers */
#define SPIN_POLLS 256           /* MPI_Test calls before the clock is read */
#define NAP_AFTER_S 0.1          /* a wait this long naps 1 ms between polls */
#define PROGRESS_POLL_S 0.05     /* comm_progress looks for roll calls at most this often */
#define BUSY_BIT (1ULL << 63)    /* in an answer: the rank works between collectives */

/* Answer every roll call that has come in: this rank is alive, waiting in collective
 * #c->seq, or busy working towards it. Best effort: the answer is 8 bytes, sent eagerly by
 * every MPI. */
static void answer_rollcalls(comm *c, bool busy) {
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, ROLLCALL_TAG, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS ||
            !flag)
            return;
        unsigned long long asked = 0, mine = c->seq | (busy ? BUSY_BIT : 0);
        if (MPI_Recv(&asked, 1, MPI_UNSIGNED_LONG_LONG, st.MPI_SOURCE, ROLLCALL_TAG,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
        MPI_Request req;
        if (MPI_Isend(&mine, 1, MPI_UNSIGNED_LONG_LONG, st.MPI_SOURCE, PRESENT_TAG,
                      MPI_COMM_WORLD, &req) == MPI_SUCCESS)
            MPI_Wait(&req, MPI_STATUS_IGNORE); /* local completion: the message is eager */
    }
}

static void nap_s(double s) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(s * 1e9)};
    nanosleep(&ts, NULL);
}

/* The roll call after a timeout in `call` (collective #c->seq): CALF_ECOMM naming the ranks
 * that did not answer, and where they run. CALF_OK when the collective completed after
 * all while the answers came in (a rank that was only slow), or with *busy set when every
 * rank answered and some are still working towards it. */
static int rollcall(comm *c, MPI_Request *req, const char *call, double waited, bool *busy,
                    calf_error *err) {
    mpi_state *m = c->impl;
    unsigned char *here = mem_calloc((size_t)c->size, 1, err);
    MPI_Request *asks = here ? mem_calloc((size_t)c->size, sizeof *asks, err) : NULL;
    if (!asks) {
        free(here);
        return CALF_ENOMEM;
    }
    unsigned long long seq = m->asked = c->seq;
    for (int r = 0; r < c->size; r++) {
        asks[r] = MPI_REQUEST_NULL;
        if (r == c->index)
            here[r] = 1;
        else
            MPI_Isend(&m->asked, 1, MPI_UNSIGNED_LONG_LONG, r, ROLLCALL_TAG, MPI_COMM_WORLD,
                      &asks[r]);
    }
    int answered = 1, done = 0;
    *busy = false;
    double until = calf_monotonic_s() + ROLLCALL_GRACE_S;
    while (answered < c->size && calf_monotonic_s() < until) {
        answer_rollcalls(c, false); /* the others may be asking too */
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, PRESENT_TAG, MPI_COMM_WORLD, &flag, &st) == MPI_SUCCESS &&
            flag) {
            unsigned long long theirs = 0;
            MPI_Recv(&theirs, 1, MPI_UNSIGNED_LONG_LONG, st.MPI_SOURCE, PRESENT_TAG,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (!here[st.MPI_SOURCE]) answered++;
            here[st.MPI_SOURCE] = 1;
            if (theirs & BUSY_BIT) *busy = true;
            continue;
        }
        nap_s(1e-3);
    }
    /* a rank that did not answer yet takes its ask later: MPI completes the send alone */
    for (int r = 0; r < c->size; r++)
        if (asks[r] != MPI_REQUEST_NULL) MPI_Request_free(&asks[r]);
    free(asks);
    if (MPI_Test(req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) {
        free(here);
        return CALF_OK;
    }
    char list[512] = "";
    size_t used = 0;
    int missing = 0;
    for (int r = 0; r < c->size; r++) {
        if (here[r]) continue;
        if (missing++ < 8 && used < sizeof list) {
            int w = snprintf(list + used, sizeof list - used, "%s%d (host %s)",
                             missing > 1 ? ", " : "", r, m->host[r]);
            if (w > 0) used += (size_t)w;
        }
    }
    free(here);
    if (missing == 0 && *busy) return CALF_OK;
    *busy = false;
    if (missing == 0)
        return calf_error_set(err, CALF_ECOMM,
                              "comm: %s (collective #%llu) timed out after %.3g s on rank %d; "
                              "every rank answered, so they wait in different collectives",
                              call, seq, waited, c->rank);
    return calf_error_set(err, CALF_ECOMM,
                          "comm: %s (collective #%llu) timed out after %.3g s on rank %d: "
                          "rank%s %s%s did not arrive "
                          "(TrainerConfig.collective_timeout_secs)",
                          call, seq, waited, c->rank, missing > 1 ? "s" : "", list,
                          missing > 8 ? ", ..." : "");
}

/* Wait for the nonblocking collective `req` (started as `call`), at most c->timeout_s. */
static int mpi_wait(comm *c, MPI_Request *req, const char *call, calf_error *err) {
    const mpi_state *m = c->impl;
    double since = -1.0;
    for (unsigned polls = 0;; polls++) {
        int done = 0, rc;
        if ((rc = mpi_check(MPI_Test(req, &done, MPI_STATUS_IGNORE), call, c, err)) != CALF_OK)
            return rc;
        if (done) return CALF_OK;
        if (polls < SPIN_POLLS) continue;
        double t = calf_monotonic_s();
        if (since < 0) since = t;
        if ((polls & 63) == 0) answer_rollcalls(c, false);
        if (t - since > c->timeout_s) {
            bool busy;
            if ((rc = rollcall(c, req, call, t - since, &busy, err)) != CALF_OK) return rc;
            if (!busy) return CALF_OK; /* it completed during the roll call */
            since = calf_monotonic_s();  /* every rank lives and some work: wait on */
            continue;
        }
        if (t - since >= NAP_AFTER_S)
            nap_s(1e-3);
        else if (!m->spin)
            sched_yield();
    }
}

/* MPI counts are int: derive counts and displacements, refusing what does not fit. */
static int mpi_counts(const comm *c, const size_t *sizes, int **counts, int **displs,
                      calf_error *err) {
    *counts = mem_alloc((size_t)c->size * sizeof **counts, err);
    *displs = *counts ? mem_alloc((size_t)c->size * sizeof **displs, err) : NULL;
    if (!*displs) {
        free(*counts);
        *counts = NULL;
        return CALF_ENOMEM;
    }
    size_t off = 0;
    for (int r = 0; r < c->size; r++) {
        if (sizes[r] > INT_MAX || off > INT_MAX) {
            free(*counts);
            free(*displs);
            *counts = *displs = NULL;
            return calf_error_set(err, CALF_ECOMM,
                                  "comm: MPI collective payload of %zu bytes at offset %zu is "
                                  "beyond MPI's int counts",
                                  sizes[r], off);
        }
        (*counts)[r] = (int)sizes[r];
        (*displs)[r] = (int)off;
        off += sizes[r];
    }
    return CALF_OK;
}

static int mpi_barrier(comm *c, calf_error *err) {
    c->seq++;
    MPI_Request req;
    int rc = mpi_check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier", c, err);
    return rc ? rc : mpi_wait(c, &req, "MPI_Ibarrier", err);
}

static int mpi_allgatherv(comm *c, const void *send, void *recv, const size_t *sizes,
                          calf_error *err) {
    int *counts, *displs;
    int rc = mpi_counts(c, sizes, &counts, &displs, err);
    if (rc != CALF_OK) return rc;
    c->seq++;
    MPI_Request req;
    rc = mpi_check(MPI_Iallgatherv(send, counts[c->index], MPI_BYTE, recv, counts, displs,
                                   MPI_BYTE, MPI_COMM_WORLD, &req),
                   "MPI_Iallgatherv", c, err);
    if (rc == CALF_OK) rc = mpi_wait(c, &req, "MPI_Iallgatherv", err);
    free(counts);
    free(displs);
    return rc;
}

static int mpi_gatherv(comm *c, const void *send, void *recv, const size_t *sizes, int root,
                       calf_error *err) {
    int *counts, *displs;
    int rc = mpi_counts(c, sizes, &counts, &displs, err);
    if (rc != CALF_OK) return rc;
    c->seq++;
    MPI_Request req;
    rc = mpi_check(MPI_Igatherv(send, counts[c->index], MPI_BYTE, recv, counts, displs,
                                MPI_BYTE, root, MPI_COMM_WORLD, &req),
                   "MPI_Igatherv", c, err);
    if (rc == CALF_OK) rc = mpi_wait(c, &req, "MPI_Igatherv", err);
    free(counts);
    free(displs);
    return rc;
}

static int mpi_alltoallv(comm *c, const void *send, const size_t *scounts, void *recv,
                         const size_t *rcounts, calf_error *err) {
    int *sc, *sd, *rc_, *rd;
    int rc = mpi_counts(c, scounts, &sc, &sd, err);
    if (rc != CALF_OK) return rc;
    if ((rc = mpi_counts(c, rcounts, &rc_, &rd, err)) != CALF_OK) {
        free(sc);
        free(sd);
        return rc;
    }
    c->seq++;
    MPI_Request req;
    rc = mpi_check(MPI_Ialltoallv(send, sc, sd, MPI_BYTE, recv, rc_, rd, MPI_BYTE,
                                  MPI_COMM_WORLD, &req),
                   "MPI_Ialltoallv", c, err);
    if (rc == CALF_OK) rc = mpi_wait(c, &req, "MPI_Ialltoallv", err);
    free(sc);
    free(sd);
    free(rc_);
    free(rd);
    return rc;
}

static int mpi_broadcast(comm *c, void *buf, size_t n, int root, calf_error *err) {
    if (n > INT_MAX)
        return calf_error_set(err, CALF_ECOMM,
                              "comm: MPI broadcast of %zu bytes is beyond MPI's int counts", n);
    c->seq++;
    MPI_Request req;
    int rc = mpi_check(MPI_Ibcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD, &req), "MPI_Ibcast",
                       c, err);
    return rc ? rc : mpi_wait(c, &req, "MPI_Ibcast", err);
}

static void mpi_report_failure(comm *c, const char *msg) {
    fprintf(stderr, "calf: rank %d failed: %s\n", c->rank, msg);
    fflush(stderr);
}

static void mpi_abort(comm *c, const char *msg) {
    if (!c->failed) mpi_report_failure(c, msg);
    fflush(NULL);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1); /* MPI_Abort does not return; if an implementation does, still stop */
}

static void mpi_finalize(comm *c) {
    mpi_state_free(c->impl);
    c->impl = NULL;
    int finalized = 0;
    if (MPI_Finalized(&finalized) != MPI_SUCCESS || finalized) return;
    if (c->failed) {
        /* Peers may be inside a collective with us; only an abort releases them. */
        fflush(NULL);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return;
    }
    calf_error err;
    if (mpi_check(MPI_Finalize(), "MPI_Finalize", c, &err) != CALF_OK)
        fprintf(stderr, "calf: %s\n", err.msg);
}

static void mpi_progress(comm *c) {
    mpi_state *m = c->impl;
    double t = calf_monotonic_s();
    if (t - m->progress_polled < PROGRESS_POLL_S) return;
    m->progress_polled = t;
    answer_rollcalls(c, true);
}

static const comm_ops mpi_ops = {
    .name = "mpi",
    .barrier = mpi_barrier,
    .allgatherv = mpi_allgatherv,
    .gatherv = mpi_gatherv,
    .broadcast = mpi_broadcast,
    .alltoallv = mpi_alltoallv,
    .abort = mpi_abort,
    .report_failure = mpi_report_failure,
    .finalize = mpi_finalize,
    .progress = mpi_progress,
};

/* Open MPI's ranks spin while they wait for a message unless mpi_yield_when_idle is set,
 * which it sets only when it knows the node is oversubscribed. A spinning rank that
 * shares its core (with the rank it waits for, another job, or the kernel's network
 * processing) takes the time slices that rank needs: ppo_cartpole on a loaded 2-core
 * machine ran 2-3 times slower spinning, while yielding costs a few microseconds per
 * collective where cores are free (bench/README.md, "Two hosts"). So calf yields unless
 * the user chose (mpirun --mca mpi_yield_when_idle 0, or the OMPI_MCA_ variable); Open
 * MPI reads it in MPI_Init. *note: the line for the rank's log (static), or NULL. */
static int choose_waiting(const char **note, bool *spin_out, calf_error *err) {
    *note = NULL;
    *spin_out = false;
#ifdef OPEN_MPI
    const char *set = getenv("OMPI_MCA_mpi_yield_when_idle");
    if (set && *set) {
        bool spin = strcmp(set, "0") == 0 || strcmp(set, "false") == 0 || strcmp(set, "no") == 0;
        *spin_out = spin;
        *note = spin ? "MPI: waiting ranks spin (mpi_yield_when_idle 0, as set)"
                     : "MPI: waiting ranks yield the core (mpi_yield_when_idle, as set)";
        return CALF_OK;
    }
    if (setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0) != 0)
        return calf_error_set(err, CALF_ENOMEM, "cannot set OMPI_MCA_mpi_yield_when_idle: %s",
                              strerror(errno));
    *note = "MPI: waiting ranks yield the core (calf's default; --mca mpi_yield_when_idle 0 "
            "to spin)";
#else
    (void)err;
#endif
    return CALF_OK;
}

/* The world ranks of `node` (the ranks sharing this rank's memory), ascending: *ranks
 * malloc'd, the caller's. */
static int machine_ranks(MPI_Comm node, int **ranks, int *count, calf_error *err) {
    int n = 0, rc;
    if ((rc = mpi_check(MPI_Comm_size(node, &n), "MPI_Comm_size(node)", NULL, err)) != CALF_OK)
        return rc;
    MPI_Group local, world;
    if ((rc = mpi_check(MPI_Comm_group(node, &local), "MPI_Comm_group", NULL, err)) != CALF_OK)
        return rc;
    if ((rc = mpi_check(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group", NULL, err)) !=
        CALF_OK) {
        MPI_Group_free(&local);
        return rc;
    }
    int *in = mem_alloc((size_t)n * sizeof *in, err);
    int *out = in ? mem_alloc((size_t)n * sizeof *out, err) : NULL;
    if (!out) {
        free(in);
        MPI_Group_free(&local);
        MPI_Group_free(&world);
        return CALF_ENOMEM;
    }
    for (int i = 0; i < n; i++) in[i] = i;
    rc = mpi_check(MPI_Group_translate_ranks(local, n, in, world, out),
                   "MPI_Group_translate_ranks", NULL, err);
    int rc_local = mpi_check(MPI_Group_free(&local), "MPI_Group_free", NULL,
                             rc == CALF_OK ? err : NULL);
    if (rc == CALF_OK) rc = rc_local;
    int rc_world = mpi_check(MPI_Group_free(&world), "MPI_Group_free", NULL,
                             rc == CALF_OK ? err : NULL);
    if (rc == CALF_OK) rc = rc_world;
    free(in);
    if (rc != CALF_OK) {
        free(out);
        return rc;
    }
    *ranks = out; /* the node's ranks were ordered by the world rank (the split's key) */
    *count = n;
    return CALF_OK;
}

int comm_mpi_init(comm **out, int *argc, char ***argv, calf_error *err) {
    *out = NULL;
    int inited = 0, rc;
    if ((rc = mpi_check(MPI_Initialized(&inited), "MPI_Initialized", NULL, err)) != CALF_OK)
        return rc;
    /* srun without an MPI plugin (--mpi=none, Debian's MpiDefault) starts tasks that share
     * no MPI world: Open MPI's MPI_Init then aborts with "NULL communicator", and an MPI
     * that starts anyway makes N one-rank jobs that all write one root dir. */
    long tasks = slurm_step_tasks();
    if (!inited && tasks >= 2 && !mpi_process_manager())
        return calf_error_set(err, CALF_EINVAL,
                              "srun started %ld tasks without an MPI plugin (no PMIx or PMI "
                              "variables), so they would not form one MPI job: run `srun "
                              "--mpi=pmix ...` (or set MpiDefault=pmix in slurm.conf)",
                              tasks);
    const char *note = NULL;
    bool spin = false;
    if (!inited && (rc = choose_waiting(&note, &spin, err)) != CALF_OK) return rc;
    if (!inited && (rc = mpi_check(MPI_Init(argc, argv), "MPI_Init", NULL, err)) != CALF_OK)
        return rc;
    /* Errors come back as codes we check, instead of MPI killing the job silently. */
    if ((rc = mpi_check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
                        "MPI_Comm_set_errhandler", NULL, err)) != CALF_OK)
        return rc;
    int rank = 0, size = 1, local_rank = 0;
    if ((rc = mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank", NULL, err)) !=
            CALF_OK ||
        (rc = mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size", NULL, err)) !=
            CALF_OK)
        return rc;
    if (tasks >= 2 && size != tasks) { /* e.g. --mpi=pmi2 with an MPI built without PMI-2 */
        if (!inited) MPI_Finalize(); /* this process's world is itself alone */
        return calf_error_set(err, CALF_EINVAL,
                              "srun started %ld tasks but MPI_COMM_WORLD has %d rank%s: calf "
                              "will not run them as separate jobs writing one root dir; run "
                              "`srun --mpi=pmix ...` (`srun --mpi=list` shows the plugins)",
                              tasks, size, size == 1 ? "" : "s");
    }
    MPI_Comm node;
    if ((rc = mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                                            MPI_INFO_NULL, &node),
                        "MPI_Comm_split_type", NULL, err)) != CALF_OK)
        return rc;
    rc = mpi_check(MPI_Comm_rank(node, &local_rank), "MPI_Comm_rank(node)", NULL, err);
    int *machine = NULL, machine_count = 0;
    if (rc == CALF_OK) rc = machine_ranks(node, &machine, &machine_count, err);
    int rc2 = mpi_check(MPI_Comm_free(&node), "MPI_Comm_free", NULL, rc == CALF_OK ? err : NULL);
    if (rc == CALF_OK) rc = rc2;
    if (rc != CALF_OK) {
        free(machine);
        return rc;
    }
    /* the comm first, before the context, which can be set only once; the context is
     * then set from the comm: the rank's one home (comm_is_main) */
    comm *c = mem_calloc(1, sizeof *c, err);
    mpi_state *m = c ? mem_calloc(1, sizeof *m, err) : NULL;
    if (m) m->host = mem_calloc((size_t)size, HOST_LEN, err);
    if (!m || !m->host) {
        mpi_state_free(m);
        free(c);
        free(machine);
        return CALF_ENOMEM;
    }
    /* every rank's host name, for the message that names a rank that stopped */
    char mine[HOST_LEN] = "";
    if (gethostname(mine, sizeof mine) != 0) snprintf(mine, sizeof mine, "?");
    mine[HOST_LEN - 1] = '\0';
    if ((rc = mpi_check(MPI_Allgather(mine, HOST_LEN, MPI_CHAR, m->host, HOST_LEN, MPI_CHAR,
                                      MPI_COMM_WORLD),
                        "MPI_Allgather(host names)", NULL, err)) != CALF_OK) {
        mpi_state_free(m);
        free(c);
        free(machine);
        return rc;
    }
    m->spin = spin;
    c->impl = m;
    c->ops = &mpi_ops;
    c->rank = rank;
    c->size = size;
    c->index = rank;
    c->timeout_s = 600.0;
    c->note = note;
    c->machine = machine;
    c->machine_count = machine_count;
    if ((rc = calf_context_set_distributed(c->index, c->size, local_rank, err)) != CALF_OK) {
        mpi_state_free(m);
        free(c);
        free(machine);
        return rc;
    }
    calf_context_finalize();
    *out = c;
    return CALF_OK;
}

#else /* !CALF_HAVE_MPI */

int comm_mpi_init(comm **out, int *argc, char ***argv, calf_error *err) {
    (void)argc, (void)argv;
    *out = NULL;
    return calf_error_set(err, CALF_EINVAL,
                          "this calf was built without MPI; install an MPI (e.g. Open MPI) and "
                          "rebuild, or use --nproc N for local processes");
}

#endif
