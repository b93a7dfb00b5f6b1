/* play.c: `calf play`: load a trained policy from a run's root dir and run it greedily,
 * printing each episode's return and the average, and with --video recording them as a
 * video file; for tests of `calf export`, it can also write down every observation the
 * policy acted on with its greedy action, or act on observations read from a file. */
#include "tools/play.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/mem.h"
#include "calf/render.h"
#include "calf/testing.h"
#include "calf/train.h"
#include "numerics/kernels.h"
#include "render/video_writer.h"
#include "records/checkpoint.h"
#include "training/trainer.h"

int play_policy_open(play_policy *p, const char *root, const char *checkpoint, calf_error *err) {
    memset(p, 0, sizeof *p);
    char conf[4096], dir[4096];
    if (!root || !root[0]) return calf_error_set(err, CALF_EINVAL, "--root_dir is empty");
    /* a CALF_KERNELS this build or this CPU lacks */
    if (kernels_select(err) != CALF_OK) return CALF_EINVAL;
    if (snprintf(conf, sizeof conf, "%s/config.gin", root) >= (int)sizeof conf ||
        snprintf(dir, sizeof dir, "%s/train/algorithm", root) >= (int)sizeof dir)
        return calf_error_set(err, CALF_EINVAL, "path too long: %s", root);
    config_init(&p->cfg);
    int rc = calf_config_parse_file(&p->cfg, conf, err);
    if (rc) return rc == CALF_ENOMEM ? rc : CALF_EINVAL;
    const char *env_name = calf_config_string(&p->cfg, CALF_CFG_ENV_NAME);
    calf_error why;
    calf_error_clear(&why);
    p->cls = calf_env_lookup(env_name, &why);
    if (!p->cls) {
        char hint[2048] = "";
        trainer_env_lib_hint(conf, hint, sizeof hint);
        if (hint[0])
            return calf_error_set(err, CALF_EINVAL,
                                  "%s: environment '%s' is not registered; the run used a "
                                  "plug-in library for it: pass it again with%s",
                                  conf, env_name, hint);
        return calf_error_set(err, CALF_EINVAL, "%s: %s", conf, why.msg);
    }

    ckpt_header hdr;
    if (checkpoint) {
        if (snprintf(p->path, sizeof p->path, "%s", checkpoint) >= (int)sizeof p->path)
            return calf_error_set(err, CALF_EINVAL, "path too long: %s", checkpoint);
        rc = ckpt_read_head(p->path, &hdr, 0, NULL, NULL, err);
        if (rc) return rc == CALF_EIO ? CALF_EINVAL : rc;
    } else {
        bool found = false;
        rc = ckpt_find_latest_valid(dir, p->path, sizeof p->path, &hdr, NULL, NULL, &found, stderr, err);
        if (rc) return rc;
        if (!found) return calf_error_set(err, CALF_EINVAL, "%s: no checkpoint to play", dir);
    }
    if (hdr.digest != calf_config_digest(&p->cfg))
        return calf_error_set(err, CALF_EINVAL, "%s does not belong to the config in %s", p->path, conf);
    p->iteration = hdr.iteration;
    return trainer_load_policy(&p->cfg, p->path, &hdr, &p->ops, &p->algo, err);
}

void play_policy_close(play_policy *p) {
    if (p && p->ops && p->algo) p->ops->destroy(p->algo);
    if (p) p->algo = NULL;
}

/* ---- testing: the policy's greedy actions on given observations ---------------- */

/* One row a line: the observation, for an env with a mask its num_actions mask bytes
 * (0 or 1), then the action (the discrete index, a MultiDiscrete's sub-actions, or the
 * continuous vector), each number as %.9g, which reads back as the same float. */
static void dump_rows(FILE *f, const calf_env_spec *spec, const float *obs, const uint8_t *mask,
                      int rows, const int *act, const float *u) {
    int od = spec->obs_dim, ad = spec->action_dim, ai = calf_env_action_ints(spec);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < od; i++) fprintf(f, "%s%.9g", i ? " " : "", (double)obs[(size_t)r * od + i]);
        for (int j = 0; mask && j < spec->num_actions; j++)
            fprintf(f, " %d", mask[(size_t)r * spec->num_actions + j] != 0);
        if (ad == 0) {
            for (int d = 0; d < ai; d++) fprintf(f, " %d", act[(size_t)r * ai + d]);
            fputc('\n', f);
        } else {
            for (int i = 0; i < ad; i++) fprintf(f, " %.9g", (double)u[(size_t)r * ad + i]);
            fputc('\n', f);
        }
    }
}

/* The greedy of a policy that records each call's rows (episodes already finished
 * included: they are valid observations too) on its way through; it stands in for the
 * algorithm in trainer_evaluate_greedy, which only calls greedy. */
typedef struct dumping_policy {
    const algorithm_ops *ops;
    algorithm *algo;
    const calf_env_spec *spec;
    FILE *f;
} dumping_policy;

static void dumping_greedy(algorithm *a, const float *obs, const uint8_t *mask, int rows,
                           int *act, float *u) {
    dumping_policy *d = (dumping_policy *)a;
    d->ops->greedy(d->algo, obs, mask, rows, act, u);
    dump_rows(d->f, d->spec, obs, mask, rows, act, u);
}

static int dumping_greedy_reset(algorithm *a, int rows, calf_error *err) {
    dumping_policy *d = (dumping_policy *)a;
    return d->ops->greedy_reset ? d->ops->greedy_reset(d->algo, rows, err) : CALF_OK;
}

/* Rows of od numbers (anything strtof reads), one a line; blank lines skipped. *obs is
 * the caller's (free()). (An env with a mask: od is obs_dim + num_actions, the mask's
 * bytes written as numbers after the observation, as the dump writes them.) */
static int read_observations(const char *path, int od, float **obs, int *rows, calf_error *err) {
    *obs = NULL;
    *rows = 0;
    FILE *f = fopen(path, "r");
    if (!f) return calf_error_set(err, CALF_EINVAL, "%s: cannot open: %s", path, strerror(errno));
    char *line = NULL;
    size_t lcap = 0, cap = 0;
    int rc = CALF_OK, lineno = 0;
    while (rc == CALF_OK && getline(&line, &lcap, f) >= 0) {
        lineno++;
        const char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        if (*s == '\n' || *s == '\0') continue;
        if ((size_t)*rows == cap) {
            cap = cap ? 2 * cap : 64;
            calf_error merr;
            float *grown = mem_realloc(*obs, cap * (size_t)od * sizeof(float), &merr);
            if (!grown) {
                rc = calf_error_set(err, CALF_ENOMEM, "reading %s: %s", path, merr.msg);
                break;
            }
            *obs = grown;
        }
        float *row = *obs + (size_t)*rows * od;
        for (int i = 0; i < od && rc == CALF_OK; i++) {
            char *end;
            errno = 0;
            row[i] = strtof(s, &end);
            if (end == s || (*end && *end != ' ' && *end != '\t' && *end != '\n'))
                rc = calf_error_set(err, CALF_EINVAL, "%s:%d: expected %d numbers", path, lineno, od);
            s = end;
        }
        while (*s == ' ' || *s == '\t') s++;
        if (rc == CALF_OK && *s != '\n' && *s != '\0')
            rc = calf_error_set(err, CALF_EINVAL, "%s:%d: more than %d numbers", path, lineno, od);
        if (rc == CALF_OK) ++*rows;
    }
    if (rc == CALF_OK && ferror(f)) rc = calf_error_set(err, CALF_EIO, "%s: read error", path);
    /* getline's -1 before the end without a read error: no memory for the line */
    if (rc == CALF_OK && !feof(f))
        rc = calf_error_set(err, CALF_ENOMEM, "%s:%d: out of memory reading a line", path,
                            lineno + 1);
    free(line);
    fclose(f);
    if (rc != CALF_OK) {
        free(*obs);
        *obs = NULL;
        *rows = 0;
    }
    return rc;
}

/* Greedy actions for the rows of t->observations, in one call (as evaluation makes
 * them: many rows at once), written to f; *rows says how many. */
static int act_on_file(const calf_play_testing *t, play_policy *p, FILE *f, int *rows,
                       calf_error *err) {
    const calf_env_spec *spec = &p->cls->spec;
    int od = spec->obs_dim, nA = spec->action_mask ? spec->num_actions : 0;
    float *in = NULL; /* (rows, od + nA) */
    int rc = read_observations(t->observations, od + nA, &in, rows, err);
    if (rc) return rc;
    int ad = spec->action_dim, ai = calf_env_action_ints(spec);
    size_t n = (size_t)*rows + 1;
    int *act = mem_calloc(n * (size_t)ai, sizeof(int), err);
    float *u = act ? mem_calloc(n * (size_t)(ad ? ad : 1), sizeof(float), err) : NULL;
    float *obs = u ? mem_calloc(n * (size_t)od, sizeof(float), err) : NULL;
    uint8_t *mask = obs && nA ? mem_calloc(n, (size_t)nA, err) : NULL;
    if (!obs || (nA && !mask)) {
        free(in), free(act), free(u), free(obs);
        return CALF_ENOMEM;
    }
    for (int r = 0; r < *rows; r++) {
        const float *row = in + (size_t)r * (od + nA);
        memcpy(obs + (size_t)r * od, row, (size_t)od * sizeof(float));
        for (int j = 0; j < nA; j++) mask[(size_t)r * nA + j] = row[od + j] != 0.0f;
    }
    /* a row's mask must allow an action (in each sub-action's slice) */
    for (int r = 0; r < *rows && mask && rc == CALF_OK; r++)
        for (int d = 0, off = 0; d < ai && rc == CALF_OK; d++) {
            int w = spec->num_action_dims > 0 ? spec->action_nvec[d] : nA, valid = 0;
            for (int j = 0; j < w; j++) valid += mask[(size_t)r * nA + off + j];
            if (!valid)
                rc = calf_error_set(err, CALF_EINVAL, "%s: row %d: its mask allows no action",
                                    t->observations, r + 1);
            off += w;
        }
    /* a policy with memory: each row the first step of an episode */
    if (rc == CALF_OK && *rows > 0 && p->ops->greedy_reset)
        rc = p->ops->greedy_reset(p->algo, *rows, err);
    if (rc == CALF_OK && *rows > 0) p->ops->greedy(p->algo, obs, mask, *rows, act, u);
    if (rc == CALF_OK) dump_rows(f, spec, obs, mask, *rows, act, u);
    free(in);
    free(obs);
    free(mask);
    free(act);
    free(u);
    return rc;
}

/* An existing regular file that this process may not write (no write bit in its mode,
 * which root's access(2) would not say, or no permission) is refused: the rename of an
 * atomic write would replace it all the same. */
static int refuse_read_only(const char *path, const struct stat *st, calf_error *err) {
    if ((st->st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) && access(path, W_OK) == 0) return CALF_OK;
    return calf_error_set(err, CALF_EIO, "cannot write %s: it is read-only (mode %04o), and calf "
                          "does not replace it: %s", path, (unsigned)(st->st_mode & 07777),
                          strerror(EACCES));
}

int play_write_output(const char *path, const void *data, size_t n, calf_error *err) {
    struct stat st;
    bool existed = stat(path, &st) == 0;
    if (!existed || S_ISREG(st.st_mode)) {
        if (existed && refuse_read_only(path, &st, err)) return CALF_EIO;
        calf_error sub;
        calf_error_clear(&sub);
        int rc = fs_write_file_atomic(path, data, n, &sub);
        if (rc != CALF_OK) return calf_error_set(err, rc, "cannot write %s: %s", path, sub.msg);
        /* the new file keeps the replaced one's permissions */
        if (existed && chmod(path, st.st_mode & 07777) != 0)
            return calf_error_set(err, CALF_EIO, "chmod %s: %s", path, strerror(errno));
        return CALF_OK;
    }
    FILE *f = fopen(path, "w");
    if (!f) return calf_error_set(err, CALF_EIO, "cannot write %s: %s", path, strerror(errno));
    /* a device's error (ENOSPC from /dev/full) may only come when the buffer is flushed */
    int saved = 0;
    if (n > 0 && fwrite(data, 1, n, f) != n) saved = errno;
    if (!saved && fflush(f) != 0) saved = errno;
    if (fclose(f) != 0 && !saved) saved = errno;
    if (saved) return calf_error_set(err, CALF_EIO, "cannot write %s: %s", path, strerror(saved));
    return CALF_OK;
}

/* ---- --video: the episodes drawn and encoded ------------------------------------ */

/* Set by SIGINT/SIGTERM while a video is recorded: the recording stops, nothing is
 * written, and play returns CALF_EINTR. */
static volatile sig_atomic_t video_interrupted = 0;
static void on_video_signal(int sig) {
    (void)sig;
    video_interrupted = 1;
}

/* Before any frame is drawn: a path that cannot become the file (a directory, a folder
 * that does not exist or cannot be written) is refused now, not after the episodes. */
static int check_video_path(const char *path, calf_error *err) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return calf_error_set(err, CALF_EIO, "cannot write %s: %s", path, strerror(EISDIR));
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && refuse_read_only(path, &st, err))
        return CALF_EIO;
    size_t len = strlen(path);
    char *dir = mem_alloc(len + 2, err);
    if (!dir) return CALF_ENOMEM;
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, len + 2, ".");
    else if (slash == path) snprintf(dir, len + 2, "/");
    else snprintf(dir, len + 2, "%.*s", (int)(slash - path), path);
    int rc = CALF_OK;
    if (access(dir, W_OK | X_OK) != 0)
        rc = calf_error_set(err, CALF_EIO, "cannot write %s: %s", path, strerror(errno));
    free(dir);
    return rc;
}

/* The greedy episodes of trainer_evaluate_greedy (the same envs: seed, index 2^40 + k,
 * the same cap of max_steps steps), one after another with one row per greedy call, each
 * frame drawn after the reset and after every step (or every k-th: video_writer_every),
 * the first max_frames encoded. */
static int record_episodes(const calf_play_options *o, const algorithm_ops *ops, algorithm *algo,
                           const calf_env_class *cls, int64_t max_steps, calf_renderer *r,
                           video_writer *v, double *returns, double *average, int *capped,
                           calf_error *err) {
    int od = cls->spec.obs_dim, ad = cls->spec.action_dim, ai = calf_env_action_ints(&cls->spec);
    int nA = cls->spec.num_actions;
    int w = calf_renderer_width(r), h = calf_renderer_height(r);
    float *obs = mem_calloc((size_t)od, sizeof(float), err);
    float *u = obs ? mem_calloc((size_t)(ad ? ad : 1), sizeof(float), err) : NULL;
    uint8_t *rgb = u ? mem_alloc((size_t)w * h * 3, err) : NULL;
    int *act = rgb ? mem_calloc((size_t)ai, sizeof(int), err) : NULL;
    uint8_t *mask = act && cls->spec.action_mask ? mem_calloc((size_t)nA, 1, err) : NULL;
    int rc = act && (mask || !cls->spec.action_mask) ? CALF_OK : CALF_ENOMEM;
    long long limit = o->max_frames > 0 ? o->max_frames : -1, drawn = 0, seen = 0;
    int every = video_writer_every(v);
    double total = 0;
    *capped = 0;
    for (int k = 0; k < o->num_episodes && rc == CALF_OK; k++) {
        calf_env env;
        rc = calf_env_init(&env, cls->spec.name, (uint64_t)o->seed, ((uint64_t)1 << 40) + (uint64_t)k,
                           err);
        if (rc != CALF_OK) break;
        calf_env_reset(&env, obs);
        returns[k] = 0;
        if (ops->greedy_reset && (rc = ops->greedy_reset(algo, 1, err)) != CALF_OK) {
            calf_env_free(&env); /* a policy with memory starts a new episode */
            break;
        }
        int term = 0, trunc = 0;
        int64_t steps = 0;
        bool at_cap = false;
        for (;;) {
            if (video_interrupted) {
                rc = calf_error_set(err, CALF_EINTR, "interrupted: no video written");
                break;
            }
            if ((limit < 0 || drawn < limit) && seen++ % every == 0) {
                rc = calf_renderer_draw(r, &env, rgb, err);
                if (rc == CALF_OK) rc = video_writer_add(v, rgb, err);
                if (rc != CALF_OK) break;
                drawn++;
            }
            if (term || trunc || at_cap) break;
            float rew = 0;
            if (mask) calf_env_action_mask(&env, mask);
            ops->greedy(algo, obs, mask, 1, act, u);
            calf_env_step_actions(&env, act, ad ? u : NULL, obs, &rew, &term, &trunc);
            returns[k] += rew;
            at_cap = !term && !trunc && ++steps >= max_steps;
        }
        *capped += at_cap;
        total += returns[k];
        calf_env_free(&env);
    }
    if (rc == CALF_OK) *average = total / o->num_episodes;
    free(obs);
    free(u);
    free(rgb);
    free(act);
    free(mask);
    return rc;
}

/* --video: the renderer and the writer, the episodes, then the file, written atomically;
 * SIGINT/SIGTERM caught meanwhile (and restored after). */
static int play_video(const calf_play_options *o, const algorithm_ops *ops, algorithm *algo,
                      const calf_env_class *cls, int64_t max_steps, double *returns,
                      double *average, int *capped, long long *frames, double *fps,
                      calf_error *err) {
    int w = o->width > 0 ? o->width : 480, h = o->height > 0 ? o->height : 480;
    calf_renderer *r = NULL;
    video_writer *v = NULL;
    int rc = check_video_path(o->video, err);
    if (rc == CALF_OK) rc = calf_renderer_open(cls->spec.name, w, h, &r, err);
    if (rc == CALF_OK) rc = video_writer_open(o->video, w, h, calf_renderer_fps(r), &v, err);
    if (rc != CALF_OK) {
        calf_renderer_close(r);
        return rc;
    }
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_video_signal;
    sigemptyset(&sa.sa_mask);
    video_interrupted = 0;
    CALF_ASSERT(sigaction(SIGINT, &sa, &old_int) == 0);
    CALF_ASSERT(sigaction(SIGTERM, &sa, &old_term) == 0);
    rc = record_episodes(o, ops, algo, cls, max_steps, r, v, returns, average, capped, err);
    calf_renderer_close(r);
    *frames = video_writer_frames(v);
    *fps = video_writer_fps(v);
    uint8_t *data = NULL;
    size_t len = 0;
    if (rc == CALF_OK) rc = video_writer_finish(v, &data, &len, err);
    else video_writer_abort(v);
    if (rc == CALF_OK) rc = play_write_output(o->video, data, len, err);
    free(data);
    CALF_ASSERT(sigaction(SIGINT, &old_int, NULL) == 0);
    CALF_ASSERT(sigaction(SIGTERM, &old_term, NULL) == 0);
    return rc;
}

/* The report stream's state after calf wrote to it: a failure is CALF_EIO. */
static int flush_report(FILE *out, calf_error *err) {
    errno = 0;
    if (fflush(out) != 0 || ferror(out))
        return calf_error_set(err, CALF_EIO, "error writing output: calf play's report: %s",
                              errno ? strerror(errno) : "stream error");
    return CALF_OK;
}

int calf_play(const calf_play_options *o, calf_error *err) {
    return calf_play_for_testing(o, NULL, err);
}

int calf_play_for_testing(const calf_play_options *o, const calf_play_testing *t, calf_error *err) {
    static const calf_play_testing none = {NULL, NULL};
    if (!t) t = &none;
    if (t->observations && !t->dump_actions)
        return calf_error_set(err, CALF_EINVAL, "--observations needs --dump_actions FILE");
    if (o->video && t->observations)
        return calf_error_set(err, CALF_EINVAL, "--video plays episodes: not with --observations");
    if (o->width < 0 || o->width > 4096 || o->height < 0 || o->height > 4096 || o->max_frames < 0)
        return calf_error_set(err, CALF_EINVAL, "--width/--height must be in [1, 4096], --max_frames >= 0");
    if (!o->video && (o->width || o->height || o->max_frames))
        return calf_error_set(err, CALF_EINVAL, "--width, --height and --max_frames need --video FILE");
    video_format fmt;
    if (o->video && video_format_of(o->video, &fmt, err) != CALF_OK) return CALF_EINVAL;
    FILE *out = o->out ? o->out : stdout;
    play_policy *p = mem_calloc(1, sizeof *p, err);
    if (!p) return CALF_ENOMEM;
    int rc = play_policy_open(p, o->root_dir, o->checkpoint, err);
    /* The dump is made in memory and written once all of it is there: a failure on the
     * way leaves no file behind. */
    FILE *dump = NULL;
    char *dump_text = NULL;
    size_t dump_len = 0;
    if (rc == CALF_OK && t->dump_actions) {
        dump = open_memstream(&dump_text, &dump_len);
        if (!dump)
            rc = calf_error_set(err, CALF_ENOMEM, "%s: out of memory for its rows: %s",
                                t->dump_actions, strerror(errno));
    }
    double *returns = NULL, avg = 0;
    int rows = 0;
    long long frames = 0;
    double video_fps = 0;
    if (rc == CALF_OK && t->observations) {
        rc = act_on_file(t, p, dump, &rows, err);
    } else if (rc == CALF_OK) {
        returns = mem_calloc((size_t)o->num_episodes, sizeof *returns, err);
        if (!returns) rc = CALF_ENOMEM;
    }
    if (rc == CALF_OK && !t->observations) {
        dumping_policy d = {.ops = p->ops, .algo = p->algo, .spec = &p->cls->spec, .f = dump};
        algorithm_ops dumping_ops = *p->ops;
        dumping_ops.greedy = dumping_greedy;
        dumping_ops.greedy_reset = p->ops->greedy_reset ? dumping_greedy_reset : NULL;
        /* the cap of the run's evaluation (its config.gin), so play reports what it did */
        int64_t max_steps = calf_config_int(&p->cfg, CALF_CFG_EVAL_MAX_EPISODE_STEPS);
        int capped = 0;
        if (o->video)
            rc = play_video(o, dump ? &dumping_ops : p->ops, dump ? (algorithm *)&d : p->algo, p->cls,
                            max_steps, returns, &avg, &capped, &frames, &video_fps, err);
        else if (dump)
            rc = trainer_evaluate_greedy(&dumping_ops, (algorithm *)&d, NULL, p->cls->spec.name,
                                         (uint64_t)o->seed, o->num_episodes, max_steps, returns, NULL,
                                         &avg, &capped, err);
        else
            rc = trainer_evaluate_greedy(p->ops, p->algo, NULL, p->cls->spec.name, (uint64_t)o->seed,
                                         o->num_episodes, max_steps, returns, NULL, &avg, &capped,
                                         err);
        if (rc == CALF_OK && capped) {
            char line[512];
            trainer_eval_cap_warning(line, sizeof line, p->cls->spec.name, max_steps, capped,
                                     o->num_episodes);
            fprintf(stderr, "calf play: %s\n", line);
        }
    }
    if (dump) {
        bool failed = ferror(dump) != 0;
        if (fclose(dump) != 0) failed = true;
        if (failed && rc == CALF_OK)
            rc = calf_error_set(err, CALF_ENOMEM, "%s: out of memory for its rows", t->dump_actions);
        if (rc == CALF_OK) rc = play_write_output(t->dump_actions, dump_text, dump_len, err);
        free(dump_text);
    }
    /* the report, once what it reports is done */
    if (rc == CALF_OK) {
        const char *env_name = p->cls->spec.name;
        if (t->observations) {
            fprintf(out, "policy: %s (iteration %lld), %s, greedy actions for %d observations of %s\n",
                    p->path, (long long)p->iteration, env_name, rows, t->observations);
        } else {
            fprintf(out, "policy: %s (iteration %lld), %s, greedy\n", p->path, (long long)p->iteration,
                    env_name);
            for (int k = 0; k < o->num_episodes; k++)
                if (o->verbose || o->num_episodes <= 20)
                    fprintf(out, "episode %d: return %.3f\n", k + 1, returns[k] + 0.0); /* no "-0.000" */
            fprintf(out, "average return over %d episodes: %.3f\n", o->num_episodes, avg + 0.0);
            if (o->video)
                fprintf(out, "video: %s, %lld frames of %dx%d at %g frames per second\n", o->video,
                        frames, o->width > 0 ? o->width : 480, o->height > 0 ? o->height : 480,
                        video_fps);
        }
        rc = flush_report(out, err);
    }
    free(returns);
    play_policy_close(p);
    free(p);
    return rc;
}
