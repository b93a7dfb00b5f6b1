/* tree_sum.h: the canonical env-ordered sum that makes N-process training bit-identical
 * to 1-process training (docs/DESIGN.md, "The one idea"): per-env partials folded over a
 * fixed binary tree on the global env index, completed across ranks by comm's primitives. */
#ifndef CALF_TREE_SUM_H
#define CALF_TREE_SUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"
#include "parallel/comm.h"

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

/* Float tree for n-element vectors; E >= 1, 0 <= begin, count >= 0, begin+count <= E.
 * Every buffer its leaves need is made here (leaves never allocate). CALF_ENOMEM when
 * memory runs out: comm_tree_free frees what was made. */
int comm_tree_init(comm_tree *t, size_t n, int E, int begin, int count, calf_error *err);
/* The same with double elements (use comm_tree_leaf_f64). */
int comm_tree_init_f64(comm_tree *t, size_t n, int E, int begin, int count, calf_error *err);
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
/* The same, and from now on the tree holds envs [begin, begin+count) of the same E; the
 * buffers that range needs beyond those t has are made (CALF_ENOMEM if they cannot be). */
int comm_tree_restart(comm_tree *t, int begin, int count, calf_error *err);
void comm_tree_free(comm_tree *t); /* zeroed t is fine */

/* Canonical sum of small double vectors (statistics: sums of advantages, returns,
 * counts). per_env is (count, n): this process's envs begin..begin+count-1. One
 * collective; every rank gets the same bits in out (n). */
int comm_tree_sum_f64(comm *c, int E, int begin, int count, const double *per_env, size_t n,
                      double *out, calf_error *err);

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

/* ---- for the work-shared sum (pieces.c): the blob format and the completion ---------- */

/* A blob: COMM_TREE_HEADER_WORDS int64 (magic, E, n, elem, begin, count, nblocks), then
 * (level, index) of each block, then the blocks' elements, padded to 8 bytes. */
enum { COMM_TREE_HEADER_WORDS = 7 };
#define COMM_TREE_MAGIC INT64_C(0x45455254464c4143)     /* "CALFTREE" */
#define COMM_TREE_REF_MAGIC INT64_C(0x46455254464c4143) /* "CALFTREF": blocks by reference */
/* Bytes of a blob of nblocks blocks of n elements. */
size_t comm_tree_blob_bytes_for(int nblocks, size_t n, size_t elem);
/* Number of maximal aligned blocks of [a, b). */
int comm_tree_range_blocks(int64_t a, int64_t b);
/* A block (level, index) from a blob lies at env `at` and ends by env `end` of E. */
bool comm_tree_block_at(int64_t level, int64_t index, int64_t at, int64_t end, int E);
/* Stack depth a tree over E envs can reach: a binary counter's blocks plus the leaf. */
int comm_tree_cap(int E);

/* The completion of the tree from blocks pushed in env order (from blobs, pieces, or a
 * lone rank's stack), into out (n elements of elem bytes); lo and hi (set after init,
 * default [0, n)) restrict it to a slice of the elements. Blocks are read where they lie
 * and must stay until comm_tree_fold_finish. The struct is visible so it can live on the
 * stack; treat its fields as private. */
enum { COMM_TREE_FOLD_LOCAL = 64 }; /* blocks (and merges) recorded without allocating */
typedef struct comm_tree_fold_op {
    int dst, a, b; /* stack position dst = a + b; operand k >= 0: block k, else position -1-k */
} comm_tree_fold_op;
typedef struct comm_tree_fold {
    size_t n, elem;
    size_t lo, hi;    /* the elements folded: all, or one rank's slice [lo, hi) */
    void *out;        /* stack position 0: the root lands in place */
    int count, room;  /* blocks pushed; room for blocks (and ops, of which there are fewer) */
    int nops, depth, max_pos;
    const void **vec; /* (room) the blocks, in env order */
    comm_tree_fold_op *ops; /* (room) */
    int code[66];     /* the counter: each position's operand, level and index */
    int level[66];
    int64_t index[66];
    const void *local_vec[COMM_TREE_FOLD_LOCAL];
    comm_tree_fold_op local_ops[COMM_TREE_FOLD_LOCAL];
} comm_tree_fold;
void comm_tree_fold_init(comm_tree_fold *f, size_t n, size_t elem, void *out);
/* The next block in env order: the aligned block (level, index), n elements at vec.
 * CALF_ENOMEM when the record of blocks cannot grow (f stays as it was). */
int comm_tree_fold_push(comm_tree_fold *f, const void *vec, int level, int64_t index,
                        calf_error *err);
/* Every block pushed: complete [lo, hi) of the sum into out; CALF_ENOMEM when a deep
 * stack's temporaries cannot be allocated. */
int comm_tree_fold_finish(comm_tree_fold *f, calf_error *err);
void comm_tree_fold_free(comm_tree_fold *f);

#endif
