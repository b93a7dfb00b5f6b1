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

#include "base/mem.h"
#include "calf/context.h"

/* Turn a failed MPI call into a one-line CALF_ECOMM naming the call. */
static int mpi_check(int mpi_rc, const char *call, const comm *c, calf_error *err) {
    if (mpi_rc == MPI_SUCCESS) return CALF_OK;
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(mpi_rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "?");
    return calf_error_set(err, CALF_ECOMM, "comm: %s failed on rank %d: %s (MPI error %d)", call,
                          c ? c->rank : -1, text, mpi_rc);
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
    return mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier", c, err);
}

static int mpi_allgatherv(comm *c, const void *send, void *recv, const size_t *sizes,
                          calf_error *err) {
    int *counts, *displs;
    int rc = mpi_counts(c, sizes, &counts, &displs, err);
    if (rc != CALF_OK) return rc;
    c->seq++;
    rc = mpi_check(MPI_Allgatherv(send, counts[c->index], MPI_BYTE, recv, counts, displs,
                                  MPI_BYTE, MPI_COMM_WORLD),
                   "MPI_Allgatherv", c, err);
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
    rc = mpi_check(MPI_Gatherv(send, counts[c->index], MPI_BYTE, recv, counts, displs, MPI_BYTE,
                               root, MPI_COMM_WORLD),
                   "MPI_Gatherv", c, err);
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
    rc = mpi_check(MPI_Alltoallv(send, sc, sd, MPI_BYTE, recv, rc_, rd, MPI_BYTE, MPI_COMM_WORLD),
                   "MPI_Alltoallv", c, err);
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
    return mpi_check(MPI_Bcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast", c, err);
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
};

/* Open MPI's ranks spin while they wait for a message unless mpi_yield_when_idle is set,
 * which it sets only when it knows the node is oversubscribed. A spinning rank that
 * shares its core (with the rank it waits for, another job, or the kernel's network
 * processing) takes the time slices that rank needs: ppo_cartpole on a loaded 2-core
 * machine ran 2-3 times slower spinning, while yielding costs a few microseconds per
 * collective where cores are free (bench/README.md, "Two hosts"). So calf yields unless
 * the user chose (mpirun --mca mpi_yield_when_idle 0, or the OMPI_MCA_ variable); Open
 * MPI reads it in MPI_Init. *note: the line for the rank's log (static), or NULL. */
static int choose_waiting(const char **note, calf_error *err) {
    *note = NULL;
#ifdef OPEN_MPI
    const char *set = getenv("OMPI_MCA_mpi_yield_when_idle");
    if (set && *set) {
        bool spin = strcmp(set, "0") == 0 || strcmp(set, "false") == 0 || strcmp(set, "no") == 0;
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
    if (!inited && (rc = choose_waiting(&note, err)) != CALF_OK) return rc;
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
    if (!c) {
        free(machine);
        return CALF_ENOMEM;
    }
    c->ops = &mpi_ops;
    c->rank = rank;
    c->size = size;
    c->index = rank;
    c->timeout_s = 600.0;
    c->note = note;
    c->machine = machine;
    c->machine_count = machine_count;
    if ((rc = calf_context_set_distributed(c->index, c->size, local_rank, err)) != CALF_OK) {
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
