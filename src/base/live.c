/* live.c: the open handles of each public handle type (live.h), a list per type under
 * a mutex. A process holds few handles at once, so a walk of the list is short. */
#include "base/live.h"

#include <stddef.h>

#include "calf/error.h"

void live_add(live_set *s, void *h) {
    live_link *l = h;
    CALF_ASSERT(pthread_mutex_lock(&s->lock) == 0);
    l->next = s->head;
    s->head = l;
    CALF_ASSERT(pthread_mutex_unlock(&s->lock) == 0);
}

/* Find h in s; with take, also unlink it. */
static bool find(live_set *s, const void *h, bool take) {
    if (!h) return false;
    CALF_ASSERT(pthread_mutex_lock(&s->lock) == 0);
    live_link **at = &s->head;
    while (*at && (const void *)*at != h) at = &(*at)->next;
    bool found = *at != NULL;
    if (found && take) *at = (*at)->next;
    CALF_ASSERT(pthread_mutex_unlock(&s->lock) == 0);
    return found;
}

bool live_has(live_set *s, const void *h) { return find(s, h, false); }

bool live_take(live_set *s, const void *h) { return find(s, h, true); }
