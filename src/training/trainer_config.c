/* trainer_config.c: a run's config as the trainer takes it: loaded from its file or
 * text and checked against the env and the algorithm it names, and written back as the
 * run's operative config.gin. */
#include "training/trainer_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calf/env.h"
#include "calf/version.h"
#include "base/bytes.h"
#include "base/fsutil.h"

void trainer_env_lib_hint(const char *conf, char *buf, size_t size) {
    FILE *f = conf ? fopen(conf, "r") : NULL;
    if (!f) return;
    char line[4200];
    const char *tag = "# " ENV_LIB_COMMENT;
    size_t tag_len = strlen(tag), used = strlen(buf);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, tag, tag_len) != 0) continue;
        line[strcspn(line, "\r\n")] = '\0';
        const char *lib = line + tag_len;
        if (strstr(buf, lib)) continue; /* named already (a resume's --conf and config.gin) */
        int n = snprintf(buf + used, size - used, " --env_lib %s", lib);
        if (n < 0 || (size_t)n >= size - used) break;
        used += (size_t)n;
    }
    fclose(f);
}

/* The message for an env the config names that is not registered: the lookup's, or,
 * when the run's config says a plug-in library registered it, which one to pass. */
static int unknown_env_error(const char *where, const char *env, const char *const *confs, int n,
                             const calf_error *why, calf_error *err) {
    char hint[2048] = "";
    for (int i = 0; i < n; i++) trainer_env_lib_hint(confs[i], hint, sizeof hint);
    if (!hint[0])
        return calf_error_set(err, CALF_EINVAL, "%s%s%s", where, where[0] ? ": " : "", why->msg);
    return calf_error_set(err, CALF_EINVAL,
                          "%s%senvironment '%s' is not registered; the run used a plug-in "
                          "library for it: pass it again with%s",
                          where, where[0] ? ": " : "", env, hint);
}

int calf_train_load_config(const calf_train_options *o, calf_config *cfg, calf_error *err) {
    return trainer_load_config(o, o->conf_text, cfg, err);
}

int trainer_load_config(const calf_train_options *o, const char *conf_text, calf_config *cfg,
                        calf_error *err) {
    config_init(cfg);
    int rc;
    if (o->conf_path && conf_text)
        return calf_error_set(err, CALF_EINVAL, "the config is given twice, as the file %s and as "
                              "conf_text: give one of them", o->conf_path);
    if (o->conf_path) {
        rc = calf_config_parse_file(cfg, o->conf_path, err);
    } else if (conf_text) {
        rc = calf_config_parse_string(cfg, conf_text, "<conf_text>", err);
    } else {
        char path[4096];
        if ((rc = fs_join(path, sizeof path, o->root_dir, "config.gin", err))) return rc;
        if (access(path, F_OK) != 0)
            return calf_error_set(err, CALF_EINVAL,
                                  "missing --conf (and %s does not exist to resume from)", path);
        rc = calf_config_parse_file(cfg, path, err);
    }
    if (rc) return rc == CALF_EIO ? CALF_EINVAL : rc;
    /* the API caller's array: a count that cannot be, or a NULL in it, is bad input */
    int n = o->num_conf_params;
    if (n < 0) return calf_error_set(err, CALF_EINVAL, "num_conf_params %d is negative", n);
    if (n > 0 && !o->conf_params)
        return calf_error_set(err, CALF_EINVAL, "conf_params is NULL but num_conf_params is %d", n);
    for (int i = 0; i < n; i++)
        if (!o->conf_params[i])
            return calf_error_set(err, CALF_EINVAL, "conf_params[%d] is NULL (of %d)", i, n);
    for (int i = 0; i < n; i++)
        if ((rc = calf_config_apply_param(cfg, o->conf_params[i], err))) return rc;
    if ((rc = calf_config_validate(cfg, err))) return rc;
    const char *env = calf_config_string(cfg, CALF_CFG_ENV_NAME);
    calf_error why;
    calf_error_clear(&why);
    const calf_env_class *cls = calf_env_lookup(env, &why);
    if (!cls) {
        char root_conf[4096] = "";
        if (o->root_dir) fs_join(root_conf, sizeof root_conf, o->root_dir, "config.gin", NULL);
        const char *confs[] = {o->conf_path, root_conf[0] ? root_conf : NULL};
        return unknown_env_error(cfg->origin[CALF_CFG_ENV_NAME], env, confs, 2, &why, err);
    }
    if (cls->spec.action_dim > 0 && cls->spec.num_actions > 0)
        return calf_error_set(err, CALF_EINVAL, "environment '%s' has both action kinds", env);
    const algorithm_ops *ops = trainer_algorithm(cfg);
    return ops->check ? ops->check(cfg, &cls->spec, err) : CALF_OK;
}


bool trainer_run_complete(const calf_config *cfg, int64_t iteration) {
    int64_t iters = calf_config_int(cfg, CALF_CFG_NUM_ITERATIONS);
    int64_t steps = calf_config_int(cfg, CALF_CFG_NUM_ENV_STEPS);
    int64_t per = calf_config_int(cfg, CALF_CFG_NUM_ENVS) * calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH);
    if (iters > 0 && iteration >= iters) return true;
    /* env steps after `iteration` iterations, as the loop counts them (finished()) */
    return steps > 0 && per > 0 && iteration >= (steps + per - 1) / per;
}

const algorithm_ops *trainer_algorithm(const calf_config *cfg) {
    const algorithm_ops *ops = algorithm_find(calf_config_string(cfg, CALF_CFG_ALGORITHM_CTOR));
    CALF_ASSERT(ops != NULL); /* the config only takes the names algorithm_find knows */
    return ops;
}

int trainer_config_write(const calf_config *cfg, int E, int N, const algorithm_ops *ops,
                         algorithm *algo, const char *root, calf_error *err) {
    char path[4096];
    int rc = fs_join(path, sizeof path, root, "config.gin", err);
    if (rc) return rc;
    /* The split: a line per rank, or beyond 16 ranks a line per run of equal blocks
     * (calf_split's blocks differ by at most one, so there are at most two runs). */
    char line[512];
    bytes_buf hb = {0};
    snprintf(line, sizeof line,
             "operative config written by calf %s: every binding's final value\n"
             "values are global; num_parallel_environments = %d split over %d process%s:",
             calf_version(), E, N, N == 1 ? "" : "es");
    bytes_buf_put_str(&hb, line);
    for (int r = 0; r < N;) {
        int b, c, last = r;
        calf_split(E, N, r, &b, &c, NULL);
        if (N > 16)
            for (int q = r + 1, bq, cq; q < N && (calf_split(E, N, q, &bq, &cq, NULL), cq == c); q++)
                last = q;
        if (last == r) {
            snprintf(line, sizeof line, "\n  rank %d: environments %d..%d (%d)", r, b, b + c - 1, c);
        } else {
            int bl, cl;
            calf_split(E, N, last, &bl, &cl, NULL);
            snprintf(line, sizeof line, "\n  ranks %d..%d: environments %d..%d (%d each)", r, last,
                     b, bl + cl - 1, c);
        }
        bytes_buf_put_str(&hb, line);
        r = last + 1;
    }
    /* Where the env came from when a plug-in registered it: a resume or `calf play`
     * that lacks the library says which (trainer_env_lib_hint). */
    for (int i = 0; i < calf_env_library_count(); i++) {
        bytes_buf_put_str(&hb, "\n" ENV_LIB_COMMENT);
        bytes_buf_put_str(&hb, calf_env_library_at(i));
    }
    if (ops->describe) {
        char text[1024];
        ops->describe(algo, text, sizeof text);
        if (text[0]) {
            bytes_buf_put_str(&hb, "\n");
            bytes_buf_put_str(&hb, text);
        }
    }
    unsigned char *nul = bytes_buf_room(&hb, 1);
    if (!nul) {
        free(hb.data);
        return calf_error_set(err, CALF_ENOMEM, "%s: out of memory building the header", path);
    }
    *nul = '\0';
    const char *header = (const char *)hb.data;
    /* built in memory, then written with write(2): a failure is seen with its errno */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    rc = f ? calf_config_write(cfg, f, header) : CALF_ENOMEM;
    if (f && fclose(f) != 0 && rc == CALF_OK) rc = CALF_ENOMEM;
    free(hb.data);
    if (rc == CALF_ENOMEM) {
        free(text);
        return calf_error_set(err, CALF_ENOMEM, "%s: out of memory formatting the config", path);
    }
    if (rc == CALF_OK) rc = fs_write_file_atomic(path, text, len, err);
    else calf_error_set(err, rc, "%s: cannot format the config", path);
    free(text);
    return rc;
}
