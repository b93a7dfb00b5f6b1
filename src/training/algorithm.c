/* algorithm.c: the registry of algorithms by the name a config gives them. */
#include "training/algorithm.h"

#include <string.h>

static const algorithm_ops *const algorithms[] = {&ppo_algorithm_ops, &sac_algorithm_ops};

const algorithm_ops *algorithm_find(const char *name) {
    for (size_t i = 0; i < sizeof algorithms / sizeof algorithms[0]; i++)
        if (strcmp(algorithms[i]->name, name) == 0) return algorithms[i];
    return NULL;
}
