/* test_context.c: every rule of the per-process context (ALF's PerProcessContext), and
 * that calf's own code asks the job's comm, not the context, which process is the main. */
#include "calf/context.h"
#include "calf/testing.h"
#include "parallel/comm.h"
#include "test_util.h"

int main(void) {
    calf_error err;

    /* defaults: not distributed, rank -1 as in ALF, one process, main */
    calf_context_reset_for_testing();
    CHECK_INT_EQ(calf_context_rank(), -1);
    CHECK_INT_EQ(calf_context_num_processes(), 1);
    CHECK_INT_EQ(calf_context_local_rank(), -1);
    CHECK(!calf_context_is_distributed());
    CHECK(calf_context_is_main());
    CHECK(!calf_context_is_finalized());

    /* invalid ranks are refused and change nothing */
    CHECK_INT_EQ(calf_context_set_distributed(2, 2, 0, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "rank 2 out of range [0, 2)") != NULL);
    CHECK_INT_EQ(calf_context_set_distributed(-1, 2, 0, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_context_set_distributed(0, 0, 0, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_context_set_distributed(0, 2, 5, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_context_rank(), -1);
    CHECK(!calf_context_is_distributed());

    /* a valid set */
    CHECK_INT_EQ(calf_context_set_distributed(1, 4, 1, &err), CALF_OK);
    CHECK_INT_EQ(calf_context_rank(), 1);
    CHECK_INT_EQ(calf_context_num_processes(), 4);
    CHECK_INT_EQ(calf_context_local_rank(), 1);
    CHECK(calf_context_is_distributed());
    CHECK(!calf_context_is_main());

    /* the rank's home is the comm: a process's own single comm is the main process of
     * its job whatever a host program set the context to */
    comm *c = NULL;
    CHECK_INT_EQ(comm_single(&c, &err), CALF_OK);
    CHECK(comm_is_main(c));
    CHECK_INT_EQ(comm_rank(c), -1);
    comm_finalize(c);

    /* set once: a second set fails even before finalize */
    CHECK_INT_EQ(calf_context_set_distributed(0, 4, 0, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "already set") != NULL);
    CHECK_INT_EQ(calf_context_rank(), 1);

    /* finalize freezes it; finalize twice is harmless */
    calf_context_finalize();
    calf_context_finalize();
    CHECK(calf_context_is_finalized());
    CHECK_INT_EQ(calf_context_set_distributed(0, 2, 0, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "finalized") != NULL);
    CHECK_INT_EQ(calf_context_rank(), 1);
    CHECK_INT_EQ(calf_context_num_processes(), 4);

    /* rank 0 of a distributed job is the main process */
    calf_context_reset_for_testing();
    CHECK_INT_EQ(calf_context_set_distributed(0, 2, 0, &err), CALF_OK);
    CHECK(calf_context_is_main());
    CHECK(calf_context_is_distributed());

    /* finalized without ever being set: stays non-distributed and cannot be set */
    calf_context_reset_for_testing();
    calf_context_finalize();
    CHECK_INT_EQ(calf_context_set_distributed(0, 1, 0, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_context_rank(), -1);
    CHECK(calf_context_is_main());

    return test_report("test_context");
}
