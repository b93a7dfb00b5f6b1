/* tree_sum.c: the canonical env-ordered tree sum (tree_sum.h): a rank's partials folded
 * with a binary counter, the blobs ranks exchange, and their completion into the one sum
 * whose bits do not depend on how the envs were split between processes. */
#include "parallel/tree_sum.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

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
int comm_tree_range_blocks(int64_t a, int64_t b) {
    int nb = 0;
    while (a < b) {
        a += (int64_t)1 << block_level_at(a, b);
        nb++;
    }
    return nb;
}

/* A block (level, index) from a blob lies at env `at` and ends by env `end` of E. */
bool comm_tree_block_at(int64_t level, int64_t index, int64_t at, int64_t end, int E) {
    return level >= 0 && level <= 31 && index >= 0 && index <= E && (index << level) == at &&
           at + ((int64_t)1 << level) <= end;
}

static size_t round8(size_t x) { return (x + 7) & ~(size_t)7; }

size_t comm_tree_blob_bytes_for(int nblocks, size_t n, size_t elem) {
    return round8(COMM_TREE_HEADER_WORDS * 8 + (size_t)nblocks * 16 + (size_t)nblocks * n * elem);
}

size_t comm_tree_blob_bytes(int E, int begin, int count, size_t n, size_t elem) {
    (void)E;
    return comm_tree_blob_bytes_for(comm_tree_range_blocks(begin, (int64_t)begin + count), n, elem);
}

size_t comm_tree_blob_bytes_max(int E, size_t n, size_t elem) {
    /* A range's blocks grow then shrink, each level at most once on each side. */
    return comm_tree_blob_bytes_for(2 * ceil_log2(E) + 1, n, elem);
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
int comm_tree_cap(int E) { return 2 * ceil_log2(E) + 2; }

/* The stack positions pushing envs [begin, begin + count) one at a time puts a leaf at:
 * 0 .. the result - 1. The binary counter of comm_tree_push on levels and indices alone
 * (push_into_left puts no leaf, so it needs no more). */
static int tree_leaf_depth(int64_t begin, int count) {
    int level[66], depth = 0, most = 0;
    int64_t index[66];
    for (int i = 0; i < count; i++) {
        if (depth + 1 > most) most = depth + 1;
        level[depth] = 0;
        index[depth] = begin + i;
        depth++;
        while (depth >= 2 && level[depth - 1] == level[depth - 2] &&
               (index[depth - 2] & 1) == 0 && index[depth - 1] == index[depth - 2] + 1) {
            level[depth - 2]++;
            index[depth - 2] >>= 1;
            depth--;
        }
    }
    return most;
}

/* Buffers for every leaf of [t->begin, t->begin + t->count), so that no leaf allocates:
 * a shared tree has all of its own. Buffers start zeroed and every merge writes left +
 * right over all n elements, so an element no leaf ever writes stays zero in every
 * buffer: comm_tree_leaf_raw relies on it. */
static int tree_reserve(comm_tree *t, calf_error *err) {
    if (t->shared) return CALF_OK;
    int need = tree_leaf_depth(t->begin, t->count);
    CALF_ASSERT(need <= t->cap);
    for (int d = 0; d < need; d++)
        if (!t->buf[d] && !(t->buf[d] = mem_calloc(t->n, t->elem, err))) return CALF_ENOMEM;
    return CALF_OK;
}

static int tree_init(comm_tree *t, size_t n, size_t elem, int E, int begin, int count,
                     calf_error *err) {
    CALF_ASSERT(E >= 1 && begin >= 0 && count >= 0 && (int64_t)begin + count <= E);
    memset(t, 0, sizeof *t);
    t->n = n;
    t->elem = elem;
    t->E = E;
    t->begin = begin;
    t->count = count;
    t->cap = comm_tree_cap(E);
    if (!(t->level = mem_calloc((size_t)t->cap, sizeof *t->level, err)) ||
        !(t->index = mem_calloc((size_t)t->cap, sizeof *t->index, err)) ||
        !(t->buf = mem_calloc((size_t)t->cap, sizeof *t->buf, err)))
        return CALF_ENOMEM; /* comm_tree_free frees what was made */
    return tree_reserve(t, err);
}

int comm_tree_init(comm_tree *t, size_t n, int E, int begin, int count, calf_error *err) {
    return tree_init(t, n, sizeof(float), E, begin, count, err);
}

int comm_tree_init_f64(comm_tree *t, size_t n, int E, int begin, int count, calf_error *err) {
    return tree_init(t, n, sizeof(double), E, begin, count, err);
}

static void *tree_leaf_raw(comm_tree *t) {
    CALF_ASSERT(t->pushed < t->count && t->depth < t->cap && t->buf[t->depth]);
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


/* A shared tree's buffers are rewritten right away: the caller has passed a barrier
 * after every rank's last read of them (comm_tree_pieces_sum ends with one; after
 * comm_tree_pieces_fold it is the caller's). */
int comm_tree_restart(comm_tree *t, int begin, int count, calf_error *err) {
    CALF_ASSERT(begin >= 0 && count >= 0 && (int64_t)begin + count <= t->E);
    comm_tree_reset(t);
    t->begin = begin;
    t->count = count;
    return tree_reserve(t, err);
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

size_t comm_tree_packed_bytes(const comm_tree *t) {
    return comm_tree_blob_bytes_for(t->depth, t->n, t->elem);
}

size_t comm_tree_packed_slice_bytes(const comm_tree *t, size_t lo, size_t hi) {
    CALF_ASSERT(lo <= hi && hi <= t->n);
    return comm_tree_blob_bytes_for(t->depth, hi - lo, t->elem);
}

void comm_tree_pack_slice(const comm_tree *t, size_t lo, size_t hi, void *buf) {
    CALF_ASSERT(t->pushed == t->count && !t->leaf_out && lo <= hi && hi <= t->n);
    unsigned char *p = buf;
    int64_t hdr[COMM_TREE_HEADER_WORDS] = {COMM_TREE_MAGIC, t->E, (int64_t)(hi - lo),
                                           (int64_t)t->elem, t->begin, t->count, t->depth};
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

/* The completion from blocks in env order (comm_tree_fold, tree_sum.h). Pushing runs
 * the binary counter on the blocks' (level, index) alone and records each merge it would
 * make; comm_tree_fold_finish then carries out that program a chunk of elements at a
 * time, so the partial sums stay in a small buffer in the cache and each block is read
 * once, where it lies (read only: a shared arena, a peer's blob). Every element is added
 * in the same order as by merging whole vectors, so the bits are those of the canonical
 * tree. */
enum {
    FOLD_CHUNK = 2048,    /* bytes of every vector folded at a time */
    FOLD_LOCAL_TEMPS = 4, /* stack positions whose chunks fit in comm_tree_fold_finish's frame */
};

void comm_tree_fold_init(comm_tree_fold *f, size_t n, size_t elem, void *out) {
    CALF_ASSERT(elem == sizeof(float) || elem == sizeof(double));
    f->n = n;
    f->elem = elem;
    f->lo = 0;
    f->hi = n;
    f->out = out;
    f->count = f->nops = f->depth = f->max_pos = 0;
    f->room = COMM_TREE_FOLD_LOCAL;
    f->vec = f->local_vec;
    f->ops = f->local_ops;
}

void comm_tree_fold_free(comm_tree_fold *f) {
    if (f->vec != f->local_vec) free((void *)f->vec);
    if (f->ops != f->local_ops) free(f->ops);
    f->vec = f->local_vec;
    f->ops = f->local_ops;
}

static int fold_grow(comm_tree_fold *f, calf_error *err) {
    int room = f->room * 2;
    const void **vec = mem_alloc((size_t)room * sizeof *vec, err);
    comm_tree_fold_op *ops = vec ? mem_alloc((size_t)room * sizeof *ops, err) : NULL;
    if (!ops) {
        free((void *)vec);
        return CALF_ENOMEM;
    }
    memcpy(vec, f->vec, (size_t)f->count * sizeof *vec);
    memcpy(ops, f->ops, (size_t)f->nops * sizeof *ops);
    comm_tree_fold_free(f);
    f->vec = vec;
    f->ops = ops;
    f->room = room;
    return CALF_OK;
}

static void fold_merge(comm_tree_fold *f, int b) {
    f->ops[f->nops++] = (comm_tree_fold_op){b, f->code[b], f->code[b + 1]};
    f->code[b] = -1 - b;
}

int comm_tree_fold_push(comm_tree_fold *f, const void *vec, int level, int64_t index,
                        calf_error *err) {
    CALF_ASSERT(f->depth < 66 && f->count < (1 << 30));
    if (f->count == f->room && fold_grow(f, err) != CALF_OK) return CALF_ENOMEM;
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
    return CALF_OK;
}

static const unsigned char *fold_operand(const comm_tree_fold *f, int code, unsigned char *out,
                                         unsigned char *temp, size_t at) {
    if (code >= 0) return (const unsigned char *)f->vec[code] + at;
    return code == -1 ? out : temp + (size_t)(-2 - code) * FOLD_CHUNK;
}

/* What remains are the maximal blocks of [0, E), largest first. Up the clipped right
 * spine of the tree each node is left block + (everything to its right), and a node with
 * nothing to its right is its left half unchanged. Then the recorded merges run over
 * [lo, hi) a chunk at a time. */
int comm_tree_fold_finish(comm_tree_fold *f, calf_error *err) {
    CALF_ASSERT(f->depth >= 1);
    for (int b = f->depth - 2; b >= 0; b--) fold_merge(f, b);
    size_t e = f->elem, at = f->lo * e, end = f->hi * e;
    if (f->nops == 0) { /* one block: the sum is that block */
        if (f->out != f->vec[0] && end > at)
            memcpy((unsigned char *)f->out + at, (const unsigned char *)f->vec[0] + at, end - at);
        return CALF_OK;
    }
    /* stack positions 1.. hold partial sums of the current chunk; 0 is out itself */
    _Alignas(64) unsigned char local[FOLD_LOCAL_TEMPS * FOLD_CHUNK];
    unsigned char *temp = f->max_pos <= FOLD_LOCAL_TEMPS
                              ? local
                              : mem_alloc((size_t)f->max_pos * FOLD_CHUNK, err);
    if (!temp) return CALF_ENOMEM;
    void (*add3)(void *, const void *, const void *, size_t) =
        e == sizeof(float) ? add3_f32 : add3_f64;
    for (; at < end; at += FOLD_CHUNK) {
        size_t bytes = end - at < FOLD_CHUNK ? end - at : FOLD_CHUNK;
        unsigned char *out = (unsigned char *)f->out + at;
        for (int k = 0; k < f->nops; k++) {
            const comm_tree_fold_op *op = &f->ops[k];
            unsigned char *dst = op->dst == 0 ? out : temp + (size_t)(op->dst - 1) * FOLD_CHUNK;
            add3(dst, fold_operand(f, op->a, out, temp, at), fold_operand(f, op->b, out, temp, at),
                 bytes / e);
        }
    }
    if (temp != local) free(temp);
    return CALF_OK;
}

/* Checks the blobs (one per rank, in rank order, rank r's at blobs + offset) and pushes
 * their blocks. */
static int push_blobs(comm_tree_fold *f, const unsigned char *packed, const size_t *sizes,
                      int nranks, int E, calf_error *err) {
    size_t n = f->n, elem = f->elem, vec = n * elem;
    int64_t p = 0;
    size_t off = 0;
    for (int r = 0; r < nranks; r++) {
        const unsigned char *blob = packed + off;
        int64_t h[COMM_TREE_HEADER_WORDS];
        if (sizes[r] % 8 != 0 || sizes[r] < sizeof h)
            return calf_error_set(err, CALF_ECOMM, "comm: tree blob of rank %d has %zu bytes",
                                  r, sizes[r]);
        memcpy(h, blob, sizeof h);
        if (h[0] != COMM_TREE_MAGIC || h[1] != E || h[2] != (int64_t)n || h[3] != (int64_t)elem)
            return calf_error_set(err, CALF_ECOMM,
                                  "comm: tree blob of rank %d is for %lld envs x %lld "
                                  "elements of %lld bytes, expected %d x %zu of %zu",
                                  r, (long long)h[1], (long long)h[2], (long long)h[3], E, n,
                                  elem);
        int64_t begin = h[4], count = h[5], nblocks = h[6];
        if (begin != p || count < 0 || begin + count > E || nblocks < 0 ||
            nblocks != comm_tree_range_blocks(begin, begin + count) ||
            comm_tree_blob_bytes_for((int)nblocks, n, elem) > sizes[r])
            return calf_error_set(err, CALF_ECOMM,
                                  "comm: rank %d holds envs [%lld, %lld) in %lld blocks; "
                                  "ranks must tile [0, %d) in rank order (expected begin %lld)",
                                  r, (long long)begin, (long long)(begin + count),
                                  (long long)nblocks, E, (long long)p);
        const unsigned char *data = blob + COMM_TREE_HEADER_WORDS * 8 + (size_t)nblocks * 16;
        for (int64_t b = 0; b < nblocks; b++) {
            int64_t li[2];
            memcpy(li, blob + COMM_TREE_HEADER_WORDS * 8 + (size_t)b * 16, sizeof li);
            if (!comm_tree_block_at(li[0], li[1], p, begin + count, E))
                return calf_error_set(err, CALF_ECOMM,
                                      "comm: rank %d sent block (level %lld, index %lld) "
                                      "where env %lld was expected",
                                      r, (long long)li[0], (long long)li[1], (long long)p);
            int rc = comm_tree_fold_push(f, data + (size_t)b * vec, (int)li[0], li[1], err);
            if (rc) return rc;
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
    comm_tree_fold f;
    comm_tree_fold_init(&f, n, elem, out);
    int rc = push_blobs(&f, packed, sizes, nranks, E, err);
    if (rc == CALF_OK) rc = comm_tree_fold_finish(&f, err);
    comm_tree_fold_free(&f);
    return rc;
}

/* *buf with room for need bytes (its contents are not kept), or NULL with err set. */
static unsigned char *grow(unsigned char **buf, size_t *cap, size_t need, calf_error *err) {
    if (need > *cap) {
        free(*buf);
        *cap = 0;
        if (!(*buf = mem_alloc(need, err))) return NULL;
        *cap = need;
    }
    return *buf;
}

/* Learn (and check) every rank's range once per comm: one small allgather. */
static int tree_exchange_ranges(comm *c, comm_tree *t, calf_error *err) {
    int64_t mine[5] = {t->E, (int64_t)t->n, (int64_t)t->elem, t->begin, t->count};
    int64_t *all = mem_alloc((size_t)c->size * sizeof mine, err);
    size_t *sizes = all ? comm_equal_sizes(c, sizeof mine, err) : NULL;
    int rc = sizes ? c->ops->allgatherv(c, mine, all, sizes, err) : CALF_ENOMEM;
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
    comm_tree_fold f;
    comm_tree_fold_init(&f, t->n, t->elem, out);
    for (int b = 0; rc == CALF_OK && b < t->depth; b++)
        rc = comm_tree_fold_push(&f, t->buf[b], t->level[b], t->index[b], err);
    if (rc == CALF_OK) rc = comm_tree_fold_finish(&f, err);
    comm_tree_fold_free(&f);
    return rc;
}

/* The number of blocks in a blob of `bytes` for n-element vectors (the inverse of
 * comm_tree_blob_bytes_for: its rounding adds less than one block's bytes). */
static int blob_nblocks(size_t bytes, size_t n, size_t elem) {
    return (int)((bytes - COMM_TREE_HEADER_WORDS * 8) / (16 + n * elem));
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
    /* everything before the first exchange: a rank without it takes no part */
    size_t *scounts = mem_alloc((size_t)P * sizeof *scounts, err);
    size_t *rcounts = scounts ? mem_alloc((size_t)P * sizeof *rcounts, err) : NULL;
    size_t *slices = rcounts ? mem_alloc((size_t)P * sizeof *slices, err) : NULL;
    if (!slices) {
        free(rcounts);
        free(scounts);
        return CALF_ENOMEM;
    }
    size_t stotal = 0, rtotal = 0, lo, hi, mine_lo, mine_hi;
    comm_slice(c, t->n, &mine_lo, &mine_hi);
    for (int q = 0; q < P; q++) {
        comm_slice_of(P, q, t->n, &lo, &hi);
        scounts[q] = comm_tree_packed_slice_bytes(t, lo, hi);
        slices[q] = (hi - lo) * t->elem;
        stotal += scounts[q];
        rcounts[q] = comm_tree_blob_bytes_for(blob_nblocks(t->sizes[q], t->n, t->elem),
                                              mine_hi - mine_lo, t->elem);
        rtotal += rcounts[q];
    }
    unsigned char *p = grow(&t->send, &t->send_cap, stotal, err);
    int rc = p && grow(&t->recv, &t->recv_cap, rtotal, err) ? CALF_OK : CALF_ENOMEM;
    for (int q = 0; rc == CALF_OK && q < P; q++) {
        comm_slice_of(P, q, t->n, &lo, &hi);
        comm_tree_pack_slice(t, lo, hi, p);
        p += scounts[q];
    }
    if (rc == CALF_OK) rc = c->ops->alltoallv(c, t->send, scounts, t->recv, rcounts, err);
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
                if (!all) rc = comm_gathered_status(err);
            }
        } else if (slices_pay(c, t)) {
            rc = allreduce_in_slices(c, t, out, err);
        } else {
            size_t total = 0;
            for (int r = 0; r < c->size; r++) total += t->sizes[r];
            unsigned char *send = grow(&t->send, &t->send_cap, mine, err);
            if (!send || !grow(&t->recv, &t->recv_cap, total, err)) {
                rc = CALF_ENOMEM;
            } else {
                comm_tree_pack(t, send);
                rc = c->ops->allgatherv(c, t->send, t->recv, t->sizes, err);
                all = t->recv;
            }
        }
        if (rc == CALF_OK && all)
            rc = comm_tree_finish(all, t->sizes, c->size, t->n, t->elem, t->E, out, err);
    }
    comm_tree_reset(t);
    return rc;
}


int comm_tree_sum_f64(comm *c, int E, int begin, int count, const double *per_env, size_t n,
                      double *out, calf_error *err) {
    /* everything before the exchange: a rank without it takes no part */
    comm_tree t;
    int rc = comm_tree_init_f64(&t, n, E, begin, count, err);
    for (int i = 0; rc == CALF_OK && i < count; i++) {
        memcpy(comm_tree_leaf_f64(&t), per_env + (size_t)i * n, n * sizeof(double));
        comm_tree_push(&t);
    }
    /* Pad every blob to the largest any range can need: one collective, no range exchange. */
    size_t blob = comm_tree_blob_bytes_max(E, n, sizeof(double));
    CALF_ASSERT(rc != CALF_OK || comm_tree_packed_bytes(&t) <= blob);
    unsigned char *send = rc == CALF_OK ? mem_calloc(1, blob, err) : NULL;
    unsigned char *recv = send ? mem_alloc((size_t)c->size * blob, err) : NULL;
    size_t *sizes = recv ? comm_equal_sizes(c, blob, err) : NULL;
    if (!sizes) rc = CALF_ENOMEM;
    if (rc == CALF_OK) {
        comm_tree_pack(&t, send);
        rc = c->ops->allgatherv(c, send, recv, sizes, err);
    }
    if (rc == CALF_OK) rc = comm_tree_finish(recv, sizes, c->size, n, sizeof(double), E, out, err);
    free(sizes);
    free(recv);
    free(send);
    comm_tree_free(&t);
    return rc;
}
