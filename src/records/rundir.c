/* rundir.c: the run's root directory: path checks before anything is written, the
 * one-writer lock, and the cleanup of a dead run's temporary files (docs/DESIGN.md,
 * "Failure model"). Two jobs writing one directory would interleave logs and events
 * and leave a config.gin that does not match the checkpoints; the lock refuses the
 * second at once. */
#define _GNU_SOURCE /* F_OFD_SETLK: locks that belong to the open file, not the process */
#include "records/rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/mem.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif
#ifndef NAME_MAX
#define NAME_MAX 255
#endif

/* The first existing prefix of root (cut at a '/') that is not a directory, into bad. */
static bool parent_not_dir(const char *root, char *bad, size_t cap) {
    size_t n = strlen(root);
    if (n + 1 > cap) return false;
    memcpy(bad, root, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (bad[i] != '/' && bad[i] != '\0') continue;
        char saved = bad[i];
        bad[i] = '\0';
        struct stat st;
        int rc = stat(bad, &st);
        if (rc == 0 && !S_ISDIR(st.st_mode)) return true;
        bad[i] = saved;
        if (rc != 0 && errno == ENOENT) return false; /* the rest will be created */
    }
    return false;
}

int rundir_check(const char *root, calf_error *err) {
    size_t n = strlen(root);
    if (n == 0) return calf_error_set(err, CALF_EINVAL, "--root_dir is empty");
    if (n + RUNDIR_MAX_SUFFIX >= PATH_MAX)
        return calf_error_set(err, CALF_EINVAL,
                              "--root_dir %s is too long: %zu characters, and the files calf "
                              "writes under it add up to %d more to a path of at most %d "
                              "(PATH_MAX); use a shorter one",
                              root, n, RUNDIR_MAX_SUFFIX, PATH_MAX - 1);
    for (const char *c = root; *c;) { /* each name in the path */
        size_t len = strcspn(c, "/");
        if (len > NAME_MAX)
            return calf_error_set(err, CALF_EINVAL,
                                  "--root_dir %s: a name in it is %zu characters long, more "
                                  "than the %d a file system allows (NAME_MAX)",
                                  root, len, NAME_MAX);
        c += len;
        c += strspn(c, "/");
    }
    struct stat st;
    if (stat(root, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return calf_error_set(err, CALF_EINVAL, "--root_dir %s is not a directory", root);
        return CALF_OK;
    }
    int e = errno;
    if (e == ENOENT || e == ENOTDIR) {
        char bad[PATH_MAX];
        if (parent_not_dir(root, bad, sizeof bad))
            return calf_error_set(err, CALF_EINVAL, "--root_dir %s: %s is not a directory", root,
                                  bad);
        if (e == ENOENT) return CALF_OK; /* created when the lock is taken */
    }
    if (e == ENAMETOOLONG)
        return calf_error_set(err, CALF_EINVAL, "--root_dir %s: %s", root, strerror(e));
    return calf_error_set(err, CALF_EIO, "--root_dir %s: %s", root, strerror(e));
}

/* ---- symbolic links ---------------------------------------------------------------
 * calf writes, appends to, renames over and deletes files under the root dir; a link
 * planted at one of those names (in a shared or copied run dir) would point these at
 * another file. So a run dir with links where calf writes is refused, naming them, and
 * the files are opened with O_NOFOLLOW besides (a directory opened by opendir is
 * checked with lstat first). The root itself may be a link: that is the user's own path. */

/* The names calf writes directly under the root, and the directories in which it writes
 * every entry (checked one level deep: calf makes no deeper ones). */
static const char *const top_names[] = {".lock", "config.gin", "log", "train", "eval"};
static const char *const entry_dirs[] = {"log", "train", "eval", "train/algorithm"};

typedef struct link_list {
    char *text;   /* "R/a, R/b" */
    size_t cap, used;
    int count;
} link_list;

static void add_link(link_list *l, const char *root, const char *dir, const char *name) {
    enum { SHOWN = 8 };
    if (l->count++ >= SHOWN) return;
    int n = snprintf(l->text + l->used, l->cap - l->used, "%s%s/%s%s%s", l->used ? ", " : "",
                     root, dir ? dir : "", dir ? "/" : "", name);
    if (n > 0 && (size_t)n < l->cap - l->used) l->used += (size_t)n;
}

/* lstat, which (like opendir) the fault shim of tests/e2e_faults.sh does not count:
 * the check adds no call to the numbered ones that test fails in turn. */
static bool is_link(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

/* Every entry of root/dir (a directory, not a link: a link there is named already)
 * that is a link. */
static void links_in(const char *root, const char *dir, link_list *l) {
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s", root, dir);
    struct stat st;
    if (n < 0 || (size_t)n >= sizeof path || lstat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return; /* missing (made later, as a directory), or a link: named already */
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
            add_link(l, root, dir, e->d_name);
    closedir(d);
}

int rundir_check_links(const char *root, calf_error *err) {
    char text[2048], path[PATH_MAX];
    link_list l = {text, sizeof text, 0, 0};
    text[0] = '\0';
    for (size_t i = 0; i < sizeof top_names / sizeof top_names[0]; i++) {
        int n = snprintf(path, sizeof path, "%s/%s", root, top_names[i]);
        if (n > 0 && (size_t)n < sizeof path && is_link(path)) add_link(&l, root, NULL, top_names[i]);
    }
    /* config.gin's temporary files, config.gin.tmp.<pid> */
    DIR *d = opendir(root);
    struct stat st;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strncmp(e->d_name, "config.gin.", 11) == 0 &&
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
            add_link(&l, root, NULL, e->d_name);
    if (d) closedir(d);
    for (size_t i = 0; i < sizeof entry_dirs / sizeof entry_dirs[0]; i++)
        links_in(root, entry_dirs[i], &l);
    if (l.count == 0) return CALF_OK;
    char more[48] = "";
    if (l.count > 8) snprintf(more, sizeof more, " and %d more", l.count - 8);
    return calf_error_set(err, CALF_EINVAL,
                          "--root_dir %s has symbolic links where calf writes: %s%s; calf does "
                          "not write through links (it would change the files they point to): "
                          "remove them, or use another --root_dir",
                          root, text, more);
}

#ifdef F_OFD_SETLK
#define LOCK_CMD F_OFD_SETLK
#else
#define LOCK_CMD F_SETLK
#endif

/* What the holder wrote into the lock file, one line; waits briefly for a holder that
 * has the lock but has not written yet. */
static void read_holder(int fd, char *out, size_t cap) {
    out[0] = '\0';
    for (int tries = 0; tries < 50; tries++) {
        ssize_t got = pread(fd, out, cap - 1, 0);
        if (got > 0) {
            out[got] = '\0';
            out[strcspn(out, "\n")] = '\0';
            if (out[0]) return;
        }
        struct timespec ms = {0, 10 * 1000 * 1000};
        nanosleep(&ms, NULL);
    }
    snprintf(out, cap, "a process that has not said who it is");
}

int rundir_lock_take(rundir_lock *l, const char *root, const char *job, calf_error *err) {
    l->fd = -1;
    l->no_write = 0;
    l->no_lock = 0;
    size_t n = strlen(root) + sizeof "/.lock";
    char *path = mem_alloc(n, err);
    if (!path) return CALF_ENOMEM;
    snprintf(path, n, "%s/.lock", root);
    int rc = fs_mkdir_p(root, err);
    if (rc == CALF_OK) rc = rundir_check_links(root, err);
    int fd = rc == CALF_OK ? open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666) : -1;
    if (rc == CALF_OK && fd < 0) {
        if (errno == ELOOP) {
            rc = calf_error_set(err, CALF_EINVAL, "--root_dir %s: %s is a symbolic link, which "
                                "calf does not write through", root, path);
        } else if (errno == EROFS || errno == EACCES || errno == EPERM) {
            l->no_write = errno;
        } else {
            rc = calf_error_set(err, CALF_EIO, "cannot open %s: %s", path, strerror(errno));
        }
    }
    if (fd >= 0) {
        struct flock fl;
        memset(&fl, 0, sizeof fl);
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET; /* start 0, length 0: the whole file */
        int locked = fcntl(fd, LOCK_CMD, &fl);
        int e = locked != 0 ? errno : 0;
#ifdef F_OFD_SETLK
        if (locked != 0 && e == EINVAL) { /* a kernel before 3.15: no OFD locks */
            locked = fcntl(fd, F_SETLK, &fl);
            e = locked != 0 ? errno : 0;
        }
#endif
        if (locked != 0 && (e == ENOLCK || e == EOPNOTSUPP || e == ENOSYS)) {
            l->no_lock = e; /* no locks on this file system: go on, the caller warns */
        } else if (locked != 0) {
            if (e == EACCES || e == EAGAIN) {
                char who[512];
                read_holder(fd, who, sizeof who);
                rc = calf_error_set(err, CALF_EINVAL,
                                    "--root_dir %s is in use by another run: %s; wait for it to "
                                    "end or use another --root_dir",
                                    root, who);
            } else {
                rc = calf_error_set(err, CALF_EIO, "cannot lock %s: %s", path, strerror(e));
            }
        }
    }
    if (fd >= 0 && rc == CALF_OK) {
        char host[256] = "", when[64] = "", line[512];
        if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "(unknown)");
        host[sizeof host - 1] = '\0';
        time_t now = time(NULL);
        struct tm tm;
        if (localtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %z", &tm);
        int len = snprintf(line, sizeof line, "pid %ld on host %s (%s), since %s\n",
                           (long)getpid(), host, job, when);
        if (len < 0 || (size_t)len >= sizeof line) len = (int)strlen(line);
        if (ftruncate(fd, 0) != 0)
            rc = calf_error_set(err, CALF_EIO, "truncate %s: %s", path, strerror(errno));
        else
            rc = fs_write_all(fd, line, (size_t)len, path, err);
    }
    if (rc == CALF_OK && fd >= 0) l->fd = fd;
    else if (fd >= 0) close(fd); /* releases the lock if it was taken */
    free(path);
    return rc;
}

void rundir_lock_release(rundir_lock *l) {
    if (l->fd >= 0) close(l->fd);
    l->fd = -1;
}

/* name is "<prefix><digits>.tmp.<digits>" (prefix_digits: digits after the prefix). */
static bool is_temp_name(const char *name, const char *prefix, bool prefix_digits) {
    size_t p = strlen(prefix);
    if (strncmp(name, prefix, p) != 0) return false;
    const char *s = name + p;
    if (prefix_digits) {
        size_t d = strspn(s, "0123456789");
        if (d == 0) return false;
        s += d;
    }
    if (strncmp(s, ".tmp.", 5) != 0) return false;
    s += 5;
    size_t d = strspn(s, "0123456789");
    return d > 0 && s[d] == '\0';
}

/* The temporary files in dir. A subdirectory of the root is opened without following
 * a link (one there is refused: the files it points to are not the run's to delete);
 * the root itself may be the user's link. */
static int remove_in(const char *dir, bool is_root, const char *prefix, bool prefix_digits,
                     FILE *note, calf_error *err) {
    struct stat st;
    if (!is_root && lstat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
        return calf_error_set(err, CALF_EINVAL, "%s is a symbolic link or not a directory: "
                              "calf deletes no files through it", dir);
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return CALF_OK;
        return calf_error_set(err, CALF_EIO, "cannot list %s: %s", dir, strerror(errno));
    }
    int rc = CALF_OK;
    size_t cap = strlen(dir) + 300;
    char *path = mem_alloc(cap, err);
    if (!path) {
        closedir(d);
        return CALF_ENOMEM;
    }
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) {
            if (errno) rc = calf_error_set(err, CALF_EIO, "cannot list %s: %s", dir, strerror(errno));
            break;
        }
        if (!is_temp_name(e->d_name, prefix, prefix_digits)) continue;
        snprintf(path, cap, "%s/%s", dir, e->d_name);
        if (unlinkat(dirfd(d), e->d_name, 0) != 0 && errno != ENOENT) {
            rc = calf_error_set(err, CALF_EIO, "cannot remove %s: %s", path, strerror(errno));
            break;
        }
        if (note) fprintf(note, "calf: removed %s, left half-written by a run that died\n", path);
    }
    closedir(d);
    free(path);
    return rc;
}

int rundir_remove_temps(const char *root, FILE *note, calf_error *err) {
    size_t cap = strlen(root) + 32;
    char *dir = mem_alloc(cap, err);
    if (!dir) return CALF_ENOMEM;
    snprintf(dir, cap, "%s/train/algorithm", root);
    int rc = remove_in(root, true, "config.gin", false, note, err);
    if (rc == CALF_OK) rc = remove_in(dir, false, "ckpt-", true, note, err);
    free(dir);
    return rc;
}
