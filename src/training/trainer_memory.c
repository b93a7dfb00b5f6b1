/* trainer_memory.c: whether a run's envs and its algorithm's storage fit this machine's
 * memory, checked before any process trains. */
#include "training/trainer_memory.h"

#include <malloc.h>
#include <stdint.h>

#include "calf/env.h"
#include "base/membudget.h"
#include "envs/envs.h"
#include "training/trainer_config.h"

/* Heap bytes in use (glibc's mallinfo2: small blocks and mmap'd ones); 0 elsewhere. */
static size_t heap_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
#else
    return 0;
#endif
}

/* What one more env of a native class (one with create: a simulator's data) takes: what
 * it maps, and what of that it touches. Classes that can say do (env_class_measure:
 * MuJoCo's, their mjData, the stack as deep as it is used); for others the heap's growth
 * when one more is made after a first (which builds what the class shares between its
 * envs), with nothing known of what is touched. 0 when no env can be made (the run then
 * fails there, saying why). */
static void native_env_bytes(const calf_env_class *cls, size_t *mapped, size_t *touched) {
    *mapped = *touched = 0;
    if (env_class_measure(cls, mapped, touched)) return;
    calf_env a, b;
    calf_error ignored;
    if (calf_env_init(&a, cls->spec.name, 0, 0, &ignored) != CALF_OK) return;
    size_t before = heap_in_use();
    if (calf_env_init(&b, cls->spec.name, 0, 1, &ignored) == CALF_OK) {
        size_t after = heap_in_use();
        *mapped = after > before ? after - before : 0;
        calf_env_free(&b);
    }
    calf_env_free(&a);
    if (*mapped < cls->spec.state_size) *mapped = cls->spec.state_size;
}

/* The envs of a native class need envs x per_env bytes of `bound`: a file:line error
 * naming num_parallel_environments when they do not fit. */
static int check_envs(const calf_config *cfg, const calf_env_class *cls, int envs,
                      size_t per_env, const membudget_bound *bound, const char *kind,
                      calf_error *err) {
    if (per_env == 0 || !bound->what || (uint64_t)envs <= bound->bytes / per_env) return CALF_OK;
    char want[32], each[32], have[32];
    membudget_format((double)per_env * envs, want, sizeof want);
    membudget_format((double)per_env, each, sizeof each);
    membudget_format((double)bound->bytes, have, sizeof have);
    const char *where = cfg->origin[CALF_CFG_NUM_ENVS];
    return calf_error_set(err, CALF_EINVAL,
                          "%s%screate_environment.num_parallel_environments = %d: the %s envs "
                          "need %s on one machine (%s %s each), more than the %s of %s",
                          where, where[0] ? ": " : "", envs, cls->spec.name, want, each, kind,
                          have, bound->what);
}

int trainer_check_memory(const calf_config *cfg, int envs, calf_error *err) {
    const algorithm_ops *ops = trainer_algorithm(cfg);
    const calf_env_class *cls = calf_env_lookup(calf_config_string(cfg, CALF_CFG_ENV_NAME), err);
    if (!cls) return CALF_EINVAL;
    if (!ops->check_memory && !cls->create) return CALF_OK; /* nothing large to check */
    membudget_bound resident, address;
    int rc = membudget_limits(&resident, &address, err);
    if (rc) return rc;
    /* the envs of a native class, each its own simulator (4,096 Hopper envs: 12.7 GiB
     * resident), against what may be resident and what may be mapped */
    if (cls->create && (resident.what || address.what)) {
        size_t mapped, touched;
        native_env_bytes(cls, &mapped, &touched);
        if ((rc = check_envs(cfg, cls, envs, touched, &resident, "resident", err)) ||
            (rc = check_envs(cfg, cls, envs, mapped, &address, "mapped", err)))
            return rc;
    }
    if (!ops->check_memory) return CALF_OK;
    bool res = resident.bytes <= address.bytes;
    uint64_t memory = res ? resident.bytes : address.bytes;
    if (memory == UINT64_MAX) return CALF_OK; /* nothing known: the allocation will tell */
    return ops->check_memory(cfg, &cls->spec, envs, memory, res ? resident.what : address.what,
                             err);
}
