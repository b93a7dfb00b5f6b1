/* memory.h: the memory this process may use, for the checks that refuse a config whose
 * buffers cannot fit before anything is written (trainer_check_memory). */
#ifndef CALF_MEMORY_H
#define CALF_MEMORY_H

#include <stdint.h>

#include "calf/error.h"

/* *bytes: the smallest of the machine's memory, this process's cgroup limit and the
 * address-space and data rlimits; *what names the one that applied ("this machine's
 * memory", "the address-space limit (ulimit -v)", ...). UINT64_MAX and NULL when none
 * is known. CALF_TEST_MEMORY_BYTES (tests) stands in for all of them; a value that is
 * not a number is CALF_EINVAL. */
int memory_limit(uint64_t *bytes, const char **what, calf_error *err);

#endif
