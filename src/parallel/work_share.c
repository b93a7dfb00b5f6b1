/* work_share.c: the one round of work sharing PPO and SAC use (work_share.h): every
 * rank's views in shared memory behind its claim word, own envs first and then a slower
 * rank's, and the tree sums whose pieces whoever folded them publishes. */
#include "parallel/work_share.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/mem.h"
#include "calf/config.h"
#include "base/clock.h"
#include "base/testing.h"

/* A rank's region: its claim word, then its view, as a whole number of cache lines
 * (how comm_shared_alloc hands regions out). SIZE_MAX when it cannot be addressed. */
static size_t region_bytes(const work_share_layout *lay, void *view, unsigned char *base,
                           int begin, int count) {
    size_t off = 0;
    comm_carve(base, &off, sizeof(comm_claim));
    size_t v = lay->carve(view, base ? base + off : NULL, begin, count, lay->ctx);
    if (v > SIZE_MAX - 64 - off) return SIZE_MAX;
    return comm_round64(off + v);
}

bool work_share_fits(const comm *c, int E, size_t extra, const work_share_layout *lay) {
    int P = comm_size(c);
    if (P < 2 || !comm_shares_memory(c)) return false;
    /* a view to measure with, on the stack: views are small structs of pointers */
    _Alignas(max_align_t) unsigned char scratch[WORK_SHARE_VIEW_MAX];
    CALF_ASSERT(lay->size <= sizeof scratch);
    memset(scratch, 0, lay->size);
    size_t need = extra;
    for (int r = 0; r < P; r++) { /* the same sum on every rank: all decide alike */
        int b = 0, n = 0;
        calf_split(E, P, r, &b, &n, NULL);
        size_t v = region_bytes(lay, scratch, NULL, b, n);
        need = need > SIZE_MAX - v ? SIZE_MAX : need + v;
    }
    return need <= comm_shared_left(c);
}

/* How ranks that share work wait for one another, and the test slowdown (work_share.h). */
static void share_timing(work_share *w) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    bool core_each = cpus > 0 && w->P <= cpus;
    int slow_rank = testing_hooks_get()->slow_rank;
    bool named = slow_rank >= 0;
    w->slow = named && slow_rank == w->self;
    /* with the hook, a rank waits for every rank to open: the slow one waits for a thief */
    w->open_wait_s = named ? WORK_SHARE_SLOW_WAIT_S : core_each ? WORK_SHARE_OPEN_WAIT_S : 0.0;
}

int work_share_init(work_share *w, comm *c, int E, const work_share_layout *lay, void *views,
                    calf_error *err) {
    memset(w, 0, sizeof *w);
    w->c = c;
    w->E = E;
    w->P = comm_size(c);
    w->self = c->index;
    void **peers = NULL;
    if (!(w->begin = mem_calloc((size_t)w->P, sizeof *w->begin, err)) ||
        !(w->count = mem_calloc((size_t)w->P, sizeof *w->count, err)) ||
        !(w->claims = mem_calloc((size_t)w->P, sizeof *w->claims, err)) ||
        !(peers = mem_calloc((size_t)w->P, sizeof *peers, err)))
        return CALF_ENOMEM; /* before the collective; work_share_free frees what was made */
    share_timing(w);
    int rc = CALF_OK;
    for (int r = 0; rc == CALF_OK && r < w->P; r++) /* alike on every rank: all fail alike */
        rc = calf_split(E, w->P, r, &w->begin[r], &w->count[r], err);
    if (rc) {
        free(peers);
        return rc;
    }
    _Alignas(max_align_t) unsigned char scratch[WORK_SHARE_VIEW_MAX];
    CALF_ASSERT(lay->size <= sizeof scratch);
    memset(scratch, 0, lay->size);
    size_t bytes = region_bytes(lay, scratch, NULL, w->begin[w->self], w->count[w->self]);
    rc = comm_shared_alloc(c, bytes, peers, err);
    for (int r = 0; rc == CALF_OK && r < w->P; r++) {
        unsigned char *base = peers[r];
        size_t off = 0;
        w->claims[r] = comm_carve(base, &off, sizeof(comm_claim));
        lay->carve((unsigned char *)views + (size_t)r * lay->size, base + off, w->begin[r],
                   w->count[r], lay->ctx);
    }
    free(peers);
    return rc;
}

void work_share_free(work_share *w) {
    if (!w) return;
    free(w->begin);
    free(w->count);
    free(w->claims);
    memset(w, 0, sizeof *w);
}

void work_share_open(work_share *w, work_round *r, long nap_ns) {
    r->w = w;
    r->tag = ++w->round;
    r->nap_ns = nap_ns;
    r->held = false;
    comm_claim_open(w->claims[w->self], r->tag, w->count[w->self]);
}

int work_share_own(work_round *r, int *first) {
    work_share *w = r->w;
    int k = comm_claim_front(w->claims[w->self], r->tag, WORK_SHARE_GROUP_ENVS, first);
    if (k > 0 && w->slow) {
        /* Event-driven, so that sharing happens however the machine schedules the ranks:
         * before its first group, hold back until another rank has taken some of this
         * rank's envs (the others wait for it to open), then nap before each group. */
        int count = w->count[w->self];
        if (!r->held && count - k >= 2) {
            double until = calf_monotonic_s() + WORK_SHARE_SLOW_WAIT_S;
            while (!comm_claim_taken(w->claims[w->self], r->tag, count) &&
                   calf_monotonic_s() < until)
                nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        r->held = true;
        nanosleep(&(struct timespec){0, r->nap_ns}, NULL);
    }
    return k;
}

int work_share_other(work_round *r, int *rank, int *first) {
    work_share *w = r->w;
    return comm_claim_take(w->claims, w->P, w->self, WORK_SHARE_REACH, r->tag, w->open_wait_s,
                           rank, first);
}

int work_share_sum_round(work_share *w, comm_tree_pieces *p, size_t n,
                         const work_share_trees *trees, long nap_ns, work_share_pass pass,
                         void *ctx, int64_t *taken, calf_error *err) {
    comm_tree *own = trees->own;
    int rc = comm_tree_pieces_open(w->c, p, w->E, n, own->shared ? own : NULL, err);
    if (rc) return rc;
    work_round r;
    work_share_open(w, &r, nap_ns);
    rc = comm_tree_restart(own, w->begin[w->self], w->count[w->self], err);
    if (rc) return rc;
    int first, k, rank, lent = 0;
    while ((k = work_share_own(&r, &first)) > 0) pass(ctx, w->self, first, k, own);
    comm_tree_pieces_put(p, own);
    while ((k = work_share_other(&r, &rank, &first)) > 0) {
        comm_tree *tree = lent < trees->nlent ? &trees->lent[lent++] : trees->spare;
        /* a lent or spare tree's buffers, made on the first range that needs them: a
         * failure here leaves the other ranks to the fail-fast of this rank's exit */
        if ((rc = comm_tree_restart(tree, w->begin[rank] + first, k, err)) != CALF_OK) return rc;
        pass(ctx, rank, first, k, tree);
        comm_tree_pieces_put(p, tree);
        *taken += k;
    }
    return CALF_OK;
}
