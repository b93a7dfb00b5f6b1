/* test_testing.c: the test hooks (calf/testing.h) parse as documented, a bad spec
 * changes nothing, and "" clears them. */
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
    return test_report("test_testing");
}
