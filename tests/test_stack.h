/* test_stack.h: running a test's work on a thread of a small stack, as an embedding host's
 * thread may have (test_kernels, test_api_trainer). */
#ifndef CALF_TEST_STACK_H
#define CALF_TEST_STACK_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* A sanitized or unoptimized build gives every inlined value a frame slot of its own, so
 * its frames are several times an optimized build's: a test gives its thread more there. */
#if defined(__SANITIZE_ADDRESS__) || !defined(__OPTIMIZE__)
#define TEST_LARGE_FRAMES 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_LARGE_FRAMES 1
#endif
#endif
#ifndef TEST_LARGE_FRAMES
#define TEST_LARGE_FRAMES 0
#endif

/* fn(arg) on a new thread of `stack` bytes (at least PTHREAD_STACK_MIN), joined; false if
 * no such thread could start. */
static inline bool test_on_stack(size_t stack, void *(*fn)(void *), void *arg) {
    if (stack < (size_t)PTHREAD_STACK_MIN) stack = (size_t)PTHREAD_STACK_MIN;
    pthread_attr_t attr;
    pthread_t t;
    if (pthread_attr_init(&attr) != 0) return false;
    bool ok = pthread_attr_setstacksize(&attr, stack) == 0 &&
              pthread_create(&t, &attr, fn, arg) == 0;
    pthread_attr_destroy(&attr);
    return ok && pthread_join(t, NULL) == 0;
}

#endif
