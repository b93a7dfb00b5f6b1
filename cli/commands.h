/* commands.h: the calf program's one command table (cli/commands.c): each command's name,
 * summary, help and options, from which the option parser, every --help (cli/parse.c) and
 * python3 -m calf (python/calf/_job.c) derive; and the commands' bodies, one function each. */
#ifndef CALF_CLI_COMMANDS_H
#define CALF_CLI_COMMANDS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* What an option's value is, and how the parser checks it before the command sees it. */
typedef enum {
    CLI_FLAG,   /* no value; only its exact name matches */
    CLI_TEXT,   /* any text ("--name TEXT" or "--name=TEXT") */
    CLI_INT,    /* a whole-string decimal integer in [lo, hi] */
    CLI_U64,    /* a whole-string unsigned decimal in [0, hi], no sign (hi 0: 2^64-1) */
    CLI_REAL,   /* a number (strtod) in [lo, hi) */
    CLI_CHOICE, /* one of choices' values */
} cli_kind;

/* cli_option.flags */
#define CLI_NONEMPTY 1u      /* an empty value is refused: "-o needs a file name" */
#define CLI_WITH_PREVIOUS 2u /* --help describes it on the row before's line */

typedef struct {
    const char *value;
    int id;           /* what the command is given for it (cli_value.choice) */
    const char *help; /* its own row in --help: "--x steps   x = environment steps" */
} cli_choice;

typedef struct cli_command cli_command;

/* One option of a command. Its index in the command's options is its id, which the
 * parser hands to the command (the commands' enums below name them). */
typedef struct {
    const char *name;      /* "--root_dir"; "-o" */
    const char *alias;     /* another spelling --help does not show ("--output"), or NULL */
    cli_kind kind;
    const char *metavar;   /* the value's name in --help ("DIR"); NULL for CLI_FLAG */
    double lo, hi;         /* CLI_INT's [lo, hi], CLI_REAL's [lo, hi), CLI_U64's hi */
    const cli_choice *choices; /* CLI_CHOICE's values, ended by a row of NULLs */
    unsigned flags;        /* CLI_NONEMPTY, CLI_WITH_PREVIOUS */
    /* --help's text: lines that end in '\n', the first after the option's name, the rest
     * indented to the command's help_col; NULL: --help leaves the option out (the
     * command's text says it). A CLI_CHOICE's rows are its choices'. */
    const char *help;
    const char *heading;   /* --help's text before the option's row, or NULL */
    /* Set for options taken out of the arguments and applied before anything else,
     * wherever they stand, value checks included (--env_lib: a plug-in loaded before
     * the command starts). Returns 0 or the exit status of a failure. */
    int (*early)(const cli_command *cmd, const char *value);
} cli_option;

/* How a command answers an argument it does not take. */
typedef enum {
    CLI_HINT_HELP,  /* the message, then the command's whole --help */
    CLI_HINT_USAGE, /* the message, then its usage lines */
    CLI_HINT_TRY,   /* "... (try --help)" */
    CLI_HINT_NONE,  /* the message alone */
} cli_hint;

struct cli_command {
    const char *name;
    const char *summary;  /* calf --help's line for it (then ":" and the synopsis) */
    const char *synopsis; /* calf --help's example after the summary, or NULL */
    const char *usage;    /* "usage: calf NAME ...\n" lines: --help's start, some errors' end */
    const char *about;    /* --help's text between the usage and the options, or NULL */
    const char *epilogue; /* --help's text after the options, or NULL */
    int help_col;         /* the column at which --help's option texts start */
    const cli_option *options;
    int num_options;
    /* the arguments that are not options ("-" included), their name in --help ("FILE"),
     * or NULL: the command takes none and any such argument is an unknown one */
    const char *operand;
    bool double_dash;      /* "--" ends the options: every argument after it is an operand */
    const char *prefix;    /* the start of a bad value's message: "calf" or "calf NAME" */
    bool empty_if_missing; /* an option with no value after it has "" (calf env's way) */
    const char *unknown;   /* what the message calls an argument it does not take */
    cli_hint hint;
    /* Output that could not be written turns a success into a failure (exit 1); false
     * for train, whose output is progress, also kept in the rank logs */
    bool checks_output;
    int (*run)(const cli_command *self, int argc, char **argv);
};

extern const cli_command cli_commands[];
extern const int cli_num_commands;

/* The command named name, or NULL. */
const cli_command *cli_command_find(const char *name);

/* Does cmd take option ("--env_lib")? */
bool cli_command_takes(const cli_command *cmd, const char *option);

/* The id the parser gives a command's operands. */
#define CLI_OPERAND (-1)
/* cli_parse's answer when the command should run. */
#define CLI_RUN (-1)

typedef struct {
    const char *text; /* the value as given: an option's, or the operand itself */
    long long num;    /* CLI_INT */
    uint64_t u64;     /* CLI_U64 */
    double real;      /* CLI_REAL */
    int choice;       /* CLI_CHOICE: the id of the value's choice */
} cli_value;

/* Takes one option (id: its index in cmd's options; CLI_OPERAND for an operand) into
 * the command's state ctx. Returns 0, or the exit status to stop with (having said why). */
typedef int (*cli_setter)(void *ctx, int id, const cli_value *v);

/* Parses the arguments after the command's name by cmd's table: first the early options
 * (which the parser removes from argv, so argc and argv change), then the rest in order,
 * each value checked by its kind, through set. Prints the message of a bad argument.
 * Returns CLI_RUN when the command should go on, else the exit status to return (0
 * after -h/--help, which every command takes; 2 for bad input). */
int cli_parse(const cli_command *cmd, int *argc, char **argv, cli_setter set, void *ctx);

/* 0 when a required option has a value; else says "missing required option" (value
 * NULL) or "empty" with the command's hint and returns 2. */
int cli_require(const cli_command *cmd, int id, const char *value);

/* The command's --help: usage, text, a row per described option, epilogue. */
void cli_print_help(const cli_command *cmd, FILE *f);

/* calf --help: the commands, then the program's own options. */
void cli_print_usage(FILE *f);

/* --env_lib's early action: loads the plug-in library (cli/calf.c). */
int cli_load_env_lib(const cli_command *cmd, const char *path);

/* cli/calf.c: the whole program, argv[1] the subcommand: main's body, also run by the
 * Python package's `python3 -m calf` (python/calf/_job.c) */
int calf_cli_main(int argc, char **argv);

/* The commands' bodies; each takes its table row and the arguments after its name and
 * returns the exit status. */
int calf_cmd_train(const cli_command *self, int argc, char **argv);  /* cli/calf.c */
int calf_cmd_play(const cli_command *self, int argc, char **argv);   /* cli/calf.c */
int calf_cmd_export(const cli_command *self, int argc, char **argv); /* cli/calf.c */
int calf_cmd_env(const cli_command *self, int argc, char **argv);    /* cli/cmd_env.c */
int calf_cmd_envs(const cli_command *self, int argc, char **argv);   /* cli/cmd_env.c */
int calf_cmd_events(const cli_command *self, int argc, char **argv); /* cli/cmd_events.c */
int calf_cmd_plot(const cli_command *self, int argc, char **argv);   /* cli/cmd_plot.c */

/* The options' ids: their rows' order in the table, which is --help's order. */
enum { TRAIN_ROOT_DIR, TRAIN_CONF, TRAIN_CONF_PARAM, TRAIN_NPROC, TRAIN_QUIET,
       TRAIN_LIST_BINDINGS, TRAIN_ENV_LIB, TRAIN_NUM_OPTIONS };
enum { PLAY_ROOT_DIR, PLAY_NUM_EPISODES, PLAY_VERBOSE, PLAY_CHECKPOINT, PLAY_SEED, PLAY_ENV_LIB,
       PLAY_VIDEO, PLAY_WIDTH, PLAY_HEIGHT, PLAY_MAX_FRAMES, PLAY_DUMP_ACTIONS,
       PLAY_OBSERVATIONS, PLAY_NUM_OPTIONS };
enum { EXPORT_ROOT_DIR, EXPORT_CHECKPOINT, EXPORT_OUTPUT, EXPORT_ENV_LIB, EXPORT_NUM_OPTIONS };
enum { ENV_SEED, ENV_INDEX, ENV_STEPS, ENV_ENV_LIB, ENV_NUM_OPTIONS };
enum { ENVS_ENV_LIB, ENVS_NUM_OPTIONS };
enum { EVENTS_RAW, EVENTS_CSV, EVENTS_NUM_OPTIONS };
enum { PLOT_OUTPUT, PLOT_TAG, PLOT_SMOOTH, PLOT_X, PLOT_GROUP, PLOT_NUM_OPTIONS };

#endif
