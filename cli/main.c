/* main.c: the calf program's entry point. The program itself is calf_cli_main
 * (cli/calf.c), which the Python package also runs for `python3 -m calf`. */
#include "commands.h"

int main(int argc, char **argv) { return calf_cli_main(argc, argv); }
