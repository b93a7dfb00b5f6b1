/* comm.c: the backend-independent half of comm: the canonical env-ordered tree sum that
 * makes results independent of the process count, and the collectives the trainer uses,
 * built on the five primitives every backend supplies (see comm.h). */
#include "parallel/comm.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"

/* ---- the comm object ---------------------------------------------------------------- */

int comm_rank(const comm *c) { return c->rank; }
int comm_size(const comm *c) { return c->size; }
const char *comm_backend_name(const comm *c) { return c->ops->name; }

void comm_set_timeout(comm *c, double secs) {
    CALF_ASSERT(secs > 0);
    c->timeout_s = secs;
}

void comm_report_failure(comm *c, const char *msg) {
    if (!c->failed) c->ops->report_failure(c, msg);
    c->failed = true;
}

_Noreturn void comm_abort(comm *c, const char *msg) {
    c->ops->abort(c, msg);
    fflush(NULL);
    _exit(1); /* backends do not return; this only satisfies _Noreturn */
}

void comm_finalize(comm *c) {
    if (!c) return;
    c->ops->finalize(c);
    free(c->machine);
    free(c);
}

bool comm_same_machine(const comm *c, int r) {
    if (!c->machine) return true;
    for (int i = 0; i < c->machine_count; i++)
        if (c->machine[i] == r) return true;
    return false;
}

/* What a failed ops->gathered said: CALF_ECOMM, or CALF_EINTR when the job was stopped. */
static int gathered_status(const calf_error *err) {
    return err && err->status != CALF_OK ? err->status : CALF_ECOMM;
}

/* Every rank's blob is `bytes` long: a (size) array for the primitives, caller frees. */
static size_t *equal_sizes(const comm *c, size_t bytes) {
    size_t *sizes = calf_xmalloc((size_t)c->size * sizeof *sizes);
    for (int r = 0; r < c->size; r++) sizes[r] = bytes;
    return sizes;
}

/* ---- single backend: one process, everything local ---------------------------------- */

static int single_barrier(comm *c, calf_error *err) {
    (void)err;
    c->seq++;
    return CALF_OK;
}

static int single_allgatherv(comm *c, const void *send, void *recv, const size_t *sizes,
                             calf_error *err) {
    (void)err;
    if (sizes[0] && recv != send) memcpy(recv, send, sizes[0]);
    c->seq++;
    return CALF_OK;
}

static int single_gatherv(comm *c, const void *send, void *recv, const size_t *sizes,
                          int root, calf_error *err) {
    (void)root;
    return single_allgatherv(c, send, recv, sizes, err);
}

static int single_broadcast(comm *c, void *buf, size_t n, int root, calf_error *err) {
    (void)buf, (void)n, (void)root, (void)err;
    c->seq++;
    return CALF_OK;
}

static void single_report_failure(comm *c, const char *msg) {
    (void)c;
    fprintf(stderr, "calf: %s\n", msg);
}

static void single_abort(comm *c, const char *msg) {
    if (!c->failed) single_report_failure(c, msg);
    fflush(NULL);
    _exit(1);
}

static void single_finalize(comm *c) { (void)c; }

static const comm_ops single_ops = {
    .name = "single",
    .barrier = single_barrier,
    .allgatherv = single_allgatherv,
    .gatherv = single_gatherv,
    .broadcast = single_broadcast,
    .abort = single_abort,
    .report_failure = single_report_failure,
    .finalize = single_finalize,
};

int comm_single(comm **out) {
    comm *c = calf_xcalloc(1, sizeof *c);
    c->ops = &single_ops;
    c->rank = -1;
    c->size = 1;
    c->index = 0;
    c->timeout_s = 600.0;
    *out = c;
    return CALF_OK;
}

/* ---- collectives -------------------------------------------------------------------- */

int comm_barrier(comm *c, calf_error *err) { return c->ops->barrier(c, err); }

int comm_broadcast(comm *c, void *buf, size_t n, int root, calf_error *err) {
    CALF_ASSERT(root >= 0 && root < c->size);
    return c->ops->broadcast(c, buf, n, root, err);
}

int comm_any(comm *c, int flag, int *out, calf_error *err) {
    int32_t mine = flag != 0;
    int32_t *all = calf_xmalloc((size_t)c->size * sizeof *all);
    size_t *sizes = equal_sizes(c, sizeof mine);
    int rc = c->ops->allgatherv(c, &mine, all, sizes, err);
    if (rc == CALF_OK) {
        int any = 0;
        for (int r = 0; r < c->size; r++) any |= all[r] != 0;
        *out = any;
    }
    free(sizes);
    free(all);
    return rc;
}

int comm_agree(comm *c, int stop, int failed, int *any_stop, int *first_failed,
               calf_error *err) {
    int32_t mine = (stop != 0) | (failed != 0) << 1;
    int32_t *all = calf_xmalloc((size_t)c->size * sizeof *all);
    size_t *sizes = equal_sizes(c, sizeof mine);
    int rc = c->ops->allgatherv(c, &mine, all, sizes, err);
    if (rc == CALF_OK) {
        *any_stop = 0;
        *first_failed = -1;
        for (int r = c->size - 1; r >= 0; r--) {
            *any_stop |= all[r] & 1;
            if (all[r] & 2) *first_failed = r;
        }
    }
    free(sizes);
    free(all);
    return rc;
}

int comm_check_equal(comm *c, const void *digest, size_t n, calf_error *err) {
    unsigned char *all = calf_xmalloc((size_t)c->size * (n ? n : 1));
    size_t *sizes = equal_sizes(c, n);
    int rc = c->ops->allgatherv(c, digest, all, sizes, err);
    if (rc == CALF_OK) {
        char list[256] = "";
        size_t used = 0;
        int differ = 0;
        for (int r = 1; r < c->size; r++) {
            if (memcmp(all, all + (size_t)r * n, n) == 0) continue;
            if (differ++ < 16 && used < sizeof list) {
                int w = snprintf(list + used, sizeof list - used, "%s%d", differ > 1 ? ", " : "", r);
                if (w > 0) used += (size_t)w;
            }
        }
        if (differ)
            rc = calf_error_set(err, CALF_ECOMM,
                                "comm: state digest of rank%s %s%s differs from rank 0 "
                                "(%zu-byte digest, collective #%llu)",
                                differ > 1 ? "s" : "", list, differ > 16 ? ", ..." : "", n,
                                (unsigned long long)c->seq);
    }
    free(sizes);
    free(all);
    return rc;
}

int comm_gather_records(comm *c, const void *local, size_t rec_size, int count, int total,
                        void *all, calf_error *err) {
    CALF_ASSERT(count >= 0 && total >= 0);
    int64_t mine = count;
    int64_t *counts = calf_xmalloc((size_t)c->size * sizeof *counts);
    size_t *sizes = equal_sizes(c, sizeof mine);
    int rc = c->ops->allgatherv(c, &mine, counts, sizes, err);
    if (rc == CALF_OK) {
        int64_t sum = 0;
        for (int r = 0; r < c->size; r++) {
            sum += counts[r];
            sizes[r] = (size_t)counts[r] * rec_size;
        }
        /* Every rank sees the same counts, so every rank fails alike: nobody waits. */
        if (sum != total)
            rc = calf_error_set(err, CALF_ECOMM,
                                "comm: gathering records: ranks hold %lld records in all, "
                                "expected %d",
                                (long long)sum, total);
        else
            rc = c->ops->gatherv(c, local, all, sizes, 0, err);
    }
    free(sizes);
    free(counts);
    return rc;
}

/* ---- canonical tree ------------------------------------------------------------------ */

enum { TREE_HEADER_WORDS = 7 }; /* magic, E, n, elem, begin, count, nblocks */
static const int64_t TREE_MAGIC = 0x45455254464c4143LL; /* "CALFTREE" */
static const int64_t TREE_REF_MAGIC = 0x46455254464c4143LL; /* "CALFTREF": blocks by reference */

/* Smallest L with 2^L >= E. */
static int ceil_log2(int64_t E) {
    int L = 0;
    while (((int64_t)1 << L) < E) L++;
    return L;
}

/* Level of the largest aligned block starting at a that fits in [a, b); a < b. */
static int block_level_at(int64_t a, int64_t b) {
    int j = 0;
    while (j < 62 && (a & ((int64_t)1 << j)) == 0 && a + ((int64_t)2 << j) <= b) j++;
    return j;
}

/* Number of maximal aligned blocks of [a, b). */
static int range_nblocks(int64_t a, int64_t b) {
    int nb = 0;
    while (a < b) {
        a += (int64_t)1 << block_level_at(a, b);
        nb++;
    }
    return nb;
}

/* A block (level, index) from a blob lies at env `at` and ends by env `end` of E. */
static bool block_at(int64_t level, int64_t index, int64_t at, int64_t end, int E) {
    return level >= 0 && level <= 31 && index >= 0 && index <= E && (index << level) == at &&
           at + ((int64_t)1 << level) <= end;
}

static size_t round8(size_t x) { return (x + 7) & ~(size_t)7; }

static size_t blob_bytes_for(int nblocks, size_t n, size_t elem) {
    return round8(TREE_HEADER_WORDS * 8 + (size_t)nblocks * 16 + (size_t)nblocks * n * elem);
}

size_t comm_tree_blob_bytes(int E, int begin, int count, size_t n, size_t elem) {
    (void)E;
    return blob_bytes_for(range_nblocks(begin, (int64_t)begin + count), n, elem);
}

size_t comm_tree_blob_bytes_max(int E, size_t n, size_t elem) {
    /* A range's blocks grow then shrink, each level at most once on each side. */
    return blob_bytes_for(2 * ceil_log2(E) + 1, n, elem);
}

/* dst = dst + src elementwise, dst being the left operand. */
static void add_f32(void *dst, const void *src, size_t n) {
    float *restrict d = dst;
    const float *restrict s = src;
    for (size_t i = 0; i < n; i++) d[i] = d[i] + s[i];
}

static void add_f64(void *dst, const void *src, size_t n) {
    double *restrict d = dst;
    const double *restrict s = src;
    for (size_t i = 0; i < n; i++) d[i] = d[i] + s[i];
}

/* Stack depth a tree over E envs can reach: a binary counter's blocks plus the leaf. */
static int tree_cap(int E) { return 2 * ceil_log2(E) + 2; }

static void tree_init(comm_tree *t, size_t n, size_t elem, int E, int begin, int count) {
    CALF_ASSERT(E >= 1 && begin >= 0 && count >= 0 && (int64_t)begin + count <= E);
    memset(t, 0, sizeof *t);
    t->n = n;
    t->elem = elem;
    t->E = E;
    t->begin = begin;
    t->count = count;
    t->cap = tree_cap(E);
    t->level = calf_xcalloc((size_t)t->cap, sizeof *t->level);
    t->index = calf_xcalloc((size_t)t->cap, sizeof *t->index);
    t->buf = calf_xcalloc((size_t)t->cap, sizeof *t->buf);
}

void comm_tree_init(comm_tree *t, size_t n, int E, int begin, int count) {
    tree_init(t, n, sizeof(float), E, begin, count);
}

void comm_tree_init_f64(comm_tree *t, size_t n, int E, int begin, int count) {
    tree_init(t, n, sizeof(double), E, begin, count);
}

/* Buffers start zeroed and every merge writes left + right over all n elements, so an
 * element no leaf ever writes stays zero in every buffer: comm_tree_leaf_raw relies on it. */
static void *tree_leaf_raw(comm_tree *t) {
    CALF_ASSERT(t->pushed < t->count && t->depth < t->cap);
    if (!t->buf[t->depth]) t->buf[t->depth] = calf_xcalloc(t->n, t->elem);
    t->leaf_out = true;
    return t->buf[t->depth];
}

static void *tree_leaf(comm_tree *t) {
    void *leaf = tree_leaf_raw(t);
    memset(leaf, 0, t->n * t->elem);
    return leaf;
}

float *comm_tree_leaf_raw(comm_tree *t) {
    CALF_ASSERT(t->elem == sizeof(float));
    return tree_leaf_raw(t);
}

float *comm_tree_leaf(comm_tree *t) {
    CALF_ASSERT(t->elem == sizeof(float));
    return tree_leaf(t);
}

double *comm_tree_leaf_f64(comm_tree *t) {
    CALF_ASSERT(t->elem == sizeof(double));
    return tree_leaf(t);
}

/* Binary counter: merge while the two top blocks of the d on the stack are siblings
 * (2k, 2k+1). A freed right slot keeps its buffer for the next leaf. */
static void tree_merge_from(comm_tree *t, int d) {
    void (*add)(void *, const void *, size_t) = t->elem == sizeof(float) ? add_f32 : add_f64;
    while (d >= 2 && t->level[d - 1] == t->level[d - 2] && (t->index[d - 2] & 1) == 0 &&
           t->index[d - 1] == t->index[d - 2] + 1) {
        add(t->buf[d - 2], t->buf[d - 1], t->n);
        t->level[d - 2]++;
        t->index[d - 2] >>= 1;
        d--;
    }
    t->depth = d;
}

void comm_tree_push(comm_tree *t) {
    CALF_ASSERT(t->leaf_out);
    t->leaf_out = false;
    int d = t->depth;
    t->level[d] = 0;
    t->index[d] = (int64_t)t->begin + t->pushed;
    t->pushed++;
    tree_merge_from(t, d + 1);
}

float *comm_tree_left_sibling(comm_tree *t) {
    CALF_ASSERT(t->elem == sizeof(float) && !t->leaf_out);
    int d = t->depth;
    if (t->pushed >= t->count || d < 1 || t->level[d - 1] != 0 || (t->index[d - 1] & 1) != 0)
        return NULL;
    CALF_ASSERT(t->index[d - 1] + 1 == (int64_t)t->begin + t->pushed);
    return t->buf[d - 1];
}

void comm_tree_push_into_left(comm_tree *t) {
    CALF_ASSERT(comm_tree_left_sibling(t) != NULL);
    int d = t->depth;
    t->level[d - 1] = 1;
    t->index[d - 1] >>= 1;
    t->pushed++;
    tree_merge_from(t, d);
}

void comm_tree_reset(comm_tree *t) {
    t->pushed = 0;
    t->depth = 0;
    t->leaf_out = false;
}

static size_t shared_vec_bytes(const comm_tree *t) { return comm_round64(t->n * t->elem); }

/* Buffer set s of the region: cap vectors at s * cap vectors; the completion's vector
 * follows the last set. */
static void tree_point_shared(comm_tree *t, int set) {
    size_t vec = shared_vec_bytes(t);
    unsigned char *base = t->peer_base[t->self] + (size_t)set * (size_t)t->cap * vec;
    for (int k = 0; k < t->cap; k++) t->buf[k] = base + (size_t)k * vec;
}

/* A shared tree's buffers are rewritten right away: the caller has passed a barrier
 * after every rank's last read of them (comm_tree_pieces_sum ends with one; after
 * comm_tree_pieces_fold it is the caller's). */
void comm_tree_restart(comm_tree *t, int begin, int count) {
    CALF_ASSERT(begin >= 0 && count >= 0 && (int64_t)begin + count <= t->E);
    comm_tree_reset(t);
    t->begin = begin;
    t->count = count;
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
    void **peers = calf_xcalloc((size_t)c->size, sizeof *peers);
    int rc = comm_shared_alloc(c, bytes, peers, err); /* zeroed, as leaves need */
    if (rc != CALF_OK) {
        free(peers);
        return rc;
    }
    tree_use_region(t, (unsigned char **)peers, c->size, c->index, bytes, 1 + spare, 0);
    return CALF_OK;
}

void comm_tree_share_set(comm_tree *t, const comm_tree *owner, int set) {
    CALF_ASSERT(owner->shared && set >= 1);
    CALF_ASSERT(t->E == owner->E && t->n == owner->n && t->elem == owner->elem &&
                t->cap == owner->cap);
    unsigned char **peer_base = calf_xmalloc((size_t)owner->peers * sizeof *peer_base);
    memcpy(peer_base, owner->peer_base, (size_t)owner->peers * sizeof *peer_base);
    tree_use_region(t, peer_base, owner->peers, owner->self, owner->peer_bytes, owner->sets,
                    set);
}

void comm_tree_free(comm_tree *t) {
    if (!t) return;
    if (t->buf && !t->shared) /* shared buffers belong to the comm's memory */
        for (int i = 0; i < t->cap; i++) free(t->buf[i]);
    free(t->peer_base);
    free(t->buf);
    free(t->level);
    free(t->index);
    free(t->send);
    free(t->recv);
    free(t->sizes);
    memset(t, 0, sizeof *t);
}

size_t comm_tree_packed_bytes(const comm_tree *t) { return blob_bytes_for(t->depth, t->n, t->elem); }

size_t comm_tree_packed_slice_bytes(const comm_tree *t, size_t lo, size_t hi) {
    CALF_ASSERT(lo <= hi && hi <= t->n);
    return blob_bytes_for(t->depth, hi - lo, t->elem);
}

void comm_tree_pack_slice(const comm_tree *t, size_t lo, size_t hi, void *buf) {
    CALF_ASSERT(t->pushed == t->count && !t->leaf_out && lo <= hi && hi <= t->n);
    unsigned char *p = buf;
    int64_t hdr[TREE_HEADER_WORDS] = {TREE_MAGIC, t->E, (int64_t)(hi - lo), (int64_t)t->elem,
                                      t->begin, t->count, t->depth};
    memcpy(p, hdr, sizeof hdr);
    p += sizeof hdr;
    for (int b = 0; b < t->depth; b++) {
        int64_t li[2] = {t->level[b], t->index[b]};
        memcpy(p, li, sizeof li);
        p += sizeof li;
    }
    size_t vec = (hi - lo) * t->elem;
    for (int b = 0; b < t->depth; b++, p += vec)
        if (vec) memcpy(p, (const unsigned char *)t->buf[b] + lo * t->elem, vec);
    size_t used = (size_t)(p - (unsigned char *)buf);
    memset(p, 0, comm_tree_packed_slice_bytes(t, lo, hi) - used);
}

void comm_tree_pack(const comm_tree *t, void *buf) { comm_tree_pack_slice(t, 0, t->n, buf); }

/* dst = a + b elementwise, left operand first; dst may be a (never b). Both cases are
 * restrict loops so that they vectorise without run-time overlap checks. */
static void add3_f32(void *dst, const void *a, const void *b, size_t n) {
    if (dst == a) {
        add_f32(dst, b, n);
        return;
    }
    float *restrict d = dst;
    const float *restrict x = a, *restrict y = b;
    for (size_t i = 0; i < n; i++) d[i] = x[i] + y[i];
}

static void add3_f64(void *dst, const void *a, const void *b, size_t n) {
    if (dst == a) {
        add_f64(dst, b, n);
        return;
    }
    double *restrict d = dst;
    const double *restrict x = a, *restrict y = b;
    for (size_t i = 0; i < n; i++) d[i] = x[i] + y[i];
}

/* Completion of the tree from blocks arriving in env order. Pushing runs the binary
 * counter on the blocks' (level, index) alone and records each merge it would make;
 * fold_finish then carries out that program a chunk of elements at a time, so the partial
 * sums stay in a small buffer in the cache and each block is read once, where it lies
 * (read only: a shared arena, a peer's blob). Every element is added in the same order as
 * by merging whole vectors, so the bits are those of the canonical tree. */
enum {
    FOLD_CHUNK = 2048,      /* bytes of every vector folded at a time */
    FOLD_LOCAL_BLOCKS = 64, /* blocks (and merges) recorded without allocating */
    FOLD_LOCAL_TEMPS = 4,   /* stack positions whose chunks fit in fold_finish's frame */
};

/* An operand: block k (k >= 0) or the partial sum at stack position p (-1 - p). */
typedef struct fold_op {
    int dst, a, b; /* stack position dst = a + b */
} fold_op;

typedef struct tree_fold {
    size_t n, elem;
    size_t lo, hi;    /* the elements folded: all, or one rank's slice [lo, hi) */
    void *out;        /* stack position 0: the root lands in place */
    int count, room;  /* blocks pushed; room for blocks (and ops, of which there are fewer) */
    int nops, depth, max_pos;
    const void **vec; /* (room) the blocks, in env order */
    fold_op *ops;     /* (room) */
    int code[66];     /* the counter: each position's operand, level and index */
    int level[66];
    int64_t index[66];
    const void *local_vec[FOLD_LOCAL_BLOCKS];
    fold_op local_ops[FOLD_LOCAL_BLOCKS];
} tree_fold;

static void fold_init(tree_fold *f, size_t n, size_t elem, void *out) {
    CALF_ASSERT(elem == sizeof(float) || elem == sizeof(double));
    f->n = n;
    f->elem = elem;
    f->lo = 0;
    f->hi = n;
    f->out = out;
    f->count = f->nops = f->depth = f->max_pos = 0;
    f->room = FOLD_LOCAL_BLOCKS;
    f->vec = f->local_vec;
    f->ops = f->local_ops;
}

static void fold_free(tree_fold *f) {
    if (f->vec != f->local_vec) free((void *)f->vec);
    if (f->ops != f->local_ops) free(f->ops);
    f->vec = f->local_vec;
    f->ops = f->local_ops;
}

static void fold_grow(tree_fold *f) {
    int room = f->room * 2;
    const void **vec = calf_xmalloc((size_t)room * sizeof *vec);
    fold_op *ops = calf_xmalloc((size_t)room * sizeof *ops);
    memcpy(vec, f->vec, (size_t)f->count * sizeof *vec);
    memcpy(ops, f->ops, (size_t)f->nops * sizeof *ops);
    fold_free(f);
    f->vec = vec;
    f->ops = ops;
    f->room = room;
}

static void fold_merge(tree_fold *f, int b) {
    f->ops[f->nops++] = (fold_op){b, f->code[b], f->code[b + 1]};
    f->code[b] = -1 - b;
}

static void fold_push(tree_fold *f, const void *vec, int level, int64_t index) {
    CALF_ASSERT(f->depth < 66 && f->count < (1 << 30));
    if (f->count == f->room) fold_grow(f);
    int d = f->depth;
    f->vec[f->count] = vec;
    f->code[d] = f->count++;
    f->level[d] = level;
    f->index[d] = index;
    d++;
    while (d >= 2 && f->level[d - 1] == f->level[d - 2] && (f->index[d - 2] & 1) == 0 &&
           f->index[d - 1] == f->index[d - 2] + 1) {
        fold_merge(f, d - 2);
        f->level[d - 2]++;
        f->index[d - 2] >>= 1;
        d--;
    }
    f->depth = d;
    if (d - 1 > f->max_pos) f->max_pos = d - 1;
}

static const unsigned char *fold_operand(const tree_fold *f, int code, unsigned char *out,
                                         unsigned char *temp, size_t at) {
    if (code >= 0) return (const unsigned char *)f->vec[code] + at;
    return code == -1 ? out : temp + (size_t)(-2 - code) * FOLD_CHUNK;
}

/* What remains are the maximal blocks of [0, E), largest first. Up the clipped right
 * spine of the tree each node is left block + (everything to its right), and a node with
 * nothing to its right is its left half unchanged. Then the recorded merges run over
 * [lo, hi) a chunk at a time. */
static void fold_finish(tree_fold *f) {
    CALF_ASSERT(f->depth >= 1);
    for (int b = f->depth - 2; b >= 0; b--) fold_merge(f, b);
    size_t e = f->elem, at = f->lo * e, end = f->hi * e;
    if (f->nops == 0) { /* one block: the sum is that block */
        if (f->out != f->vec[0] && end > at)
            memcpy((unsigned char *)f->out + at, (const unsigned char *)f->vec[0] + at, end - at);
        return;
    }
    /* stack positions 1.. hold partial sums of the current chunk; 0 is out itself */
    _Alignas(64) unsigned char local[FOLD_LOCAL_TEMPS * FOLD_CHUNK];
    unsigned char *temp = f->max_pos <= FOLD_LOCAL_TEMPS
                              ? local
                              : calf_xmalloc((size_t)f->max_pos * FOLD_CHUNK);
    void (*add3)(void *, const void *, const void *, size_t) =
        e == sizeof(float) ? add3_f32 : add3_f64;
    for (; at < end; at += FOLD_CHUNK) {
        size_t bytes = end - at < FOLD_CHUNK ? end - at : FOLD_CHUNK;
        unsigned char *out = (unsigned char *)f->out + at;
        for (int k = 0; k < f->nops; k++) {
            const fold_op *op = &f->ops[k];
            unsigned char *dst = op->dst == 0 ? out : temp + (size_t)(op->dst - 1) * FOLD_CHUNK;
            add3(dst, fold_operand(f, op->a, out, temp, at), fold_operand(f, op->b, out, temp, at),
                 bytes / e);
        }
    }
    if (temp != local) free(temp);
}

/* Checks the blobs (one per rank, in rank order, rank r's at blobs + offset) and pushes
 * their blocks. */
static int push_blobs(tree_fold *f, const unsigned char *packed, const size_t *sizes,
                      int nranks, int E, calf_error *err) {
    size_t n = f->n, elem = f->elem, vec = n * elem;
    int64_t p = 0;
    size_t off = 0;
    for (int r = 0; r < nranks; r++) {
        const unsigned char *blob = packed + off;
        int64_t h[TREE_HEADER_WORDS];
        if (sizes[r] % 8 != 0 || sizes[r] < sizeof h)
            return calf_error_set(err, CALF_ECOMM, "comm: tree blob of rank %d has %zu bytes",
                                  r, sizes[r]);
        memcpy(h, blob, sizeof h);
        if (h[0] != TREE_MAGIC || h[1] != E || h[2] != (int64_t)n || h[3] != (int64_t)elem)
            return calf_error_set(err, CALF_ECOMM,
                                  "comm: tree blob of rank %d is for %lld envs x %lld "
                                  "elements of %lld bytes, expected %d x %zu of %zu",
                                  r, (long long)h[1], (long long)h[2], (long long)h[3], E, n,
                                  elem);
        int64_t begin = h[4], count = h[5], nblocks = h[6];
        if (begin != p || count < 0 || begin + count > E || nblocks < 0 ||
            nblocks != range_nblocks(begin, begin + count) ||
            blob_bytes_for((int)nblocks, n, elem) > sizes[r])
            return calf_error_set(err, CALF_ECOMM,
                                  "comm: rank %d holds envs [%lld, %lld) in %lld blocks; "
                                  "ranks must tile [0, %d) in rank order (expected begin %lld)",
                                  r, (long long)begin, (long long)(begin + count),
                                  (long long)nblocks, E, (long long)p);
        const unsigned char *data = blob + TREE_HEADER_WORDS * 8 + (size_t)nblocks * 16;
        for (int64_t b = 0; b < nblocks; b++) {
            int64_t li[2];
            memcpy(li, blob + TREE_HEADER_WORDS * 8 + (size_t)b * 16, sizeof li);
            if (!block_at(li[0], li[1], p, begin + count, E))
                return calf_error_set(err, CALF_ECOMM,
                                      "comm: rank %d sent block (level %lld, index %lld) "
                                      "where env %lld was expected",
                                      r, (long long)li[0], (long long)li[1], (long long)p);
            fold_push(f, data + (size_t)b * vec, (int)li[0], li[1]);
            p += (int64_t)1 << li[0];
        }
        off += sizes[r];
    }
    if (p != E)
        return calf_error_set(err, CALF_ECOMM, "comm: ranks hold envs [0, %lld), expected [0, %d)",
                              (long long)p, E);
    return CALF_OK;
}

int comm_tree_finish(const void *packed, const size_t *sizes, int nranks, size_t n, size_t elem,
                     int E, void *out, calf_error *err) {
    tree_fold f;
    fold_init(&f, n, elem, out);
    int rc = push_blobs(&f, packed, sizes, nranks, E, err);
    if (rc == CALF_OK) fold_finish(&f);
    fold_free(&f);
    return rc;
}

static unsigned char *grow(unsigned char **buf, size_t *cap, size_t need) {
    if (need > *cap) {
        free(*buf);
        *buf = calf_xmalloc(need);
        *cap = need;
    }
    return *buf;
}

/* Learn (and check) every rank's range once per comm: one small allgather. */
static int tree_exchange_ranges(comm *c, comm_tree *t, calf_error *err) {
    int64_t mine[5] = {t->E, (int64_t)t->n, (int64_t)t->elem, t->begin, t->count};
    int64_t *all = calf_xmalloc((size_t)c->size * sizeof mine);
    size_t *sizes = equal_sizes(c, sizeof mine);
    int rc = c->ops->allgatherv(c, mine, all, sizes, err);
    int64_t p = 0;
    for (int r = 0; rc == CALF_OK && r < c->size; r++) {
        const int64_t *o = all + 5 * r;
        if (o[0] != t->E || o[1] != (int64_t)t->n || o[2] != (int64_t)t->elem)
            rc = calf_error_set(err, CALF_ECOMM,
                                "comm: rank %d sums %lld envs x %lld elements, rank %d "
                                "%d x %zu",
                                r, (long long)o[0], (long long)o[1], c->index, t->E, t->n);
        else if (o[3] != p || o[4] < 0 || o[3] + o[4] > t->E)
            rc = calf_error_set(err, CALF_ECOMM,
                                "comm: rank %d holds envs [%lld, %lld); ranks must tile "
                                "[0, %d) in rank order (expected begin %lld)",
                                r, (long long)o[3], (long long)(o[3] + o[4]), t->E,
                                (long long)p);
        else {
            sizes[r] = comm_tree_blob_bytes(t->E, (int)o[3], (int)o[4], t->n, t->elem);
            p += o[4];
        }
    }
    if (rc == CALF_OK && p != t->E)
        rc = calf_error_set(err, CALF_ECOMM, "comm: ranks hold envs [0, %lld), expected [0, %d)",
                            (long long)p, t->E);
    free(all);
    if (rc != CALF_OK) {
        free(sizes);
        return rc;
    }
    free(t->sizes);
    t->sizes = sizes;
    t->sizes_n = c->size;
    t->sizes_comm = c;
    return CALF_OK;
}

/* One process holds [0, E): its stack already is the maximal blocks; fold them in place. */
static int finish_alone(comm *c, comm_tree *t, void *out, calf_error *err) {
    if (t->begin != 0 || t->count != t->E)
        return calf_error_set(err, CALF_ECOMM,
                              "comm: the only rank holds envs [%d, %d), expected [0, %d)",
                              t->begin, t->begin + t->count, t->E);
    int rc = c->ops->barrier(c, err); /* keeps the collective count alike on every backend */
    if (rc != CALF_OK) return rc;
    tree_fold f;
    fold_init(&f, t->n, t->elem, out);
    for (int b = 0; b < t->depth; b++) fold_push(&f, t->buf[b], t->level[b], t->index[b]);
    fold_finish(&f);
    fold_free(&f);
    return CALF_OK;
}

/* The number of blocks in a blob of `bytes` for n-element vectors (blob_bytes_for's
 * inverse: its rounding adds less than one block's bytes). */
static int blob_nblocks(size_t bytes, size_t n, size_t elem) {
    return (int)((bytes - TREE_HEADER_WORDS * 8) / (16 + n * elem));
}

/* Whether to complete in slices. Whole, each rank receives every other rank's blocks:
 * B - own of the B blocks, whole vectors. In slices, 1/P of every block, then (P-1)/P of
 * the sum, and it waits for a second collective, counted as one more vector. So slices
 * pay when a rank with few blocks would receive more than B/P + 2 vectors whole (3 ranks
 * on 64 envs: 11 blocks, 8 for the rank with 3), not for one block per rank. Every rank
 * decides alike, from the sizes all of them hold; every slice must have elements. */
static bool slices_pay(const comm *c, const comm_tree *t) {
    int P = c->size, B = 0, fewest = INT_MAX;
    if (!c->ops->alltoallv || (t->n + COMM_SLICE_ELEMS - 1) / COMM_SLICE_ELEMS < (size_t)P)
        return false;
    for (int r = 0; r < P; r++) {
        int nb = blob_nblocks(t->sizes[r], t->n, t->elem);
        B += nb;
        if (nb < fewest) fewest = nb;
    }
    return (double)(B - fewest) > (double)B / P + 2.0;
}

/* Every rank completes its slice of the elements (comm_slice) from every rank's blocks,
 * sent to it by one alltoallv, then one allgatherv hands every rank every slice. Each
 * element is summed over the same tree in the same order as a whole completion. */
static int allreduce_in_slices(comm *c, comm_tree *t, void *out, calf_error *err) {
    int P = c->size;
    size_t *scounts = calf_xmalloc((size_t)P * sizeof *scounts);
    size_t *rcounts = calf_xmalloc((size_t)P * sizeof *rcounts);
    size_t *slices = calf_xmalloc((size_t)P * sizeof *slices);
    size_t stotal = 0, rtotal = 0, lo, hi, mine_lo, mine_hi;
    comm_slice(c, t->n, &mine_lo, &mine_hi);
    for (int q = 0; q < P; q++) {
        comm_slice_of(P, q, t->n, &lo, &hi);
        scounts[q] = comm_tree_packed_slice_bytes(t, lo, hi);
        slices[q] = (hi - lo) * t->elem;
        stotal += scounts[q];
        rcounts[q] = blob_bytes_for(blob_nblocks(t->sizes[q], t->n, t->elem), mine_hi - mine_lo,
                                    t->elem);
        rtotal += rcounts[q];
    }
    unsigned char *p = grow(&t->send, &t->send_cap, stotal);
    for (int q = 0; q < P; q++) {
        comm_slice_of(P, q, t->n, &lo, &hi);
        comm_tree_pack_slice(t, lo, hi, p);
        p += scounts[q];
    }
    grow(&t->recv, &t->recv_cap, rtotal);
    int rc = c->ops->alltoallv(c, t->send, scounts, t->recv, rcounts, err);
    /* the send buffer is free again: the slice goes there (the allgatherv's send and
     * receive buffers must not overlap), and it is no larger than what was sent */
    if (rc == CALF_OK)
        rc = comm_tree_finish(t->recv, rcounts, P, mine_hi - mine_lo, t->elem, t->E, t->send,
                              err);
    if (rc == CALF_OK) rc = c->ops->allgatherv(c, t->send, out, slices, err);
    free(slices);
    free(rcounts);
    free(scounts);
    return rc;
}

int comm_tree_allreduce(comm *c, comm_tree *t, void *out, calf_error *err) {
    CALF_ASSERT(t->pushed == t->count && !t->leaf_out);
    int rc = CALF_OK;
    if (c->size == 1) {
        rc = finish_alone(c, t, out, err);
        comm_tree_reset(t);
        return rc;
    }
    if (t->sizes_comm != c || t->sizes_n != c->size) rc = tree_exchange_ranges(c, t, err);
    if (rc == CALF_OK) {
        size_t mine = comm_tree_packed_bytes(t);
        CALF_ASSERT(mine == t->sizes[c->index]);
        const unsigned char *all = NULL;
        if (c->ops->next_arena) { /* zero-copy: pack into the shared arena, sum from it */
            size_t total = 0, off = 0;
            for (int r = 0; r < c->size; r++) {
                if (r < c->index) off += t->sizes[r];
                total += t->sizes[r];
            }
            unsigned char *arena = c->ops->next_arena(c, total, err);
            if (!arena) rc = CALF_ENOMEM;
            if (rc == CALF_OK) {
                comm_tree_pack(t, arena + off);
                all = c->ops->gathered(c, err);
                if (!all) rc = gathered_status(err);
            }
        } else if (slices_pay(c, t)) {
            rc = allreduce_in_slices(c, t, out, err);
        } else {
            size_t total = 0;
            for (int r = 0; r < c->size; r++) total += t->sizes[r];
            comm_tree_pack(t, grow(&t->send, &t->send_cap, mine));
            grow(&t->recv, &t->recv_cap, total);
            rc = c->ops->allgatherv(c, t->send, t->recv, t->sizes, err);
            all = t->recv;
        }
        if (rc == CALF_OK && all)
            rc = comm_tree_finish(all, t->sizes, c->size, t->n, t->elem, t->E, out, err);
    }
    comm_tree_reset(t);
    return rc;
}

/* ---- work-shared tree sum ------------------------------------------------------------ */

/* A piece [y, z) has at most z - y blocks, so its blob fits in (z - y) strides of one
 * block's bytes: pieces can sit at y * stride without knowing each other. The table of
 * piece ends (E int32) follows the E strides. */
static size_t piece_stride(size_t n) {
    /* room for one copied block, or for the (rank, offset) of one block by reference */
    size_t copied = blob_bytes_for(1, n, sizeof(float)), by_ref = TREE_HEADER_WORDS * 8 + 32;
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
        return calf_error_set(err, CALF_EINVAL, "comm: the %s backend cannot share a sum of %d x %zu",
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
        int64_t hdr[TREE_HEADER_WORDS] = {TREE_REF_MAGIC, t->E, (int64_t)t->n, (int64_t)t->elem,
                                          t->begin, t->pushed, t->depth};
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

/* With shared tree buffers every rank folds only its slice of the elements (each
 * element's sum is its own, so the slices together are exactly the whole fold) into one
 * vector all ranks share: the completion is split, not repeated on every rank. Slices are
 * whole runs of COMM_SLICE_ELEMS, so no two ranks write one cache line, and a caller can
 * give each rank the same part of what follows (the gradient norm, the optimiser step). */
void comm_slice_of(int P, int q, size_t n, size_t *lo, size_t *hi) {
    size_t runs = (n + COMM_SLICE_ELEMS - 1) / COMM_SLICE_ELEMS;
    size_t a = runs * (size_t)q / (size_t)P;
    size_t b = runs * (size_t)(q + 1) / (size_t)P;
    *lo = a * COMM_SLICE_ELEMS < n ? a * COMM_SLICE_ELEMS : n;
    *hi = b * COMM_SLICE_ELEMS < n ? b * COMM_SLICE_ELEMS : n;
}

void comm_slice(const comm *c, size_t n, size_t *lo, size_t *hi) {
    comm_slice_of(c->size, c->index, n, lo, hi);
}

float *comm_tree_shared_sum(const comm_tree *own) {
    CALF_ASSERT(own->shared);
    return (float *)(void *)(own->peer_base[0] +
                             (size_t)own->sets * (size_t)own->cap * shared_vec_bytes(own));
}

/* Checks the pieces, in env order, and pushes their blocks. */
static int push_pieces(tree_fold *f, const comm_tree_pieces *p, const unsigned char *all,
                       calf_error *err) {
    const unsigned char *ends = all + (size_t)p->E * p->stride;
    size_t vec = p->n * p->elem;
    int y = 0;
    while (y < p->E) {
        uint64_t stamped;
        memcpy(&stamped, ends + 8 * (size_t)y, sizeof stamped);
        int64_t z = (stamped >> 32) == p->seq ? (int64_t)(stamped & 0xffffffffu) : -1;
        const unsigned char *blob = all + (size_t)y * p->stride;
        int64_t h[TREE_HEADER_WORDS];
        memcpy(h, blob, sizeof h);
        int64_t nblocks = h[6];
        bool ref = h[0] == TREE_REF_MAGIC;
        if (z <= y || z > p->E || (h[0] != TREE_MAGIC && !(ref && p->shared)) || h[1] != p->E ||
            h[2] != (int64_t)p->n || h[3] != (int64_t)p->elem || h[4] != y || h[5] != z - y ||
            nblocks != range_nblocks(y, z))
            return calf_error_set(err, CALF_ECOMM,
                                  "comm: shared sum: no valid piece starts at env %d of %d", y,
                                  p->E);
        /* a copied blob's blocks follow its table of (level, index); a by-reference
         * blob's table rows carry (rank, offset) of each block too */
        const unsigned char *data = blob + TREE_HEADER_WORDS * 8 + (size_t)nblocks * 16;
        int64_t at = y;
        for (int64_t b = 0; b < nblocks; b++) {
            int64_t w[4];
            memcpy(w, blob + TREE_HEADER_WORDS * 8 + (size_t)b * (ref ? 32 : 16),
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
            if (!block_at(w[0], w[1], at, z, p->E))
                return calf_error_set(err, CALF_ECOMM,
                                      "comm: shared sum: bad block in the piece at env %d", y);
            fold_push(f, vecp, (int)w[0], w[1]);
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
    if (!all) return gathered_status(err);
    tree_fold f;
    fold_init(&f, p->n, p->elem, out);
    f.lo = lo;
    f.hi = hi;
    int rc = push_pieces(&f, p, all, err);
    if (rc == CALF_OK) fold_finish(&f);
    fold_free(&f);
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
    if (lo == hi) return c->ops->gathered(c, err) ? CALF_OK : gathered_status(err);
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

/* ---- work claims ---------------------------------------------------------------------- */

/* A word is tag (16 bits) | next (24) | limit (24): items [next, limit) are unclaimed. */
static uint64_t claim_pack(uint32_t tag, uint64_t next, uint64_t limit) {
    return ((uint64_t)(tag & 0xffff) << 48) | (next << 24) | limit;
}

void comm_claim_open(comm_claim *w, uint32_t tag, int count) {
    CALF_ASSERT(count >= 0 && count < (1 << 24));
    atomic_store_explicit(w, claim_pack(tag, 0, (uint64_t)count), memory_order_release);
}

int comm_claim_front(comm_claim *w, uint32_t tag, int max, int *first) {
    CALF_ASSERT(max > 0);
    uint64_t cur = atomic_load_explicit(w, memory_order_acquire);
    for (;;) {
        uint64_t next = (cur >> 24) & 0xffffff, limit = cur & 0xffffff;
        if ((cur >> 48) != (tag & 0xffff) || next >= limit) return 0;
        /* Never more than half of what is left (rounded up), so that the tail of the
         * round is claimed in ever smaller bites and nobody waits long for the last. */
        uint64_t take = (limit - next + 1) / 2;
        if (take > (uint64_t)max) take = (uint64_t)max;
        if (atomic_compare_exchange_weak_explicit(w, &cur, claim_pack(tag, next + take, limit),
                                                  memory_order_acq_rel, memory_order_acquire)) {
            *first = (int)next;
            return (int)take;
        }
    }
}

int comm_claim_back(comm_claim *const *words, int P, int self, int reach, uint32_t tag,
                    int *victim, int *first, int *unopened) {
    CALF_ASSERT(P >= 1 && self >= 0 && self < P && reach >= 0);
    if (reach > P - 1) reach = P - 1;
    for (;;) {
        int best = -1, closed = 0;
        uint64_t best_left = 0, best_word = 0;
        for (int d = 1; d <= reach; d++) {
            int r = self + d < P ? self + d : self + d - P;
            uint64_t cur = atomic_load_explicit(words[r], memory_order_acquire);
            uint64_t next = (cur >> 24) & 0xffffff, limit = cur & 0xffffff;
            if ((cur >> 48) != (tag & 0xffff)) {
                closed++;
                continue;
            }
            if (next >= limit) continue;
            if (limit - next > best_left) {
                best = r;
                best_left = limit - next;
                best_word = cur;
            }
        }
        if (unopened) *unopened = closed;
        if (best < 0) return 0;
        uint64_t next = (best_word >> 24) & 0xffffff, limit = best_word & 0xffffff;
        uint64_t take = (best_left + 1) / 2;
        if (atomic_compare_exchange_strong_explicit(words[best], &best_word,
                                                    claim_pack(tag, next, limit - take),
                                                    memory_order_acq_rel, memory_order_acquire)) {
            *victim = best;
            *first = (int)(limit - take);
            return (int)take;
        }
        /* The word moved under us (its owner claimed, or another thief): look again. */
    }
}

int comm_claim_take(comm_claim *const *words, int P, int self, int reach, uint32_t tag,
                    double open_wait_s, int *victim, int *first) {
    double give_up = -1.0;
    for (;;) {
        int unopened = 0;
        int k = comm_claim_back(words, P, self, reach, tag, victim, first, &unopened);
        if (k > 0 || unopened == 0 || open_wait_s <= 0) return k;
        double now = calf_monotonic_s();
        if (give_up < 0) give_up = now + open_wait_s;
        else if (now > give_up) return 0;
        sched_yield();
    }
}

void comm_share_timing(const comm *c, bool *slow, double *open_wait_s) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    bool core_each = cpus > 0 && c->size <= cpus;
    const char *env = getenv("CALF_TEST_SLOW_RANK");
    char *end = NULL;
    long slow_rank = env && *env ? strtol(env, &end, 10) : -1;
    bool named = end && *end == '\0';
    *slow = named && slow_rank == c->index;
    *open_wait_s = named ? 0.5 : core_each ? COMM_OPEN_WAIT_S : 0.0;
}

bool comm_shares_memory(const comm *c) { return c->ops->shared_alloc != NULL; }

size_t comm_shared_left(const comm *c) {
    return c->ops->shared_left ? c->ops->shared_left(c) : 0;
}

size_t comm_tree_shared_bytes(int E, size_t n, int spare) {
    /* the stack's buffers, once per set, then the vector a split completion lands in */
    return ((size_t)tree_cap(E) * (size_t)(1 + spare) + 1) * comm_round64(n * sizeof(float));
}

int comm_shared_alloc(comm *c, size_t bytes, void **peers, calf_error *err) {
    CALF_ASSERT(c->ops->shared_alloc);
    return c->ops->shared_alloc(c, bytes, peers, err);
}

int comm_tree_sum_f64(comm *c, int E, int begin, int count, const double *per_env, size_t n,
                      double *out, calf_error *err) {
    comm_tree t;
    comm_tree_init_f64(&t, n, E, begin, count);
    for (int i = 0; i < count; i++) {
        memcpy(comm_tree_leaf_f64(&t), per_env + (size_t)i * n, n * sizeof(double));
        comm_tree_push(&t);
    }
    /* Pad every blob to the largest any range can need: one collective, no range exchange. */
    size_t blob = comm_tree_blob_bytes_max(E, n, sizeof(double));
    CALF_ASSERT(comm_tree_packed_bytes(&t) <= blob);
    unsigned char *send = calf_xcalloc(1, blob);
    unsigned char *recv = calf_xmalloc((size_t)c->size * blob);
    size_t *sizes = equal_sizes(c, blob);
    comm_tree_pack(&t, send);
    int rc = c->ops->allgatherv(c, send, recv, sizes, err);
    if (rc == CALF_OK) rc = comm_tree_finish(recv, sizes, c->size, n, sizeof(double), E, out, err);
    free(sizes);
    free(recv);
    free(send);
    comm_tree_free(&t);
    return rc;
}
