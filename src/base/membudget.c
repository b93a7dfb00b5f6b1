/* membudget.c: how much memory this process may use: the smallest of the machine's memory,
 * its cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes, up to the root) and
 * ulimit -v / -d. What refuses a config that cannot fit before anything is written. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/membudget.h"
#include "base/testing.h"

/* The smallest of `*memory` and `bytes`; `what` names the bound when it is smaller. */
static void lower_bound(uint64_t *memory, const char **limit, uint64_t bytes, const char *what) {
    if (bytes < *memory) {
        *memory = bytes;
        *limit = what;
    }
}

/* The smallest `file` (a number of bytes, or "max") of `group` under `base` and of every
 * group above it; UINT64_MAX when none can be read. */
static uint64_t group_limit(const char *base, char *group, const char *file) {
    uint64_t least = UINT64_MAX;
    char path[4200], v[64];
    while (group[0] == '/') {
        snprintf(path, sizeof path, "%s%s/%s", base, group[1] ? group : "", file);
        FILE *m = fopen(path, "r");
        if (m && fgets(v, sizeof v, m)) {
            char *end;
            errno = 0;
            unsigned long long b = strtoull(v, &end, 10);
            if (errno == 0 && end != v && (*end == '\n' || *end == '\0') && b < least) least = b;
        }
        if (m) fclose(m);
        char *slash = strrchr(group, '/');
        if (slash == group) {
            if (!group[1]) break; /* the root, done */
            group[1] = '\0';
        } else {
            *slash = '\0';
        }
    }
    return least;
}

/* The memory limit of this process's cgroup (v2 memory.max, v1 memory.limit_in_bytes),
 * the smallest on the way to the root; UINT64_MAX when there is none or it cannot be
 * read. */
static uint64_t cgroup_memory_max(void) {
    uint64_t least = UINT64_MAX;
    char line[4096];
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return least;
    while (fgets(line, sizeof line, f)) { /* "ID:CONTROLLERS:PATH" */
        line[strcspn(line, "\n")] = '\0';
        char *c = strchr(line, ':'), *g = c ? strchr(c + 1, ':') : NULL;
        if (!g) continue;
        *g++ = '\0';
        uint64_t b = UINT64_MAX;
        if (strcmp(line, "0") == 0 && c[1] == '\0')
            b = group_limit("/sys/fs/cgroup", g, "memory.max");
        else if (strcmp(c + 1, "memory") == 0 || strstr(c + 1, ",memory") ||
                 strncmp(c + 1, "memory,", 7) == 0)
            b = group_limit("/sys/fs/cgroup/memory", g, "memory.limit_in_bytes");
        if (b < least) least = b;
    }
    fclose(f);
    return least;
}

int membudget_limits(membudget_bound *resident, membudget_bound *address, calf_error *err) {
    *resident = (membudget_bound){UINT64_MAX, NULL};
    *address = (membudget_bound){UINT64_MAX, NULL};
    (void)err;
    uint64_t test = testing_hooks_get()->memory_bytes; /* tests: the machine's memory */
    if (test) {
        lower_bound(&resident->bytes, &resident->what, test, "this machine's memory");
        return CALF_OK;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
        lower_bound(&resident->bytes, &resident->what, (uint64_t)pages * (uint64_t)page,
                    "this machine's memory");
    lower_bound(&resident->bytes, &resident->what, cgroup_memory_max(),
                "this process's cgroup (memory.max)");
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        lower_bound(&address->bytes, &address->what, (uint64_t)rl.rlim_cur,
                    "the address-space limit (ulimit -v)");
    if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        lower_bound(&address->bytes, &address->what, (uint64_t)rl.rlim_cur,
                    "the data limit (ulimit -d)");
    return CALF_OK;
}

int membudget_limit(uint64_t *bytes, const char **what, calf_error *err) {
    membudget_bound resident, address;
    int rc = membudget_limits(&resident, &address, err);
    if (rc) return rc;
    bool res = resident.bytes <= address.bytes;
    *bytes = res ? resident.bytes : address.bytes;
    *what = res ? resident.what : address.what;
    return CALF_OK;
}

void membudget_format(double bytes, char *buf, size_t cap) {
    if (bytes >= 1024.0 * 1024.0 * 1024.0)
        snprintf(buf, cap, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
    else if (bytes >= 1024.0 * 1024.0) snprintf(buf, cap, "%.1f MiB", bytes / (1024.0 * 1024.0));
    else if (bytes >= 1024.0) snprintf(buf, cap, "%.1f KiB", bytes / 1024.0);
    else snprintf(buf, cap, "%.0f bytes", bytes);
}
