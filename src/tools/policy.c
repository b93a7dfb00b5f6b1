/* policy.c: the public calf_policy (calf/policy.h): play_policy, the loaded policy that
 * `calf play` and `calf export` run, behind an opaque pointer, acting through the same
 * algorithm greedy (and, for a policy with memory, its per-row state and resets), so its
 * floats are calf play's; and sampling from its distribution through the algorithm's
 * sample, row r from the handle's stream r, stepping the same per-row state. */
#include "calf/policy.h"

#include <stdlib.h>
#include <string.h>

#include "base/live.h"
#include "base/mem.h"
#include "calf/rng.h"
#include "tools/play.h"

struct calf_policy {
    live_link live;    /* first: the open handles' list (base/live.h) */
    play_policy pp;
    int *act;          /* (cap, action ints) scratch for the array the caller need not pass */
    float *u;          /* (cap, action_dim) */
    int cap;
    calf_rng *rng;     /* (nrng) row r's sampling stream (seed, r, CALF_RNG_ACTION) */
    int nrng;          /* rows seeded so far; more are seeded as calls need them */
    uint64_t seed;     /* calf_policy_seed's; 0 from open */
    int memory;        /* floats of state per row (greedy_memory); 0: none */
    int state_rows;    /* with memory: rows the last full reset made; 0 before any */
};

/* root of ROOT/train/algorithm/ckpt-N: the path without its last three components. */
static int run_dir_of(const char *checkpoint, char *root, size_t cap, calf_error *err) {
    if (snprintf(root, cap, "%s", checkpoint) >= (int)cap)
        return calf_error_set(err, CALF_EINVAL, "path too long: %s", checkpoint);
    for (int k = 0; k < 3; k++) {
        char *slash = strrchr(root, '/');
        if (!slash || slash == root)
            return calf_error_set(err, CALF_EINVAL,
                                  "%s: not in a run dir (ROOT/train/algorithm/ckpt-N): give the "
                                  "run's root dir",
                                  checkpoint);
        *slash = '\0';
    }
    return CALF_OK;
}

/* The open handles: a NULL, closed or never-opened one given to a call is refused
 * (calf/policy.h says how) by comparing pointers, never by reading through it. */
static live_set policies = LIVE_SET_INIT;

static bool open_handle(const calf_policy *p) { return live_has(&policies, p); }

int calf_policy_open(const char *root_dir, const char *checkpoint, calf_policy **out,
                     calf_error *err) {
    if (!out) return calf_error_set(err, CALF_EINVAL, "calf_policy_open: out is NULL");
    *out = NULL;
    char derived[4096];
    if (!root_dir) {
        if (!checkpoint)
            return calf_error_set(err, CALF_EINVAL, "calf_policy_open: neither a run dir nor a checkpoint");
        int rc = run_dir_of(checkpoint, derived, sizeof derived, err);
        if (rc != CALF_OK) return rc;
        root_dir = derived;
    }
    calf_policy *p = mem_calloc(1, sizeof *p, err);
    if (!p) return CALF_ENOMEM;
    int rc = play_policy_open(&p->pp, root_dir, checkpoint, err);
    if (rc == CALF_OK && p->pp.ops->greedy_memory) {
        p->memory = p->pp.ops->greedy_memory(p->pp.algo);
        /* a policy with memory resets all its rows and given rows */
        CALF_ASSERT(p->memory == 0 || (p->pp.ops->greedy_reset && p->pp.ops->greedy_reset_rows));
    }
    if (rc != CALF_OK) {
        play_policy_close(&p->pp);
        free(p);
        return rc;
    }
    live_add(&policies, p);
    *out = p;
    return CALF_OK;
}

void calf_policy_close(calf_policy *p) {
    if (!live_take(&policies, p)) return; /* NULL, or closed already: nothing to do */
    play_policy_close(&p->pp);
    free(p->act);
    free(p->u);
    free(p->rng);
    free(p);
}

static const calf_env_spec *policy_spec(const calf_policy *p) { return &p->pp.cls->spec; }

/* The queries answer -1 (NULL for strings) for a handle that is not open. */
int calf_policy_obs_dim(const calf_policy *p) { return open_handle(p) ? policy_spec(p)->obs_dim : -1; }
int calf_policy_discrete(const calf_policy *p) {
    return open_handle(p) ? policy_spec(p)->action_dim == 0 : -1;
}
int calf_policy_num_actions(const calf_policy *p) {
    return open_handle(p) ? policy_spec(p)->num_actions : -1;
}
int calf_policy_action_dim(const calf_policy *p) {
    return open_handle(p) ? policy_spec(p)->action_dim : -1;
}
const char *calf_policy_env_name(const calf_policy *p) {
    return open_handle(p) ? policy_spec(p)->name : NULL;
}
const char *calf_policy_checkpoint(const calf_policy *p) { return open_handle(p) ? p->pp.path : NULL; }
int64_t calf_policy_iteration(const calf_policy *p) { return open_handle(p) ? p->pp.iteration : -1; }

int calf_policy_action_dims(const calf_policy *p) {
    return open_handle(p) ? policy_spec(p)->num_action_dims : -1;
}
const int *calf_policy_action_nvec(const calf_policy *p) {
    return open_handle(p) && policy_spec(p)->num_action_dims > 0 ? policy_spec(p)->action_nvec
                                                                 : NULL;
}
int calf_policy_masked(const calf_policy *p) {
    return open_handle(p) ? policy_spec(p)->action_mask != 0 : -1;
}

int calf_policy_state_size(const calf_policy *p) { return open_handle(p) ? p->memory : -1; }

int calf_policy_reset(calf_policy *p, int rows, const uint8_t *which, calf_error *err) {
    if (!p) return calf_error_set(err, CALF_EINVAL, "calf_policy_reset: the policy is NULL");
    if (!open_handle(p))
        return calf_error_set(err, CALF_EINVAL, "calf_policy_reset: %p is not an open policy "
                              "(closed already?)", (const void *)p);
    if (rows < 0) return calf_error_set(err, CALF_EINVAL, "calf_policy_reset: rows = %d", rows);
    if (!p->memory) return CALF_OK;
    if (!which) {
        int rc = p->pp.ops->greedy_reset(p->pp.algo, rows, err);
        p->state_rows = rc == CALF_OK ? rows : 0;
        return rc;
    }
    if (rows > p->state_rows)
        return calf_error_set(err, CALF_EINVAL,
                              "calf_policy_reset: %d rows, but the policy's state has %d (reset "
                              "them all first: calf_policy_reset(p, %d, NULL))",
                              rows, p->state_rows, rows);
    p->pp.ops->greedy_reset_rows(p->pp.algo, which, rows);
    return CALF_OK;
}

int calf_policy_greedy(calf_policy *p, const float *obs, int rows, int *actions,
                       float *cont_actions, calf_error *err) {
    return calf_policy_greedy_masked(p, obs, NULL, rows, actions, cont_actions, err);
}

/* What greedy and sample check before acting; `who` names the caller's function. */
static int check_act(const char *who, calf_policy *p, const float *obs, const uint8_t *mask,
                     int rows, const int *actions, const float *cont_actions, calf_error *err) {
    if (!p) return calf_error_set(err, CALF_EINVAL, "%s: the policy is NULL", who);
    if (!open_handle(p))
        return calf_error_set(err, CALF_EINVAL, "%s: %p is not an open policy "
                              "(closed already?)", who, (const void *)p);
    const calf_env_spec *spec = policy_spec(p);
    const int ad = spec->action_dim, ai = calf_env_action_ints(spec), nA = spec->num_actions;
    if (rows < 0) return calf_error_set(err, CALF_EINVAL, "%s: rows = %d", who, rows);
    if (rows == 0) return CALF_OK;
    if (!obs) return calf_error_set(err, CALF_EINVAL, "%s: obs is NULL", who);
    if (ad == 0 && !actions)
        return calf_error_set(err, CALF_EINVAL, "%s: %s has discrete actions: actions is NULL",
                              who, spec->name);
    if (ad > 0 && !cont_actions)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: %s has continuous actions: cont_actions is NULL", who,
                              spec->name);
    if (mask && ad > 0)
        return calf_error_set(err, CALF_EINVAL, "%s: %s has continuous actions: no mask", who,
                              spec->name);
    for (int r = 0; mask && r < rows; r++) /* each row (each slice) allows an action */
        for (int d = 0, off = 0; d < ai; d++) {
            int w = spec->num_action_dims > 0 ? spec->action_nvec[d] : nA, valid = 0;
            for (int j = 0; j < w; j++) valid |= mask[(size_t)r * nA + off + j] != 0;
            if (!valid)
                return calf_error_set(err, CALF_EINVAL, "%s: row %d's mask allows no action%s",
                                      who, r, ai > 1 ? " of a sub-action" : "");
            off += w;
        }
    return CALF_OK;
}

/* A policy with memory acts on the rows its state has: a handle never reset starts its
 * rows here (every row starts an episode); more rows than the last full reset's are refused. */
static int ready_state(calf_policy *p, int rows, const char *who, calf_error *err) {
    if (!p->memory) return CALF_OK;
    if (p->state_rows == 0) {
        int rc = calf_policy_reset(p, rows, NULL, err);
        if (rc != CALF_OK) return rc;
    }
    if (rows > p->state_rows)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: %d rows, but the policy's state has %d (a policy with "
                              "memory: calf_policy_reset(p, %d, NULL) first)",
                              who, rows, p->state_rows, rows);
    return CALF_OK;
}

/* Greedy and sample write both arrays; the one the caller did not pass goes to scratch,
 * grown here to rows (the handle stays usable when that fails). */
static int grow_scratch(calf_policy *p, int rows, const char *who, calf_error *err) {
    if (rows <= p->cap) return CALF_OK;
    const calf_env_spec *spec = policy_spec(p);
    const int ad = spec->action_dim, ai = calf_env_action_ints(spec);
    calf_error merr;
    int *act = mem_realloc(p->act, (size_t)rows * ai * sizeof *act, &merr);
    if (act) p->act = act;
    float *u = act ? mem_realloc(p->u, (size_t)rows * (size_t)(ad ? ad : 1) * sizeof *u, &merr)
                   : NULL;
    if (u) p->u = u;
    if (!act || !u) return calf_error_set(err, CALF_ENOMEM, "%s: %d rows: %s", who, rows, merr.msg);
    p->cap = rows;
    return CALF_OK;
}

int calf_policy_greedy_masked(calf_policy *p, const float *obs, const uint8_t *mask, int rows,
                              int *actions, float *cont_actions, calf_error *err) {
    int rc = check_act(mask ? "calf_policy_greedy_masked" : "calf_policy_greedy", p, obs, mask,
                       rows, actions, cont_actions, err);
    if (rc != CALF_OK || rows == 0) return rc;
    rc = ready_state(p, rows, "calf_policy_greedy", err);
    if (rc != CALF_OK) return rc;
    rc = grow_scratch(p, rows, "calf_policy_greedy", err);
    if (rc != CALF_OK) return rc;
    const int ad = policy_spec(p)->action_dim;
    p->pp.ops->greedy(p->pp.algo, obs, mask, rows, ad ? p->act : actions, ad ? cont_actions : p->u);
    return CALF_OK;
}

int calf_policy_stochastic(const calf_policy *p) {
    return open_handle(p) ? p->pp.ops->sample != NULL : -1;
}

int calf_policy_seed(calf_policy *p, uint64_t seed, calf_error *err) {
    if (!open_handle(p))
        return calf_error_set(err, CALF_EINVAL, "calf_policy_seed: %p is not an open policy "
                              "(NULL or closed already?)", (const void *)p);
    p->seed = seed;
    p->nrng = 0; /* each row's stream starts again when a call next reaches it */
    return CALF_OK;
}

int calf_policy_sample(calf_policy *p, const float *obs, const uint8_t *mask, int rows,
                       int *actions, float *cont_actions, calf_error *err) {
    int rc = check_act("calf_policy_sample", p, obs, mask, rows, actions, cont_actions, err);
    if (rc != CALF_OK || rows == 0) return rc;
    if (!p->pp.ops->sample) /* a deterministic policy: its samples are its greedy actions */
        return calf_policy_greedy_masked(p, obs, mask, rows, actions, cont_actions, err);
    const int ad = policy_spec(p)->action_dim;
    if (rows > p->nrng) {
        calf_error merr;
        calf_rng *rng = mem_realloc(p->rng, (size_t)rows * sizeof *rng, &merr);
        if (!rng)
            return calf_error_set(err, CALF_ENOMEM, "calf_policy_sample: %d rows: %s", rows,
                                  merr.msg);
        p->rng = rng;
        for (int r = p->nrng; r < rows; r++)
            calf_rng_seed(&p->rng[r], p->seed, (uint64_t)r, CALF_RNG_ACTION);
        p->nrng = rows;
    }
    rc = ready_state(p, rows, "calf_policy_sample", err);
    if (rc != CALF_OK) return rc;
    rc = grow_scratch(p, rows, "calf_policy_sample", err);
    if (rc != CALF_OK) return rc;
    p->pp.ops->sample(p->pp.algo, obs, mask, rows, p->rng, ad ? p->act : actions,
                      ad ? cont_actions : p->u);
    return CALF_OK;
}
