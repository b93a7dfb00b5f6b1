/* trainer_signals.h: what reaches a run from outside its loop (trainer_signals.c):
 * SIGINT/SIGTERM, which stop it after the iteration, and an exit() in the middle of it;
 * private to src/training/. */
#ifndef CALF_TRAINER_SIGNALS_H
#define CALF_TRAINER_SIGNALS_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

/* Signal handlers are process-wide, so one run of a process at a time may have them:
 * claim them for the calling run (true), or learn that another run of this process holds
 * them (false). A forked child's copy of its parent's claim does not count. */
bool trainer_signals_claim(void);
void trainer_signals_unclaim(void);

/* Claim the handlers (false, installing nothing, when another run of the process holds
 * them) and catch SIGINT and SIGTERM until trainer_signals_restore, which releases them:
 * the first asks the run to stop after the iteration, with its checkpoint (when
 * announce, saying so on stderr); a second gets the default action. The actions before
 * go to *old_int and *old_term. */
bool trainer_signals_install(struct sigaction *old_int, struct sigaction *old_term,
                             bool announce);
void trainer_signals_restore(const struct sigaction *old_int,
                             const struct sigaction *old_term);
/* Why a run could not have the handlers: the message for a failed claim. */
#define TRAINER_SIGNALS_TAKEN                                                              \
    "SIGINT/SIGTERM handlers are process-wide and another run in this process (calf_train, " \
    "or a calf_trainer opened with handle_signals) holds them: open this one without "       \
    "handle_signals, or once that run has ended"
/* Whether SIGINT or SIGTERM came since trainer_signals_install (the ranks agree on it at
 * the end of each iteration). */
bool trainer_signals_stop_requested(void);

/* Until trainer_signals_unguard_exit, an exit() ends the process with status 1 and a
 * message naming iteration *iteration + 1 as the one that did not finish. False when
 * that cannot be arranged (atexit failed): the run goes on unguarded. */
bool trainer_signals_guard_exit(const int64_t *iteration);
void trainer_signals_unguard_exit(void);

#endif
