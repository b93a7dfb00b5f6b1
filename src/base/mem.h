/* mem.h: allocation that can fail. Running out of memory is a status like any other
 * (CALF_ENOMEM, "out of memory allocating N bytes (src/FILE.c:LINE)"), which the caller
 * returns after freeing what it took: no library call ends its host for it. */
#ifndef CALF_MEM_H
#define CALF_MEM_H

#include <stddef.h>

#include "calf/error.h"

/* malloc / calloc / realloc of at least one byte. On failure: NULL, *err set (err may be
 * NULL), and for mem_realloc p still valid and the caller's. */
#define mem_alloc(n, err) mem_alloc_at((n), (err), __FILE__, __LINE__)
#define mem_calloc(count, size, err) mem_calloc_at((count), (size), (err), __FILE__, __LINE__)
#define mem_realloc(p, n, err) mem_realloc_at((p), (n), (err), __FILE__, __LINE__)
/* A copy of the string s (NULL on failure, as above). */
#define mem_strdup(s, err) mem_strdup_at((s), (err), __FILE__, __LINE__)

void *mem_alloc_at(size_t n, calf_error *err, const char *file, int line);
void *mem_calloc_at(size_t count, size_t size, calf_error *err, const char *file, int line);
void *mem_realloc_at(void *p, size_t n, calf_error *err, const char *file, int line);
char *mem_strdup_at(const char *s, calf_error *err, const char *file, int line);

/* The status out-of-memory messages carry, for a caller that found NULL elsewhere
 * (a library that returned NULL for want of memory): CALF_ENOMEM. */
int mem_failed(calf_error *err, size_t count, size_t size, const char *file, int line);

#endif
