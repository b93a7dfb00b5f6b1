/* export_main.c: the tiny program tests/e2e_export.sh builds around a policy written by
 * `calf export`, included as CALF_POLICY_FILE. It reads observations from stdin, a line
 * each (CALF_POLICY_OBS_DIM numbers, then for a masked policy its CALF_POLICY_NUM_ACTIONS
 * mask numbers, 0 or 1; the rest of the line, e.g. the action calf chose, is ignored), and
 * prints each one's action as `calf play --dump_actions` does: the discrete index, a
 * MultiDiscrete's sub-actions, or the continuous floats as %.9g. A recurrent policy's
 * line (CALF_POLICY_STATE_SIZE defined) starts with two more numbers: the row (0..63)
 * whose state steps, and 1 where that row's episode starts (calf_policy_reset first).
 * C99 only. */
#include CALF_POLICY_FILE

#include <stdio.h>
#include <stdlib.h>

/* One step of the line's row: a recurrent policy steps that row's state. */
#ifdef CALF_POLICY_STATE_SIZE
enum { MAX_ROWS = 64 };
static float state[MAX_ROWS][CALF_POLICY_STATE_SIZE];
#define ACT(obs, action) calf_policy_step(state[row], obs, action)
#define ACT_MASKED(obs, mask, action) calf_policy_step_masked(state[row], obs, mask, action)
#else
#define ACT(obs, action) calf_policy_act(obs, action)
#define ACT_MASKED(obs, mask, action) calf_policy_act_masked(obs, mask, action)
#endif

int main(void) {
    char line[16384];
    long n = 0;
    while (fgets(line, sizeof line, stdin)) {
        float obs[CALF_POLICY_OBS_DIM], action[CALF_POLICY_ACTION_DIM];
        char *s = line;
        int i, r;
        n++;
#ifdef CALF_POLICY_STATE_SIZE
        char *end;
        long row = strtol(s, &end, 10), start;
        if (end == s || row < 0 || row >= MAX_ROWS) {
            fprintf(stderr, "export_main: line %ld: expected a row 0..%d first\n", n, MAX_ROWS - 1);
            return 1;
        }
        s = end;
        start = strtol(s, &end, 10);
        if (end == s) {
            fprintf(stderr, "export_main: line %ld: expected the episode-start flag second\n", n);
            return 1;
        }
        s = end;
        if (start) calf_policy_reset(state[row]);
#endif
        for (i = 0; i < CALF_POLICY_OBS_DIM; i++) {
            char *end;
            obs[i] = strtof(s, &end);
            if (end == s) {
                fprintf(stderr, "export_main: line %ld: expected %d numbers\n", n, CALF_POLICY_OBS_DIM);
                return 1;
            }
            s = end;
        }
#ifdef CALF_POLICY_MASKED
        {
            unsigned char mask[CALF_POLICY_NUM_ACTIONS];
            for (i = 0; i < CALF_POLICY_NUM_ACTIONS; i++) {
                char *end;
                float m = strtof(s, &end);
                if (end == s) {
                    fprintf(stderr, "export_main: line %ld: expected %d mask numbers\n", n,
                            CALF_POLICY_NUM_ACTIONS);
                    return 1;
                }
                mask[i] = m != 0.0f;
                s = end;
            }
            r = ACT_MASKED(obs, mask, action);
        }
#else
        r = ACT(obs, action);
#endif
#if defined(CALF_POLICY_NUM_ACTION_DIMS)
        if (r != 0) {
            fprintf(stderr, "export_main: line %ld: returned %d\n", n, r);
            return 1;
        }
        for (i = 0; i < CALF_POLICY_ACTION_DIM; i++) printf("%s%d", i ? " " : "", (int)action[i]);
        printf("\n");
#elif CALF_POLICY_DISCRETE
        if (r < 0 || r >= CALF_POLICY_NUM_ACTIONS || action[0] != (float)r) {
            fprintf(stderr, "export_main: line %ld: returned %d, wrote %g\n", n, r, (double)action[0]);
            return 1;
        }
        printf("%d\n", r);
#else
        if (r != 0) {
            fprintf(stderr, "export_main: line %ld: returned %d\n", n, r);
            return 1;
        }
        for (i = 0; i < CALF_POLICY_ACTION_DIM; i++) printf("%s%.9g", i ? " " : "", (double)action[i]);
        printf("\n");
#endif
    }
    return ferror(stdin) || fflush(stdout) != 0;
}
