/* comm.h: the canonical env-ordered sum that makes N-process training bit-identical to
 * 1-process training (docs/DESIGN.md, "The one idea"), and the collectives the trainer uses,
 * built in comm.c on five tiny primitives each backend (single, local, MPI) supplies. */
#ifndef CALF_COMM_H
#define CALF_COMM_H

#include <stdatomic.h>
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
} comm_ops;

struct comm {
    const comm_ops *ops;
    int rank;          /* -1 for the single backend (ALF's convention), else 0..size-1 */
    int size;          /* number of processes in the job */
    int index;         /* rank as an array index: 0 for the single backend */
    double timeout_s;  /* bound on any wait (local backend); comm_set_timeout */
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
 * *out is owned by the caller: release with comm_finalize. Always returns CALF_OK. */
int comm_single(comm **out);
int comm_rank(const comm *c);  /* -1 for single */
int comm_size(const comm *c);
const char *comm_backend_name(const comm *c);
/* Bound every wait of the local backend (default 600 s). MPI collectives cannot time
 * out; there a failing rank aborts the job instead. */
void comm_set_timeout(comm *c, double secs);
/* Whether rank r runs on the same machine as this rank (the memory both use adds up). */
bool comm_same_machine(const comm *c, int r);
/* Record this rank's one-line failure reason so that it reaches the user exactly once:
 * the local backend stores it for the launcher, which prints "calf: rank R failed: ...";
 * single and MPI print it to stderr now. The first message wins. */
void comm_report_failure(comm *c, const char *msg);
/* Stop the whole job with exit status 1 (local: record msg, raise the abort flag every
 * peer's wait watches, exit; MPI: MPI_Abort). Never returns. */
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
/* Ranks hold contiguous blocks of a global (total, rec_size) record array in rank order,
 * `count` records each. Rank 0 (the single process too) receives all `total` records in
 * global order into `all` (caller-allocated, total * rec_size bytes); elsewhere all may
 * be NULL. Rank 0 fails with CALF_ECOMM when the counts do not add up to total. */
int comm_gather_records(comm *c, const void *local, size_t rec_size, int count, int total,
                        void *all, calf_error *err);

/* ---- canonical env-ordered sum ------------------------------------------------------ */

/* Sums E per-env partial vectors (n elements each) over a fixed binary tree on the global
 * env index: nodes are aligned blocks [k*2^j, (k+1)*2^j) clipped to [0,E); a node is
 * left + right (elementwise, left operand first), or just its left half when its right
 * half lies wholly beyond E. This process owns envs [begin, begin+count) and folds their
 * partials as they are produced with a stack of block partials (a binary counter), so at
 * most 2*ceil(log2 E)+2 vectors are alive. comm_tree_allreduce exchanges the blocks and
 * every rank completes the same tree, so the result is bit-identical for any split of
 * [0,E) into contiguous ranges in rank order. The struct is visible so it can be embedded;
 * treat its fields as private. */
typedef struct comm_tree {
    size_t n;          /* elements per vector */
    size_t elem;       /* bytes per element: 4 (float) or 8 (double) */
    int E;             /* global number of envs */
    int begin, count;  /* this process's envs */
    int pushed;        /* envs folded in since the last reset */
    int depth;         /* blocks on the stack */
    int cap;           /* stack capacity */
    int *level;        /* (cap) block level j */
    int64_t *index;    /* (cap) block index k */
    void **buf;        /* (cap) n elements each, allocated on first use */
    bool leaf_out;     /* comm_tree_leaf handed out buf[depth] */
    unsigned char *send, *recv; /* exchange scratch, grown on demand */
    size_t send_cap, recv_cap;
    size_t *sizes;     /* (sizes_n) every rank's blob size, learned on first exchange */
    int sizes_n;
    const comm *sizes_comm;
    /* comm_tree_share_buffers: buf[] points into memory every rank can read: each rank's
     * region holds sets of cap buffers, then one vector (rank 0's is where a split
     * completion lands); this tree uses one of the sets (comm_tree_share_set) */
    bool shared;
    int sets;
    int peers, self;             /* ranks, and this one */
    unsigned char **peer_base;   /* (peers) each rank's region */
    size_t peer_bytes;           /* bytes of each rank's region */
} comm_tree;

/* Float tree for n-element vectors; E >= 1, 0 <= begin, count >= 0, begin+count <= E. */
void comm_tree_init(comm_tree *t, size_t n, int E, int begin, int count);
/* The same with double elements (use comm_tree_leaf_f64). */
void comm_tree_init_f64(comm_tree *t, size_t n, int E, int begin, int count);
/* Zeroed buffer (n elements, owned by t) for the next env's partial, envs in order
 * begin..begin+count-1. Valid until the matching comm_tree_push. */
float *comm_tree_leaf(comm_tree *t);
double *comm_tree_leaf_f64(comm_tree *t);
/* As comm_tree_leaf, without zeroing: for a caller that overwrites the same elements of
 * every leaf (e.g. nn_mlp_backward_set over the model's ranges). The elements no leaf
 * ever writes (padding) read as zero: buffers start zeroed and merges keep them so. */
float *comm_tree_leaf_raw(comm_tree *t);
/* When the next env's left sibling (the env before it, at an even index) is on top of
 * the stack as a single env's partial, its buffer, else NULL. The caller may then add the
 * next env's partial into it in place (left + right, e.g. nn_mlp_backward_add) and call
 * comm_tree_push_into_left instead of comm_tree_leaf + comm_tree_push: the same bits,
 * one pass over memory fewer. */
float *comm_tree_left_sibling(comm_tree *t);
void comm_tree_push_into_left(comm_tree *t);
/* Fold the leaf in (left + right for each completed sibling pair). */
void comm_tree_push(comm_tree *t);
/* Collective: exchange every rank's blocks and complete the tree into out (n elements of
 * the tree's type); all `count` leaves must have been pushed. Resets t for reuse. The
 * first call on a comm also exchanges and checks every rank's range (one extra
 * collective); a range that does not tile [0,E) in rank order is CALF_ECOMM everywhere.
 * Where the backend offers alltoallv and the ranks hold many blocks (a split that does
 * not fall on the tree's aligned blocks), each rank completes a slice of the elements
 * from every rank's blocks and the slices are gathered: two collectives, fewer bytes,
 * the same bits (every element is still summed over the same tree). */
int comm_tree_allreduce(comm *c, comm_tree *t, void *out, calf_error *err);
/* Discard pushed leaves; buffers are kept. */
void comm_tree_reset(comm_tree *t);
/* The same, and from now on the tree holds envs [begin, begin+count) of the same E. */
void comm_tree_restart(comm_tree *t, int begin, int count);
void comm_tree_free(comm_tree *t); /* zeroed t is fine */

/* Canonical sum of small double vectors (statistics: sums of advantages, returns,
 * counts). per_env is (count, n): this process's envs begin..begin+count-1. One
 * collective; every rank gets the same bits in out (n). */
int comm_tree_sum_f64(comm *c, int E, int begin, int count, const double *per_env, size_t n,
                      double *out, calf_error *err);

/* ---- work-shared tree sum (ranks that share memory: the local backend) -------------- */

/* When the ranks share memory, the envs whose partials make up one sum need not be
 * split by rank: any rank may fold any contiguous piece [y, z) of [0, E) (with
 * comm_tree_restart and pushes) and put it; once every env is in exactly one piece,
 * comm_tree_pieces_sum completes the same canonical tree from the pieces in env order,
 * so the bits are those of comm_tree_allreduce. Who computed which piece never shows. */
typedef struct comm_tree_pieces {
    unsigned char *base; /* the next collective's arena */
    size_t stride;       /* bytes reserved per env: a piece [y, z) lies at y * stride */
    int E;
    size_t n, elem;
    const comm_tree *shared; /* a tree with shared buffers (its peers' bases), or NULL */
    uint32_t seq;            /* the collective (stamped on every piece) */
} comm_tree_pieces;

/* True when c can run piece sums for E envs of n floats (shared memory, room in the
 * arena); the same answer on every rank. */
bool comm_tree_pieces_supported(const comm *c, int E, size_t n);
/* Start the next collective's sum (every rank, before putting) of E envs of n floats.
 * own: this rank's tree if its buffers are shared (comm_tree_share_buffers; every rank's
 * then are), else NULL. */
int comm_tree_pieces_open(comm *c, comm_tree_pieces *p, int E, size_t n, const comm_tree *own,
                          calf_error *err);
/* Publish the piece [t->begin, t->begin + pushed) folded in t (nothing if none pushed).
 * A private tree's blocks are copied, and t may be restarted at once; a shared tree's
 * are published where they lie, so t must not be restarted before the sum. */
void comm_tree_pieces_put(comm_tree_pieces *p, const comm_tree *t);
/* Collective: wait for every rank's pieces and complete the tree into out (n floats).
 * A gap or overlap between pieces is CALF_ECOMM on every rank (with shared buffers: on
 * every rank with a slice). With shared buffers (own given at open) each rank completes a
 * slice of the elements and a barrier (a second collective) ends the sum. */
int comm_tree_pieces_sum(comm *c, comm_tree_pieces *p, void *out, calf_error *err);
/* With shared buffers, the sum split between ranks and left where it is: wait for every
 * rank's pieces and complete only this rank's slice (comm_slice) of the vector all ranks
 * share (*sum). There is no closing barrier: the caller must pass one before anyone reads
 * another rank's slice of *sum, restarts a tree whose pieces were published by reference
 * (its own or a lent set), or starts the next sum. A rank whose slice is empty (more
 * ranks than runs of COMM_SLICE_ELEMS) only waits: the ranks that fold check the pieces. */
int comm_tree_pieces_fold(comm *c, comm_tree_pieces *p, float **sum, calf_error *err);
/* A rank's part [lo, hi) of n elements in a split completion: whole runs of
 * COMM_SLICE_ELEMS (so no two ranks write one cache line), as evenly as they go. */
enum { COMM_SLICE_ELEMS = 512 };
void comm_slice(const comm *c, size_t n, size_t *lo, size_t *hi);
/* The same for rank q of P. */
void comm_slice_of(int P, int q, size_t n, size_t *lo, size_t *hi);
/* The vector a split completion of own's pieces lands in (the same on every rank). */
float *comm_tree_shared_sum(const comm_tree *own);

/* Work claims, for ranks that share memory. In each round (a tag every rank agrees on,
 * e.g. the number of the minibatch) every rank opens its word over its own work items
 * [0, count) and takes them from the front; a rank out of work takes the back half of
 * the largest remainder of another rank. Claims are lock-free compare-and-swaps, so a
 * stalled rank never blocks another; the collective that ends the round is what waits.
 * The caller must make an item's result independent of who computes it. */
typedef _Atomic uint64_t comm_claim;
void comm_claim_open(comm_claim *w, uint32_t tag, int count); /* count < 2^24 */
/* Up to max items, and at most half of what is left (rounded up), from the front of
 * this rank's word: returns how many (0: none left), the first in *first. */
int comm_claim_front(comm_claim *w, uint32_t tag, int max, int *first);
/* Items from another rank (words: every rank's, P of them): of the `reach` ranks after
 * self (cyclically; P - 1 or more: all others), the one with the most left. Returns how
 * many (0: nothing left to take), whose in *victim, the first in *first. *unopened (if
 * not NULL) is set to how many of those ranks have not opened this round yet: all of
 * their items may still come. A bounded reach keeps a claim's cost flat in P. */
int comm_claim_back(comm_claim *const *words, int P, int self, int reach, uint32_t tag,
                    int *victim, int *first, int *unopened);
/* comm_claim_back for a rank out of its own work. A rank that has not opened the round
 * yet has all of its items ahead of it, so rather than leave them to it, wait up to
 * open_wait_s for it to open, yielding the core meanwhile (0: return at once). */
int comm_claim_take(comm_claim *const *words, int P, int self, int reach, uint32_t tag,
                    double open_wait_s, int *victim, int *first);
/* How ranks that share work wait for one another (the same answer on every rank but
 * *slow): *open_wait_s for comm_claim_take, COMM_OPEN_WAIT_S when every rank has a core
 * of its own, else 0 (with more ranks than cores, one that has not opened a round is
 * waiting for a core, and polling would take the core from it or from a rank with
 * work). Tests set CALF_TEST_SLOW_RANK=r: rank r is *slow (it dawdles over its own items
 * so that others certainly take some), and the others wait 0.5 s, enough for it to open
 * a round even on a loaded machine. Results cannot depend on either; only timing does. */
#define COMM_OPEN_WAIT_S 0.02
void comm_share_timing(const comm *c, bool *slow, double *open_wait_s);

/* Collective: move t's buffers to memory every rank can read, so that
 * comm_tree_pieces_put publishes this rank's blocks without copying them. Once every
 * rank has read them (comm_tree_pieces_sum ends with a barrier; after
 * comm_tree_pieces_fold the caller passes one) t may be restarted and its buffers
 * rewritten. The region has room for `spare` further sets of buffers, which
 * comm_tree_share_set lends to other trees. */
int comm_tree_share_buffers(comm *c, comm_tree *t, int spare, calf_error *err);
/* Point t (a private, empty tree of owner's n and E) at spare set `set` (1..spare) of
 * owner's region, so that its pieces too are published where they lie. Pieces of one
 * sum must each have their own set. */
void comm_tree_share_set(comm_tree *t, const comm_tree *owner, int set);
/* What comm_tree_share_buffers asks of the shared memory on each rank, for a float tree
 * over E envs of n elements with `spare` further sets. */
size_t comm_tree_shared_bytes(int E, size_t n, int spare);

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

/* The exchange format, exposed so tests can check the math without processes:
 * comm_tree_pack writes comm_tree_packed_bytes(t) bytes (a multiple of 8) describing the
 * pushed blocks; comm_tree_finish completes the tree from nranks blobs packed back to back
 * (blob r is sizes[r] bytes, possibly padded), leaving them unchanged. */
size_t comm_tree_packed_bytes(const comm_tree *t);
void comm_tree_pack(const comm_tree *t, void *buf);
/* The same for elements [lo, hi) of every block (lo <= hi <= n): a blob for completing
 * that slice of the sum (comm_tree_finish with n = hi - lo). */
size_t comm_tree_packed_slice_bytes(const comm_tree *t, size_t lo, size_t hi);
void comm_tree_pack_slice(const comm_tree *t, size_t lo, size_t hi, void *buf);
int comm_tree_finish(const void *packed, const size_t *sizes, int nranks, size_t n, size_t elem,
                     int E, void *out, calf_error *err);
/* Bytes of a blob for a range [begin, begin+count) of E envs, and the largest for any
 * range (what comm_tree_sum_f64 pads to). */
size_t comm_tree_blob_bytes(int E, int begin, int count, size_t n, size_t elem);
size_t comm_tree_blob_bytes_max(int E, size_t n, size_t elem);

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
