/* claim.h: work claims, for ranks that share memory: one lock-free word per rank over
 * its work items, so that a rank out of work takes the back half of a slower one's. */
#ifndef CALF_CLAIM_H
#define CALF_CLAIM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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
/* Whether another rank has taken items from the back of this rank's word, opened over
 * count items in round tag (or the word has moved on to another round). */
bool comm_claim_taken(const comm_claim *w, uint32_t tag, int count);
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

#endif
