/* commands.h: the subcommands of the calf program, one function each.
 * Each takes the arguments after the subcommand name and returns the exit status. */
#ifndef CALF_CLI_COMMANDS_H
#define CALF_CLI_COMMANDS_H

/* cli/calf.c: the whole program, argv[1] the subcommand: main's body, also run by the
 * Python package's `python3 -m calf` (python/calf/_job.c) */
int calf_cli_main(int argc, char **argv);

int calf_cmd_envs(int argc, char **argv);   /* cli/cmd_env.c: list environments */
int calf_cmd_env(int argc, char **argv);    /* cli/cmd_env.c: step one env randomly */
int calf_cmd_events(int argc, char **argv); /* cli/cmd_events.c: dump an events file */
int calf_cmd_plot(int argc, char **argv);   /* cli/cmd_plot.c: learning curves as SVG */

#endif
