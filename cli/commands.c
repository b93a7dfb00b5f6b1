/* commands.c: the calf program's command table: every command with its summary, help
 * text and options (name, kind, bounds, help), the one list that the parser, calf --help,
 * each command's --help and python3 -m calf read. A new option is one row here. */
#include <stddef.h>
#include <string.h>

#include "calf/plot.h"
#include "commands.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* --env_lib LIB, which every command that makes environments takes: the plug-in is
 * loaded before anything else (train's workers are forked later and inherit it; each
 * MPI rank loads it too) */
#define ENV_LIB_OPTION(help_text) \
    {"--env_lib", NULL, CLI_TEXT, "LIB", 0, 0, NULL, 0, help_text, NULL, cli_load_env_lib}

static const cli_option train_options[] = {
    [TRAIN_ROOT_DIR] = {"--root_dir", NULL, CLI_TEXT, "DIR", 0, 0, NULL, 0,
                        "where config.gin, train/, eval/ and log/ go; a DIR that holds\n"
                        "checkpoints resumes from the newest valid one; one run at a\n"
                        "time (a second is refused while the first holds DIR/.lock)\n",
                        NULL, NULL},
    [TRAIN_CONF] = {"--conf", NULL, CLI_TEXT, "FILE", 0, 0, NULL, 0,
                    "gin config (default: DIR/config.gin of an earlier run)\n", NULL, NULL},
    [TRAIN_CONF_PARAM] = {"--conf_param", NULL, CLI_TEXT, "K=V", 0, 0, NULL, 0,
                          "override one binding (repeatable; wins over the file)\n", NULL, NULL},
    [TRAIN_NPROC] = {"--nproc", NULL, CLI_INT, "N", 1, 1024, NULL, 0,
                     "run N local worker processes (default 1); the result is\n"
                     "bit-identical to one process. Leave it out under mpirun/srun:\n"
                     "the MPI ranks are the processes there (both together are\n"
                     "refused)\n",
                     NULL, NULL},
    [TRAIN_QUIET] = {"--quiet", NULL, CLI_FLAG, NULL, 0, 0, NULL, 0, "no progress output\n", NULL,
                     NULL},
    [TRAIN_LIST_BINDINGS] = {"--list-bindings", "--list_bindings", CLI_FLAG, NULL, 0, 0, NULL, 0,
                             "print every config binding with type, default and help\n", NULL,
                             NULL},
    [TRAIN_ENV_LIB] = ENV_LIB_OPTION(
        "load the plug-in library LIB (repeatable) before anything else,\n"
        "for environments not built into calf; every worker and MPI rank\n"
        "has it. config.gin records it (a config cannot load code), and\n"
        "a resume or `calf play` of the run needs it passed again\n"),
};

static const cli_option play_options[] = {
    [PLAY_ROOT_DIR] = {"--root_dir", NULL, CLI_TEXT, "DIR", 0, 0, NULL, 0, NULL, NULL, NULL},
    [PLAY_NUM_EPISODES] = {"--num_episodes", NULL, CLI_INT, "N", 1, 1000000, NULL, 0,
                           "episodes to play (default 10); each is printed when N <= 20\n", NULL,
                           NULL},
    [PLAY_VERBOSE] = {"--verbose", NULL, CLI_FLAG, NULL, 0, 0, NULL, 0,
                      "print each episode's return for any N\n", NULL, NULL},
    [PLAY_CHECKPOINT] = {"--checkpoint", NULL, CLI_TEXT, "FILE", 0, 0, NULL, 0,
                         "play FILE instead of the newest valid checkpoint\n", NULL, NULL},
    [PLAY_SEED] = {"--seed", NULL, CLI_INT, "S", 0, 4e18, NULL, 0,
                   "the episodes' start states come from S (default 0); the run's\n"
                   "TrainerConfig.random_seed plays its evaluation's episodes\n",
                   NULL, NULL},
    [PLAY_ENV_LIB] = ENV_LIB_OPTION("load the plug-in library LIB first (repeatable): a run of a\n"
                                    "plug-in's environment needs it, as its config.gin says\n"),
    [PLAY_VIDEO] = {"--video", NULL, CLI_TEXT, "FILE", 0, 0, NULL, 0,
                    "record the episodes, one after another, as FILE: MP4 (H.264)\n"
                    "when it ends in .mp4, an animated GIF when .gif; at the env's\n"
                    "frame rate, written once at the end (after an error, none)\n",
                    NULL, NULL},
    [PLAY_WIDTH] = {"--width", NULL, CLI_INT, "W", 1, 4096, NULL, 0,
                    "the video's size in pixels (default 480x480)\n", NULL, NULL},
    [PLAY_HEIGHT] = {"--height", NULL, CLI_INT, "H", 1, 4096, NULL, CLI_WITH_PREVIOUS, NULL, NULL,
                     NULL},
    [PLAY_MAX_FRAMES] = {"--max_frames", NULL, CLI_INT, "N", 1, 1e12, NULL, 0,
                         "record at most N frames (the episodes still all play)\n", NULL, NULL},
    [PLAY_DUMP_ACTIONS] = {"--dump_actions", NULL, CLI_TEXT, "OUT", 0, 0, NULL, 0,
                           "write each observation acted on and its greedy action to OUT,\n"
                           "a line each: the observation's numbers, then the action's\n",
                           "\n  for checking an exported policy (calf export) against calf:\n",
                           NULL},
    [PLAY_OBSERVATIONS] = {"--observations", NULL, CLI_TEXT, "IN", 0, 0, NULL, 0,
                           "with --dump_actions: act on IN's observations (a line each)\n"
                           "instead of playing episodes\n",
                           NULL, NULL},
};

/* export's text says what its options do */
static const cli_option export_options[] = {
    [EXPORT_ROOT_DIR] = {"--root_dir", NULL, CLI_TEXT, "DIR", 0, 0, NULL, 0, NULL, NULL, NULL},
    [EXPORT_CHECKPOINT] = {"--checkpoint", NULL, CLI_TEXT, "FILE", 0, 0, NULL, 0, NULL, NULL, NULL},
    [EXPORT_OUTPUT] = {"-o", "--output", CLI_TEXT, "OUT.c", 0, 0, NULL, 0, NULL, NULL, NULL},
    [EXPORT_ENV_LIB] = ENV_LIB_OPTION(NULL),
};

static const cli_option env_options[] = {
    [ENV_SEED] = {"--seed", NULL, CLI_U64, "S", 0, 0, NULL, 0,
                  "random seed, 0..2^64-1 (default 0)\n", NULL, NULL},
    [ENV_INDEX] = {"--index", NULL, CLI_U64, "I", 0, 0, NULL, 0,
                   "global env index, 0..2^64-1 (default 0)\n", NULL, NULL},
    [ENV_STEPS] = {"--steps", NULL, CLI_U64, "N", 0, 100000000, NULL, 0,
                   "number of steps, 0..100000000 (default 20)\n", NULL, NULL},
    [ENV_ENV_LIB] = ENV_LIB_OPTION(NULL),
};

static const cli_option envs_options[] = {
    [ENVS_ENV_LIB] = ENV_LIB_OPTION(NULL),
};

static const cli_option events_options[] = {
    [EVENTS_RAW] = {"--raw", NULL, CLI_FLAG, NULL, 0, 0, NULL, 0,
                    "every record as stored; nothing dropped\n", NULL, NULL},
    [EVENTS_CSV] = {"--csv", NULL, CLI_FLAG, NULL, 0, 0, NULL, 0,
                    "tag,step,wall_time,value: a header, then one row per scalar (histograms\n"
                    "and markers have none); wall_time %.17g seconds and value %.9g, both\n"
                    "exact; a tag with a comma, quote or line break is quoted, CSV-style\n",
                    NULL, NULL},
};

static const cli_choice plot_x_choices[] = {
    {"steps", CALF_PLOT_X_STEPS,
     "x = environment steps (default): a Metrics/X value is placed at\n"
     "the Metrics/EnvironmentSteps of its step, and a\n"
     "Metrics_vs_EnvironmentSteps/X value at its own step\n"},
    {"iterations", CALF_PLOT_X_ITERATIONS, "x = the iteration (the events' step)\n"},
    {"seconds", CALF_PLOT_X_SECONDS, "x = wall-clock seconds since the run's first record\n"},
    {NULL, 0, NULL},
};

static const cli_option plot_options[] = {
    [PLOT_OUTPUT] = {"-o", "--output", CLI_TEXT, "FILE", 0, 0, NULL, CLI_NONEMPTY,
                     "the SVG file (default plot.svg; - for standard output)\n", NULL, NULL},
    [PLOT_TAG] = {"--tag", NULL, CLI_TEXT, "T", 0, 0, NULL, 0,
                  "a panel per directory that has scalar tag T; eval:T or train:T\n"
                  "for one directory (repeatable; default Metrics/AverageReturn,\n"
                  "eval's panel then train's)\n",
                  NULL, NULL},
    [PLOT_SMOOTH] = {"--smooth", NULL, CLI_REAL, "W", 0, 1, NULL, 0,
                     "TensorBoard's smoothing weight in [0, 1) (default 0.6; 0: none):\n"
                     "its exponential moving average with debiasing\n",
                     NULL, NULL},
    [PLOT_X] = {"--x", NULL, CLI_CHOICE, NULL, 0, 0, plot_x_choices, 0, NULL, NULL, NULL},
    [PLOT_GROUP] = {"--group", NULL, CLI_FLAG, NULL, 0, 0, NULL, 0,
                    "runs whose names differ only by a seed suffix (ppo-seed1, ppo_2,\n"
                    "ppo3) as one line, their mean, over a band from their min to max\n",
                    NULL, NULL},
};

const cli_command cli_commands[] = {
    {.name = "train",
     .summary = "train a policy",
     .synopsis = "calf train --root_dir DIR --conf FILE [--conf_param K=V]... [--nproc N]",
     .usage = "usage: calf train --root_dir DIR [--conf FILE] [--conf_param 'Scope.param=value']... "
              "[--nproc N]\n"
              "                  [--env_lib LIB]...\n"
              "       calf train --list-bindings\n",
     .about = "\n",
     .help_col = 22,
     .options = train_options,
     .num_options = COUNT(train_options),
     .prefix = "calf",
     .unknown = "unknown option",
     .hint = CLI_HINT_HELP,
     .checks_output = false,
     .run = calf_cmd_train},
    {.name = "play",
     .summary = "run a trained policy",
     .synopsis = "calf play --root_dir DIR [--num_episodes N] [--checkpoint FILE]",
     .usage = "usage: calf play --root_dir DIR [--env_lib LIB]... [--num_episodes N] [--checkpoint "
              "FILE] [--seed S] [--verbose]\n"
              "                 [--video FILE.mp4|FILE.gif [--width W] [--height H] [--max_frames "
              "N]]\n",
     .about = "\n"
              "  runs the greedy policy of the newest valid checkpoint in DIR/train/algorithm\n"
              "  (or FILE) and prints each episode's return and the average\n",
     .help_col = 24,
     .options = play_options,
     .num_options = COUNT(play_options),
     .prefix = "calf",
     .unknown = "unknown option",
     .hint = CLI_HINT_HELP,
     .checks_output = true,
     .run = calf_cmd_play},
    {.name = "export",
     .summary = "write a trained policy as one C file",
     .synopsis = "calf export --root_dir DIR [-o policy.c]",
     .usage = "usage: calf export --root_dir DIR [--checkpoint FILE] [-o OUT.c] [--env_lib LIB]...\n",
     .about = "\n"
              "  writes the greedy policy of the newest valid checkpoint in DIR/train/algorithm (or\n"
              "  FILE) as one C99 file that needs only a C compiler and libm, to OUT.c (default:\n"
              "  standard output):  int calf_policy_act(const float *obs, float *action);\n"
              "  with CALF_POLICY_OBS_DIM, CALF_POLICY_ACTION_DIM and CALF_POLICY_DISCRETE. Its\n"
              "  actions are calf play's, computed with the same arithmetic\n",
     .help_col = 22,
     .options = export_options,
     .num_options = COUNT(export_options),
     .prefix = "calf",
     .unknown = "unknown option",
     .hint = CLI_HINT_HELP,
     .checks_output = true,
     .run = calf_cmd_export},
    {.name = "env",
     .summary = "step one environment with random actions",
     .synopsis = "calf env NAME [--seed S] [--index I] [--steps N]",
     .usage = "usage: calf env NAME [--seed S] [--index I] [--steps N] [--env_lib LIB]...\n",
     .about = "Step environment NAME with uniformly random actions drawn from the action stream of\n"
              "(seed, index), printing one line per step:\n"
              "  step action... obs... reward terminated truncated\n"
              "Lines starting with '#' show the observation after each reset; for envs with a\n"
              "physical state (MuJoCo's), a '# state' line after it gives the state that reset\n"
              "drew (qpos then qvel, %.17g), so an episode can be replayed elsewhere.\n",
     .help_col = 14,
     .options = env_options,
     .num_options = COUNT(env_options),
     .operand = "NAME",
     .prefix = "calf env",
     .empty_if_missing = true,
     .unknown = "unknown option",
     .hint = CLI_HINT_TRY,
     .checks_output = true,
     .run = calf_cmd_env},
    {.name = "envs",
     .summary = "list the registered environments",
     .usage = "usage: calf envs [--env_lib LIB]...\n",
     .about = "List the registered environments: name, observation size, action space, time limit,\n"
              "and for a plug-in's environment the library it came from (--env_lib LIB loads one).\n",
     .help_col = 14,
     .options = envs_options,
     .num_options = COUNT(envs_options),
     .prefix = "calf envs",
     .unknown = "unexpected argument",
     .hint = CLI_HINT_TRY,
     .checks_output = true,
     .run = calf_cmd_envs},
    {.name = "events",
     .summary = "print a run's TensorBoard events files as TensorBoard reads them",
     .synopsis = "calf events [--raw] [--csv] FILE...",
     .usage = "usage: calf events [--raw] [--csv] FILE...\n",
     .about = "\n"
              "prints TensorBoard events files after checking both CRCs of every record:\n"
              "  file_version <v>\n"
              "  <step> <tag> <value>                                 a scalar\n"
              "  <step> <tag> histogram num=N min=A max=B sum=S       a histogram\n"
              "  <step> session_start                                 a restart marker\n"
              "Several files are read in the order given as one run, as TensorBoard reads the\n"
              "files of a run directory in name order (calf names them by creation time, so\n"
              "DIR/events.out.tfevents.* lists them launch by launch). A FILE may be a pipe:\n"
              "`... | calf events /dev/stdin`.\n"
              "\n"
              "By default the output is what TensorBoard shows: at each session_start after the\n"
              "run's first, the values read before it with step >= its step are dropped (the\n"
              "launch that resumed there wrote them again).\n"
              "\n",
     .epilogue = "\n"
                 "A file that ends inside its last record (a crash while writing) is shown up to\n"
                 "that record with a warning, exit 0. A damaged record (CRC mismatch, bad length)\n"
                 "is an error naming its offset, exit 2, after what came before it is shown.\n",
     .help_col = 10,
     .options = events_options,
     .num_options = COUNT(events_options),
     .operand = "FILE",
     .double_dash = true,
     .prefix = "calf events",
     .unknown = "unknown option",
     .hint = CLI_HINT_USAGE,
     .checks_output = true,
     .run = calf_cmd_events},
    {.name = "plot",
     .summary = "draw runs' learning curves as one SVG file",
     .synopsis = "calf plot ROOT... [-o FILE.svg] [--tag T]... [--smooth W] [--x "
                 "steps|iterations|seconds] [--group]",
     .usage = "usage: calf plot ROOT... [-o FILE.svg] [--tag T]... [--smooth W]\n"
              "                 [--x steps|iterations|seconds] [--group]\n",
     .about = "\n"
              "draws the learning curves of training runs (each ROOT a calf train --root_dir) as one\n"
              "SVG 1.1 file: one panel per tag and directory, one colour per run with a legend of\n"
              "the runs' directory names, TensorBoard's smoothing over the faint raw curve, axes\n"
              "with 1-2-5 ticks. ROOT/eval and ROOT/train are each read as TensorBoard reads a run\n"
              "(as calf events does: files in name order, restart markers applied).\n"
              "\n",
     .epilogue = "\n"
                 "The same events give the same bytes. Exit 2, with one line saying why, for a ROOT\n"
                 "with no events file, a tag no run has, a damaged events file or a bad option.\n",
     .help_col = 19,
     .options = plot_options,
     .num_options = COUNT(plot_options),
     .operand = "ROOT",
     .double_dash = true,
     .prefix = "calf plot",
     .unknown = "unknown option",
     .hint = CLI_HINT_NONE,
     .checks_output = true,
     .run = calf_cmd_plot},
};

const int cli_num_commands = COUNT(cli_commands);

const cli_command *cli_command_find(const char *name) {
    for (int k = 0; k < cli_num_commands; k++)
        if (!strcmp(cli_commands[k].name, name)) return &cli_commands[k];
    return NULL;
}

bool cli_command_takes(const cli_command *cmd, const char *option) {
    for (int k = 0; k < cmd->num_options; k++)
        if (!strcmp(cmd->options[k].name, option)) return true;
    return false;
}
