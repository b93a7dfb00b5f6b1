/* test_util.h: the tiny assert helper every tests/test_<module>.c shares.
 * A failed check prints file:line and the values, and the test exits non-zero. */
#ifndef CALF_TEST_UTIL_H
#define CALF_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failures = 0;
static int test_checks = 0;

#define CHECK(cond)                                                            \
    do {                                                                       \
        test_checks++;                                                         \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,   \
                    #cond);                                                    \
            test_failures++;                                                   \
        }                                                                      \
    } while (0)

#define CHECK_INT_EQ(a, b)                                                     \
    do {                                                                       \
        long long va_ = (long long)(a), vb_ = (long long)(b);                  \
        test_checks++;                                                         \
        if (va_ != vb_) {                                                      \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n",          \
                    __FILE__, __LINE__, #a, #b, va_, vb_);                     \
            test_failures++;                                                   \
        }                                                                      \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                  \
    do {                                                                       \
        double va_ = (double)(a), vb_ = (double)(b);                           \
        test_checks++;                                                         \
        if (!(fabs(va_ - vb_) <= (tol))) {                                     \
            fprintf(stderr, "%s:%d: |%s - %s| <= %g failed: %.17g vs %.17g\n", \
                    __FILE__, __LINE__, #a, #b, (double)(tol), va_, vb_);      \
            test_failures++;                                                   \
        }                                                                      \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                     \
    do {                                                                       \
        const char *va_ = (a), *vb_ = (b);                                     \
        test_checks++;                                                         \
        if (va_ == NULL || vb_ == NULL || strcmp(va_, vb_) != 0) {             \
            fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n",      \
                    __FILE__, __LINE__, #a, #b, va_ ? va_ : "(null)",          \
                    vb_ ? vb_ : "(null)");                                     \
            test_failures++;                                                   \
        }                                                                      \
    } while (0)

/* Call last in main: prints a summary line and returns the exit status. */
static inline int test_report(const char *name) {
    if (test_checks == 0) {
        fprintf(stderr, "%s: no checks ran\n", name);
        return 1;
    }
    printf("%s: %d checks, %d failed\n", name, test_checks, test_failures);
    return test_failures ? 1 : 0;
}

#endif
