/* calf.c: the `calf` command-line program: dispatch by the command table (commands.c)
 * and the commands that run a job on the library's public API: train, play, export; play
 * reaches calf/testing.h for what calf's tests drive through the program (--dump_actions,
 * --observations), and the program sets CALF_TEST_HOOKS through it.
 * Exit codes: 0 success, 1 failure, 2 bad input, 130 Ctrl-C. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/config.h"
#include "calf/env.h"
#include "calf/testing.h"
#include "calf/train.h"
#include "calf/version.h"
#include "commands.h"

#define EXIT_BAD_INPUT 2

/* Output that could not be written (a full disk, say) turns a success into a failure;
 * a command that failed has already said why. */
static int output_checked(int rc) {
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0) {
        fprintf(stderr, "calf: error writing output\n");
        return 1;
    }
    return rc;
}

/* --env_lib's early action: the plug-in, loaded before the command does anything else
 * (train's workers are forked later and inherit it; each MPI rank runs this too). */
int cli_load_env_lib(const cli_command *cmd, const char *path) {
    calf_error err;
    calf_error_clear(&err);
    int rc = calf_env_load_library(path, &err);
    if (rc == CALF_OK) return 0;
    fprintf(stderr, "calf %s: %s\n", cmd->name, err.msg);
    return calf_exit_code(rc);
}

typedef struct {
    calf_train_options o;
    const char **params; /* o.conf_params, one per argument at most */
    bool list;           /* --list-bindings */
} train_state;

static int train_set(void *ctx, int id, const cli_value *v) {
    train_state *t = ctx;
    switch (id) {
    case TRAIN_ROOT_DIR: t->o.root_dir = v->text; break;
    case TRAIN_CONF: t->o.conf_path = v->text; break;
    case TRAIN_CONF_PARAM: t->params[t->o.num_conf_params++] = v->text; break;
    case TRAIN_NPROC: t->o.nproc = (int)v->num; break;
    case TRAIN_QUIET: t->o.quiet = true; break;
    case TRAIN_LIST_BINDINGS: t->list = true; break;
    }
    return 0;
}

int calf_cmd_train(const cli_command *self, int argc, char **argv) {
    train_state t;
    memset(&t, 0, sizeof t);
    t.o.nproc = 1;
    t.params = calloc((size_t)argc + 1, sizeof *t.params);
    if (!t.params) {
        fprintf(stderr, "calf: out of memory\n");
        return 1;
    }
    int rc = cli_parse(self, &argc, argv, train_set, &t);
    if (rc == CLI_RUN && t.list) {
        calf_config_list_bindings(stdout);
        rc = output_checked(0);
    } else if (rc == CLI_RUN && (rc = cli_require(self, TRAIN_ROOT_DIR, t.o.root_dir)) == 0) {
        t.o.conf_params = t.params;
        calf_error err;
        calf_error_clear(&err);
        rc = calf_train(&t.o, &err);
        if (rc != CALF_OK && rc != CALF_EINTR && err.msg[0]) fprintf(stderr, "calf: %s\n", err.msg);
        rc = calf_exit_code(rc);
    }
    free(t.params);
    return rc;
}

/* What calf play sets: the public options, and the two test-only ones (calf/testing.h). */
typedef struct play_args {
    calf_play_options o;
    calf_play_testing t;
} play_args;

static int play_set(void *ctx, int id, const cli_value *v) {
    play_args *a = ctx;
    calf_play_options *o = &a->o;
    switch (id) {
    case PLAY_ROOT_DIR: o->root_dir = v->text; break;
    case PLAY_NUM_EPISODES: o->num_episodes = (int)v->num; break;
    case PLAY_VERBOSE: o->verbose = true; break;
    case PLAY_CHECKPOINT: o->checkpoint = v->text; break;
    case PLAY_SEED: o->seed = v->num; break;
    case PLAY_VIDEO: o->video = v->text; break;
    case PLAY_WIDTH: o->width = (int)v->num; break;
    case PLAY_HEIGHT: o->height = (int)v->num; break;
    case PLAY_MAX_FRAMES: o->max_frames = v->num; break;
    case PLAY_DUMP_ACTIONS: a->t.dump_actions = v->text; break;
    case PLAY_OBSERVATIONS: a->t.observations = v->text; break;
    }
    return 0;
}

int calf_cmd_play(const cli_command *self, int argc, char **argv) {
    play_args a;
    memset(&a, 0, sizeof a);
    a.o.num_episodes = 10;
    int rc = cli_parse(self, &argc, argv, play_set, &a);
    if (rc != CLI_RUN) return rc;
    if ((rc = cli_require(self, PLAY_ROOT_DIR, a.o.root_dir))) return rc;
    calf_error err;
    calf_error_clear(&err);
    rc = calf_play_for_testing(&a.o, &a.t, &err);
    if (rc != CALF_OK) fprintf(stderr, "calf: %s\n", err.msg);
    return calf_exit_code(rc);
}

static int export_set(void *ctx, int id, const cli_value *v) {
    calf_export_options *o = ctx;
    switch (id) {
    case EXPORT_ROOT_DIR: o->root_dir = v->text; break;
    case EXPORT_CHECKPOINT: o->checkpoint = v->text; break;
    case EXPORT_OUTPUT: o->output = v->text; break;
    }
    return 0;
}

int calf_cmd_export(const cli_command *self, int argc, char **argv) {
    calf_export_options o;
    memset(&o, 0, sizeof o);
    int rc = cli_parse(self, &argc, argv, export_set, &o);
    if (rc != CLI_RUN) return rc;
    if ((rc = cli_require(self, EXPORT_ROOT_DIR, o.root_dir))) return rc;
    calf_error err;
    calf_error_clear(&err);
    rc = calf_export(&o, &err);
    if (rc != CALF_OK) fprintf(stderr, "calf: %s\n", err.msg);
    else if (o.output && strcmp(o.output, "-") != 0) fprintf(stderr, "calf export: wrote %s\n", o.output);
    return calf_exit_code(rc);
}

int calf_cli_main(int argc, char **argv) {
    if (argc < 2) {
        cli_print_usage(stderr);
        return EXIT_BAD_INPUT;
    }
    const char *name = argv[1];
    /* calf's own tests set timing and limits through this one variable (calf/testing.h) */
    const char *hooks = getenv("CALF_TEST_HOOKS");
    calf_error herr;
    if (hooks && calf_testing_set(hooks, &herr) != CALF_OK) {
        fprintf(stderr, "calf: CALF_TEST_HOOKS: %s\n", herr.msg);
        return EXIT_BAD_INPUT;
    }
    if (!strcmp(name, "-h") || !strcmp(name, "--help") || !strcmp(name, "help")) {
        cli_print_usage(stdout);
        return output_checked(0);
    }
    if (!strcmp(name, "--version")) {
        printf("calf %s (MPI backend: %s; MuJoCo envs: %s)\nvideos (calf play --video): %s\n"
               "kernels: %s\n",
               calf_version(), calf_feature_note("mpi"), calf_feature_note("mujoco"),
               calf_feature_note("video"), calf_feature_note("kernels"));
        return output_checked(0);
    }
    const cli_command *cmd = cli_command_find(name);
    if (!cmd) {
        fprintf(stderr, "calf: unknown command '%s'\n", name);
        cli_print_usage(stderr);
        return EXIT_BAD_INPUT;
    }
    int rc = cmd->run(cmd, argc - 2, argv + 2);
    return cmd->checks_output ? output_checked(rc) : rc;
}
