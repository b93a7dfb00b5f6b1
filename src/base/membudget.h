/* membudget.h: the memory this process may use, for the checks that refuse a config whose
 * buffers cannot fit before anything is written (trainer_check_memory). */
#ifndef CALF_MEMBUDGET_H
#define CALF_MEMBUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"

/* *bytes: the smallest of the machine's memory, this process's cgroup limit and the
 * address-space and data rlimits; *what names the one that applied ("this machine's
 * memory", "the address-space limit (ulimit -v)", ...). UINT64_MAX and NULL when none
 * is known. The memory_bytes test hook (calf/testing.h) stands in for all of them. */
int membudget_limit(uint64_t *bytes, const char **what, calf_error *err);

/* The two kinds of bound, for memory that is reserved before it is touched (a MuJoCo
 * env's data arena): what may be resident (the machine's memory, the cgroup's limit:
 * resident) and what may be mapped (ulimit -v and -d: address). Each UINT64_MAX and
 * NULL when unknown; the memory_bytes test hook sets the resident bound alone. */
typedef struct membudget_bound {
    uint64_t bytes;
    const char *what;
} membudget_bound;
int membudget_limits(membudget_bound *resident, membudget_bound *address, calf_error *err);

/* bytes as the memory checks' messages write them: "12.4 GiB", "953.7 MiB", "2.0 KiB",
 * "512 bytes" (cap bytes of buf). */
void membudget_format(double bytes, char *buf, size_t cap);

#endif
