/* pieces.h: the work-shared tree sum, for ranks that share memory (the local backend):
 * any rank folds any contiguous piece of the envs and publishes it; the pieces complete
 * the canonical tree (tree_sum.h), so who computed which piece never shows in the bits. */
#ifndef CALF_PIECES_H
#define CALF_PIECES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"
#include "parallel/comm.h"
#include "parallel/tree_sum.h"

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
/* The vector a split completion of own's pieces lands in (the same on every rank). */
float *comm_tree_shared_sum(const comm_tree *own);

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
int comm_tree_share_set(comm_tree *t, const comm_tree *owner, int set, calf_error *err);
/* What comm_tree_share_buffers asks of the shared memory on each rank, for a float tree
 * over E envs of n elements with `spare` further sets. */
size_t comm_tree_shared_bytes(int E, size_t n, int spare);

#endif
