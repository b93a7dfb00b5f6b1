/* algorithm.c: the registry of algorithms by the name a config gives them, made from the
 * one table ALGORITHMS (algorithms/registry.h), and the check that it is well formed. */
#include "training/algorithm.h"

#include <string.h>

#define ALGORITHM_ENTRY_(name, ops, bindings, in_every_digest) {#name, &ops},
static const algorithm_entry registry[] = {ALGORITHMS(ALGORITHM_ENTRY_)};
#undef ALGORITHM_ENTRY_

const algorithm_entry *algorithm_registry(int *n) {
    *n = (int)(sizeof registry / sizeof registry[0]);
    return registry;
}

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
