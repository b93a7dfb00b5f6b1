/* work_share.h: work sharing over a job's envs, for ranks that share memory (the local
 * backend), as PPO and SAC use it: every rank's per-env data in shared memory, rounds in
 * which a rank computes its own envs a few at a time and then takes the back half of what
 * a slower rank has left, and the tree sums whose pieces any rank may fold. Which rank
 * computes an env never shows in the bits; only the time it takes changes. */
#ifndef CALF_WORK_SHARE_H
#define CALF_WORK_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"
#include "parallel/claim.h"
#include "parallel/comm.h"
#include "parallel/pieces.h"
#include "parallel/tree_sum.h"

/* Envs a rank claims of its own at once, and per forward pass. Claims never take more
 * than half of what is left, so the end of a round is fine grained whatever this is (it
 * only matters to a rank with more than twice as many envs). On ppo_cartpole's --nproc 2,
 * 2 was clearly slower than 4; 6, 8, 12 and 16 were 0-3% faster, about what two
 * identical builds differ by on this machine; 8 keeps a rank's passes long (64 rows
 * there). The bits do not depend on it. */
enum { WORK_SHARE_GROUP_ENVS = 8 };

/* How many ranks after itself (cyclically) a rank out of work looks at for envs to take:
 * all of them up to 17 ranks; beyond, a claim's cost stays flat in the number of ranks
 * (a scan of every rank, for every rank, in every round grows as its square), and a slow
 * rank still has WORK_SHARE_REACH ranks before it that may take its envs. */
enum { WORK_SHARE_REACH = 16 };

/* While every rank has a core, how long a rank out of work waits for one that has not
 * opened a round yet (still in its rollout, say, or an evaluation on rank 0): all of that
 * rank's envs are still ahead of it. With more ranks than cores it does not wait: the
 * late rank is waiting for a core, and polling would take the core from it or from a
 * rank with work. */
#define WORK_SHARE_OPEN_WAIT_S 0.02

enum { WORK_SHARE_VIEW_MAX = 1024 };
/* What an algorithm keeps per rank in shared memory, after the rank's claim word: carve
 * lays out a view (a struct of `size` bytes) of `count` envs starting at env `begin` at
 * base (NULL: only measure) and returns its bytes (SIZE_MAX: too many to address), laying
 * parts out in comm_carve steps. Every rank lays out every rank's view alike. */
typedef struct work_share_layout {
    size_t size; /* at most WORK_SHARE_VIEW_MAX: a view is measured on the stack */
    size_t (*carve)(void *view, unsigned char *base, int begin, int count, void *ctx);
    void *ctx;
} work_share_layout;

typedef struct work_share {
    comm *c;
    int E;                /* the job's envs */
    int P, self;          /* ranks, and this one's index */
    int *begin, *count;   /* (P) every rank's envs (calf_split) */
    comm_claim **claims;  /* (P) every rank's claim word, at the start of its region */
    uint32_t round;       /* rounds so far: the claim tag, alike on every rank */
    bool slow;            /* the slow_rank test hook names this rank (calf/testing.h) */
    double open_wait_s;   /* WORK_SHARE_OPEN_WAIT_S, 0, or with the hook WORK_SHARE_SLOW_WAIT_S */
} work_share;

/* Whether c can share the work of E envs: more than one rank, shared memory, and room in
 * it for every rank's claim word and view plus `extra` bytes (what else the caller will
 * put there). The same answer on every rank. */
bool work_share_fits(const comm *c, int E, size_t extra, const work_share_layout *lay);
/* Collective: every rank's region in shared memory (its claim word, then its view), and
 * every rank's view carved into views (P structs of lay->size bytes, in rank order).
 * Tests set the slow_rank=r hook (calf/testing.h): in each round rank r holds back its
 * own envs until another rank has taken some (up to WORK_SHARE_SLOW_WAIT_S) and naps
 * before each group, and the others wait as long for a rank to open a round, so that
 * sharing happens on any machine, however loaded. Results cannot depend on either;
 * only timing does. On failure w still needs work_share_free. */
#define WORK_SHARE_SLOW_WAIT_S 30.0
int work_share_init(work_share *w, comm *c, int E, const work_share_layout *lay, void *views,
                    calf_error *err);
void work_share_free(work_share *w); /* zeroed w is fine */

/* One round of work over every rank's envs, on every rank: work_share_own hands this
 * rank its own envs from the front, at most WORK_SHARE_GROUP_ENVS at a time; once it
 * returns 0, work_share_other hands it envs other ranks have left (the back half of the
 * largest remainder), until it returns 0 too. The collective that ends the round is the
 * caller's. A slow rank (the slow_rank hook) holds back as work_share_init says, and naps
 * nap_ns before each of its own groups. */
typedef struct work_round {
    work_share *w;
    uint32_t tag;
    long nap_ns;
    bool held;            /* a slow rank has held back its first group this round */
} work_round;
void work_share_open(work_share *w, work_round *r, long nap_ns);
/* How many of this rank's envs (0: none left), the first (an index into its envs). */
int work_share_own(work_round *r, int *first);
/* How many envs of another rank (0: the round is over for this rank), whose in *rank, the
 * first in *first (an index into that rank's envs). */
int work_share_other(work_round *r, int *rank, int *first);

/* The trees a work-shared sum folds into: own holds this rank's envs (shared buffers,
 * comm_tree_share_buffers, or private); the first pieces taken from other ranks go to
 * the nlent trees lent spare sets of own's buffers (comm_tree_share_set), published
 * where they lie; any further piece to spare, a private tree whose blocks are copied
 * when put, so that it serves every one. */
typedef struct work_share_trees {
    comm_tree *own;
    comm_tree *lent; /* (nlent) */
    int nlent;
    comm_tree *spare;
} work_share_trees;
/* pass computes count envs of rank's from first and folds their partials into tree, in
 * env order; the result may depend only on the envs, never on the rank that runs it. */
typedef void (*work_share_pass)(void *ctx, int rank, int first, int count, comm_tree *tree);
/* One round of a work-shared sum of n-element partials: opens p (with own's shared
 * buffers, if it has them), folds this rank's envs and then others' with pass, and puts
 * every piece; *taken grows by the envs taken from other ranks. The caller completes the
 * sum with comm_tree_pieces_sum or comm_tree_pieces_fold. */
int work_share_sum_round(work_share *w, comm_tree_pieces *p, size_t n,
                         const work_share_trees *trees, long nap_ns, work_share_pass pass,
                         void *ctx, int64_t *taken, calf_error *err);

#endif
