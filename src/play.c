/* play.c: `calf play`: load a trained policy from a run's root dir and run it greedily,
 * printing each episode's return and the average. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/train.h"
#include "checkpoint.h"
#include "trainer.h"

int calf_play(const calf_play_options *o, calf_error *err) {
    char conf[4096], dir[4096], path[4200];
    const char *root = o->root_dir;
    if (!root || !root[0]) return calf_error_set(err, CALF_EINVAL, "--root_dir is empty");
    if (snprintf(conf, sizeof conf, "%s/config.gin", root) >= (int)sizeof conf ||
        snprintf(dir, sizeof dir, "%s/train/algorithm", root) >= (int)sizeof dir)
        return calf_error_set(err, CALF_EINVAL, "path too long: %s", root);
    calf_config cfg;
    calf_config_init(&cfg);
    int rc = calf_config_parse_file(&cfg, conf, err);
    if (rc) return CALF_EINVAL;
    const char *env_name = calf_config_string(&cfg, CALF_CFG_ENV_NAME);
    calf_error why;
    calf_error_clear(&why);
    const calf_env_class *cls = calf_env_lookup(env_name, &why);
    if (!cls) return calf_error_set(err, CALF_EINVAL, "%s: %s", conf, why.msg);

    ckpt_header hdr;
    if (o->checkpoint) {
        if (snprintf(path, sizeof path, "%s", o->checkpoint) >= (int)sizeof path)
            return calf_error_set(err, CALF_EINVAL, "path too long: %s", o->checkpoint);
        rc = ckpt_read_head(path, &hdr, 0, NULL, NULL, err);
        if (rc) return rc == CALF_EIO ? CALF_EINVAL : rc;
    } else {
        bool found = false;
        rc = ckpt_find_latest_valid(dir, path, sizeof path, &hdr, NULL, NULL, &found, stderr, err);
        if (rc) return rc;
        if (!found) return calf_error_set(err, CALF_EINVAL, "%s: no checkpoint to play", dir);
    }
    if (hdr.digest != calf_config_digest(&cfg)) {
        return calf_error_set(err, CALF_EINVAL, "%s does not belong to the config in %s", path, conf);
    }
    const algorithm_ops *ops = NULL;
    algorithm *algo = NULL;
    int64_t iteration = hdr.iteration;
    rc = trainer_load_policy(&cfg, path, &hdr, &ops, &algo, err);
    if (rc) return rc;
    double *returns = calloc((size_t)o->num_episodes, sizeof *returns);
    if (!returns) {
        ops->destroy(algo);
        return calf_error_set(err, CALF_ENOMEM, "out of memory");
    }
    double avg = 0;
    rc = trainer_evaluate_greedy(ops, algo, env_name, (uint64_t)o->seed, o->num_episodes, returns, &avg, err);
    if (rc == CALF_OK) {
        printf("policy: %s (iteration %lld), %s, greedy\n", path, (long long)iteration, env_name);
        for (int k = 0; k < o->num_episodes; k++)
            if (o->verbose || o->num_episodes <= 20) printf("episode %d: return %.3f\n", k + 1, returns[k] + 0.0); /* no "-0.000" */
        printf("average return over %d episodes: %.3f\n", o->num_episodes, avg + 0.0);
    }
    free(returns);
    ops->destroy(algo);
    return rc;
}
