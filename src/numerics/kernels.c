/* kernels.c: the run-time choice of kernel variant (kernels.h): which variants this build
 * holds, which one this CPU runs (or CALF_KERNELS forces), and the plain-named functions of
 * the dispatched files, each one call through the chosen variant's table. */
#include "numerics/kernels.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* CMake says which variants it compiled: CALF_KERNELS_FMA=1 where the portable x86-64
 * build also has the AVX2+FMA copy; CALF_KERNELS_NATIVE=1 where the one copy is
 * -march=native (then named "native", not "generic": it may not run on another CPU). */
#ifndef CALF_KERNELS_FMA
#define CALF_KERNELS_FMA 0
#endif
#ifndef CALF_KERNELS_NATIVE
#define CALF_KERNELS_NATIVE 0
#endif

typedef struct kernels_table {
    const char *name;  /* CALF_KERNELS's word for it */
    const char *about; /* kernels_describe's text */
    bool needs_fma;    /* runs only where the CPU has AVX2 and FMA */
#define KERNELS_FIELD(ret, name, params, args) ret(*name) params;
#define KERNELS_FIELD_VOID(name, params, args) void(*name) params;
    KERNELS_LIST(KERNELS_FIELD, KERNELS_FIELD_VOID)
} kernels_table;

/* Each variant's functions, by their link names (kernels.h), and its table. */
#define KERNELS_DECLARE_GENERIC(ret, name, params, args) ret name##_generic params;
#define KERNELS_DECLARE_GENERIC_VOID(name, params, args) void name##_generic params;
KERNELS_LIST(KERNELS_DECLARE_GENERIC, KERNELS_DECLARE_GENERIC_VOID)
#define KERNELS_GENERIC(ret, name, params, args) name##_generic,
#define KERNELS_GENERIC_VOID(name, params, args) name##_generic,
static const kernels_table generic_table = {
#if CALF_KERNELS_NATIVE
    "native", "native (compiled for the build machine's CPU: -DCALF_NATIVE=ON)", false,
#elif defined(__x86_64__)
    "generic", "generic (baseline x86-64: runs on any x86-64 CPU; fmaf is a call into libm)",
    false,
#else
    "generic", "generic (this architecture's baseline)", false,
#endif
    KERNELS_LIST(KERNELS_GENERIC, KERNELS_GENERIC_VOID)};

#if CALF_KERNELS_FMA
#define KERNELS_DECLARE_FMA(ret, name, params, args) ret name##_fma params;
#define KERNELS_DECLARE_FMA_VOID(name, params, args) void name##_fma params;
KERNELS_LIST(KERNELS_DECLARE_FMA, KERNELS_DECLARE_FMA_VOID)
#define KERNELS_FMA(ret, name, params, args) name##_fma,
#define KERNELS_FMA_VOID(name, params, args) name##_fma,
static const kernels_table fma_table = {
    "fma", "fma (x86-64 with AVX2 and FMA: fmaf is one instruction, kernels 8 floats wide)",
    true, KERNELS_LIST(KERNELS_FMA, KERNELS_FMA_VOID)};
#endif

/* The variants of this build, best first. */
static const kernels_table *const variants[] = {
#if CALF_KERNELS_FMA
    &fma_table,
#endif
    &generic_table,
};
#define NUM_VARIANTS (sizeof variants / sizeof variants[0])

static bool cpu_has_fma(void) {
#if CALF_KERNELS_FMA
    /* libgcc's answer also asks the OS whether it saves the AVX registers */
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

static bool runs_here(const kernels_table *t) { return !t->needs_fma || cpu_has_fma(); }

static const kernels_table *best(void) {
    for (size_t i = 0; i < NUM_VARIANTS; i++)
        if (runs_here(variants[i])) return variants[i];
    return &generic_table;
}

/* What CALF_KERNELS asks for, or CALF_EINVAL saying why not. */
static int choose(const kernels_table **out, calf_error *err) {
    const char *want = getenv("CALF_KERNELS");
    *out = best();
    if (!want || !*want || !strcmp(want, "auto")) return CALF_OK;
    char names[64] = "";
    for (size_t i = 0; i < NUM_VARIANTS; i++) {
        const kernels_table *t = variants[NUM_VARIANTS - 1 - i];
        if (!strcmp(want, t->name)) {
            if (!runs_here(t))
                return calf_error_set(err, CALF_EINVAL,
                                      "CALF_KERNELS=%s: this CPU lacks AVX2 or FMA, which the %s "
                                      "kernels need (unset CALF_KERNELS to use the best this "
                                      "CPU runs)",
                                      want, t->name);
            *out = t;
            return CALF_OK;
        }
        strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
        strncat(names, t->name, sizeof names - strlen(names) - 1);
    }
    return calf_error_set(err, CALF_EINVAL,
                          "CALF_KERNELS=%s: not a kernel variant of this build (it has %s, "
                          "or auto)",
                          want, names);
}

/* The variant every call runs, set once; NULL until the first call chooses. Not state:
 * a property of the CPU and the environment at start, as an ifunc's resolution is. */
static _Atomic(const kernels_table *) chosen;

static const kernels_table *choose_once(void) {
    const kernels_table *t, *expected = NULL;
    choose(&t, NULL); /* on a refusal t is the best variant this CPU runs */
    /* a racing thread chose the same; either way the first stored is the one kept */
    if (!atomic_compare_exchange_strong(&chosen, &expected, t)) t = expected;
    return t;
}

static inline const kernels_table *table(void) {
    const kernels_table *t = atomic_load_explicit(&chosen, memory_order_acquire);
    return t ? t : choose_once();
}

int kernels_select(calf_error *err) {
    const kernels_table *t;
    int rc = choose(&t, err);
    if (rc != CALF_OK) return rc;
    table();
    return CALF_OK;
}

const char *kernels_describe(void) {
    const kernels_table *t;
    if (choose(&t, NULL) != CALF_OK)
        return "refused: CALF_KERNELS names a variant this build lacks or this CPU cannot run";
    return table()->about;
}

/* The plain names: one call through the chosen table. */
#define KERNELS_ENTRY(ret, name, params, args) \
    ret name params { return table()->name args; }
#define KERNELS_ENTRY_VOID(name, params, args) \
    void name params { table()->name args; }
KERNELS_LIST(KERNELS_ENTRY, KERNELS_ENTRY_VOID)
