/* testing.h: the test hooks of calf/testing.h as the library reads them. */
#ifndef CALF_BASE_TESTING_H
#define CALF_BASE_TESTING_H

#include <stdbool.h>
#include <stdint.h>

typedef struct testing_hooks {
    int slow_rank;          /* -1: none */
    uint64_t memory_bytes;  /* 0: the machine's own limits */
    int ckpt_chunk_envs;    /* 0: about 64 MiB of records a chunk */
    int alloc_fail_rank;    /* with alloc_fail_at: the rank whose allocation fails */
    uint64_t alloc_fail_at; /* 0: none; k: that rank's k-th mem_* allocation fails */
    int64_t alloc_fail_iter;/* 0: none; i: that rank's first allocation in iteration i
                               (or later) fails */
    int hold_rank;          /* with hold_secs > 0: the rank held at its second iteration */
    double hold_secs;       /* 0: none */
    bool hold_busy;         /* busy_rank (working, comm_progress) or stuck_rank (silent) */
} testing_hooks;

/* The current settings (all off until calf_testing_set). */
const testing_hooks *testing_hooks_get(void);

/* This process's rank in its job, as the per-process context learns it (-1: none, which
 * the alloc_fail hook takes for rank 0); restarts the allocation count. */
void testing_note_rank(int rank);

/* The iteration this process's trainer is in (1 for the first), as the trainer starts it. */
void testing_note_iteration(int64_t iteration);

/* Whether the allocation being made is the one the alloc_fail hook fails (counts it).
 * mem.c asks before each allocation; thread-safe. */
bool testing_alloc_fails(void);

#endif
