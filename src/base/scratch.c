/* scratch.c: the per-thread scratch block of scratch.h, behind a pthread key whose
 * destructor frees a thread's block when the thread ends. One block a thread, grown to
 * the largest request and kept (at most the largest kernel's need, 160 KiB), so a
 * kernel's call costs one pthread_getspecific, not an allocation. */
#include "base/scratch.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* The block's first HEADER bytes hold its usable size; the caller's part follows, still
 * 64-byte aligned. */
enum { HEADER = 64 };

/* The process's one key, made once; key_made is false if pthread_key_create failed (then
 * every call answers NULL). libcalf.so is linked -z nodelete (CMakeLists.txt), so the
 * destructor's code stays mapped after a host's dlclose while its threads live on. */
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static bool key_made;

static void make_key(void) { key_made = pthread_key_create(&key, free) == 0; }

void *scratch_get(size_t bytes) {
    if (pthread_once(&key_once, make_key) != 0 || !key_made) return NULL;
    unsigned char *block = pthread_getspecific(key);
    if (block && *(size_t *)block >= bytes) return block + HEADER;
    if (bytes > SIZE_MAX - HEADER - 63) return NULL;
    size_t size = (bytes + 63) / 64 * 64;
    unsigned char *grown = aligned_alloc(64, HEADER + size);
    if (!grown) return NULL; /* the old block stays the thread's */
    if (pthread_setspecific(key, grown) != 0) {
        free(grown);
        return NULL;
    }
    free(block);
    *(size_t *)grown = size;
    return grown + HEADER;
}
