/* ac_recurrent.h: an actor-critic's recurrent cores (net.h's LSTM or GRU layer; CleanRL's
 * ppo_atari_lstm, SB3-contrib's RecurrentPPO) while it acts: each row's state (an env's in
 * the rollout, a greedy row's outside it), zeroed where an episode starts, one step of the
 * actor and the value from it, and a value's look-ahead that changes no state. */
#ifndef CALF_AC_RECURRENT_H
#define CALF_AC_RECURRENT_H

#include <stdbool.h>
#include <stdint.h>

#include "algorithms/ac_model.h"
#include "calf/error.h"
#include "numerics/net.h"

/* Every env's state: (n, state_size) rows of each network (net.h: its core's h, then c
 * for an LSTM), the actor's and the value's apart, as their nets step them. One env's
 * state_dim floats (the checkpoint's and the update's) are its actor row, then its value
 * row. */
typedef struct ac_rec_state {
    int n;                 /* rows */
    float *sa, *sv;        /* (n, actor.state_size), (n, value.state_size); NULL where 0 */
} ac_rec_state;

int ac_rec_state_init(ac_rec_state *s, const ac_model *md, int n, calf_error *err);
void ac_rec_state_free(ac_rec_state *s);
/* Zero rows [first, first + count). */
void ac_rec_state_zero(ac_rec_state *s, const ac_model *md, int first, int count);
/* Row r to and from the state_dim floats of one env (the layout above). */
void ac_rec_state_get(const ac_rec_state *s, const ac_model *md, int r, float *out);
void ac_rec_state_set(ac_rec_state *s, const ac_model *md, int r, const float *in);
/* Rows [first, first + n) of s, as a state of n rows (pointers into s). */
ac_rec_state ac_rec_state_rows(const ac_rec_state *s, const ac_model *md, int first, int n);
/* Row r as 4 * state_dim bytes (float32, little-endian: a checkpoint's env record), and
 * back: false, and nothing changed, when a value read is not finite (a damaged file). */
void ac_rec_state_put(const ac_rec_state *s, const ac_model *md, int r, unsigned char *out);
bool ac_rec_state_load(ac_rec_state *s, const ac_model *md, int r, const unsigned char *in);

/* Scratch of the acting steps: a one-row state for looking ahead. */
typedef struct ac_rec_act {
    ac_rec_state peek;     /* one row */
} ac_rec_act;

int ac_rec_act_init(ac_rec_act *w, const ac_model *md, calf_error *err);
void ac_rec_act_free(ac_rec_act *w);

/* One step of n envs (net_step: the bits of net_forward_seq's step): rows whose start is
 * set are zeroed first; the actor's output rows into head (n, head_dim) through ac, and,
 * when val is not NULL, the values into val (n) through vc. x is what the networks read
 * (normalized when configured). ac and vc hold n rows. */
void ac_rec_step(const ac_model *md, const float *params, ac_rec_state *s,
                 const float *x,         /* (n, obs_dim) */
                 const uint8_t *start,   /* (n), or NULL: no episode starts */
                 int n, net_cache *ac, float *head, net_cache *vc, float *val);

/* The value of observation x for row r if the env stepped on from its state (zeroed
 * first when start): V(final observation) of a truncated episode, V(the next
 * observation) to bootstrap. Changes no state. */
float ac_rec_peek_value(const ac_model *md, const float *params, ac_rec_act *w,
                        const ac_rec_state *s, int r, const float *x /* (obs_dim) */,
                        bool start, net_cache *vc);

#endif
