/* pieces.c: the work-shared tree sum (pieces.h). Where ranks share memory, any rank may
 * fold any contiguous piece of the envs and publish it, copied or where its tree's buffers
 * lie in shared memory; the pieces then complete the canonical tree, so who computed
 * which piece never shows in the bits. */
#include "parallel/pieces.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

/* ---- tree buffers in shared memory ---------------------------------------------------- */

static size_t shared_vec_bytes(const comm_tree *t) { return comm_round64(t->n * t->elem); }

/* Buffer set s of the region: cap vectors at s * cap vectors; the completion's vector
 * follows the last set. */
static void tree_point_shared(comm_tree *t, int set) {
    size_t vec = shared_vec_bytes(t);
    unsigned char *base = t->peer_base[t->self] + (size_t)set * (size_t)t->cap * vec;
    for (int k = 0; k < t->cap; k++) t->buf[k] = base + (size_t)k * vec;
}

/* t (private, empty) gives up its own buffers for set `set` of the shared regions at
 * peer_base (peers of them, bytes each, `sets` sets; t takes the array). */
static void tree_use_region(comm_tree *t, unsigned char **peer_base, int peers, int self,
                            size_t bytes, int sets, int set) {
    CALF_ASSERT(!t->shared && t->pushed == 0 && set >= 0 && set < sets);
    for (int k = 0; k < t->cap; k++) {
        free(t->buf[k]);
        t->buf[k] = NULL;
    }
    t->peer_base = peer_base;
    t->peers = peers;
    t->self = self;
    t->peer_bytes = bytes;
    t->sets = sets;
    t->shared = true;
    tree_point_shared(t, set);
}

int comm_tree_share_buffers(comm *c, comm_tree *t, int spare, calf_error *err) {
    CALF_ASSERT(!t->shared && t->pushed == 0 && comm_shares_memory(c));
    CALF_ASSERT(t->elem == sizeof(float) && spare >= 0);
    size_t bytes = comm_tree_shared_bytes(t->E, t->n, spare);
    void **peers = mem_calloc((size_t)c->size, sizeof *peers, err);
    if (!peers) return CALF_ENOMEM;
    int rc = comm_shared_alloc(c, bytes, peers, err); /* zeroed, as leaves need */
    if (rc != CALF_OK) {
        free(peers);
        return rc;
    }
    tree_use_region(t, (unsigned char **)peers, c->size, c->index, bytes, 1 + spare, 0);
    return CALF_OK;
}

int comm_tree_share_set(comm_tree *t, const comm_tree *owner, int set, calf_error *err) {
    CALF_ASSERT(owner->shared && set >= 1);
    CALF_ASSERT(t->E == owner->E && t->n == owner->n && t->elem == owner->elem &&
                t->cap == owner->cap);
    unsigned char **peer_base = mem_alloc((size_t)owner->peers * sizeof *peer_base, err);
    if (!peer_base) return CALF_ENOMEM;
    memcpy(peer_base, owner->peer_base, (size_t)owner->peers * sizeof *peer_base);
    tree_use_region(t, peer_base, owner->peers, owner->self, owner->peer_bytes, owner->sets,
                    set);
    return CALF_OK;
}

size_t comm_tree_shared_bytes(int E, size_t n, int spare) {
    /* the stack's buffers, once per set, then the vector a split completion lands in */
    return ((size_t)comm_tree_cap(E) * (size_t)(1 + spare) + 1) * comm_round64(n * sizeof(float));
}

float *comm_tree_shared_sum(const comm_tree *own) {
    CALF_ASSERT(own->shared);
    return (float *)(void *)(own->peer_base[0] +
                             (size_t)own->sets * (size_t)own->cap * shared_vec_bytes(own));
}


/* ---- piece sums ---------------------------------------------------------------------- */

/* A piece [y, z) has at most z - y blocks, so its blob fits in (z - y) strides of one
 * block's bytes: pieces can sit at y * stride without knowing each other. The table of
 * piece ends (E int32) follows the E strides. */
static size_t piece_stride(size_t n) {
    /* room for one copied block, or for the (rank, offset) of one block by reference */
    size_t copied = comm_tree_blob_bytes_for(1, n, sizeof(float));
    size_t by_ref = COMM_TREE_HEADER_WORDS * 8 + 32;
    return copied > by_ref ? copied : by_ref;
}

static bool pieces_bytes(int E, size_t n, size_t *out) {
    size_t stride = piece_stride(n);
    if (E < 1 || stride > (SIZE_MAX - 8 * (size_t)E) / (size_t)E) return false;
    *out = (size_t)E * stride + 8 * (size_t)E;
    return true;
}

bool comm_tree_pieces_supported(const comm *c, int E, size_t n) {
    size_t bytes;
    if (!c->ops->next_arena || c->size < 2 || !pieces_bytes(E, n, &bytes)) return false;
    calf_error err;
    /* A query only: next_arena checks the size and hands out a pointer, nothing else. */
    return c->ops->next_arena((comm *)c, bytes, &err) != NULL;
}

int comm_tree_pieces_open(comm *c, comm_tree_pieces *p, int E, size_t n, const comm_tree *own,
                          calf_error *err) {
    size_t bytes;
    if (!c->ops->next_arena || !pieces_bytes(E, n, &bytes))
        return calf_error_set(err, CALF_EINVAL,
                              "comm: the %s backend cannot share a sum of %d x %zu",
                              c->ops->name, E, n);
    unsigned char *base = c->ops->next_arena(c, bytes, err);
    if (!base) return CALF_ENOMEM;
    p->base = base;
    p->stride = piece_stride(n);
    p->E = E;
    p->n = n;
    p->elem = sizeof(float);
    p->seq = (uint32_t)(c->seq + 1);
    CALF_ASSERT(!own || (own->shared && own->peers == c->size && own->E == E && own->n == n));
    p->shared = own;
    return CALF_OK;
}

void comm_tree_pieces_put(comm_tree_pieces *p, const comm_tree *t) {
    CALF_ASSERT(t->E == p->E && t->n == p->n && t->elem == p->elem && !t->leaf_out);
    if (t->pushed == 0) return;
    unsigned char *blob = p->base + (size_t)t->begin * p->stride;
    if (t->shared) {
        /* Where the blocks lie instead of the blocks: (rank, offset) after each (level,
         * index). The blob describes what was pushed: [begin, begin + pushed). */
        CALF_ASSERT(p->shared && t->peer_base[t->self] == p->shared->peer_base[t->self]);
        int64_t hdr[COMM_TREE_HEADER_WORDS] = {COMM_TREE_REF_MAGIC, t->E, (int64_t)t->n,
                                               (int64_t)t->elem, t->begin, t->pushed, t->depth};
        memcpy(blob, hdr, sizeof hdr);
        unsigned char *q = blob + sizeof hdr;
        for (int b = 0; b < t->depth; b++, q += 32) {
            int64_t w[4] = {t->level[b], t->index[b], t->self,
                            (int64_t)((unsigned char *)t->buf[b] - t->peer_base[t->self])};
            memcpy(q, w, sizeof w);
        }
    } else {
        comm_tree view = *t;
        view.count = t->pushed;
        comm_tree_pack(&view, blob);
    }
    /* The end, stamped with the collective: an entry left from an earlier sum in this
     * arena never passes for one of this sum's. */
    uint64_t end = ((uint64_t)p->seq << 32) | (uint32_t)(t->begin + t->pushed);
    memcpy(p->base + (size_t)p->E * p->stride + 8 * (size_t)t->begin, &end, sizeof end);
}


/* Checks the pieces, in env order, and pushes their blocks. */
static int push_pieces(comm_tree_fold *f, const comm_tree_pieces *p, const unsigned char *all,
                       calf_error *err) {
    const unsigned char *ends = all + (size_t)p->E * p->stride;
    size_t vec = p->n * p->elem;
    int y = 0;
    while (y < p->E) {
        uint64_t stamped;
        memcpy(&stamped, ends + 8 * (size_t)y, sizeof stamped);
        int64_t z = (stamped >> 32) == p->seq ? (int64_t)(stamped & 0xffffffffu) : -1;
        const unsigned char *blob = all + (size_t)y * p->stride;
        int64_t h[COMM_TREE_HEADER_WORDS];
        memcpy(h, blob, sizeof h);
        int64_t nblocks = h[6];
        bool ref = h[0] == COMM_TREE_REF_MAGIC;
        if (z <= y || z > p->E || (h[0] != COMM_TREE_MAGIC && !(ref && p->shared)) ||
            h[1] != p->E || h[2] != (int64_t)p->n || h[3] != (int64_t)p->elem || h[4] != y ||
            h[5] != z - y || nblocks != comm_tree_range_blocks(y, z))
            return calf_error_set(err, CALF_ECOMM,
                                  "comm: shared sum: no valid piece starts at env %d of %d", y,
                                  p->E);
        /* a copied blob's blocks follow its table of (level, index); a by-reference
         * blob's table rows carry (rank, offset) of each block too */
        const unsigned char *data = blob + COMM_TREE_HEADER_WORDS * 8 + (size_t)nblocks * 16;
        int64_t at = y;
        for (int64_t b = 0; b < nblocks; b++) {
            int64_t w[4];
            memcpy(w, blob + COMM_TREE_HEADER_WORDS * 8 + (size_t)b * (ref ? 32 : 16),
                   (ref ? 4 : 2) * sizeof(int64_t));
            const unsigned char *vecp = ref ? NULL : data + (size_t)b * vec;
            if (ref) {
                const comm_tree *s = p->shared;
                if (w[2] < 0 || w[2] >= s->peers || w[3] < 0 ||
                    (uint64_t)w[3] > s->peer_bytes - vec)
                    return calf_error_set(err, CALF_ECOMM,
                                          "comm: shared sum: bad reference in the piece at env %d",
                                          y);
                vecp = s->peer_base[w[2]] + w[3];
            }
            if (!comm_tree_block_at(w[0], w[1], at, z, p->E))
                return calf_error_set(err, CALF_ECOMM,
                                      "comm: shared sum: bad block in the piece at env %d", y);
            int rc = comm_tree_fold_push(f, vecp, (int)w[0], w[1], err);
            if (rc) return rc;
            at += (int64_t)1 << w[0];
        }
        y = (int)z;
    }
    return CALF_OK;
}

/* Folds [lo, hi) of every piece's blocks into out. */
static int fold_pieces(comm *c, comm_tree_pieces *p, size_t lo, size_t hi, void *out,
                       calf_error *err) {
    const unsigned char *all = c->ops->gathered(c, err);
    if (!all) return comm_gathered_status(err);
    comm_tree_fold f;
    comm_tree_fold_init(&f, p->n, p->elem, out);
    f.lo = lo;
    f.hi = hi;
    int rc = push_pieces(&f, p, all, err);
    if (rc == CALF_OK) rc = comm_tree_fold_finish(&f, err);
    comm_tree_fold_free(&f);
    return rc;
}

int comm_tree_pieces_fold(comm *c, comm_tree_pieces *p, float **sum, calf_error *err) {
    CALF_ASSERT(p->shared);
    size_t lo, hi;
    comm_slice(c, p->n, &lo, &hi);
    *sum = comm_tree_shared_sum(p->shared);
    /* A rank with no slice (more ranks than runs of elements) reads nothing: walking every
     * piece on every rank would cost E x P a sum. The ranks that fold check the pieces,
     * and a failure there stops the job. */
    if (lo == hi) return c->ops->gathered(c, err) ? CALF_OK : comm_gathered_status(err);
    return fold_pieces(c, p, lo, hi, *sum, err);
}

int comm_tree_pieces_sum(comm *c, comm_tree_pieces *p, void *out, calf_error *err) {
    if (!p->shared) return fold_pieces(c, p, 0, p->n, out, err);
    float *sum;
    int rc = comm_tree_pieces_fold(c, p, &sum, err);
    if (rc == CALF_OK) rc = comm_barrier(c, err);
    if (rc == CALF_OK) memcpy(out, sum, p->n * p->elem);
    return rc;
}
