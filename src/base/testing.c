/* testing.c: the test hooks (calf/testing.h): parsed once when the host sets them, read
 * by the few places that take them; process-wide like the per-process context. */
#include "calf/testing.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/testing.h"

#define HOOKS_OFF {.slow_rank = -1, .memory_bytes = 0, .ckpt_chunk_envs = 0, .alloc_fail_rank = -1, \
                   .hold_rank = -1}
static testing_hooks hooks = HOOKS_OFF;
static int known_rank = -1;
static atomic_uint_fast64_t alloc_count;
static _Atomic int_fast64_t iteration_now;
static atomic_bool iter_failed;

const testing_hooks *testing_hooks_get(void) { return &hooks; }

void testing_note_rank(int rank) {
    known_rank = rank;
    atomic_store(&alloc_count, 0);
    atomic_store(&iteration_now, 0);
    atomic_store(&iter_failed, false);
}

void testing_note_iteration(int64_t iteration) { atomic_store(&iteration_now, iteration); }

bool testing_alloc_fails(void) {
    if (hooks.alloc_fail_rank != (known_rank < 0 ? 0 : known_rank)) return false;
    if (hooks.alloc_fail_iter > 0 && atomic_load(&iteration_now) >= hooks.alloc_fail_iter)
        return !atomic_exchange(&iter_failed, true);
    return hooks.alloc_fail_at > 0 && atomic_fetch_add(&alloc_count, 1) + 1 == hooks.alloc_fail_at;
}

/* The number of text[0..len), within [lo, hi]; false if it is not one. */
static int parse_number(const char *text, size_t len, unsigned long long lo, unsigned long long hi,
                        unsigned long long *out) {
    char buf[32];
    if (len == 0 || len >= sizeof buf || text[0] == '-' || text[0] == '+') return 0;
    memcpy(buf, text, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

int calf_testing_set(const char *spec, calf_error *err) {
    testing_hooks next = HOOKS_OFF;
    for (const char *p = spec ? spec : ""; *p;) {
        size_t n = strcspn(p, ",");
        const char *eq = memchr(p, '=', n);
        if (!eq)
            return calf_error_set(err, CALF_EINVAL, "test hooks: '%.*s' is not name=value",
                                  (int)n, p);
        size_t name_len = (size_t)(eq - p), value_len = n - name_len - 1;
        const char *value = eq + 1;
        unsigned long long v = 0;
        int ok;
        if (name_len == 9 && !strncmp(p, "slow_rank", 9)) {
            ok = parse_number(value, value_len, 0, 1u << 20, &v);
            if (ok) next.slow_rank = (int)v;
        } else if (name_len == 12 && !strncmp(p, "memory_bytes", 12)) {
            ok = parse_number(value, value_len, 1, UINT64_MAX, &v);
            if (ok) next.memory_bytes = v;
        } else if (name_len == 15 && !strncmp(p, "ckpt_chunk_envs", 15)) {
            ok = parse_number(value, value_len, 1, 1u << 30, &v);
            if (ok) next.ckpt_chunk_envs = (int)v;
        } else if (name_len == 10 && !strncmp(p, "alloc_fail", 10)) {
            const char *colon = memchr(value, ':', value_len);
            unsigned long long r = 0;
            ok = colon && parse_number(value, (size_t)(colon - value), 0, 1u << 20, &r) &&
                 parse_number(colon + 1, value_len - (size_t)(colon - value) - 1, 1, UINT64_MAX, &v);
            if (ok) next.alloc_fail_rank = (int)r, next.alloc_fail_at = v;
        } else if (name_len == 15 && !strncmp(p, "alloc_fail_iter", 15)) {
            const char *colon = memchr(value, ':', value_len);
            unsigned long long r = 0;
            ok = colon && parse_number(value, (size_t)(colon - value), 0, 1u << 20, &r) &&
                 parse_number(colon + 1, value_len - (size_t)(colon - value) - 1, 1, INT64_MAX, &v);
            if (ok) next.alloc_fail_rank = (int)r, next.alloc_fail_iter = (int64_t)v;
        } else if ((name_len == 9 && !strncmp(p, "busy_rank", 9)) ||
                   (name_len == 10 && !strncmp(p, "stuck_rank", 10))) {
            const char *colon = memchr(value, ':', value_len);
            unsigned long long r = 0;
            ok = colon && parse_number(value, (size_t)(colon - value), 0, 1u << 20, &r) &&
                 parse_number(colon + 1, value_len - (size_t)(colon - value) - 1, 1, 86400, &v);
            if (ok) next.hold_rank = (int)r, next.hold_secs = (double)v, next.hold_busy = p[0] == 'b';
        } else {
            return calf_error_set(err, CALF_EINVAL, "test hooks: unknown hook '%.*s' (known: "
                                  "slow_rank, memory_bytes, ckpt_chunk_envs, alloc_fail, "
                                  "alloc_fail_iter, busy_rank, stuck_rank)",
                                  (int)name_len, p);
        }
        if (!ok)
            return calf_error_set(err, CALF_EINVAL, "test hooks: %.*s='%.*s' is not a number in "
                                  "range", (int)name_len, p, (int)value_len, value);
        p += n;
        if (*p == ',') p++;
    }
    hooks = next;
    atomic_store(&alloc_count, 0);
    atomic_store(&iter_failed, false);
    return CALF_OK;
}
