/* claim.c: work claims (claim.h): one lock-free word per rank over its work items, from
 * which the rank takes its own from the front and a rank out of work takes the back half
 * of another's remainder, so that ranks sharing memory share a round of work. */
#include "parallel/claim.h"

#include <sched.h>
#include <time.h>

#include "base/clock.h"
#include "calf/error.h"

/* A word is tag (16 bits) | next (24) | limit (24): items [next, limit) are unclaimed. */
static uint64_t claim_pack(uint32_t tag, uint64_t next, uint64_t limit) {
    return ((uint64_t)(tag & 0xffff) << 48) | (next << 24) | limit;
}

void comm_claim_open(comm_claim *w, uint32_t tag, int count) {
    CALF_ASSERT(count >= 0 && count < (1 << 24));
    atomic_store_explicit(w, claim_pack(tag, 0, (uint64_t)count), memory_order_release);
}

bool comm_claim_taken(const comm_claim *w, uint32_t tag, int count) {
    uint64_t cur = atomic_load_explicit(w, memory_order_acquire);
    return (cur >> 48) != (tag & 0xffff) || (cur & 0xffffff) < (uint64_t)count;
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
