/* calf.c: the command-line program (placeholder until the foundation lands). */
#include <stdio.h>
int main(void) { puts("calf"); return 0; }
