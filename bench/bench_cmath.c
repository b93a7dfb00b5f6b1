/* bench_cmath.c: calf's exp, log, sin, cos, tanh and powi against libm's, in ns per call
 * over arrays of the arguments calf passes (bench_cmath [reps]); median of 7 runs. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "base/cmath.h"

enum { N = 4096 };

static double powi_libm(double x) { return pow(x, 1000.0); }
static double powi_calf(double x) { return cm_powi(x, 1000); }

typedef struct pair {
    const char *name;
    double (*calf)(double), (*libm)(double);
    double lo, hi;
} pair;

static volatile double sink;

static double ns_per_call(double (*f)(double), const double *x, int reps) {
    double t[7];
    for (int k = 0; k < 7; k++) {
        double s = 0, t0 = bench_now();
        for (int r = 0; r < reps; r++)
            for (int i = 0; i < N; i++) s += f(x[i]);
        t[k] = (bench_now() - t0) * 1e9 / ((double)reps * N);
        sink = s;
    }
    return bench_quantile(t, 7, 0.5);
}

int main(int argc, char **argv) {
    int reps = 100;
    if (argc > 1) {
        char *end;
        long r = strtol(argv[1], &end, 10);
        if (end == argv[1] || *end != '\0' || r > 1000000) {
            fprintf(stderr, "bench_cmath: REPS must be a number up to 1000000, not '%s'\n",
                    argv[1]);
            return 2;
        }
        reps = r < 1 ? 1 : (int)r;
    }
    const pair p[] = {
        {"exp", cm_exp, exp, -20, 20},      {"log", cm_log, log, 1e-6, 4},
        {"sin", cm_sin, sin, -80, 80},      {"cos", cm_cos, cos, -80, 80},
        {"tanh", cm_tanh, tanh, -4, 4},     {"powi", powi_calf, powi_libm, 0.99, 1.0},
    };
    static double x[N];
    uint64_t s = 1;
    printf("%-6s %10s %10s\n", "fn", "calf ns", "libm ns");
    for (size_t k = 0; k < sizeof p / sizeof p[0]; k++) {
        for (int i = 0; i < N; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            x[i] = p[k].lo + (p[k].hi - p[k].lo) * ((double)(s >> 11) * 0x1p-53);
        }
        printf("%-6s %10.2f %10.2f\n", p[k].name, ns_per_call(p[k].calf, x, reps),
               ns_per_call(p[k].libm, x, reps));
    }
    return 0;
}
