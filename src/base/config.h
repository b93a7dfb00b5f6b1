/* config.h: the config as the library holds it behind the opaque calf_config
 * (calf/config.h): its values, and the binding table's rows, among them those a layer
 * above adds to the public ones as data that config.c reads without knowing its source. */
#ifndef CALF_BASE_CONFIG_H
#define CALF_BASE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "calf/config.h"

/* Rows a config holds, public and added together: config.c panics on a table past it,
 * and training/algorithm.c does not build when the algorithms' rows do not fit. */
#define CONFIG_CAPACITY 128

#define CONFIG_MAX_TUPLE 16
#define CONFIG_MAX_STRING 256
#define CONFIG_MAX_ORIGIN 320
#define CONFIG_MAX_MACROS 32
#define CONFIG_MAX_MACRO_TEXT 384

typedef struct config_value {
    int64_t i;                          /* INT, BOOL */
    double f;                           /* FLOAT */
    char s[CONFIG_MAX_STRING];          /* STRING; REF: the name without '@' */
    int n;                              /* tuple length; CONV_LAYERS: layers */
    int64_t ti[CONFIG_MAX_TUPLE];       /* INT_TUPLE; CONV_LAYERS: layer l's (filters,
                                           kernel, stride, padding) at 4 l .. 4 l + 3 */
    double tf[CONFIG_MAX_TUPLE];        /* FLOAT_TUPLE */
    bool none;                          /* None (rows flagged CALF_BINDING_OPTIONAL only) */
} config_value;

/* A gin macro, `NAME = value`, used as `%NAME`. */
typedef struct config_macro {
    char name[64];
    char text[CONFIG_MAX_MACRO_TEXT];   /* its value as gin text on one line */
    char origin[CONFIG_MAX_ORIGIN];     /* where it was (last) defined */
    char used_at[CONFIG_MAX_ORIGIN];    /* its first use, "" while unused */
} config_macro;

/* A job's configuration; calf_binding_count() of the slots are used. */
struct calf_config {
    config_value values[CONFIG_CAPACITY]; /* by id; unused past calf_binding_count() */
    /* where each row was set: "file:line", "--conf_param", or "" when it was not (its
     * default, or for a scoped row its fallback's value: see calf_config_origin) */
    char origin[CONFIG_CAPACITY][CONFIG_MAX_ORIGIN];
    int num_macros;
    config_macro macros[CONFIG_MAX_MACROS];
};

/* Every binding of cfg at its default, no macros (what calf_config_new returns; the
 * library's own code may hold a calf_config in a struct of its own). */
void config_init(calf_config *cfg);
/* The value in effect for a row (calf_config_int's), whatever its type. Points into cfg. */
const config_value *config_get(const calf_config *cfg, calf_binding_id id);
/* Where the value in effect for a row came from, for a message's "WHERE: ...":
 * calf_config_origin's "file:line" or "--conf_param" (for a scoped row set only through
 * its fallback, the fallback's), or "config" when it is a default. Points into cfg or at
 * a literal. */
const char *config_where(const calf_config *cfg, calf_binding_id id);

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

/* A value a choice gives a row that a config choosing it leaves unset, in place of the
 * row's own default. */
typedef struct config_default {
    const char *name;      /* the row's full name */
    const char *value;     /* gin text */
} config_default;

/* One of the implementations the REF row chooses (calf's one REF row,
 * TrainerConfig.algorithm_ctor, chooses an algorithm), with the number of its own rows
 * and of its defaults. */
typedef struct config_choice {
    const char *name;      /* as a config refers to it: @name */
    int num_rows;          /* its rows follow the previous choice's in config_extension.rows */
    bool in_every_digest;  /* its rows enter every config's digest, not only of the configs
                            * that choose it */
    int num_defaults;      /* its defaults follow the previous choice's in .defaults */
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
    const config_default *defaults; /* every choice's defaults, in the choices' order */
    int num_defaults;
} config_extension;

/* The extension config.c reads: the algorithms and their own rows. Defined by the layer
 * that holds the algorithm registry (training/algorithm.c, from ALGORITHMS in
 * training/registry.h); config.c includes nothing of that layer, it only reads this. */
extern const config_extension config_algorithms;

#endif
