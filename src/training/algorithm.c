/* algorithm.c: the registry of algorithms by the name a config gives them, made from the
 * one table ALGORITHMS (training/registry.h), the check that it is well formed, and the
 * algorithms' own config rows and defaults as the config reads them (config_algorithms). */
#include "training/algorithm.h"

#include <string.h>

#include "base/config.h"

#define ALGORITHM_ENTRY_(name, ops, bindings, defaults, in_every_digest) {#name, &ops},
static const algorithm_entry registry[] = {ALGORITHMS(ALGORITHM_ENTRY_)};
#undef ALGORITHM_ENTRY_

const algorithm_entry *algorithm_registry(int *n) {
    *n = (int)(sizeof registry / sizeof registry[0]);
    return registry;
}

/* The algorithms and their rows, for the config: the REF row TrainerConfig.algorithm_ctor
 * chooses among the names; each algorithm's rows get the ids CFG_<ID> (registry.h), since
 * both follow ALGORITHMS' order; each algorithm's defaults follow the previous one's. */
#define ALGORITHM_ROWS_(name, ops, bindings, defaults, in_every_digest) bindings(CONFIG_ROW)
static const config_row rows[] = {ALGORITHMS(ALGORITHM_ROWS_)};
#undef ALGORITHM_ROWS_
#define DEFAULT_ROW_(binding, value) {binding, value},
#define ALGORITHM_DEFAULTS_(name, ops, bindings, defaults, in_every_digest) defaults(DEFAULT_ROW_)
/* the first element stands in for an empty list (C has no empty arrays); never read */
static const config_default defaults[] = {{NULL, NULL}, ALGORITHMS(ALGORITHM_DEFAULTS_)};
#undef ALGORITHM_DEFAULTS_
#undef DEFAULT_ROW_
#define COUNT_ROW_(...) +1
#define ALGORITHM_CHOICE_ROW_(name, ops, bindings, defaults, in_every_digest) \
    {#name, 0 bindings(COUNT_ROW_), in_every_digest, 0 defaults(COUNT_ROW_)},
static const config_choice choices[] = {ALGORITHMS(ALGORITHM_CHOICE_ROW_)};
#undef ALGORITHM_CHOICE_ROW_
#undef COUNT_ROW_
_Static_assert(sizeof rows / sizeof rows[0] == CFG_NUM_ROWS - CALF_CFG_NUM_BINDINGS,
               "every algorithm's rows once, in CFG_<ID> order");
_Static_assert(CFG_NUM_ROWS <= CONFIG_CAPACITY, "more rows than a calf_config holds");

const config_extension config_algorithms = {
    ALGORITHM_CHOICES, choices, (int)(sizeof choices / sizeof choices[0]),
    rows, (int)(sizeof rows / sizeof rows[0]),
    defaults + 1, (int)(sizeof defaults / sizeof defaults[0]) - 1,
};

static bool is_reference_name(const char *s) {
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
    for (s++; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

int algorithm_registry_check(const algorithm_entry *entries, int n, calf_error *err) {
    for (int i = 0; i < n; i++) {
        const algorithm_entry *e = &entries[i];
        if (!e->name || !is_reference_name(e->name))
            return calf_error_set(err, CALF_EINVAL,
                                  "algorithm registry entry %d: '%s' is not a name a config can "
                                  "write as @Name", i, e->name ? e->name : "(null)");
        for (int j = 0; j < i; j++)
            if (strcmp(entries[j].name, e->name) == 0)
                return calf_error_set(err, CALF_EINVAL,
                                      "algorithm registry entries %d and %d are both named '%s'",
                                      j, i, e->name);
        const algorithm_ops *o = e->ops;
        const char *missing = !o                    ? "ops"
                              : !o->create          ? "create"
                              : !o->destroy         ? "destroy"
                              : !o->act             ? "act"
                              : !o->observe         ? "observe"
                              : !o->train           ? "train"
                              : !o->greedy          ? "greedy"
                              : !o->summarize       ? "summarize"
                              : !o->digest          ? "digest"
                              : !o->save            ? "save"
                              : !o->load            ? "load"
                              : !o->env_record_size ? "env_record_size"
                              : !o->save_env        ? "save_env"
                              : !o->load_env        ? "load_env"
                                                    : NULL;
        if (missing)
            return calf_error_set(err, CALF_EINVAL, "algorithm registry entry '%s' has no %s",
                                  e->name, missing);
    }
    return CALF_OK;
}

const algorithm_ops *algorithm_find(const char *name) {
    int n;
    const algorithm_entry *entries = algorithm_registry(&n);
    calf_error err;
    if (algorithm_registry_check(entries, n, &err) != CALF_OK)
        calf_panic(__FILE__, __LINE__, "%s", err.msg);
    for (int i = 0; i < n; i++)
        if (strcmp(entries[i].name, name) == 0) return entries[i].ops;
    return NULL;
}
