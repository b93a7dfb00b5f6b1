/* calf.c: the `calf` command-line program: argument parsing and dispatch to the
 * library's public API. Exit codes: 0 success, 1 failure, 2 bad input, 130 Ctrl-C. */
#include <errno.h>
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

static const char usage_text[] =
    "usage: calf <command> [options]\n"
    "\n"
    "commands:\n"
    "  train    train a policy:  calf train --root_dir DIR --conf FILE [--conf_param K=V]... [--nproc N]\n"
    "  play     run a trained policy:  calf play --root_dir DIR [--num_episodes N] [--checkpoint FILE]\n"
    "  export   write a trained policy as one C file:  calf export --root_dir DIR [-o policy.c]\n"
    "  envs     list the registered environments\n"
    "  env      step one environment with random actions:  calf env NAME [--seed S] [--index I] [--steps N]\n"
    "  events   print a run's TensorBoard events files as TensorBoard reads them:\n"
    "           calf events [--raw] [--csv] FILE...\n"
    "  plot     draw runs' learning curves as one SVG file:\n"
    "           calf plot ROOT... [-o FILE.svg] [--tag T]... [--smooth W] [--x steps|iterations|seconds] [--group]\n"
    "\n"
    "options:\n"
    "  -h, --help     this text (also: calf <command> --help)\n"
    "  --version      version and build features\n"
    "  --env_lib LIB  (train, play, export, env, envs; repeatable) first load the plug-in\n"
    "                 shared library LIB, whose calf_plugin_register adds its environments\n"
    "                 (include/calf/env.h; examples/custom_env.c is one)\n";

static const char train_usage[] =
    "usage: calf train --root_dir DIR [--conf FILE] [--conf_param 'Scope.param=value']... [--nproc N]\n"
    "                  [--env_lib LIB]...\n"
    "       calf train --list-bindings\n"
    "\n"
    "  --root_dir DIR      where config.gin, train/, eval/ and log/ go; a DIR that holds\n"
    "                      checkpoints resumes from the newest valid one; one run at a\n"
    "                      time (a second is refused while the first holds DIR/.lock)\n"
    "  --conf FILE         gin config (default: DIR/config.gin of an earlier run)\n"
    "  --conf_param K=V    override one binding (repeatable; wins over the file)\n"
    "  --nproc N           run N local worker processes (default 1); the result is\n"
    "                      bit-identical to one process. Leave it out under mpirun/srun:\n"
    "                      the MPI ranks are the processes there (both together are\n"
    "                      refused)\n"
    "  --quiet             no progress output\n"
    "  --list-bindings     print every config binding with type, default and help\n"
    "  --env_lib LIB       load the plug-in library LIB (repeatable) before anything else,\n"
    "                      for environments not built into calf; every worker and MPI rank\n"
    "                      has it. config.gin records it (a config cannot load code), and\n"
    "                      a resume or `calf play` of the run needs it passed again\n";

static const char play_usage[] =
    "usage: calf play --root_dir DIR [--env_lib LIB]... [--num_episodes N] [--checkpoint FILE] [--seed S] [--verbose]\n"
    "                 [--video FILE.mp4|FILE.gif [--width W] [--height H] [--max_frames N]]\n"
    "\n"
    "  runs the greedy policy of the newest valid checkpoint in DIR/train/algorithm\n"
    "  (or FILE) and prints each episode's return and the average\n"
    "  --num_episodes N      episodes to play (default 10); each is printed when N <= 20\n"
    "  --verbose             print each episode's return for any N\n"
    "  --checkpoint FILE     play FILE instead of the newest valid checkpoint\n"
    "  --seed S              the episodes' start states come from S (default 0); the run's\n"
    "                        TrainerConfig.random_seed plays its evaluation's episodes\n"
    "  --env_lib LIB         load the plug-in library LIB first (repeatable): a run of a\n"
    "                        plug-in's environment needs it, as its config.gin says\n"
    "  --video FILE          record the episodes, one after another, as FILE: MP4 (H.264)\n"
    "                        when it ends in .mp4, an animated GIF when .gif; at the env's\n"
    "                        frame rate, written once at the end (after an error, none)\n"
    "  --width W, --height H the video's size in pixels (default 480x480)\n"
    "  --max_frames N        record at most N frames (the episodes still all play)\n"
    "\n"
    "  for checking an exported policy (calf export) against calf:\n"
    "  --dump_actions OUT    write each observation acted on and its greedy action to OUT,\n"
    "                        a line each: the observation's numbers, then the action's\n"
    "  --observations IN     with --dump_actions: act on IN's observations (a line each)\n"
    "                        instead of playing episodes\n";

static const char export_usage[] =
    "usage: calf export --root_dir DIR [--checkpoint FILE] [-o OUT.c] [--env_lib LIB]...\n"
    "\n"
    "  writes the greedy policy of the newest valid checkpoint in DIR/train/algorithm (or\n"
    "  FILE) as one C99 file that needs only a C compiler and libm, to OUT.c (default:\n"
    "  standard output):  int calf_policy_act(const float *obs, float *action);\n"
    "  with CALF_POLICY_OBS_DIM, CALF_POLICY_ACTION_DIM and CALF_POLICY_DISCRETE. Its\n"
    "  actions are calf play's, computed with the same arithmetic\n";

/* Output that could not be written (a full disk, say) turns a success into a failure;
 * a command that failed has already said why. */
static int output_checked(int rc) {
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0) {
        fprintf(stderr, "calf: error writing output\n");
        return 1;
    }
    return rc;
}

/* "--name value" or "--name=value"; advances *i past what it consumed. */
static const char *option_value(int argc, char **argv, int *i, const char *name, int *bad) {
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] != '\0') return NULL;
    if (*i + 1 >= argc) {
        fprintf(stderr, "calf: option %s needs a value\n", name);
        *bad = 1;
        return NULL;
    }
    return argv[++*i];
}

static int parse_int_arg(const char *name, const char *s, long long lo, long long hi, long long *out) {
    char *end = NULL;
    errno = 0;
    /* strtoll would skip leading blanks: the whole string must be the number */
    bool digit_first = (s[0] >= '0' && s[0] <= '9') || (s[0] == '-' && s[1] >= '0' && s[1] <= '9');
    long long v = digit_first ? strtoll(s, &end, 10) : 0;
    if (!digit_first || errno || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "calf: %s expects an integer in [%lld, %lld], got '%s'\n", name, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int cmd_train(int argc, char **argv) {
    calf_train_options o;
    memset(&o, 0, sizeof o);
    o.nproc = 1;
    const char **params = calloc((size_t)argc + 1, sizeof *params);
    if (!params) { fprintf(stderr, "calf: out of memory\n"); return 1; }
    int list = 0, bad = 0;
    for (int i = 0; i < argc && !bad; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(train_usage, stdout);
            free(params);
            return 0;
        } else if (!strcmp(argv[i], "--list-bindings") || !strcmp(argv[i], "--list_bindings")) {
            list = 1;
        } else if (!strcmp(argv[i], "--quiet")) {
            o.quiet = true;
        } else if ((v = option_value(argc, argv, &i, "--root_dir", &bad))) {
            o.root_dir = v;
        } else if ((v = option_value(argc, argv, &i, "--conf_param", &bad))) {
            params[o.num_conf_params++] = v;
        } else if ((v = option_value(argc, argv, &i, "--conf", &bad))) {
            o.conf_path = v;
        } else if ((v = option_value(argc, argv, &i, "--nproc", &bad))) {
            long long n;
            if (parse_int_arg("--nproc", v, 1, 1024, &n)) bad = 1;
            else o.nproc = (int)n;
        } else if (!bad) {
            fprintf(stderr, "calf train: unknown option '%s'\n%s", argv[i], train_usage);
            bad = 1;
        }
    }
    if (bad) { free(params); return EXIT_BAD_INPUT; }
    if (list) {
        calf_config_list_bindings(stdout);
        free(params);
        return output_checked(0);
    }
    if (!o.root_dir || !o.root_dir[0]) {
        fprintf(stderr, "calf train: %s --root_dir\n%s", o.root_dir ? "empty" : "missing required option",
                train_usage);
        free(params);
        return EXIT_BAD_INPUT;
    }
    o.conf_params = params;
    calf_error err;
    calf_error_clear(&err);
    int rc = calf_train(&o, &err);
    if (rc != CALF_OK && rc != CALF_EINTR && err.msg[0]) fprintf(stderr, "calf: %s\n", err.msg);
    free(params);
    return calf_exit_code(rc);
}

static int cmd_play(int argc, char **argv) {
    calf_play_options o;
    memset(&o, 0, sizeof o);
    o.num_episodes = 10;
    int bad = 0;
    for (int i = 0; i < argc && !bad; i++) {
        const char *v;
        long long n;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(play_usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--verbose")) {
            o.verbose = true;
        } else if ((v = option_value(argc, argv, &i, "--root_dir", &bad))) {
            o.root_dir = v;
        } else if ((v = option_value(argc, argv, &i, "--checkpoint", &bad))) {
            o.checkpoint = v;
        } else if ((v = option_value(argc, argv, &i, "--num_episodes", &bad))) {
            if (parse_int_arg("--num_episodes", v, 1, 1000000, &n)) bad = 1;
            else o.num_episodes = (int)n;
        } else if ((v = option_value(argc, argv, &i, "--seed", &bad))) {
            if (parse_int_arg("--seed", v, 0, (long long)4e18, &n)) bad = 1;
            else o.seed = n;
        } else if ((v = option_value(argc, argv, &i, "--dump_actions", &bad))) {
            o.dump_actions = v;
        } else if ((v = option_value(argc, argv, &i, "--observations", &bad))) {
            o.observations = v;
        } else if ((v = option_value(argc, argv, &i, "--video", &bad))) {
            o.video = v;
        } else if ((v = option_value(argc, argv, &i, "--width", &bad))) {
            if (parse_int_arg("--width", v, 1, 4096, &n)) bad = 1;
            else o.width = (int)n;
        } else if ((v = option_value(argc, argv, &i, "--height", &bad))) {
            if (parse_int_arg("--height", v, 1, 4096, &n)) bad = 1;
            else o.height = (int)n;
        } else if ((v = option_value(argc, argv, &i, "--max_frames", &bad))) {
            if (parse_int_arg("--max_frames", v, 1, (long long)1e12, &n)) bad = 1;
            else o.max_frames = n;
        } else if (!bad) {
            fprintf(stderr, "calf play: unknown option '%s'\n%s", argv[i], play_usage);
            bad = 1;
        }
    }
    if (bad) return EXIT_BAD_INPUT;
    if (!o.root_dir || !o.root_dir[0]) {
        fprintf(stderr, "calf play: %s --root_dir\n%s", o.root_dir ? "empty" : "missing required option",
                play_usage);
        return EXIT_BAD_INPUT;
    }
    calf_error err;
    calf_error_clear(&err);
    int rc = calf_play(&o, &err);
    if (rc != CALF_OK) fprintf(stderr, "calf: %s\n", err.msg);
    return calf_exit_code(rc);
}

static int cmd_export(int argc, char **argv) {
    calf_export_options o;
    memset(&o, 0, sizeof o);
    int bad = 0;
    for (int i = 0; i < argc && !bad; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(export_usage, stdout);
            return 0;
        } else if ((v = option_value(argc, argv, &i, "--root_dir", &bad))) {
            o.root_dir = v;
        } else if ((v = option_value(argc, argv, &i, "--checkpoint", &bad))) {
            o.checkpoint = v;
        } else if ((v = option_value(argc, argv, &i, "-o", &bad)) ||
                   (!bad && (v = option_value(argc, argv, &i, "--output", &bad)))) {
            o.output = v;
        } else if (!bad) {
            fprintf(stderr, "calf export: unknown option '%s'\n%s", argv[i], export_usage);
            bad = 1;
        }
    }
    if (bad) return EXIT_BAD_INPUT;
    if (!o.root_dir || !o.root_dir[0]) {
        fprintf(stderr, "calf export: %s --root_dir\n%s", o.root_dir ? "empty" : "missing required option",
                export_usage);
        return EXIT_BAD_INPUT;
    }
    calf_error err;
    calf_error_clear(&err);
    int rc = calf_export(&o, &err);
    if (rc != CALF_OK) fprintf(stderr, "calf: %s\n", err.msg);
    else if (o.output && strcmp(o.output, "-") != 0) fprintf(stderr, "calf export: wrote %s\n", o.output);
    return calf_exit_code(rc);
}

/* Loads every --env_lib LIB / --env_lib=LIB of args in order, before the command does
 * anything else (train's workers are forked later and inherit them; each MPI rank runs
 * this too), and removes them from args. Returns 0 or the exit status of a failure. */
static int load_env_libs(const char *cmd, int *argc, char **argv) {
    int kept = 0, bad = 0;
    for (int i = 0; i < *argc; i++) {
        const char *v = option_value(*argc, argv, &i, "--env_lib", &bad);
        if (bad) return EXIT_BAD_INPUT;
        if (!v) {
            argv[kept++] = argv[i];
            continue;
        }
        calf_error err;
        calf_error_clear(&err);
        int rc = calf_env_load_library(v, &err);
        if (rc != CALF_OK) {
            fprintf(stderr, "calf %s: %s\n", cmd, err.msg);
            return calf_exit_code(rc);
        }
    }
    *argc = kept;
    return 0;
}

int calf_cli_main(int argc, char **argv) {
    if (argc < 2) {
        fputs(usage_text, stderr);
        return EXIT_BAD_INPUT;
    }
    const char *cmd = argv[1];
    /* calf's own tests set timing and limits through this one variable (calf/testing.h) */
    const char *hooks = getenv("CALF_TEST_HOOKS");
    calf_error herr;
    if (hooks && calf_testing_set(hooks, &herr) != CALF_OK) {
        fprintf(stderr, "calf: CALF_TEST_HOOKS: %s\n", herr.msg);
        return EXIT_BAD_INPUT;
    }
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(usage_text, stdout);
        return output_checked(0);
    }
    if (!strcmp(cmd, "--version")) {
        printf("calf %s (MPI backend: %s; MuJoCo envs: %s)\nvideos (calf play --video): %s\n",
               calf_version(), calf_feature_note("mpi"), calf_feature_note("mujoco"),
               calf_feature_note("video"));
        return output_checked(0);
    }
    static const char *const with_env_libs[] = {"train", "play", "export", "env", "envs"};
    int nargs = argc - 2;
    for (size_t k = 0; k < sizeof with_env_libs / sizeof with_env_libs[0]; k++) {
        if (strcmp(cmd, with_env_libs[k]) != 0) continue;
        int rc = load_env_libs(cmd, &nargs, argv + 2);
        if (rc) return rc;
        argc = nargs + 2;
    }
    /* train's output is progress, also kept in the rank logs: its files are what counts */
    if (!strcmp(cmd, "train")) return cmd_train(argc - 2, argv + 2);
    if (!strcmp(cmd, "play")) return output_checked(cmd_play(argc - 2, argv + 2));
    if (!strcmp(cmd, "export")) return output_checked(cmd_export(argc - 2, argv + 2));
    if (!strcmp(cmd, "envs")) return output_checked(calf_cmd_envs(argc - 2, argv + 2));
    if (!strcmp(cmd, "env")) return output_checked(calf_cmd_env(argc - 2, argv + 2));
    if (!strcmp(cmd, "events")) return output_checked(calf_cmd_events(argc - 2, argv + 2));
    if (!strcmp(cmd, "plot")) return output_checked(calf_cmd_plot(argc - 2, argv + 2));
    fprintf(stderr, "calf: unknown command '%s'\n%s", cmd, usage_text);
    return EXIT_BAD_INPUT;
}
