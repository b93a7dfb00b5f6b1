/* session_log.c: a resumed launch cuts the events files earlier launches left back to
 * the checkpoint it resumes from, record by record and on each tag's own step axis,
 * instead of writing TensorBoard's restart marker (session_log.h says why). */
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/fsutil.h"
#include "base/mem.h"
#include "records/events_reader.h"
#include "records/session_log.h"

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether a record stays after a resume from (iteration, env_steps). */
static bool keeps(const events_record *rec, int64_t iteration, int64_t env_steps) {
    if (rec->has_session_log)
        return rec->session_status != EVENTS_SESSION_START || rec->step <= 1;
    if (rec->num_values == 0) return rec->step <= iteration; /* file_version: step 0 */
    const char *tag = rec->values[0].tag;
    bool env_axis = strncmp(tag, SESSION_ENV_STEP_TAGS, strlen(SESSION_ENV_STEP_TAGS)) == 0;
    return rec->step <= (env_axis ? env_steps : iteration);
}

/* Cut one file (session_trim). */
static int trim_file(const char *path, int64_t iteration, int64_t env_steps, calf_error *err) {
    /* O_NONBLOCK and a regular file only: a FIFO or device named like an events file is
     * no file of calf's, and opening a FIFO that nothing writes would block the resume */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return CALF_OK; /* gone since the listing: nothing to keep */
    struct stat st;
    FILE *in = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !(in = fdopen(fd, "rb"))) {
        close(fd);
        return CALF_OK; /* not calf's: left as it is */
    }
    events_reader r;
    calf_error rerr;
    if (events_reader_open(&r, path, &rerr) != CALF_OK) {
        fclose(in);
        return CALF_OK; /* unreadable: left as it is */
    }
    bytes_buf kept = {0};
    bool dropped = false, damaged = false;
    for (;;) {
        uint64_t start = r.offset;
        const events_record *rec;
        if (events_reader_next(&r, &rec, &rerr) != CALF_OK) {
            if (r.cut) dropped = true; /* a torn tail: not kept */
            else damaged = true;
            break;
        }
        if (!rec) break;
        if (!keeps(rec, iteration, env_steps)) {
            dropped = true;
            continue;
        }
        /* the record's bytes as they are in the file, framing and CRCs included */
        size_t n = (size_t)(r.offset - start);
        unsigned char *at = bytes_buf_room(&kept, n);
        if (!at) break;
        if (fseek(in, (long)start, SEEK_SET) != 0 || fread(at, 1, n, in) != n) {
            damaged = true;
            break;
        }
    }
    events_reader_close(&r);
    fclose(in);
    int rc = CALF_OK;
    if (kept.failed)
        rc = calf_error_set(err, CALF_ENOMEM, "%s: out of memory cutting it back", path);
    else if (damaged)
        fprintf(stderr, "calf: warning: %s: %s; left as it is\n", path, rerr.msg);
    else if (dropped)
        rc = fs_write_file_atomic(path, kept.data ? (const void *)kept.data : "", kept.len, err);
    free(kept.data);
    return rc;
}

int session_trim(const char *root, const char *sub, int64_t iteration, int64_t env_steps,
                 calf_error *err) {
    char dir[4096], path[4400];
    int rc = fs_join(dir, sizeof dir, root, sub, err);
    if (rc) return rc;
    DIR *d = opendir(dir);
    if (!d) return CALF_OK;
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; rc == CALF_OK && (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20) != 0) continue;
        if (n == cap) {
            size_t more = cap ? 2 * cap : 8;
            char **grown = mem_realloc(names, more * sizeof *grown, err);
            if (!grown) {
                rc = CALF_ENOMEM;
                break;
            }
            names = grown;
            cap = more;
        }
        if (!(names[n] = mem_strdup(e->d_name, err))) rc = CALF_ENOMEM;
        else n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_names); /* launch order: names start with the time */
    for (size_t i = 0; i < n && rc == CALF_OK; i++) {
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path) continue;
        rc = trim_file(path, iteration, env_steps, err);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}
