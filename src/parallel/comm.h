/* comm.h: how the processes of a job talk: the comm object, the collectives the trainer
 * uses, built in comm.c on five tiny primitives each backend (single, local, MPI)
 * supplies, and the memory ranks on one machine may share. The canonical sum built on them
 * is tree_sum.h; work sharing over shared memory is pieces.h and claim.h. */
#ifndef CALF_COMM_H
#define CALF_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"

typedef struct comm comm;

/* Backend primitives. Every rank calls every collective in the same order. Sizes are in
 * bytes; `sizes` (size) gives each rank's blob size and must be the same on all ranks. */
typedef struct comm_ops {
    const char *name; /* "single", "local", "mpi" */
    bool measures_waits; /* comm.wait_s is kept (local); elsewhere it stays 0 */
    int (*barrier)(comm *c, calf_error *err);
    /* Every rank contributes `send` (sizes[own rank] bytes); all receive all blobs packed
     * in rank order into `recv` (sum of sizes bytes). */
    int (*allgatherv)(comm *c, const void *send, void *recv, const size_t *sizes,
                      calf_error *err);
    /* As allgatherv, but only `root` receives; recv is ignored elsewhere. */
    int (*gatherv)(comm *c, const void *send, void *recv, const size_t *sizes, int root,
                   calf_error *err);
    int (*broadcast)(comm *c, void *buf, size_t n, int root, calf_error *err);
    /* Stop the whole job now; msg is one line. Never returns. */
    void (*abort)(comm *c, const char *msg);
    /* Record this rank's one-line failure reason (see comm_report_failure). */
    void (*report_failure)(comm *c, const char *msg);
    /* Optional (NULL: not offered; single and local): every rank sends scounts[q] bytes
     * to each rank q, packed in rank order in `send`, and receives rcounts[r] bytes from
     * each rank r, packed in rank order into `recv`. */
    int (*alltoallv)(comm *c, const void *send, const size_t *scounts, void *recv,
                     const size_t *rcounts, calf_error *err);
    /* Release backend resources (MPI_Finalize, or MPI_Abort after a reported failure). */
    void (*finalize)(comm *c);
    /* Optional, NULL where the ranks share no memory (single, MPI). next_arena returns
     * the buffer the next collective's data goes in, bytes long, which every rank may
     * write (its own parts) and, after gathered, read: gathered completes that
     * collective and returns the same buffer, readable until this rank's next
     * collective. NULL with err set if bytes do not fit, or on failure. */
    void *(*next_arena)(comm *c, size_t bytes, calf_error *err);
    const void *(*gathered)(comm *c, calf_error *err);
    /* Optional, as above. Collective: this rank's region of `bytes` (ranks may differ),
     * zeroed, which every rank can read and write for the rest of the job; peers[r]
     * (size entries) receives rank r's. */
    int (*shared_alloc)(comm *c, size_t bytes, void **peers, calf_error *err);
    /* Optional, as above: bytes shared_alloc can still hand out in all (the same on
     * every rank). */
    size_t (*shared_left)(const comm *c);
    /* Optional (NULL: single): see comm_progress. */
    void (*progress)(comm *c);
} comm_ops;

struct comm {
    const comm_ops *ops;
    int rank;          /* -1 for the single backend (ALF's convention), else 0..size-1 */
    int size;          /* number of processes in the job */
    int index;         /* rank as an array index: 0 for the single backend */
    double timeout_s;  /* bound on any wait (local and MPI backends); comm_set_timeout */
    double wait_s;     /* seconds spent waiting for other ranks in collectives (where
                        * ops->measures_waits; 0 elsewhere) */
    uint64_t seq;      /* collectives completed by this rank (the same on every rank) */
    bool failed;       /* comm_report_failure was called */
    bool broken;       /* a wait failed: the local backend refuses further collectives */
    const char *note;  /* one line for the rank's log about how the backend waits, or NULL
                        * (static storage) */
    int *machine;      /* MPI: the ranks on this rank's machine, ascending (machine_count of
                        * them); NULL: every rank is on this machine */
    int machine_count;
    void *impl;        /* backend state */
};

/* ---- the comm object ---------------------------------------------------------------- */

/* The one-process communicator (rank -1, size 1): everything is local, no shared memory.
 * *out is owned by the caller: release with comm_finalize. Fails only with CALF_ENOMEM
 * (*out NULL). */
int comm_single(comm **out, calf_error *err);
int comm_rank(const comm *c);  /* -1 for single */
int comm_size(const comm *c);
/* Whether this is the job's main process (index 0: the single process, or rank 0), the
 * one that writes the job's files. Inside calf, code that holds the job's comm asks it
 * this way; the public calf_context (calf/context.h) is set from the same numbers when a
 * process joins a job, for C users and code that has no comm. */
bool comm_is_main(const comm *c);
const char *comm_backend_name(const comm *c);
/* Bound every wait of the local and MPI backends (default 600 s): a wait fails when a
 * rank that has not arrived has shown no sign of life for this long (comm_progress). */
void comm_set_timeout(comm *c, double secs);
/* This rank is working, not stuck. Long work between collectives (env steps, rank 0's
 * evaluation) calls this now and then, and a rank waiting in a collective times out only
 * when some rank that has not arrived has shown no sign of life (an arrival or this call)
 * for the timeout: a slow iteration is not taken for a stuck rank, while a stopped one, or
 * one stuck inside an env step, still is. Cheap enough to call every env step (a clock
 * read; under MPI an MPI_Iprobe at most every PROGRESS_POLL_S to answer roll calls). Not
 * a collective; no result depends on it. */
void comm_progress(comm *c);
/* Whether rank r runs on the same machine as this rank (the memory both use adds up). */
bool comm_same_machine(const comm *c, int r);
/* Record this rank's one-line failure reason so that it reaches the user exactly once:
 * the local backend stores it for the launcher, which prints "calf: rank R failed: ...";
 * single and MPI print it to stderr now. The first message wins. */
void comm_report_failure(comm *c, const char *msg);
/* Stop the whole job with exit status 1 (local: record msg, raise the abort flag every
 * peer's wait watches, exit; MPI: MPI_Abort). Never returns. The library never calls it
 * (its failures are statuses): it is for programs that run their own workers. */
_Noreturn void comm_abort(comm *c, const char *msg);
/* Release c (NULL is fine). MPI: MPI_Finalize, or MPI_Abort when this rank reported a
 * failure, so that its peers never wait forever. */
void comm_finalize(comm *c);

/* ---- collectives (call on every rank, in the same order) ---------------------------- */

int comm_barrier(comm *c, calf_error *err);
/* Copy root's n bytes of buf to every rank's buf. */
int comm_broadcast(comm *c, void *buf, size_t n, int root, calf_error *err);
/* *out = OR over ranks of (flag != 0); e.g. agree to stop after Ctrl-C reached any rank. */
int comm_any(comm *c, int flag, int *out, calf_error *err);
/* The trainer's decision at the end of an iteration, in one collective: *any_stop = OR
 * over ranks of (stop != 0); *first_failed = the lowest rank index whose `failed` is
 * non-zero, or -1 when none. */
int comm_agree(comm *c, int stop, int failed, int *any_stop, int *first_failed,
               calf_error *err);
/* All ranks compare their n-byte digest; a mismatch returns CALF_ECOMM on every rank,
 * naming the ranks that differ from rank 0. */
int comm_check_equal(comm *c, const void *digest, size_t n, calf_error *err);
/* All ranks compare n values that must be the same everywhere (sizes that records,
 * buffers or collectives depend on), names[i] saying what vals[i] is: on a mismatch every
 * rank returns CALF_ECOMM, *which the first value that differs, and the message names
 * it, rank 0's value and each rank that differs with its own ("ranks disagree on NAME:
 * rank 0 has A, rank 2 has B"). *which is -1 when they agree. */
int comm_check_agree(comm *c, const int64_t *vals, const char *const *names, int n,
                     int *which, calf_error *err);
/* Ranks hold contiguous blocks of a global (total, rec_size) record array in rank order,
 * `count` records each. Rank 0 (the single process too) receives all `total` records in
 * global order into `all` (caller-allocated, total * rec_size bytes); elsewhere all may
 * be NULL. Every rank fails alike with CALF_ECOMM, before any record moves, when the
 * counts do not add up to total or the ranks' rec_size differ (rank 0 never receives
 * more than total * rec_size bytes, whatever a rank would send). */
int comm_gather_records(comm *c, const void *local, size_t rec_size, int count, int total,
                        void *all, calf_error *err);

/* ---- a rank's slice of a vector ------------------------------------------------------ */

/* A rank's part [lo, hi) of n elements in a split completion: whole runs of
 * COMM_SLICE_ELEMS (so no two ranks write one cache line), as evenly as they go. */
enum { COMM_SLICE_ELEMS = 512 };
void comm_slice(const comm *c, size_t n, size_t *lo, size_t *hi);
/* The same for rank q of P. */
void comm_slice_of(int P, int q, size_t n, size_t *lo, size_t *hi);

/* ---- shared memory (ranks on one machine: the local backend) -------------------------- */

/* Memory every rank can reach (see comm_ops.shared_alloc): false where the ranks share
 * none, and then comm_shared_alloc must not be called. */
bool comm_shares_memory(const comm *c);
int comm_shared_alloc(comm *c, size_t bytes, void **peers, calf_error *err);
/* n rounded up to a whole number of 64-byte cache lines: how the parts of a rank's shared
 * region are laid out, so that no two parts (nor two ranks' writes) share a line. */
static inline size_t comm_round64(size_t n) { return (n + 63) & ~(size_t)63; }
/* The next part of a region laid out in comm_round64 steps: base + *off (NULL when base is
 * NULL: only measuring), then *off moves past `bytes`. */
static inline void *comm_carve(unsigned char *base, size_t *off, size_t bytes) {
    void *part = base ? base + *off : NULL;
    *off += comm_round64(bytes);
    return part;
}
/* Bytes of shared memory comm_shared_alloc can still hand out, all ranks' regions
 * together, each rounded up to 64 bytes (0 where there is none). */
size_t comm_shared_left(const comm *c);

/* ---- for the modules built on the primitives (tree_sum.c, pieces.c) ----------------- */

/* A (size) array of `bytes` for every rank, as the primitives take sizes; caller frees.
 * NULL (CALF_ENOMEM in err) when memory runs out. */
size_t *comm_equal_sizes(const comm *c, size_t bytes, calf_error *err);
/* What a failed ops->gathered said: CALF_ECOMM, or CALF_EINTR when the job was stopped. */
int comm_gathered_status(const calf_error *err);

/* ---- local backend: fork + shared memory (comm_local.c) ------------------------------ */

/* The shared region, created by the supervisor BEFORE fork (an anonymous MAP_SHARED
 * mapping, so nothing is visible to other programs). arena_bytes bounds the payload of
 * one collective (all ranks' blobs together); 0 reserves a generous default with
 * MAP_NORESERVE (pages are only used when touched). A collective that needs more fails
 * with CALF_ENOMEM naming both sizes. */
typedef struct comm_local_shared comm_local_shared;
int comm_local_create(comm_local_shared **out, int nproc, size_t arena_bytes,
                      calf_error *err);
/* In the child for `rank`: a comm on the shared region (owned by the caller:
 * comm_finalize). The region stays owned by the supervisor. */
int comm_local_attach(comm_local_shared *sh, int rank, comm **out, calf_error *err);
/* Supervisor: rank has exited (why: "exit status 3", "killed by signal 9 (SIGKILL)").
 * Collectives waiting for it fail at once; when failed, every wait of every rank fails
 * (the abort flag). */
void comm_local_mark_exited(comm_local_shared *sh, int rank, bool failed, const char *why);
/* In a rank: its worker function has returned (whatever it returned), so an exit now is
 * the end of its job, not an exit() in the middle of it (a plug-in's). */
void comm_local_mark_finished(comm *c);
/* Supervisor: whether rank marked itself finished. */
bool comm_local_finished(const comm_local_shared *sh, int rank);
/* Supervisor: every rank is forked; comm_local_await_start returns. */
void comm_local_start(comm_local_shared *sh);
/* In a rank: sleep until the supervisor has forked every rank, so that the first ones do
 * not take the cores it needs to fork the rest (with hundreds of ranks on a few cores,
 * forking would take seconds, with the supervisor deaf to signals). Returns only then:
 * a supervisor that dies first takes its workers with it (PR_SET_PDEATHSIG). */
void comm_local_await_start(comm *c);
/* Supervisor: give up on an interrupted job in secs (0: now): from then on every wait of
 * every rank fails at once with CALF_EINTR. The ranks keep the deadline themselves, so it
 * holds even when the supervisor cannot get a core. */
void comm_local_stop_after(comm_local_shared *sh, double secs);
/* Supervisor: the failure message rank stored with comm_report_failure or comm_abort
 * ("" if none), copied into buf (cap bytes, NUL-terminated). */
void comm_local_failure_message(const comm_local_shared *sh, int rank, char *buf,
                                size_t cap);
size_t comm_local_arena_bytes(const comm_local_shared *sh);
/* Supervisor: the rank that raised the abort flag (comm_abort or mark_exited), or -1. */
int comm_local_abort_rank(const comm_local_shared *sh);
void comm_local_destroy(comm_local_shared *sh); /* NULL is fine */

/* ---- MPI backend (comm_mpi.c) -------------------------------------------------------- */

/* True when the environment says an MPI launcher started this process (mpirun/mpiexec,
 * srun with more than one task). Works whether or not calf was built with MPI. */
bool comm_mpi_launched(void);
/* MPI_Init, MPI_COMM_WORLD; sets and finalizes the per-process context (rank, size, and
 * the local rank from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)). Without MPI compiled
 * in, fails with CALF_EINVAL saying so. *out is owned by the caller: comm_finalize. */
int comm_mpi_init(comm **out, int *argc, char ***argv, calf_error *err);

#endif
