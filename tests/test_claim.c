/* test_claim.c: the work claims (parallel/claim.c) in one process: front bites never
 * exceed half of what is left, thieves take the back half of the largest remainder within
 * their reach, and a word opened for another round claims nothing. */
#include "parallel/claim.h"
#include "test_util.h"

/* The claim protocol in one process: front bites never exceed half of what is left,
 * thieves take the back half of the largest remainder, a stale tag claims nothing. */
static void test_claims(void) {
    comm_claim w[3];
    comm_claim *words[3] = {&w[0], &w[1], &w[2]};
    int first = -1, victim = -1;
    comm_claim_open(&w[0], 7, 10);
    comm_claim_open(&w[1], 7, 0);
    comm_claim_open(&w[2], 6, 50); /* an earlier round: not open in round 7 */
    CHECK_INT_EQ(comm_claim_front(&w[0], 7, 4, &first), 4); /* half of 10 is 5; max 4 */
    CHECK_INT_EQ(first, 0);
    CHECK_INT_EQ(comm_claim_front(&w[0], 8, 4, &first), 0); /* wrong round */
    /* Rank 1 (no work of its own) takes the back half of rank 0's 6 left: [7, 10). */
    CHECK_INT_EQ(comm_claim_back(words, 3, 1, 2, 7, &victim, &first, NULL), 3);
    CHECK_INT_EQ(victim, 0);
    CHECK_INT_EQ(first, 7);
    CHECK_INT_EQ(comm_claim_front(&w[0], 7, 4, &first), 2); /* [4, 7): half of 3, rounded up */
    CHECK_INT_EQ(first, 4);
    CHECK_INT_EQ(comm_claim_back(words, 3, 1, 2, 7, &victim, &first, NULL), 1); /* [6, 7) */
    CHECK_INT_EQ(first, 6);
    CHECK_INT_EQ(comm_claim_front(&w[0], 7, 4, &first), 0);
    /* Nothing left to take, but rank 2 has not opened round 7: its items may still come. */
    int unopened = -1;
    CHECK_INT_EQ(comm_claim_back(words, 3, 1, 2, 7, &victim, &first, &unopened), 0);
    CHECK_INT_EQ(unopened, 1);
    comm_claim_open(&w[2], 7, 0);
    CHECK_INT_EQ(comm_claim_back(words, 3, 1, 2, 7, &victim, &first, &unopened), 0);
    CHECK_INT_EQ(unopened, 0);
    /* A thief never takes from itself, and picks the largest remainder. */
    comm_claim_open(&w[0], 9, 3);
    comm_claim_open(&w[1], 9, 8);
    comm_claim_open(&w[2], 9, 5);
    CHECK_INT_EQ(comm_claim_back(words, 3, 1, 2, 9, &victim, &first, NULL), 3); /* rank 2's [2, 5) */
    CHECK_INT_EQ(victim, 2);
    CHECK_INT_EQ(first, 2);
    CHECK_INT_EQ(comm_claim_back(words, 3, 0, 2, 9, &victim, &first, &unopened), 4); /* rank 1's [4, 8) */
    CHECK_INT_EQ(unopened, 0);
    CHECK_INT_EQ(victim, 1);
    CHECK_INT_EQ(first, 4);
    /* A bounded reach looks only at the next ranks, cyclically: from rank 2 with reach 1
     * that is rank 0 (3 left), not rank 1 (4 left); an unopened rank beyond the reach is
     * not counted. A reach beyond P - 1 is all the others. */
    CHECK_INT_EQ(comm_claim_back(words, 3, 2, 1, 9, &victim, &first, &unopened), 2); /* [1, 3) */
    CHECK_INT_EQ(victim, 0);
    CHECK_INT_EQ(first, 1);
    comm_claim_open(&w[1], 8, 4);
    CHECK_INT_EQ(comm_claim_back(words, 3, 2, 1, 9, &victim, &first, &unopened), 1); /* [0, 1) */
    CHECK_INT_EQ(unopened, 0);
    CHECK_INT_EQ(comm_claim_back(words, 3, 2, 1, 9, &victim, &first, &unopened), 0);
    CHECK_INT_EQ(unopened, 0);
    CHECK_INT_EQ(comm_claim_back(words, 3, 2, 5, 9, &victim, &first, &unopened), 0);
    CHECK_INT_EQ(unopened, 1);
    CHECK_INT_EQ(comm_claim_back(words, 3, 2, 0, 9, &victim, &first, &unopened), 0);
    CHECK_INT_EQ(unopened, 0);
}

int main(void) {
    test_claims();
    return test_report("test_claim");
}
