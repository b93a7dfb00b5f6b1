/* calf/config.h: gin-style configuration with ALF's binding names.
 * One list of known bindings (CALF_BINDINGS below) makes both the public binding ids and
 * the table that drives parsing, validation, --list-bindings and the operative-config dump.
 * Each algorithm's own rows (PPOLoss.*, SacAlgorithm.*) are not here: they are listed with
 * the algorithm, in the library's registry (src/training/registry.h), and reached by name
 * (calf_binding_find), so registering an algorithm leaves every id below as it is. A
 * calf_config is opaque: made by calf_config_new, read through the functions below.
 * Values in a config are global for the whole job; the per-process split is derived
 * (calf_split). */
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
    CALF_CFG_FLOAT_TUPLE,
    CALF_CFG_REF,         /* `@Name`: one of the row's choices, stored in .s without '@' */
    CALF_CFG_CONV_LAYERS  /* ALF's conv_layer_params: a tuple of (filters, kernel, stride[,
                             padding]) tuples, e.g. ((16, 3, 1),) or (); min and max bound
                             filters, kernel and stride, padding is 0..max (default 0),
                             -tuple_len the number of layers */
} calf_config_type;

/* Row flags. */
enum calf_binding_flag {
    CALF_BINDING_NODIGEST = 1, /* does not change the training result (run length, cadence) */
    CALF_BINDING_OPTIONAL = 2, /* takes None (see calf_config_is_none) */
    CALF_BINDING_DIGEST_SET = 4 /* in the digest only when its value in effect is not its
                                   default: a row added after checkpoints were written,
                                   whose default is what those runs did, leaves their
                                   digest (and the checkpoints' bytes) as they were */
};

#define CALF_NO_FALLBACK (-1)

/* The public bindings, one row each, grouped by configurable so the dump reads well:
 *   X(ID, name, type, default as gin text, min, max, tuple_len, choices, flags, fallback, help)
 * ID names the constant CALF_CFG_<ID>. min and max bound numbers and tuple elements.
 * tuple_len > 0: exact tuple length; < 0: at most -tuple_len elements. choices: NULL or
 * '|'-separated allowed strings. A REF row's choices are NULL here: they are the names of
 * what it refers to, registered in the library (algorithm_ctor: the algorithms; see
 * calf_binding_choices).
 * A scoped row (`scope/Configurable.param`) may name the unscoped row it falls back to,
 * as gin's `Configurable.param` sets every scope's default: a scoped row that is not set
 * takes the fallback's value when that one is set, and its own default otherwise.
 *
 * Two lists, because the dump, --list-bindings and the digest take the rows in the order
 * CALF_BINDINGS_TRAINER, then every algorithm's own rows (in the registry's order), then
 * CALF_BINDINGS_SHARED: what the run is, what the algorithm is, the parts algorithms are
 * built from. The ids are CALF_BINDINGS_TRAINER's rows, then CALF_BINDINGS_SHARED's, so a
 * public row may only be appended at the end of CALF_BINDINGS_SHARED: inserted anywhere
 * else, it would shift the ids after it. */
#define CALF_BINDINGS(X) CALF_BINDINGS_TRAINER(X) CALF_BINDINGS_SHARED(X)

#define CALF_BINDINGS_TRAINER(X)                                                               \
    X(ENV_NAME, "create_environment.env_name", CALF_CFG_STRING, "'CartPole-v1'", 0, 0, 0, NULL, \
      0, CALF_NO_FALLBACK, "registered environment to train on (see `calf envs`)")             \
    X(NUM_ENVS, "create_environment.num_parallel_environments", CALF_CFG_INT, "64", 1, 1 << 20, \
      0, NULL, 0, CALF_NO_FALLBACK,                                                            \
      "environments stepped in parallel by the WHOLE job; split across processes")             \
                                                                                               \
    X(RANDOM_SEED, "TrainerConfig.random_seed", CALF_CFG_INT, "0", 0, 4.0e18, 0, NULL, 0,       \
      CALF_NO_FALLBACK,                                                                        \
      "seed of every random stream (per env: dynamics, actions, minibatch shuffling)")         \
    X(NUM_ITERATIONS, "TrainerConfig.num_iterations", CALF_CFG_INT, "1000", 0, 1e12, 0, NULL,   \
      CALF_BINDING_NODIGEST, CALF_NO_FALLBACK,                                                 \
      "training iterations to run (0: no limit, stop on num_env_steps)")                       \
    X(NUM_ENV_STEPS, "TrainerConfig.num_env_steps", CALF_CFG_INT, "0", 0, 1e15, 0, NULL,        \
      CALF_BINDING_NODIGEST, CALF_NO_FALLBACK,                                                 \
      "stop after this many environment steps of the whole job (0: no limit)")                 \
    X(UNROLL_LENGTH, "TrainerConfig.unroll_length", CALF_CFG_INT, "32", 1, 1 << 20, 0, NULL, 0, \
      CALF_NO_FALLBACK, "steps each environment takes per iteration")                          \
    X(MINI_BATCH_SIZE, "TrainerConfig.mini_batch_size", CALF_CFG_INT, "512", 1, 1 << 30, 0,     \
      NULL, 0, CALF_NO_FALLBACK,                                                               \
      "samples per gradient step for the whole job (rounded to a whole number of steps per "   \
      "env)")                                                                                  \
    X(NUM_UPDATES, "TrainerConfig.num_updates_per_train_iter", CALF_CFG_INT, "4", 1, 10000, 0,  \
      NULL, 0, CALF_NO_FALLBACK, "passes (epochs) over each iteration's experience")           \
    X(NUM_CHECKPOINTS, "TrainerConfig.num_checkpoints", CALF_CFG_INT, "5", 0, 1e6, 0, NULL,     \
      CALF_BINDING_NODIGEST, CALF_NO_FALLBACK,                                                 \
      "checkpoints spread over the run and kept (plus one at the end)")                        \
    X(EVALUATE, "TrainerConfig.evaluate", CALF_CFG_BOOL, "False", 0, 0, 0, NULL,                \
      CALF_BINDING_NODIGEST, CALF_NO_FALLBACK,                                                 \
      "evaluate the greedy policy on separate environments (main process only)")               \
    X(EVAL_INTERVAL, "TrainerConfig.eval_interval", CALF_CFG_INT, "10", 1, 1e12, 0, NULL,       \
      CALF_BINDING_NODIGEST, CALF_NO_FALLBACK,                                                 \
      "evaluate every this many iterations, and after the last one")                           \
    X(NUM_EVAL_EPISODES, "TrainerConfig.num_eval_episodes", CALF_CFG_INT, "10", 1, 1e6, 0,      \
      NULL, CALF_BINDING_NODIGEST, CALF_NO_FALLBACK, "episodes per evaluation")                \
    X(SUMMARY_INTERVAL, "TrainerConfig.summary_interval", CALF_CFG_INT, "1", 1, 1e12, 0, NULL,  \
      CALF_BINDING_NODIGEST, CALF_NO_FALLBACK,                                                 \
      "write training summaries every this many iterations")                                   \
    X(SUMMARIES_FLUSH_SECS, "TrainerConfig.summaries_flush_secs", CALF_CFG_FLOAT, "1.0", 0, 1e6, \
      0, NULL, CALF_BINDING_NODIGEST, CALF_NO_FALLBACK,                                        \
      "flush summary files at least this often (seconds)")                                     \
    X(SUMMARIZE_GRADS_AND_VARS, "TrainerConfig.summarize_grads_and_vars", CALF_CFG_BOOL,        \
      "False", 0, 0, 0, NULL, CALF_BINDING_NODIGEST, CALF_NO_FALLBACK,                         \
      "write parameter and gradient histograms")                                               \
    X(DDP_CHECK_INTERVAL, "TrainerConfig.ddp_paras_check_interval", CALF_CFG_INT, "10", 0, 1e12, \
      0, NULL, CALF_BINDING_NODIGEST, CALF_NO_FALLBACK,                                        \
      "compare a digest of parameters and Adam state across processes every this many "        \
      "iterations (0: never; processes that share memory step one model and skip it)")         \
    X(COLLECTIVE_TIMEOUT, "TrainerConfig.collective_timeout_secs", CALF_CFG_FLOAT, "600.0",     \
      0.01, 1e7, 0, NULL, CALF_BINDING_NODIGEST, CALF_NO_FALLBACK,                             \
      "fail a collective whose peers do not arrive within this many seconds")                  \
    X(ALGORITHM_CTOR, "TrainerConfig.algorithm_ctor", CALF_CFG_REF, "@PPOAlgorithm", 0, 0, 0,   \
      NULL, 0, CALF_NO_FALLBACK, "the training algorithm")                                     \
    X(INITIAL_COLLECT_STEPS, "TrainerConfig.initial_collect_steps", CALF_CFG_INT, "0", 0, 1e15, \
      0, NULL, 0, CALF_NO_FALLBACK,                                                            \
      "env steps of the whole job taken with uniform random actions before learning starts "   \
      "(off-policy)")                                                                          \
    X(MINI_BATCH_LENGTH, "TrainerConfig.mini_batch_length", CALF_CFG_INT, "2", 1, 1 << 20, 0,   \
      NULL, 0, CALF_NO_FALLBACK,                                                               \
      "consecutive steps per replayed sample (2: one-step TD; off-policy)")                    \
    X(REPLAY_BUFFER_LENGTH, "TrainerConfig.replay_buffer_length", CALF_CFG_INT, "100000", 1,    \
      1 << 30, 0, NULL, 0, CALF_NO_FALLBACK,                                                   \
      "transitions kept per environment in the replay buffer (off-policy)")                    \
    X(NORMALIZE_OBS, "TrainerConfig.normalize_observations", CALF_CFG_BOOL, "False", 0, 0, 0,   \
      NULL, 0, CALF_NO_FALLBACK,                                                               \
      "normalize observations by their running mean and variance over all envs, updated "      \
      "once per iteration; kept in checkpoints, applied by play and export; PPO only")         \
    X(OBS_CLIPPING, "ObservationNormalizer.clipping", CALF_CFG_FLOAT, "0.0", 0, 1e6, 0, NULL, 0, \
      CALF_NO_FALLBACK, "clip normalized observations to [-clipping, clipping] (0: no clipping)")

#define CALF_BINDINGS_SHARED(X)                                                                \
    X(TD_GAMMA, "OneStepTDLoss.gamma", CALF_CFG_FLOAT, "0.99", 0, 1, 0, NULL, 0,                \
      CALF_NO_FALLBACK, "discount factor of the critics' TD target (off-policy)")              \
                                                                                               \
    X(ADAM_LR, "Adam.lr", CALF_CFG_FLOAT, "0.001", 0, 10, 0, NULL, 0, CALF_NO_FALLBACK,         \
      "learning rate (also of every scope below that is not set)")                             \
    X(ADAM_BETAS, "Adam.betas", CALF_CFG_FLOAT_TUPLE, "(0.9, 0.999)", 0, 0.99999997, 2, NULL,   \
      0, CALF_NO_FALLBACK, "Adam's moment decay rates (beta1, beta2)")                         \
    X(ADAM_EPS, "Adam.eps", CALF_CFG_FLOAT, "1e-5", 0, 1, 0, NULL, 0, CALF_NO_FALLBACK,         \
      "Adam's epsilon")                                                                        \
    X(GRADIENT_CLIPPING, "Adam.gradient_clipping", CALF_CFG_FLOAT, "0.0", 0, 1e9, 0, NULL, 0,   \
      CALF_NO_FALLBACK, "clip the gradient's global norm to this (0: no clipping)")            \
    X(LR_SCHEDULE, "Adam.lr_schedule", CALF_CFG_STRING, "'constant'", 0, 0, 0, "constant|linear", \
      0, CALF_NO_FALLBACK,                                                                     \
      "'linear': the learning rate decays linearly to 0 over the run (iteration k of N uses "  \
      "lr * (1 - k / N), N from num_iterations or num_env_steps)")                             \
    X(ACTOR_LR, "actor/Adam.lr", CALF_CFG_FLOAT, "0.001", 0, 10, 0, NULL, 0, CALF_CFG_ADAM_LR,  \
      "learning rate of SAC's actor")                                                          \
    X(CRITIC_LR, "critic/Adam.lr", CALF_CFG_FLOAT, "0.001", 0, 10, 0, NULL, 0, CALF_CFG_ADAM_LR, \
      "learning rate of SAC's critics")                                                        \
    X(ALPHA_LR, "alpha/Adam.lr", CALF_CFG_FLOAT, "0.001", 0, 10, 0, NULL, 0, CALF_CFG_ADAM_LR,  \
      "learning rate of SAC's entropy temperature alpha")                                      \
                                                                                               \
    X(ACTOR_LAYERS, "ActorDistributionNetwork.fc_layer_params", CALF_CFG_INT_TUPLE, "(64, 64)", \
      1, 1024, -7, NULL, 0, CALF_NO_FALLBACK, "hidden layer sizes of the policy network")      \
    X(ACTOR_ACTIVATION, "ActorDistributionNetwork.activation", CALF_CFG_STRING, "'tanh'", 0, 0, \
      0, "tanh|relu", 0, CALF_NO_FALLBACK, "hidden activation of the policy network")          \
    X(INIT_LOG_STD, "ActorDistributionNetwork.init_log_std", CALF_CFG_FLOAT, "0.0", -20, 5, 0,  \
      NULL, 0, CALF_NO_FALLBACK, "initial log standard deviation of continuous actions")       \
    X(SAC_ACTOR_LAYERS, "actor/ActorDistributionNetwork.fc_layer_params", CALF_CFG_INT_TUPLE,   \
      "(100, 100)", 1, 1024, -7, NULL, 0, CALF_CFG_ACTOR_LAYERS,                               \
      "hidden layer sizes of SAC's actor network")                                             \
    X(SAC_ACTOR_ACTIVATION, "actor/ActorDistributionNetwork.activation", CALF_CFG_STRING,       \
      "'relu'", 0, 0, 0, "tanh|relu", 0, CALF_CFG_ACTOR_ACTIVATION,                            \
      "hidden activation of SAC's actor network")                                              \
                                                                                               \
    X(VALUE_LAYERS, "ValueNetwork.fc_layer_params", CALF_CFG_INT_TUPLE, "(64, 64)", 1, 1024,    \
      -7, NULL, 0, CALF_NO_FALLBACK, "hidden layer sizes of the value network")                \
    X(VALUE_ACTIVATION, "ValueNetwork.activation", CALF_CFG_STRING, "'tanh'", 0, 0, 0,          \
      "tanh|relu", 0, CALF_NO_FALLBACK, "hidden activation of the value network")              \
                                                                                               \
    X(SAC_CRITIC_LAYERS, "critic/CriticNetwork.joint_fc_layer_params", CALF_CFG_INT_TUPLE,      \
      "(100, 100)", 1, 1024, -7, NULL, 0, CALF_NO_FALLBACK,                                    \
      "hidden layer sizes of SAC's critic networks (observation and action joined)")           \
    X(SAC_CRITIC_ACTIVATION, "critic/CriticNetwork.activation", CALF_CFG_STRING, "'relu'", 0, 0, \
      0, "tanh|relu", 0, CALF_NO_FALLBACK, "hidden activation of SAC's critic networks")     \
                                                                                               \
    X(EVAL_MAX_EPISODE_STEPS, "TrainerConfig.eval_max_episode_steps", CALF_CFG_INT, "27000", 1, \
      2147483647, 0, NULL, CALF_BINDING_NODIGEST, CALF_NO_FALLBACK,                            \
      "end an evaluation or `calf play` episode after this many steps when the env has not "   \
      "ended it (an env without a time limit: MinAtar, a Python env without one); its return " \
      "so far counts, and a warning says so once. 27000: Atari's 108000 frames at frame skip 4") \
    X(ACTOR_CONV_LAYERS, "ActorDistributionNetwork.conv_layer_params", CALF_CFG_CONV_LAYERS,   \
      "()", 1, 1024, -4, NULL, CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                      \
      "conv layers (filters, kernel, stride[, padding]) before the policy network's fc "       \
      "layers, each with ReLU; needs an image observation (PPO)")                               \
    X(VALUE_CONV_LAYERS, "ValueNetwork.conv_layer_params", CALF_CFG_CONV_LAYERS, "()", 1, 1024, \
      -4, NULL, CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                                     \
      "conv layers (filters, kernel, stride[, padding]) before the value network's fc "        \
      "layers, each with ReLU; needs an image observation (PPO)")                               \
    X(UINT8_SCALE, "EncodingNetwork.uint8_scale", CALF_CFG_FLOAT, "None", 0, 1e6, 0, NULL,      \
      CALF_BINDING_OPTIONAL | CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                       \
      "a network reading a uint8 observation multiplies each byte by this first; None: "      \
      "1 / the env's largest value (1/255 for pixels, 1 for MinAtar's 0/1 images)")

/* CALF_CFG_<ID> for every public row, in id order. These numbers are the ABI: a program
 * compiled against this header keeps them (rows are only appended). */
#define CALF_BINDING_ENUM_(id, ...) CALF_CFG_##id,
enum {
    CALF_BINDINGS(CALF_BINDING_ENUM_)
    CALF_CFG_NUM_BINDINGS /* the public rows; every row, the algorithms' too: calf_binding_count */
};
#undef CALF_BINDING_ENUM_

/* A binding's id: a CALF_CFG_<ID> above, or, for an algorithm's own row, what
 * calf_binding_find returns for its name (from CALF_CFG_NUM_BINDINGS up to
 * calf_binding_count(); those numbers may differ from one release to the next). */
typedef int calf_binding_id;

/* A job's configuration: every binding's value, where it was set, and the config's
 * macros. Opaque; calf_config_new makes one, calf_config_free releases it. */
typedef struct calf_config calf_config;

/* A config with every binding at its default and no macros, the caller's to release
 * with calf_config_free; NULL with CALF_ENOMEM in *err when memory runs out. */
calf_config *calf_config_new(calf_error *err);
/* Release cfg (NULL is fine). */
void calf_config_free(calf_config *cfg);
/* Parse a gin file (with includes, relative to the including file) into cfg.
 * Errors name file:line and return CALF_EINVAL (CALF_EIO for an unreadable file,
 * CALF_ENOMEM "out of memory allocating ..." when a file's text does not fit; cfg may
 * then hold the rows parsed before it).
 * Besides `Scope.param = value` and `include 'file.gin'`, calf reads what ALF's configs
 * use: `scope/Scope.param = value` (rows of the table), `@Name` references, None for
 * optional rows, `import x.y` / `from x import y` (ignored: a config is data), a UTF-8
 * byte-order mark, and macros. A macro `NAME = value` (a bare name) holds any literal;
 * `%NAME` in a value stands for it and is type-checked there like the literal. A macro
 * is expanded where it is used, with its value at that point, in later files, includes
 * and --conf_params alike: defining it again changes later uses (last wins), and
 * changing it after a use is an error, since gin would change that earlier use too. */
int calf_config_parse_file(calf_config *cfg, const char *path, calf_error *err);
/* Parse gin text; `origin` names it in messages and in the operative dump. Errors as
 * calf_config_parse_file's (memory is taken only to read the files it includes). */
int calf_config_parse_string(calf_config *cfg, const char *text, const char *origin, calf_error *err);
/* Apply one --conf_param 'Scope.param=value' (or 'NAME=value', a macro). */
int calf_config_apply_param(calf_config *cfg, const char *assignment, calf_error *err);
/* Checks across bindings, after every file and --conf_param: the run must stop and have
 * one budget (num_iterations and num_env_steps not both set above 0), the rollout must
 * fit in memory, an off-policy sample must fit in the replay buffer, and
 * every macro must be used (an unused one is most likely a binding written without
 * its scope). */
int calf_config_validate(const calf_config *cfg, calf_error *err);

/* The value in effect for a row: for a scoped row that is not set, its fallback's value
 * when that one is set. The getters assert the row's type, and that the value is not
 * None (check calf_config_is_none first on an optional row). calf_config_string serves
 * STRING and REF rows (a REF without its '@'; points into cfg). */
int64_t calf_config_int(const calf_config *cfg, calf_binding_id id);
double calf_config_float(const calf_config *cfg, calf_binding_id id);
bool calf_config_bool(const calf_config *cfg, calf_binding_id id);
const char *calf_config_string(const calf_config *cfg, calf_binding_id id);
/* A tuple row's value in effect: its number of elements, and element k (0 <= k < that
 * number) of an INT_TUPLE or a FLOAT_TUPLE row. A CONV_LAYERS row: its number of layers,
 * and element k = 4 layer + j of (filters, kernel, stride, padding) (padding 0 when the
 * config left it out). */
int calf_config_tuple_len(const calf_config *cfg, calf_binding_id id);
int64_t calf_config_tuple_int(const calf_config *cfg, calf_binding_id id, int k);
double calf_config_tuple_float(const calf_config *cfg, calf_binding_id id, int k);
/* True when the value in effect is None. */
bool calf_config_is_none(const calf_config *cfg, calf_binding_id id);
/* Where the value in effect came from: "file:line", "--conf_param", or "" for a default
 * (the row's own, or the chosen algorithm's: see calf_config_write's comments). Points
 * into cfg. */
const char *calf_config_origin(const calf_config *cfg, calf_binding_id id);

/* Table access for --list-bindings and tools: every id from 0 to calf_binding_count() - 1. */
int calf_binding_count(void);
const char *calf_binding_name(calf_binding_id id);
calf_config_type calf_binding_type(calf_binding_id id);
const char *calf_binding_help(calf_binding_id id);
/* CALF_BINDING_* flags of the row. */
int calf_binding_flags(calf_binding_id id);
/* The unscoped row a scoped row falls back to, or CALF_NO_FALLBACK. */
int calf_binding_fallback(calf_binding_id id);
/* The row's allowed values, '|'-separated (for a REF, the names without '@', e.g.
 * "PPOAlgorithm|SacAlgorithm"), or NULL when any value in bounds is allowed. Static
 * storage. */
const char *calf_binding_choices(calf_binding_id id);
/* Look a binding up by full name, an algorithm's own rows included; -1 if unknown. */
int calf_binding_find(const char *name);
/* The algorithm (an algorithm_ctor choice, without '@') whose own row id is
 * ("PPOAlgorithm" for PPOLoss.gamma), or NULL for a public row. Static storage. */
const char *calf_binding_algorithm(calf_binding_id id);
/* The default, as gin text, that a config choosing `algorithm` (a choice without '@')
 * gets for row id when it leaves the row unset: the algorithm's own default for it, else
 * the row's (TrainerConfig.num_iterations aside: 0 when num_env_steps is set). NULL
 * algorithm: the row's own default; NULL for an unknown algorithm. Static storage. */
const char *calf_binding_default(calf_binding_id id, const char *algorithm);
/* Print every binding: name, type, default, bounds, help. */
void calf_config_list_bindings(FILE *out);
/* Format the value in effect as gin text into buf. */
void calf_config_format_value(const calf_config *cfg, calf_binding_id id, char *buf, size_t cap);
/* Write the operative config (every binding's value in effect, with origins) as gin: a
 * set value's line ends "# file:line", a default the chosen algorithm gives "# Name's
 * default", num_iterations that num_env_steps replaces "# TrainerConfig.num_env_steps
 * ends the run"; a line without a comment holds calf's own default.
 * `header` (may be NULL) is written first as comment lines. */
int calf_config_write(const calf_config *cfg, FILE *out, const char *header);
/* 64-bit digest of every binding's value in effect that changes the training result
 * (run length, evaluation, summaries and checkpoint cadence excluded). */
uint64_t calf_config_digest(const calf_config *cfg);

/* The per-process split: E global environments over n processes. Process `rank`
 * owns the contiguous global indices [*begin, *begin + *count); sizes differ by at
 * most one and sum to exactly E. n > E is an error naming both numbers. */
int calf_split(int num_envs, int num_processes, int rank, int *begin, int *count, calf_error *err);

#endif
