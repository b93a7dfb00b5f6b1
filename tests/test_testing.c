/* test_testing.c: the test hooks (calf/testing.h) parse as documented, a bad spec
 * changes nothing, "" clears them, and alloc_fail fails the one allocation it names. */
#include "calf/testing.h"
#include "base/testing.h"
#include "test_util.h"

int main(void) {
    calf_error err;
    const testing_hooks *h = testing_hooks_get();
    CHECK_INT_EQ(h->slow_rank, -1);
    CHECK_INT_EQ(h->memory_bytes, 0);
    CHECK_INT_EQ(h->ckpt_chunk_envs, 0);

    CHECK_INT_EQ(calf_testing_set("slow_rank=2,memory_bytes=2048,ckpt_chunk_envs=3", &err), CALF_OK);
    CHECK_INT_EQ(h->slow_rank, 2);
    CHECK_INT_EQ(h->memory_bytes, 2048);
    CHECK_INT_EQ(h->ckpt_chunk_envs, 3);

    /* refused, naming the part, and nothing changes */
    CHECK_INT_EQ(calf_testing_set("slow_rank=1,speed=9", &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "unknown hook 'speed'") != NULL);
    CHECK_INT_EQ(calf_testing_set("memory_bytes=2k", &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "memory_bytes='2k' is not a number in range") != NULL);
    CHECK_INT_EQ(calf_testing_set("memory_bytes=0", &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_testing_set("slow_rank=-1", &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_testing_set("ckpt_chunk_envs", &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "'ckpt_chunk_envs' is not name=value") != NULL);
    CHECK_INT_EQ(h->slow_rank, 2);
    CHECK_INT_EQ(h->memory_bytes, 2048);

    /* a spec sets exactly what it names; "" clears */
    CHECK_INT_EQ(calf_testing_set("ckpt_chunk_envs=1", &err), CALF_OK);
    CHECK_INT_EQ(h->slow_rank, -1);
    CHECK_INT_EQ(h->memory_bytes, 0);
    CHECK_INT_EQ(h->ckpt_chunk_envs, 1);
    CHECK_INT_EQ(calf_testing_set("", &err), CALF_OK);
    CHECK_INT_EQ(h->ckpt_chunk_envs, 0);

    /* alloc_fail=R:K fails exactly the K-th allocation of rank R (0 when not distributed),
     * counted from when the rank is known; other ranks allocate freely */
    CHECK_INT_EQ(calf_testing_set("alloc_fail=0:3", &err), CALF_OK);
    CHECK_INT_EQ(h->alloc_fail_rank, 0);
    CHECK(h->alloc_fail_at == 3);
    int fails[5];
    for (int i = 0; i < 5; i++) fails[i] = testing_alloc_fails();
    CHECK(!fails[0] && !fails[1] && fails[2] && !fails[3] && !fails[4]);
    testing_note_rank(1); /* another rank: never */
    int any = 0;
    for (int i = 0; i < 10; i++) any |= testing_alloc_fails();
    CHECK(!any);
    testing_note_rank(0); /* rank 0 joins a job: its count starts again */
    for (int i = 0; i < 3; i++) fails[i] = testing_alloc_fails();
    CHECK(!fails[0] && !fails[1] && fails[2]);
    testing_note_rank(-1);
    CHECK_INT_EQ(calf_testing_set("alloc_fail=1", &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "alloc_fail='1' is not a number in range") != NULL);
    CHECK_INT_EQ(calf_testing_set("alloc_fail=1:0", &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_testing_set("alloc_fail=:4", &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_testing_set("alloc_fail=1:4x", &err), CALF_EINVAL);
    CHECK_INT_EQ(h->alloc_fail_rank, 0); /* refused specs changed nothing */
    CHECK_INT_EQ(calf_testing_set("", &err), CALF_OK);
    CHECK(h->alloc_fail_at == 0 && !testing_alloc_fails());

    /* alloc_fail_iter=R:I: rank R's first allocation once iteration I has started, once */
    CHECK_INT_EQ(calf_testing_set("alloc_fail_iter=2:4", &err), CALF_OK);
    testing_note_rank(2);
    testing_note_iteration(3);
    CHECK(!testing_alloc_fails() && !testing_alloc_fails());
    testing_note_iteration(4);
    CHECK(testing_alloc_fails());
    CHECK(!testing_alloc_fails());
    testing_note_iteration(5);
    CHECK(!testing_alloc_fails());
    CHECK_INT_EQ(calf_testing_set("alloc_fail_iter=2:0", &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "alloc_fail_iter='2:0' is not a number in range") != NULL);
    CHECK_INT_EQ(calf_testing_set("", &err), CALF_OK);
    testing_note_rank(-1);
    return test_report("test_testing");
}
