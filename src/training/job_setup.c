/* job_setup.c: what every way of starting a training job does before any process
 * trains: the memory check, the root dir's lock, a dead run's temp files removed, and
 * the checkpoint to resume from, found and checked against the config. */
#include "training/job_setup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"
#include "records/checkpoint.h"
#include "training/trainer_checkpoint.h"
#include "training/trainer_config.h"
#include "training/trainer_memory.h"

/* What changed between the config that wrote a checkpoint (digest) and cfg, as ": B = NEW
 * (was OLD), ..." from ROOT/config.gin, the operative config of the launch before; ""
 * when that file is gone or describes another config. */
static void config_changes(const char *root, const calf_config *cfg, uint64_t digest, char *buf,
                           size_t cap) {
    buf[0] = '\0';
    char path[4096];
    calf_error ignored;
    calf_config *was = calf_config_new(&ignored);
    if (!was || fs_join(path, sizeof path, root, "config.gin", &ignored) != CALF_OK ||
        calf_config_parse_file(was, path, &ignored) != CALF_OK || calf_config_digest(was) != digest) {
        calf_config_free(was);
        return;
    }
    size_t used = 0;
    int shown = 0, more = 0;
    for (int id = 0; id < calf_binding_count(); id++) {
        if (calf_binding_flags(id) & CALF_BINDING_NODIGEST) continue;
        char now[300], then[300];
        calf_config_format_value(cfg, id, now, sizeof now);
        calf_config_format_value(was, id, then, sizeof then);
        if (!strcmp(now, then)) continue;
        if (calf_binding_type(id) == CALF_CFG_FLOAT) { /* as a person writes them: 0.9, not
                                                        * the round-trip 0.90000000000000002 */
            snprintf(now, sizeof now, "%.9g", calf_config_float(cfg, id));
            snprintf(then, sizeof then, "%.9g", calf_config_float(was, id));
        }
        if (shown == 3) {
            more++;
            continue;
        }
        int n = snprintf(buf + used, cap - used, "%s%s = %s (was %s)", shown ? ", " : ": ",
                         calf_binding_name(id), now, then);
        if (n < 0 || (size_t)n >= cap - used) break;
        used += (size_t)n;
        shown++;
    }
    if (more && used < cap) snprintf(buf + used, cap - used, ", and %d more", more);
    calf_config_free(was);
}

/* A checkpoint's head loads into the config's algorithm (a ckpt_check): its counters,
 * parameters and optimizer state are ones a run could have written. One of another
 * config passes, to be refused for that below rather than skipped. */
static int check_head(const char *path, const ckpt_header *hdr, void *arg, calf_error *err) {
    const calf_config *cfg = arg;
    if (hdr->digest != calf_config_digest(cfg)) return CALF_OK;
    const algorithm_ops *ops = NULL;
    algorithm *algo = NULL;
    int rc = trainer_load_policy(cfg, path, hdr, &ops, &algo, err);
    if (rc == CALF_OK) ops->destroy(algo);
    return rc;
}

/* The newest valid checkpoint under root, refused when its config differs in anything
 * but run length and cadence. Warnings about skipped (corrupt) files go to stderr. */
static int find_resume(const char *root, const calf_config *cfg, resume_state *rs,
                       calf_error *err) {
    memset(rs, 0, sizeof *rs);
    char dir[4096];
    int rc = fs_join(dir, sizeof dir, root, "train/algorithm", err);
    if (rc) return rc;
    rc = ckpt_find_latest_usable(dir, rs->path, sizeof rs->path, &rs->hdr, NULL, NULL,
                                 &rs->found, check_head, (void *)cfg, stderr, err);
    if (rc) return rc;
    if (rs->found && rs->hdr.digest != calf_config_digest(cfg)) {
        rs->found = false;
        char changed[700];
        config_changes(root, cfg, rs->hdr.digest, changed, sizeof changed);
        return calf_error_set(err, CALF_EINVAL,
                              "%s was written by a different config%s (only the run length, "
                              "evaluation, summary and checkpoint settings may change when "
                              "resuming); use a fresh --root_dir",
                              rs->path, changed);
    }
    return CALF_OK;
}

int job_check_memory(const calf_train_options *o, const calf_config *cfg, int envs,
                        calf_error *err) {
    char dir[4096];
    int64_t *iters = NULL;
    int count = 0;
    calf_error ignored;
    calf_error_clear(&ignored);
    bool done = fs_join(dir, sizeof dir, o->root_dir, "train/algorithm", &ignored) == CALF_OK &&
                ckpt_list(dir, &iters, &count, &ignored) == CALF_OK && count > 0 &&
                trainer_run_complete(cfg, iters[count - 1]);
    free(iters);
    return done ? CALF_OK : trainer_check_memory(cfg, envs, err);
}

int job_settle_root(const calf_train_options *o, const calf_config *cfg, const char *job,
                       rundir_lock *l, resume_state *rs, bool *complete, calf_error *err) {
    *complete = false;
    int rc = rundir_lock_take(l, o->root_dir, job, err);
    if (rc == CALF_OK && l->no_lock)
        /* Unlocked, a temp file here may be a live run's: leave them all. */
        fprintf(stderr,
                "calf: warning: cannot lock %s/.lock (%s): its file system has no locks, so a "
                "second run on this --root_dir would not be refused; make sure there is none\n",
                o->root_dir, strerror(l->no_lock));
    else if (rc == CALF_OK && !l->no_write)
        rc = rundir_remove_temps(o->root_dir, stderr, err);
    if (rc == CALF_OK) rc = find_resume(o->root_dir, cfg, rs, err);
    if (rc) return rc;
    *complete = rs->found && trainer_run_complete(cfg, rs->hdr.iteration);
    if (*complete) {
        if (!o->quiet)
            fprintf(stderr, "calf: nothing to do: the run in %s is complete at iteration %lld\n",
                    o->root_dir, (long long)rs->hdr.iteration);
        return CALF_OK;
    }
    if (l->no_write)
        return calf_error_set(err, CALF_EIO, "--root_dir %s cannot be written (%s): the run "
                              "cannot continue there", o->root_dir, strerror(l->no_write));
    return CALF_OK;
}
