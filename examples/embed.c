/* embed.c: calf as a library in a host program, through its three handles. It steps a
 * block of CartPole envs with random actions (calf/vec_env.h), trains PPO ten
 * iterations a step at a time, printing the metrics each one hands back
 * (calf/trainer.h), then opens the result as a policy and plays it on the same envs
 * (calf/policy.h). It checks what it can and exits non-zero on a mismatch:
 *     example_embed [ROOT_DIR]     (default: a fresh directory under /tmp)
 * Built in the tree (example_embed) and against an installed calf (tests/e2e_install.sh):
 *     cc -std=c11 embed.c $(pkg-config --cflags --libs calf) \
 *         -Wl,-rpath,$(pkg-config --variable=libdir calf) -o embed
 * (the rpath: where the program finds libcalf.so when the prefix is not one the dynamic
 * loader searches, such as ~/.local) */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/error.h"
#include "calf/policy.h"
#include "calf/trainer.h"
#include "calf/vec_env.h"
#include "calf/version.h"

enum { NUM_ENVS = 8 };

/* PPO on CartPole, small enough to train ten iterations in a moment */
static const char config[] =
    "create_environment.env_name = 'CartPole-v1'\n"
    "create_environment.num_parallel_environments = 8\n"
    "TrainerConfig.random_seed = 1\n"
    "TrainerConfig.unroll_length = 128\n"
    "TrainerConfig.mini_batch_size = 256\n"
    "TrainerConfig.num_updates_per_train_iter = 4\n"
    "TrainerConfig.num_iterations = 10\n"
    "TrainerConfig.num_checkpoints = 1\n"
    "ActorDistributionNetwork.fc_layer_params = (32,)\n"
    "ValueNetwork.fc_layer_params = (32,)\n";

static int fail(const char *what, const calf_error *err) {
    fprintf(stderr, "embed: %s: %s\n", what, err->msg);
    return 1;
}

/* The average return of `episodes` episodes over the block's envs, acting with policy
 * (greedy) or, when it is NULL, with a fixed pseudo-random sequence. */
static int play(calf_vec_env *v, calf_policy *policy, int episodes, double *average) {
    calf_error err;
    int n = calf_vec_env_count(v), od = calf_vec_env_obs_dim(v);
    float obs[NUM_ENVS * 4], final_obs[NUM_ENVS * 4], reward[NUM_ENVS];
    uint8_t term[NUM_ENVS], trunc[NUM_ENVS];
    int act[NUM_ENVS];
    double ret[NUM_ENVS] = {0}, total = 0;
    if (n != NUM_ENVS || od != 4) return fprintf(stderr, "embed: unexpected spaces\n"), 1;
    if (calf_vec_env_reset(v, obs, &err) != CALF_OK) return fail("reset", &err);
    unsigned seed = 12345;
    int done = 0;
    while (done < episodes) {
        if (policy) {
            if (calf_policy_greedy(policy, obs, n, act, NULL, &err) != CALF_OK)
                return fail("greedy", &err);
        } else {
            for (int e = 0; e < n; e++) {
                seed = seed * 1103515245u + 12345u;
                act[e] = (int)((seed >> 16) & 1);
            }
        }
        if (calf_vec_env_step(v, act, NULL, obs, reward, term, trunc, final_obs, &err) != CALF_OK)
            return fail("step", &err);
        for (int e = 0; e < n; e++) {
            ret[e] += reward[e];
            if (term[e] || trunc[e]) { /* auto-reset: obs row e already starts the next */
                if (done < episodes) total += ret[e], done++;
                ret[e] = 0;
            }
        }
    }
    *average = total / episodes;
    return 0;
}

static void on_progress(const calf_trainer_metrics *m, void *arg) {
    (void)arg;
    printf("iteration %2lld  env steps %5lld  episodes %3lld  return %6.1f", (long long)m->iteration,
           (long long)m->env_steps, (long long)m->episodes, m->average_return);
    for (int k = 0; k < m->num_algorithm_metrics; k++)
        if (!strcmp(m->algorithm_metric_names[k], "PPOLoss/entropy"))
            printf("  entropy %.3f", m->algorithm_metric_values[k]);
    printf("\n");
}

int main(int argc, char **argv) {
    char root[256];
    if (argc > 1) {
        snprintf(root, sizeof root, "%s", argv[1]);
    } else {
        snprintf(root, sizeof root, "/tmp/calf_embed.XXXXXX");
        if (!mkdtemp(root)) return perror("mkdtemp"), 1;
    }
    printf("calf %s, run in %s\n", calf_version(), root);
    calf_error err;

    /* 1. a block of envs: the job's envs 0..7, as the trainer would step them */
    calf_vec_env *v;
    if (calf_vec_env_open("CartPole-v1", NULL, 1, 0, NUM_ENVS, &v, &err) != CALF_OK)
        return fail("open CartPole-v1", &err);
    double random_return;
    if (play(v, NULL, 40, &random_return)) return 1;
    printf("random actions: average return %.1f over 40 episodes\n", random_return);

    /* 2. train ten iterations, one step at a time */
    calf_trainer_options o = CALF_TRAINER_OPTIONS_INIT;
    o.root_dir = root;
    o.conf_text = config;
    o.quiet = true;
    o.progress = on_progress;
    calf_trainer *t;
    if (calf_trainer_open(&o, &t, &err) != CALF_OK) return fail("open the run", &err);
    int last = 0;
    while (!calf_trainer_done(t)) {
        if (calf_trainer_step(t, &err) != CALF_OK) {
            calf_trainer_close(t, NULL);
            return fail("step", &err);
        }
        last = (int)calf_trainer_metrics_last(t)->iteration;
    }
    if (calf_trainer_close(t, &err) != CALF_OK) return fail("close the run", &err);
    if (last != 10) return fprintf(stderr, "embed: stopped at iteration %d\n", last), 1;

    /* 3. the trained policy on the same envs */
    calf_policy *p;
    if (calf_policy_open(root, NULL, &p, &err) != CALF_OK) return fail("open the policy", &err);
    double trained_return;
    int bad = play(v, p, 40, &trained_return);
    printf("policy of %s: average return %.1f over 40 episodes\n", calf_policy_checkpoint(p),
           trained_return);
    calf_policy_close(p);
    calf_vec_env_close(v);
    if (bad) return 1;
    /* random play averages about 22; ten iterations of PPO are well past it */
    if (!(trained_return > 2 * random_return)) {
        fprintf(stderr, "embed: the trained policy (%.1f) is no better than random (%.1f)\n",
                trained_return, random_return);
        return 1;
    }
    printf("embed example OK\n");
    return 0;
}
