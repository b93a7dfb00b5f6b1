/* testing.h: the test hooks of calf/testing.h as the library reads them. */
#ifndef CALF_BASE_TESTING_H
#define CALF_BASE_TESTING_H

#include <stdint.h>

typedef struct testing_hooks {
    int slow_rank;          /* -1: none */
    uint64_t memory_bytes;  /* 0: the machine's own limits */
    int ckpt_chunk_envs;    /* 0: about 64 MiB of records a chunk */
} testing_hooks;

/* The current settings (all off until calf_testing_set). */
const testing_hooks *testing_hooks_get(void);

#endif
