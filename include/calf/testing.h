/* calf/testing.h: the one control calf's own tests use to make timing and limits what a
 * test needs. A setting changes when things happen or what a check takes for the
 * machine's memory, never a result. The library reads no environment variable for them:
 * the calf program sets them from CALF_TEST_HOOKS when it starts, a test program calls
 * calf_testing_set. */
#ifndef CALF_TESTING_H
#define CALF_TESTING_H

#include "calf/error.h"

/* Set the test hooks from spec, comma-separated name=value pairs ("" clears them all):
 *   slow_rank=R        rank R of a work-sharing job holds back its own envs until
 *                      another rank has taken some, so that sharing certainly happens;
 *                      the other ranks wait up to 30 s for a rank to open a round
 *   memory_bytes=N     the memory checks take N bytes for the machine's memory (and
 *                      ignore the cgroup and ulimits)
 *   ckpt_chunk_envs=K  checkpoints are written and read K env records at a time
 * Settings are process-wide and inherited by --nproc workers. A bad name or value is
 * CALF_EINVAL naming it, and changes nothing. */
int calf_testing_set(const char *spec, calf_error *err);

#endif
