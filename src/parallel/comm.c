/* comm.c: the backend-independent half of comm (comm.h): the comm object, the single
 * backend, and the collectives the trainer uses, built on the five primitives every
 * backend supplies; shared memory where a backend offers it. */
#include "parallel/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/mem.h"

/* ---- the comm object ---------------------------------------------------------------- */

int comm_rank(const comm *c) { return c->rank; }
int comm_size(const comm *c) { return c->size; }
bool comm_is_main(const comm *c) { return c->index == 0; }
const char *comm_backend_name(const comm *c) { return c->ops->name; }

void comm_set_timeout(comm *c, double secs) {
    CALF_ASSERT(secs > 0);
    c->timeout_s = secs;
}

void comm_progress(comm *c) {
    if (c->ops->progress) c->ops->progress(c);
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
int comm_gathered_status(const calf_error *err) {
    return err && err->status != CALF_OK ? err->status : CALF_ECOMM;
}

/* Every rank's blob is `bytes` long: a (size) array for the primitives, caller frees. */
size_t *comm_equal_sizes(const comm *c, size_t bytes, calf_error *err) {
    size_t *sizes = mem_alloc((size_t)c->size * sizeof *sizes, err);
    for (int r = 0; sizes && r < c->size; r++) sizes[r] = bytes;
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

int comm_single(comm **out, calf_error *err) {
    comm *c = mem_calloc(1, sizeof *c, err);
    *out = c;
    if (!c) return CALF_ENOMEM;
    c->ops = &single_ops;
    c->rank = -1;
    c->size = 1;
    c->index = 0;
    c->timeout_s = 600.0;
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
    /* both arrays before the exchange: a rank without them takes no part in it */
    int32_t *all = mem_alloc((size_t)c->size * sizeof *all, err);
    size_t *sizes = all ? comm_equal_sizes(c, sizeof mine, err) : NULL;
    int rc = sizes ? c->ops->allgatherv(c, &mine, all, sizes, err) : CALF_ENOMEM;
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
    /* both arrays before the exchange: a rank without them takes no part in it */
    int32_t *all = mem_alloc((size_t)c->size * sizeof *all, err);
    size_t *sizes = all ? comm_equal_sizes(c, sizeof mine, err) : NULL;
    int rc = sizes ? c->ops->allgatherv(c, &mine, all, sizes, err) : CALF_ENOMEM;
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
    unsigned char *all = mem_alloc((size_t)c->size * (n ? n : 1), err);
    size_t *sizes = all ? comm_equal_sizes(c, n, err) : NULL;
    int rc = sizes ? c->ops->allgatherv(c, digest, all, sizes, err) : CALF_ENOMEM;
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

/* " rank R has V" for each rank whose value `vals[r * stride]` differs from rank 0's, at
 * most 8 of them, into list (size bytes). */
static void list_differing(const comm *c, const int64_t *vals, size_t stride, char *list,
                           size_t size) {
    size_t used = 0;
    int listed = 0;
    list[0] = '\0';
    for (int r = 1; r < c->size && used < size; r++) {
        if (vals[(size_t)r * stride] == vals[0]) continue;
        int w = listed++ < 8 ? snprintf(list + used, size - used, ", rank %d has %lld", r,
                                        (long long)vals[(size_t)r * stride])
                             : snprintf(list + used, size - used, ", ...");
        if (w > 0) used += (size_t)w;
        if (listed > 8) break;
    }
}

int comm_check_agree(comm *c, const int64_t *vals, const char *const *names, int n,
                     int *which, calf_error *err) {
    CALF_ASSERT(n >= 1);
    *which = -1;
    int64_t *all = mem_alloc((size_t)c->size * (size_t)n * sizeof *all, err);
    size_t *sizes = all ? comm_equal_sizes(c, (size_t)n * sizeof *vals, err) : NULL;
    int rc = sizes ? c->ops->allgatherv(c, vals, all, sizes, err) : CALF_ENOMEM;
    /* every rank sees the same values, so every rank fails alike: nobody waits */
    for (int i = 0; rc == CALF_OK && i < n; i++) {
        for (int r = 1; r < c->size; r++) {
            if (all[(size_t)r * (size_t)n + (size_t)i] == all[i]) continue;
            char list[256];
            list_differing(c, all + i, (size_t)n, list, sizeof list);
            *which = i;
            rc = calf_error_set(err, CALF_ECOMM, "ranks disagree on %s: rank 0 has %lld%s",
                                names[i], (long long)all[i], list);
            break;
        }
    }
    free(sizes);
    free(all);
    return rc;
}

int comm_gather_records(comm *c, const void *local, size_t rec_size, int count, int total,
                        void *all, calf_error *err) {
    CALF_ASSERT(count >= 0 && total >= 0 && rec_size <= INT64_MAX);
    /* (count, record size) from every rank first: rank 0 makes room for what each rank
     * says it sends, so a rank whose record size differs (a Python env's slot sized from
     * its own pickle) must fail here, on every rank, before any record moves */
    int64_t mine[2] = {count, (int64_t)rec_size};
    int64_t *said = mem_alloc((size_t)c->size * sizeof mine, err);
    size_t *sizes = said ? comm_equal_sizes(c, sizeof mine, err) : NULL;
    int rc = sizes ? c->ops->allgatherv(c, mine, said, sizes, err) : CALF_ENOMEM;
    if (rc == CALF_OK) {
        int64_t sum = 0;
        bool same = true;
        for (int r = 0; r < c->size; r++) {
            sum += said[2 * r];
            same = same && said[2 * r + 1] == said[1];
            sizes[r] = (size_t)said[2 * r] * rec_size;
        }
        char list[256];
        if (!same) {
            list_differing(c, said + 1, 2, list, sizeof list);
            rc = calf_error_set(err, CALF_ECOMM,
                                "comm: gathering records: ranks disagree on the record size: "
                                "rank 0 has %lld%s",
                                (long long)said[1], list);
        } else if (sum != total) {
            rc = calf_error_set(err, CALF_ECOMM,
                                "comm: gathering records: ranks hold %lld records in all, "
                                "expected %d",
                                (long long)sum, total);
        } else {
            rc = c->ops->gatherv(c, local, all, sizes, 0, err);
        }
    }
    free(sizes);
    free(said);
    return rc;
}

/* ---- a rank's slice of n elements ------------------------------------------------------ */

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

/* ---- shared memory ------------------------------------------------------------------- */

bool comm_shares_memory(const comm *c) { return c->ops->shared_alloc != NULL; }

size_t comm_shared_left(const comm *c) {
    return c->ops->shared_left ? c->ops->shared_left(c) : 0;
}

int comm_shared_alloc(comm *c, size_t bytes, void **peers, calf_error *err) {
    CALF_ASSERT(c->ops->shared_alloc);
    return c->ops->shared_alloc(c, bytes, peers, err);
}

