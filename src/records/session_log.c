/* session_log.c: TensorBoard's restart marker (SessionLog START) for a launch that
 * resumes a run: whether one is needed, from what the earlier launches' events files
 * hold. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"
#include "records/events_reader.h"
#include "records/session_log.h"

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

bool session_restart_needed(const char *root, const char *sub, int64_t iteration) {
    if (iteration == 0) return true;
    char dir[4096], path[4400];
    calf_error err;
    if (fs_join(dir, sizeof dir, root, sub, &err) != CALF_OK) return true;
    DIR *d = opendir(dir);
    if (!d) return true;
    char **names = NULL;
    size_t n = 0, cap = 0;
    bool short_of_memory = false; /* then as for a file that cannot be read: needed */
    for (struct dirent *e; !short_of_memory && (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20) != 0) continue;
        if (n == cap) {
            size_t more = cap ? 2 * cap : 8;
            char **grown = realloc(names, more * sizeof *grown);
            if (!grown) {
                short_of_memory = true;
                break;
            }
            names = grown;
            cap = more;
        }
        size_t len = strlen(e->d_name);
        if (!(names[n] = malloc(len + 1))) {
            short_of_memory = true;
            break;
        }
        memcpy(names[n++], e->d_name, len + 1);
    }
    closedir(d);
    if (short_of_memory) {
        for (size_t i = 0; i < n; i++) free(names[i]);
        free(names);
        return true;
    }
    qsort(names, n, sizeof *names, cmp_names); /* launch order: names start with the time */
    events_run run;
    events_run_init(&run);
    bool needed = false;
    for (size_t i = 0; i < n && !needed; i++)
        needed = snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path ||
                 events_run_read_file(&run, path, NULL, &err) != CALF_OK;
    for (size_t i = 0; i < run.num_entries && !needed; i++) {
        const events_entry *en = &run.entries[i];
        needed = en->what == EVENTS_ENTRY_VALUE && !en->purged && en->step > iteration &&
                 strncmp(en->text, "Metrics_vs_", 11) != 0;
    }
    events_run_free(&run);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return needed;
}
