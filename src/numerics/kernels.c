/* kernels.c: the run-time choice of kernel variant (kernels.h): which variants this build
 * holds, which one this CPU runs (or CALF_KERNELS forces), and the plain-named functions of
 * the dispatched files, each one call through the chosen variant's table. */
#include "numerics/kernels.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* CMake says which variants it compiled: CALF_KERNELS_FMA=1 where the portable x86-64
 * build also has the AVX2+FMA copy and the AVX-512 one; CALF_KERNELS_NATIVE=1 where the one copy is
 * -march=native (then named "native", not "generic": it may not run on another CPU). */
#ifndef CALF_KERNELS_FMA
#define CALF_KERNELS_FMA 0
#endif
#ifndef CALF_KERNELS_NATIVE
#define CALF_KERNELS_NATIVE 0
#endif

/* What a variant needs of the CPU (and of the OS: that it saves the registers). */
typedef enum { NEEDS_NOTHING, NEEDS_FMA, NEEDS_AVX512 } kernels_needs;

typedef struct kernels_table {
    const char *name;    /* CALF_KERNELS's word for it */
    const char *about;   /* kernels_describe's text */
    kernels_needs needs; /* what the CPU must have to run it */
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
    "native", "native (compiled for the build machine's CPU: -DCALF_NATIVE=ON)", NEEDS_NOTHING,
#elif defined(__x86_64__)
    "generic", "generic (baseline x86-64: runs on any x86-64 CPU; fmaf is a call into libm)",
    NEEDS_NOTHING,
#else
    "generic", "generic (this architecture's baseline)", NEEDS_NOTHING,
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
    NEEDS_FMA, KERNELS_LIST(KERNELS_FMA, KERNELS_FMA_VOID)};

#define KERNELS_DECLARE_AVX512(ret, name, params, args) ret name##_avx512 params;
#define KERNELS_DECLARE_AVX512_VOID(name, params, args) void name##_avx512 params;
KERNELS_LIST(KERNELS_DECLARE_AVX512, KERNELS_DECLARE_AVX512_VOID)
#define KERNELS_AVX512(ret, name, params, args) name##_avx512,
#define KERNELS_AVX512_VOID(name, params, args) name##_avx512,
static const kernels_table avx512_table = {
    "avx512",
    "avx512 (x86-64 with AVX-512F and VL: the products' tiles 16 floats wide, the rest as "
    "fma)",
    NEEDS_AVX512, KERNELS_LIST(KERNELS_AVX512, KERNELS_AVX512_VOID)};
#endif

/* The variants of this build, best first. */
static const kernels_table *const variants[] = {
#if CALF_KERNELS_FMA
    &avx512_table,
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

#if CALF_KERNELS_FMA
/* XCR0, the register state the OS saves on a context switch (valid only where CPUID says
 * the OS enabled XSAVE: leaf 1, ECX bit 27). */
static uint64_t xcr0(void) {
    uint32_t a, b, c, d, lo, hi;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1u), "c"(0u));
    if (!(c & (1u << 27))) return 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0u));
    return (uint64_t)hi << 32 | lo;
}
#endif

static bool cpu_has_avx512(void) {
#if CALF_KERNELS_FMA
    /* the instructions (AVX-512F and VL, with AVX2 and FMA), and the OS saving all of
     * their state: XCR0 bits 1-2 (XMM, YMM) and 5-7 (the mask registers, ZMM0-15's upper
     * halves, ZMM16-31). libgcc checks the same; asked here too, so the rule is in sight */
    const uint64_t state = 0x06 | 0xe0;
    return cpu_has_fma() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512vl") && (xcr0() & state) == state;
#else
    return false;
#endif
}

static bool runs_here(const kernels_table *t) {
    switch (t->needs) {
    case NEEDS_FMA: return cpu_has_fma();
    case NEEDS_AVX512: return cpu_has_avx512();
    default: return true;
    }
}

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
                                      "CALF_KERNELS=%s: this CPU lacks %s, which the %s "
                                      "kernels need (unset CALF_KERNELS to use the best this "
                                      "CPU runs)",
                                      want,
                                      t->needs == NEEDS_AVX512
                                          ? "AVX-512F or VL (or the OS does not save their "
                                            "registers)"
                                          : "AVX2 or FMA",
                                      t->name);
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
