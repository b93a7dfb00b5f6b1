/* registry.h: the one table of calf's algorithms, and each algorithm's own config rows.
 * TrainerConfig.algorithm_ctor's choices, its errors, --list-bindings, the rows' ids and
 * algorithm_find are all made from ALGORITHMS below: training/algorithm.c builds the
 * registry and the rows it hands the config (config_algorithms, base/config.h) from it.
 * Macros only, so an algorithm's file includes it for its rows' ids. */
#ifndef CALF_REGISTRY_H
#define CALF_REGISTRY_H

#include "calf/config.h"

/* A(name, ops, bindings, defaults, in_every_digest), in the order of the choices and of
 * the dump:
 *   name       the reference a config writes: TrainerConfig.algorithm_ctor = @name
 *   ops        the `const algorithm_ops` its file in src/algorithms/ defines
 *   bindings   the X-macro list of its own rows below (NO_BINDINGS: it has none)
 *   defaults   the X-macro list of the values it gives rows a config leaves unset, in place
 *              of the rows' own (NO_DEFAULTS: calf's own are its: PPO's)
 *   in_every_digest  1: its rows enter the digest of every config, whichever algorithm
 *              it selects. PPO and SAC only: their rows were public rows, and so in every
 *              digest, before algorithms had rows of their own; this keeps the digest of
 *              every checkpoint written since. 0 for every algorithm added later: its rows
 *              enter only the digest of a config that selects it, so adding it changes no
 *              existing checkpoint.
 * Adding an algorithm is its file in src/algorithms/ plus one row here (and, when it has
 * settings, its list of rows beside PPO's and SAC's). */
#define ALGORITHMS(A)                                                \
    A(PPOAlgorithm, ppo_algorithm_ops, PPO_BINDINGS, NO_DEFAULTS, 1)   \
    A(SacAlgorithm, sac_algorithm_ops, SAC_BINDINGS, SAC_DEFAULTS, 1)  \
    A(Td3Algorithm, td3_algorithm_ops, TD3_BINDINGS, TD3_DEFAULTS, 0)  \
    A(DqnAlgorithm, dqn_algorithm_ops, DQN_BINDINGS, DQN_DEFAULTS, 0)  \
    A(DdpgAlgorithm, ddpg_algorithm_ops, DDPG_BINDINGS, DDPG_DEFAULTS, 0)

/* An algorithm's defaults: D(binding name, value as gin text), each the value that a
 * config choosing the algorithm gets for a row it does not set (one it sets, directly or
 * through the unscoped row a scoped one falls back to, keeps its value). calf's own
 * defaults (include/calf/config.h) are PPO's; the off-policy algorithms' below are taken
 * from CleanRL's single-file scripts, each with its source, mapped onto calf's rows: one
 * env stepped `unroll_length` steps per iteration, then `num_updates_per_train_iter`
 * gradient steps, so CleanRL's one update per env step is 1 x 1, DQN's train_frequency
 * 10 is 10 x 1; `learning_starts` is initial_collect_steps; `buffer_size` the replay
 * buffer (per env, and there is one env). TrainerConfig.num_iterations is never one: it
 * is calf's (the run's budget, see config.c). An algorithm's own rows keep their row
 * defaults (PPO's and SAC's rows enter every config's digest). Every example sets these
 * rows itself, so none of them changes (tests/test_algorithm.c checks that a config
 * naming only the algorithm gets them). */
#define NO_DEFAULTS(D)

/* CleanRL sac_continuous_action.py (v1.0.0 defaults): num_envs 1, learning_starts 5e3,
 * batch_size 256, buffer_size 1e6, policy_lr 3e-4, q_lr 1e-3 (also the temperature's,
 * autotune), one update per env step. */
#define SAC_DEFAULTS(D)                                          \
    D("create_environment.num_parallel_environments", "1")       \
    D("TrainerConfig.unroll_length", "1")                        \
    D("TrainerConfig.num_updates_per_train_iter", "1")           \
    D("TrainerConfig.mini_batch_size", "256")                    \
    D("TrainerConfig.initial_collect_steps", "5000")             \
    D("TrainerConfig.replay_buffer_length", "1000000")           \
    D("actor/Adam.lr", "3e-4")                                   \
    D("critic/Adam.lr", "1e-3")                                  \
    D("alpha/Adam.lr", "1e-3")

/* CleanRL td3_continuous_action.py: num_envs 1, learning_starts 25e3, batch_size 256,
 * buffer_size 1e6, learning_rate 3e-4 (actor and critics), one update per env step. */
#define TD3_DEFAULTS(D)                                          \
    D("create_environment.num_parallel_environments", "1")       \
    D("TrainerConfig.unroll_length", "1")                        \
    D("TrainerConfig.num_updates_per_train_iter", "1")           \
    D("TrainerConfig.mini_batch_size", "256")                    \
    D("TrainerConfig.initial_collect_steps", "25000")            \
    D("TrainerConfig.replay_buffer_length", "1000000")           \
    D("actor/Adam.lr", "3e-4")                                   \
    D("critic/Adam.lr", "3e-4")

/* CleanRL dqn.py: num_envs 1, train_frequency 10 (10 env steps, then one update),
 * learning_starts 10000, batch_size 128, buffer_size 10000, learning_rate 2.5e-4. */
#define DQN_DEFAULTS(D)                                          \
    D("create_environment.num_parallel_environments", "1")       \
    D("TrainerConfig.unroll_length", "10")                       \
    D("TrainerConfig.num_updates_per_train_iter", "1")           \
    D("TrainerConfig.mini_batch_size", "128")                    \
    D("TrainerConfig.initial_collect_steps", "10000")            \
    D("TrainerConfig.replay_buffer_length", "10000")             \
    D("critic/Adam.lr", "2.5e-4")

/* CleanRL ddpg_continuous_action.py: num_envs 1, learning_starts 25e3, batch_size 256,
 * buffer_size 1e6, learning_rate 3e-4 (actor and critic), one update per env step. */
#define DDPG_DEFAULTS(D)                                         \
    D("create_environment.num_parallel_environments", "1")       \
    D("TrainerConfig.unroll_length", "1")                        \
    D("TrainerConfig.num_updates_per_train_iter", "1")           \
    D("TrainerConfig.mini_batch_size", "256")                    \
    D("TrainerConfig.initial_collect_steps", "25000")            \
    D("TrainerConfig.replay_buffer_length", "1000000")           \
    D("actor/Adam.lr", "3e-4")                                   \
    D("critic/Adam.lr", "3e-4")

/* An algorithm's own rows: the columns of CALF_BINDINGS (include/calf/config.h). Each ID
 * makes the internal id CFG_<ID>, numbered after the public rows in ALGORITHMS order, the
 * order in which algorithm.c hands them to the config; the public API reaches a row by
 * its name (calf_binding_find), so these ids may change from release to release while
 * every public id and sizeof(calf_config) stay as they are. A row's name must be unknown
 * to every other table (config.c checks). */
#define NO_BINDINGS(X)

#define PPO_BINDINGS(X)                                                                          \
    X(PPO_GAMMA, "PPOLoss.gamma", CALF_CFG_FLOAT, "0.99", 0, 1, 0, NULL, 0, CALF_NO_FALLBACK,     \
      "discount factor")                                                                         \
    X(PPO_TD_LAMBDA, "PPOLoss.td_lambda", CALF_CFG_FLOAT, "0.95", 0, 1, 0, NULL, 0,               \
      CALF_NO_FALLBACK, "GAE lambda")                                                            \
    X(PPO_RATIO_CLIPPING, "PPOLoss.importance_ratio_clipping", CALF_CFG_FLOAT, "0.2", 0, 10, 0,   \
      NULL, 0, CALF_NO_FALLBACK, "PPO clipping epsilon of the importance ratio")                 \
    X(PPO_TD_LOSS_WEIGHT, "PPOLoss.td_loss_weight", CALF_CFG_FLOAT, "0.5", 0, 1e6, 0, NULL, 0,    \
      CALF_NO_FALLBACK, "weight of the value (TD) loss")                                         \
    X(PPO_ENTROPY_REG, "PPOLoss.entropy_regularization", CALF_CFG_FLOAT, "0.0", 0, 1e6, 0, NULL,  \
      0, CALF_NO_FALLBACK, "weight of the entropy bonus")                                        \
    X(PPO_NORMALIZE_ADVANTAGES, "PPOLoss.normalize_advantages", CALF_CFG_BOOL, "True", 0, 0, 0,   \
      NULL, 0, CALF_NO_FALLBACK,                                                                 \
      "normalise advantages to mean 0 and std 1 (over advantage_normalization_scope)")           \
    X(PPO_ADV_NORM_SCOPE, "PPOLoss.advantage_normalization_scope", CALF_CFG_STRING, "'batch'", 0, \
      0, 0, "batch|minibatch", CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                         \
      "what normalize_advantages takes the mean and (population) std of: each iteration's "    \
      "whole batch, or each minibatch its own (CleanRL's and gymnax-blines' PPO)")              \
    X(PPO_VALUE_CLIPPING, "PPOLoss.value_clipping", CALF_CFG_FLOAT, "0.0", 0, 1e6, 0, NULL,       \
      CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                                                 \
      "clip c of the value's move from the rollout's value v_old in the value loss, "          \
      "0.5 max((v - R)^2, (v_old + clip(v - v_old, -c, c) - R)^2) (CleanRL's clip_vloss "       \
      "with c = clip_coef; 0: off)")                                                           \
    X(PPO_ACTOR_LSTM, "ActorDistributionNetwork.lstm_hidden_size", CALF_CFG_INT, "0", 0, 1024, 0, \
      NULL, CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                                           \
      "PPO: an LSTM of this many units between the observation (after any conv and pre_fc "    \
      "layers) and the policy's fc layers (0: none; a recurrent policy, its state carried per " \
      "env and reset at episode starts)")                                                       \
    X(PPO_ACTOR_GRU, "ActorDistributionNetwork.gru_hidden_size", CALF_CFG_INT, "0", 0, 1024, 0,   \
      NULL, CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                                           \
      "PPO: a GRU of this many units there instead (0: none; not with lstm_hidden_size)")       \
    X(PPO_VALUE_LSTM, "ValueNetwork.lstm_hidden_size", CALF_CFG_INT, "0", 0, 1024, 0, NULL,       \
      CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                                                 \
      "PPO: an LSTM of this many units between the observation and the value's fc layers "      \
      "(0: none)")                                                                               \
    X(PPO_VALUE_GRU, "ValueNetwork.gru_hidden_size", CALF_CFG_INT, "0", 0, 1024, 0, NULL,         \
      CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                                                 \
      "PPO: a GRU of this many units there instead (0: none; not with lstm_hidden_size)")       \
    X(PPO_ACTOR_PRE_FC, "ActorDistributionNetwork.pre_fc_layer_params", CALF_CFG_INT_TUPLE, "()", \
      1, 1024, -7, NULL, CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                              \
      "PPO with a recurrent core: fc layers between the observation (or the conv layers) and "   \
      "the core, activated like fc_layer_params, which follow the core (ALF's "                 \
      "LSTMEncodingNetwork name; CleanRL's ppo_atari_lstm: conv, (512,), an LSTM, the heads)")  \
    X(PPO_VALUE_PRE_FC, "ValueNetwork.pre_fc_layer_params", CALF_CFG_INT_TUPLE, "()", 1, 1024,   \
      -7, NULL, CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                                       \
      "PPO with a recurrent core: fc layers between the observation (or the conv layers) and "   \
      "the value core")

#define SAC_BINDINGS(X)                                                                          \
    X(SAC_TAU, "SacAlgorithm.target_update_tau", CALF_CFG_FLOAT, "0.05", 0, 1, 0, NULL, 0,        \
      CALF_NO_FALLBACK,                                                                          \
      "soft update of the target critics: target += tau * (critic - target)")                    \
    X(SAC_TARGET_PERIOD, "SacAlgorithm.target_update_period", CALF_CFG_INT, "1", 1, 1e9, 0,       \
      NULL, 0, CALF_NO_FALLBACK, "update the target critics every this many training steps")     \
    X(SAC_INITIAL_LOG_ALPHA, "SacAlgorithm.initial_log_alpha", CALF_CFG_FLOAT, "0.0", -20, 20,    \
      0, NULL, 0, CALF_NO_FALLBACK, "initial log of the entropy temperature alpha")              \
    X(SAC_TARGET_ENTROPY, "SacAlgorithm.target_entropy", CALF_CFG_FLOAT, "None", -1e6, 1e6, 0,    \
      NULL, CALF_BINDING_OPTIONAL, CALF_NO_FALLBACK,                                             \
      "entropy that alpha is tuned towards (None: chosen by the algorithm from the action "      \
      "space, -|A| for continuous actions)")

/* TD3's own settings, CleanRL's td3_continuous_action names and defaults (its networks,
 * learning rates and gamma are the rows SAC reads: actor/ActorDistributionNetwork.*,
 * critic/CriticNetwork.*, actor/Adam.lr, critic/Adam.lr, OneStepTDLoss.gamma). */
#define TD3_BINDINGS(X)                                                                          \
    X(TD3_TAU, "Td3Algorithm.target_update_tau", CALF_CFG_FLOAT, "0.005", 0, 1, 0, NULL, 0,       \
      CALF_NO_FALLBACK,                                                                          \
      "soft update of the target actor and critics: target += tau * (online - target)")          \
    X(TD3_POLICY_DELAY, "Td3Algorithm.policy_delay", CALF_CFG_INT, "2", 1, 1e9, 0, NULL, 0,       \
      CALF_NO_FALLBACK,                                                                          \
      "update the actor and the targets after every this many critic updates")                   \
    X(TD3_POLICY_NOISE, "Td3Algorithm.policy_noise", CALF_CFG_FLOAT, "0.2", 0, 1e6, 0, NULL, 0,   \
      CALF_NO_FALLBACK,                                                                          \
      "target policy smoothing: std of the target action's noise, a fraction of the action "     \
      "range's half")                                                                            \
    X(TD3_NOISE_CLIP, "Td3Algorithm.noise_clip", CALF_CFG_FLOAT, "0.5", 0, 1e6, 0, NULL, 0,       \
      CALF_NO_FALLBACK, "target policy smoothing: the noise is clipped to +-this before scaling")   \
    X(TD3_EXPLORATION_NOISE, "Td3Algorithm.exploration_noise", CALF_CFG_FLOAT, "0.1", 0, 1e6, 0,  \
      NULL, 0, CALF_NO_FALLBACK,                                                                 \
      "std of the Gaussian exploration noise, a fraction of the action range's half")

/* DQN's own settings, after CleanRL's dqn.py (its target_network_frequency of 500 env
 * steps at train_frequency 10 is 50 updates; train_frequency itself is the iteration:
 * TrainerConfig.unroll_length env steps per env, then num_updates_per_train_iter
 * updates). Its learning rate is critic/Adam.lr, its gamma OneStepTDLoss.gamma. The
 * optimizer rows and epsilon_decay_after_collect came later (the MinAtar paper's DQN
 * trains with RMSProp and decays epsilon after its replay start): at their defaults they
 * stay out of the digest, so DQN checkpoints written before keep theirs. */
#define DQN_BINDINGS(X)                                                                          \
    X(DQN_Q_LAYERS, "q/QNetwork.fc_layer_params", CALF_CFG_INT_TUPLE, "(120, 84)", 1, 1024, -7,  \
      NULL, 0, CALF_NO_FALLBACK, "hidden layer sizes of DQN's Q network")                        \
    X(DQN_Q_ACTIVATION, "q/QNetwork.activation", CALF_CFG_STRING, "'relu'", 0, 0, 0, "tanh|relu", \
      0, CALF_NO_FALLBACK, "hidden activation of DQN's Q network")                               \
    X(DQN_Q_CONV_LAYERS, "q/QNetwork.conv_layer_params", CALF_CFG_CONV_LAYERS, "()", 1, 1024,    \
      -4, NULL, CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                                       \
      "conv layers (filters, kernel, stride[, padding]) before DQN's Q network's fc layers, "   \
      "each with ReLU; needs an image observation")                                              \
    X(DQN_TARGET_PERIOD, "DqnAlgorithm.target_update_period", CALF_CFG_INT, "50", 1, 1e9, 0, NULL, \
      0, CALF_NO_FALLBACK, "update the target Q network every this many updates")                \
    X(DQN_TAU, "DqnAlgorithm.target_update_tau", CALF_CFG_FLOAT, "1.0", 0, 1, 0, NULL, 0,          \
      CALF_NO_FALLBACK, "target += tau * (q - target) at each target update (1: a copy)")         \
    X(DQN_START_EPSILON, "DqnAlgorithm.start_epsilon", CALF_CFG_FLOAT, "1.0", 0, 1, 0, NULL, 0,    \
      CALF_NO_FALLBACK, "epsilon-greedy: the chance of a random action at the first env step")    \
    X(DQN_END_EPSILON, "DqnAlgorithm.end_epsilon", CALF_CFG_FLOAT, "0.05", 0, 1, 0, NULL, 0,       \
      CALF_NO_FALLBACK, "epsilon-greedy: the chance once the decay is over")                     \
    X(DQN_EXPLORATION_FRACTION, "DqnAlgorithm.exploration_fraction", CALF_CFG_FLOAT, "0.5", 0, 1, \
      0, NULL, 0, CALF_NO_FALLBACK,                                                              \
      "epsilon decays linearly over this fraction of the run's env steps")                       \
    X(DQN_TD_LOSS, "DqnAlgorithm.td_loss", CALF_CFG_STRING, "'mse'", 0, 0, 0, "mse|huber", 0,      \
      CALF_NO_FALLBACK, "the TD loss: squared error (CleanRL's) or Huber (smooth L1, delta 1)")   \
    X(DQN_OPTIMIZER, "DqnAlgorithm.optimizer", CALF_CFG_STRING, "'adam'", 0, 0, 0, "adam|rmsprop", \
      CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                                                   \
      "the Q network's optimizer: Adam (critic/Adam.lr, Adam.betas, Adam.eps) or RMSProp as "   \
      "PyTorch's RMSprop (RMSprop.lr, alpha, eps, centered); both clip by "                      \
      "Adam.gradient_clipping")                                                                  \
    X(DQN_RMSPROP_LR, "RMSprop.lr", CALF_CFG_FLOAT, "0.01", 0, 10, 0, NULL,                       \
      CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                                                   \
      "RMSProp's learning rate (DqnAlgorithm.optimizer = 'rmsprop'; PyTorch's default)")         \
    X(DQN_RMSPROP_ALPHA, "RMSprop.alpha", CALF_CFG_FLOAT, "0.99", 0, 1, 0, NULL,                  \
      CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                                                   \
      "RMSProp's decay of its running averages of g^2 (and of g, centered)")                     \
    X(DQN_RMSPROP_EPS, "RMSprop.eps", CALF_CFG_FLOAT, "1e-8", 0, 1, 0, NULL,                      \
      CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                                                   \
      "RMSProp's epsilon, added to the root: g / (sqrt(v) + eps)")                               \
    X(DQN_RMSPROP_CENTERED, "RMSprop.centered", CALF_CFG_BOOL, "False", 0, 0, 0, NULL,            \
      CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                                                   \
      "RMSProp divides by the root of the gradient's running variance, not its mean square")   \
    X(DQN_DECAY_AFTER_COLLECT, "DqnAlgorithm.epsilon_decay_after_collect", CALF_CFG_BOOL,       \
      "False", 0, 0, 0, NULL, CALF_BINDING_DIGEST_SET, CALF_NO_FALLBACK,                         \
      "epsilon decays from the end of TrainerConfig.initial_collect_steps (the MinAtar "       \
      "paper's, Dopamine's), not from the first env step (CleanRL's, SB3's)")

/* DDPG's own settings, ALF's DdpgAlgorithm names and defaults (its networks, learning
 * rates and gamma are the rows TD3 reads). */
#define DDPG_BINDINGS(X)                                                                         \
    X(DDPG_TAU, "DdpgAlgorithm.target_update_tau", CALF_CFG_FLOAT, "0.05", 0, 1, 0, NULL, 0,      \
      CALF_NO_FALLBACK,                                                                          \
      "soft update of the target actor and critic: target += tau * (online - target)")           \
    X(DDPG_TARGET_PERIOD, "DdpgAlgorithm.target_update_period", CALF_CFG_INT, "1", 1, 1e9, 0,     \
      NULL, 0, CALF_NO_FALLBACK, "update the targets every this many training steps")            \
    X(DDPG_NOISE, "DdpgAlgorithm.exploration_noise", CALF_CFG_STRING, "'ou'", 0, 0, 0,            \
      "ou|gaussian", 0, CALF_NO_FALLBACK,                                                        \
      "exploration: Ornstein-Uhlenbeck noise (ALF's) or independent Gaussian noise")             \
    X(DDPG_OU_STDDEV, "DdpgAlgorithm.ou_stddev", CALF_CFG_FLOAT, "0.2", 0, 1e6, 0, NULL, 0,       \
      CALF_NO_FALLBACK,                                                                          \
      "std of the exploration noise's kick (Gaussian: of the noise), a fraction of the "         \
      "action range's half")                                                                     \
    X(DDPG_OU_DAMPING, "DdpgAlgorithm.ou_damping", CALF_CFG_FLOAT, "0.15", 0, 1, 0, NULL, 0,      \
      CALF_NO_FALLBACK, "Ornstein-Uhlenbeck noise: x = (1 - damping) x + stddev * normal")

/* CFG_<ID> for every algorithm's rows, in ALGORITHMS order, after the public rows. */
#define ALGORITHM_BINDING_ID_(id, ...) CFG_##id,
#define ALGORITHM_BINDING_IDS_(name, ops, bindings, defaults, in_every_digest) \
    bindings(ALGORITHM_BINDING_ID_)
enum {
    CFG_LAST_PUBLIC_ = CALF_CFG_NUM_BINDINGS - 1,
    ALGORITHMS(ALGORITHM_BINDING_IDS_)
    CFG_NUM_ROWS /* every row: the public ones and the algorithms' */
};
#undef ALGORITHM_BINDING_IDS_
#undef ALGORITHM_BINDING_ID_

/* The algorithms' names, '|'-separated in ALGORITHMS order ("PPOAlgorithm|SacAlgorithm"):
 * TrainerConfig.algorithm_ctor's choices. A string constant. */
#define ALGORITHM_CHOICE_(name, ops, bindings, defaults, in_every_digest) "|" #name
#define ALGORITHM_CHOICES (&(ALGORITHMS(ALGORITHM_CHOICE_))[1])

#endif
