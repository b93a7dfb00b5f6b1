/* trainer_signals.h: what reaches a run from outside its loop (trainer_signals.c):
 * SIGINT/SIGTERM, which stop it after the iteration, and an exit() in the middle of it;
 * private to src/training/. */
#ifndef CALF_TRAINER_SIGNALS_H
#define CALF_TRAINER_SIGNALS_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

/* Catch SIGINT and SIGTERM until trainer_signals_restore: the first asks the run to stop
 * after the iteration, with its checkpoint (when announce, saying so on stderr); a second
 * gets the default action. The actions before go to *old_int and *old_term. */
void trainer_signals_install(struct sigaction *old_int, struct sigaction *old_term,
                             bool announce);
void trainer_signals_restore(const struct sigaction *old_int,
                             const struct sigaction *old_term);
/* Whether SIGINT or SIGTERM came since trainer_signals_install (the ranks agree on it at
 * the end of each iteration). */
bool trainer_signals_stop_requested(void);

/* Until trainer_signals_unguard_exit, an exit() ends the process with status 1 and a
 * message naming iteration *iteration + 1 as the one that did not finish. False when
 * that cannot be arranged (atexit failed): the run goes on unguarded. */
bool trainer_signals_guard_exit(const int64_t *iteration);
void trainer_signals_unguard_exit(void);

#endif
