/* rundir.h: a run's root directory before anything is written in it: its path checked
 * (length, a parent that is a file), one writer at a time (ROOT/.lock, held for the whole
 * job and released by the kernel when its holder dies, so no lock outlives a crash), and
 * the temporary files a dead run left behind removed. */
#ifndef CALF_RUNDIR_H
#define CALF_RUNDIR_H

#include <stdbool.h>
#include <stdio.h>

#include "calf/error.h"

/* The most any file calf writes adds to the root dir's path: the longest is an events
 * file, ROOT/train/events.out.tfevents.<time>.<host>.<pid>.<n>, host names cut at 127. */
#define RUNDIR_MAX_SUFFIX 256

/* Checks that need no file written: root fits PATH_MAX with RUNDIR_MAX_SUFFIX to spare,
 * and neither root nor an existing parent of it is something other than a directory.
 * Failures are CALF_EINVAL (bad input), or CALF_EIO when the system refuses to look. */
int rundir_check(const char *root, calf_error *err);

/* CALF_EINVAL naming them (one line) when root holds symbolic links where calf writes:
 * .lock, config.gin (and its temporary files), log, train, eval, or any entry of log/,
 * train/, eval/ and train/algorithm/; CALF_OK otherwise, and for a root not made yet.
 * rundir_lock_take checks this before it opens anything. */
int rundir_check_links(const char *root, calf_error *err);

typedef struct rundir_lock {
    int fd;         /* ROOT/.lock while held; -1 otherwise */
    int no_write;   /* errno (EROFS, EACCES, EPERM) when this process cannot write in root:
                     * no lock taken, and none needed while nothing is written; else 0 */
    int no_lock;    /* errno (ENOLCK, EOPNOTSUPP, ENOSYS) when root's file system has no
                     * fcntl locks (an NFS mount without lockd): the run goes on unlocked,
                     * the caller warns, and a second run there would not be refused */
} rundir_lock;

/* Create root (and parents) and take ROOT/.lock, an fcntl write lock on an open file
 * description (Linux; a process's POSIX lock elsewhere): it is inherited by the workers
 * a launcher forks and released by the kernel once every process holding it has exited,
 * however it ended. The holder writes "pid P on host H (job), since TIME" into the file;
 * job says what holds it ("calf train", "calf train --nproc 4", "mpirun, 3 ranks").
 * Another live holder: CALF_EINVAL naming it, nothing written. A root this process cannot
 * write in (read-only file system, no permission): CALF_OK with l->no_write set and no
 * lock; the caller may only read (a finished run has nothing to do). A file system
 * without locks: CALF_OK with l->no_lock set, the holder line written, the file kept open
 * (released as a lock would be). */
int rundir_lock_take(rundir_lock *l, const char *root, const char *job, calf_error *err);
/* Release (close) the lock; a zeroed or never-taken lock with fd -1 is fine. */
void rundir_lock_release(rundir_lock *l);

/* With the lock held: remove what a run that died while writing left behind,
 * ROOT/config.gin.tmp.<pid> and ROOT/train/algorithm/ckpt-<n>.tmp.<pid>, saying so on
 * note (if not NULL). These are only ever half-written files: a whole one has been
 * renamed to its real name. */
int rundir_remove_temps(const char *root, FILE *note, calf_error *err);

#endif
