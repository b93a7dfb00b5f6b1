/* scratch.h: per-thread heap scratch for the kernels whose working sets are too large
 * for a host's thread stack (nn.c's packed product and dW chunks: up to 160 KiB). calf
 * runs on its host's threads (the C API, the Python module), whose stacks may be 64-256
 * KiB, so no kernel keeps more than a few KiB on the stack. */
#ifndef CALF_SCRATCH_H
#define CALF_SCRATCH_H

#include <stddef.h>

/* A 64-byte aligned block of at least `bytes` bytes, the calling thread's own: valid until
 * the thread's next scratch_get or its end (then freed), its contents undefined. NULL when
 * it cannot be had (allocation failed): the caller then takes a path that needs none, so
 * a failure costs speed, never a result. One user at a time per thread: a caller is done
 * with the block before it calls anything that may ask again. Allocates with aligned_alloc
 * directly, not through mem.h, so the alloc_fail test hook's count does not see it.
 * Thread-safe. */
void *scratch_get(size_t bytes);

#endif
