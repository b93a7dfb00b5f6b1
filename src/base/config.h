/* config.h: the binding table as the library builds it: a row's type, and the rows a layer
 * above the config adds to the public ones (calf/config.h), as data that config.c reads
 * without knowing where they come from. */
#ifndef CALF_BASE_CONFIG_H
#define CALF_BASE_CONFIG_H

#include <stdbool.h>

#include "calf/config.h"

/* One binding: the columns of CALF_BINDINGS (include/calf/config.h) after its ID. */
typedef struct config_row {
    const char *name;
    calf_config_type type;
    const char *def;      /* default, as gin text */
    double min, max;      /* bounds on numbers and tuple elements */
    int tuple_len;        /* > 0: exact tuple length; < 0: at most -tuple_len elements */
    const char *choices;  /* STRING: '|'-separated allowed values, or NULL (REF: see below) */
    int flags;            /* CALF_BINDING_* */
    int fallback;         /* the unscoped row a scoped one falls back to, or CALF_NO_FALLBACK */
    const char *help;
} config_row;

/* An X-macro row of CALF_BINDINGS' columns as a config_row initializer. */
#define CONFIG_ROW(id, name, type, def, min, max, tuple_len, choices, flags, fallback, help) \
    {name, type, def, min, max, tuple_len, choices, flags, fallback, help},

/* One of the implementations the REF row chooses (calf's one REF row,
 * TrainerConfig.algorithm_ctor, chooses an algorithm), with the number of its own rows. */
typedef struct config_choice {
    const char *name;      /* as a config refers to it: @name */
    int num_rows;          /* its rows follow the previous choice's in config_extension.rows */
    bool in_every_digest;  /* its rows enter every config's digest, not only of the configs
                            * that choose it */
} config_choice;

/* What a layer above adds to the public rows: the REF row's choices and their own rows.
 * The rows' ids follow the public ones (CALF_CFG_NUM_BINDINGS + k for rows[k]); the
 * dump, --list-bindings and the digest take them between CALF_BINDINGS_TRAINER's rows and
 * CALF_BINDINGS_SHARED's. Static storage. */
typedef struct config_extension {
    const char *names;              /* the choices' names, '|'-separated, in their order */
    const config_choice *choices;
    int num_choices;
    const config_row *rows;         /* every choice's own rows, in the choices' order */
    int num_rows;
} config_extension;

/* The extension config.c reads: the algorithms and their own rows. Defined by the layer
 * that holds the algorithm registry (training/algorithm.c, from ALGORITHMS in
 * training/registry.h); config.c includes nothing of that layer, it only reads this. */
extern const config_extension config_algorithms;

#endif
