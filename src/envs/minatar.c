/* minatar.c: what MinAtar's five games share beyond the inline step (envs/minatar.h):
 * seeding an env's MT19937 from calf's (seed, index) stream, and naming that seed. */
#include "envs/minatar.h"

#include "calf/rng.h"

void minatar_seed(void *state, uint32_t k) {
    minatar_core *c = state;
    mt19937_seed(&c->mt, k);
    c->seed = k;
}

int minatar_create_at(void *state, const calf_env_class *cls, uint64_t seed, uint64_t index,
                      calf_error *err) {
    (void)cls, (void)err;
    calf_rng r;
    calf_rng_seed(&r, seed, index, CALF_RNG_DYNAMICS);
    minatar_seed(state, (uint32_t)(calf_rng_next(&r) >> 32));
    ((minatar_core *)state)->last_action = MA_NOOP;
    return CALF_OK;
}

void minatar_reset_state(const void *state, double *out) {
    out[0] = (double)((const minatar_core *)state)->seed;
}
