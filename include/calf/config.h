/* calf/config.h: gin-style configuration with ALF's binding names.
 * One table of known bindings {name, type, default, bounds, help} drives parsing,
 * validation, --list-bindings and the operative-config dump. Values in a config are
 * global for the whole job; the per-process split is derived (calf_split). */
#ifndef CALF_CONFIG_H
#define CALF_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "calf/error.h"

typedef enum calf_config_type {
    CALF_CFG_INT,
    CALF_CFG_FLOAT,
    CALF_CFG_BOOL,
    CALF_CFG_STRING,
    CALF_CFG_INT_TUPLE,
    CALF_CFG_FLOAT_TUPLE
} calf_config_type;

/* The known bindings, in table order. */
typedef enum calf_binding_id {
    CALF_CFG_ENV_NAME,
    CALF_CFG_NUM_ENVS,
    CALF_CFG_RANDOM_SEED,
    CALF_CFG_NUM_ITERATIONS,
    CALF_CFG_NUM_ENV_STEPS,
    CALF_CFG_UNROLL_LENGTH,
    CALF_CFG_MINI_BATCH_SIZE,
    CALF_CFG_NUM_UPDATES,
    CALF_CFG_NUM_CHECKPOINTS,
    CALF_CFG_EVALUATE,
    CALF_CFG_EVAL_INTERVAL,
    CALF_CFG_NUM_EVAL_EPISODES,
    CALF_CFG_SUMMARY_INTERVAL,
    CALF_CFG_SUMMARIES_FLUSH_SECS,
    CALF_CFG_SUMMARIZE_GRADS_AND_VARS,
    CALF_CFG_DDP_CHECK_INTERVAL,
    CALF_CFG_COLLECTIVE_TIMEOUT,
    CALF_CFG_GAMMA,
    CALF_CFG_TD_LAMBDA,
    CALF_CFG_RATIO_CLIPPING,
    CALF_CFG_TD_LOSS_WEIGHT,
    CALF_CFG_ENTROPY_REG,
    CALF_CFG_NORMALIZE_ADVANTAGES,
    CALF_CFG_ADAM_LR,
    CALF_CFG_ADAM_BETAS,
    CALF_CFG_ADAM_EPS,
    CALF_CFG_GRADIENT_CLIPPING,
    CALF_CFG_ACTOR_LAYERS,
    CALF_CFG_ACTOR_ACTIVATION,
    CALF_CFG_INIT_LOG_STD,
    CALF_CFG_VALUE_LAYERS,
    CALF_CFG_VALUE_ACTIVATION,
    CALF_CFG_NUM_BINDINGS
} calf_binding_id;

#define CALF_CFG_MAX_TUPLE 16
#define CALF_CFG_MAX_STRING 256

typedef struct calf_config_value {
    int64_t i;                          /* INT, BOOL */
    double f;                           /* FLOAT */
    char s[CALF_CFG_MAX_STRING];        /* STRING */
    int n;                              /* tuple length */
    int64_t ti[CALF_CFG_MAX_TUPLE];     /* INT_TUPLE */
    double tf[CALF_CFG_MAX_TUPLE];      /* FLOAT_TUPLE */
} calf_config_value;

typedef struct calf_config {
    calf_config_value values[CALF_CFG_NUM_BINDINGS];
    /* where each value came from: "file:line", "--conf_param", or "" for the default */
    char origin[CALF_CFG_NUM_BINDINGS][320];
} calf_config;

/* Every binding at its default. */
void calf_config_init(calf_config *cfg);
/* Parse a gin file (with includes, relative to the including file) into cfg.
 * Errors name file:line and return CALF_EINVAL (CALF_EIO for an unreadable file). */
int calf_config_parse_file(calf_config *cfg, const char *path, calf_error *err);
/* Parse gin text; `origin` names it in messages and in the operative dump. */
int calf_config_parse_string(calf_config *cfg, const char *text, const char *origin, calf_error *err);
/* Apply one --conf_param 'Scope.param=value'. */
int calf_config_apply_param(calf_config *cfg, const char *assignment, calf_error *err);
/* Checks across bindings (e.g. the env name is registered elsewhere; here: ranges
 * that depend on each other). */
int calf_config_validate(const calf_config *cfg, calf_error *err);

int64_t calf_config_int(const calf_config *cfg, calf_binding_id id);
double calf_config_float(const calf_config *cfg, calf_binding_id id);
bool calf_config_bool(const calf_config *cfg, calf_binding_id id);
const char *calf_config_string(const calf_config *cfg, calf_binding_id id);
const calf_config_value *calf_config_get(const calf_config *cfg, calf_binding_id id);

/* Table access for --list-bindings and tools. */
const char *calf_binding_name(calf_binding_id id);
calf_config_type calf_binding_type(calf_binding_id id);
const char *calf_binding_help(calf_binding_id id);
/* Look a binding up by full name; returns -1 if unknown. */
int calf_binding_find(const char *name);
/* Print every binding: name, type, default, bounds, help. */
void calf_config_list_bindings(FILE *out);
/* Format one value as gin text into buf. */
void calf_config_format_value(const calf_config *cfg, calf_binding_id id, char *buf, size_t cap);
/* Write the operative config (every binding's final value, with origins) as gin.
 * `header` (may be NULL) is written first as comment lines. */
int calf_config_write(const calf_config *cfg, FILE *out, const char *header);
/* 64-bit digest of every binding that changes the training result (run length,
 * evaluation, summaries and checkpoint cadence excluded). */
uint64_t calf_config_digest(const calf_config *cfg);

/* The per-process split: E global environments over n processes. Process `rank`
 * owns the contiguous global indices [*begin, *begin + *count); sizes differ by at
 * most one and sum to exactly E. n > E is an error naming both numbers. */
int calf_split(int num_envs, int num_processes, int rank, int *begin, int *count, calf_error *err);

#endif
