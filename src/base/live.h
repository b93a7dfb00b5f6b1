/* live.h: the handles a public API has given out and not taken back (live.c), so that a
 * call given a closed or never-opened handle is refused by comparing pointers, never by
 * reading what the pointer points to. */
#ifndef CALF_LIVE_H
#define CALF_LIVE_H

#include <pthread.h>
#include <stdbool.h>

/* The first member of every handle a live_set keeps: the handle's own pointer is its
 * link's, so looking a handle up reads only the links of open ones. */
typedef struct live_link {
    struct live_link *next;
} live_link;

/* One kind of handle's open ones. Static, one per kind (LIVE_SET_INIT); safe from any
 * thread. */
typedef struct live_set {
    pthread_mutex_t lock;
    live_link *head;
} live_set;

#define LIVE_SET_INIT {PTHREAD_MUTEX_INITIALIZER, NULL}

/* h: a handle whose first member is a live_link. Add it to s (open). */
void live_add(live_set *s, void *h);
/* Whether h is in s. */
bool live_has(live_set *s, const void *h);
/* Take h out of s (close); false, changing nothing, when it was not there. */
bool live_take(live_set *s, const void *h);

#endif
